//! HTTP and SSE tools (bindings without `mcp_tool`) against the test server's tool endpoints over
//! real HTTP on loopback: one test per row of the wire contract's classification (docs/src/guides/http-tools.md), each asserting `(is_error, unknown_outcome, requests the endpoint received)`;
//! the request brain sends; progress; conversion; the byte bounds; session inspection tokens.

use std::time::{Duration, Instant, SystemTime};

use brain_config::HostConfig;
use brain_runtime::{CallRequest, Event, Runtime, RuntimeError, Scope, ToolResult};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tests::server::{Faults, Stats, TestServer};

const KEY: &str = "test-session-token-key-0123456789abcdef";

/// A binding of the tool endpoint `path` (under `/tools`), with `patch` applied.
fn binding(server: &TestServer, name: &str, path: &str, patch: Value) -> Value {
    let mut binding = json!({
        "name": name,
        "description": format!("The test server's {path} tool endpoint."),
        "input_schema": {"type": "object"},
        "url": format!("{}/{path}", tools_url(server)),
        "tenants": ["local"],
        "timeout_seconds": 10,
    });
    for (key, value) in patch.as_object().cloned().unwrap_or_default() {
        binding[key] = value;
    }
    binding
}

fn tools_url(server: &TestServer) -> String {
    server.url.trim_end_matches("/mcp").to_owned() + "/tools"
}

fn config(bindings: Vec<Value>) -> HostConfig {
    let text = json!({ "tools": bindings }).to_string();
    brain_config::parse(text.as_bytes(), "http-tools.json").unwrap_or_else(|e| panic!("{e}"))
}

async fn server() -> TestServer {
    TestServer::start(Faults {
        require_token: None,
        session_token_key: Some(KEY.as_bytes().to_vec()),
        ..Faults::default()
    })
    .await
    .expect("the test server starts")
}

fn request(tool: &str, call_id: &str, arguments: Value) -> CallRequest {
    CallRequest::new(
        tool,
        Scope {
            tenant_id: "local".into(),
            session_id: "session-7".into(),
        },
        arguments,
    )
    .with_call_id(call_id)
}

/// Calls the one binding `path` (kind by `patch`) and returns its result and the requests its
/// endpoint received.
async fn call_one(path: &str, patch: Value, arguments: Value) -> (ToolResult, usize) {
    let server = server().await;
    let runtime = Runtime::new(&config(vec![binding(&server, "tool", path, patch)])).unwrap();
    let result = runtime
        .call(request("tool", "call-1", arguments))
        .result()
        .await;
    runtime.wait_for_cleanup().await;
    (result, Stats::get(&server.tools.requests))
}

fn text(result: &ToolResult) -> String {
    format!("{:?}", result.content)
}

#[track_caller]
fn assert_row(got: (ToolResult, usize), want: Row, needle: &str) -> ToolResult {
    let (result, requests) = got;
    assert_eq!(
        (result.is_error, result.unknown_outcome, requests),
        want,
        "(is_error, unknown_outcome, requests): {result:?}"
    );
    assert!(
        text(&result).contains(needle),
        "expected {needle:?} in {result:?}"
    );
    result
}

/// `(is_error, unknown_outcome, requests the endpoint received)`.
type Row = (bool, bool, usize);

/// Calls each row's endpoint `(path, binding patch, arguments)` as the one binding of a fresh
/// server and checks `(is_error, unknown_outcome, requests received)` and a needle in the result.
async fn check_rows(rows: Vec<(&str, Value, Value, Row, &str)>) {
    for (path, patch, arguments, want, needle) in rows {
        let (result, requests) = call_one(path, patch, arguments).await;
        assert_eq!(
            (result.is_error, result.unknown_outcome, requests),
            want,
            "/tools/{path}: {result:?}"
        );
        assert!(
            text(&result).contains(needle),
            "/tools/{path}: {needle:?} in {result:?}"
        );
    }
}

/// Runs `call` to its end: its progress events and its result.
async fn events(mut call: brain_runtime::Call) -> (Vec<brain_runtime::Progress>, ToolResult) {
    let (mut progress, mut result) = (Vec::new(), None);
    while let Some(event) = call.next().await {
        match event {
            Event::Progress(p) => progress.push(p),
            Event::Result(r) => result = Some(r),
            other => panic!("unexpected: {other:?}"),
        }
    }
    (progress, result.expect("a call ends with a result"))
}

const HTTP: fn() -> Value = || json!({});
const SSE: fn() -> Value = || json!({"transport": "sse"});

#[tokio::test]
async fn the_request_carries_the_arguments_scope_and_idempotency_key() {
    let server = server().await;
    let config = config(vec![binding(
        &server,
        "echo_tool",
        "echo",
        json!({"token_env": "ECHO_TOKEN"}),
    )]);
    let runtime = Runtime::builder(&config)
        .env(|var| (var == "ECHO_TOKEN").then(|| "s3cret-token".to_owned()))
        .build()
        .unwrap();
    let result = runtime
        .call(request(
            "echo_tool",
            "call-42",
            json!({"city": "Oslo", "n": 3}),
        ))
        .result()
        .await;
    assert!(!result.is_error && !result.unknown_outcome, "{result:?}");
    assert_eq!(Stats::get(&server.tools.requests), 1);
    // No output_schema: one text block holding the JSON body, no structured content.
    assert_eq!(result.structured_content, None);
    let [brain_runtime::ContentBlock::Text { text }] = result.content.as_slice() else {
        panic!("one text block: {result:?}")
    };
    let body: Value = serde_json::from_str(text).unwrap();
    assert_eq!(body["arguments"], json!({"city": "Oslo", "n": 3}));
    let headers = &body["headers"];
    assert_eq!(headers["brain-tenant-id"], "local");
    assert_eq!(headers["brain-session-id"], "session-7");
    assert_eq!(headers["brain-call-id"], "call-42");
    assert_eq!(headers["idempotency-key"], "call-42");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["accept"], "application/json, text/event-stream");
    assert_eq!(headers["authorization"], "<present>");
    assert!(headers.get("brain-session-token").is_none(), "{headers}");
    let seen = server.tools.last_headers.lock().unwrap().clone();
    assert!(!seen.contains_key("brain-session-token"));
}

#[tokio::test]
async fn json_with_an_output_schema_becomes_checked_structured_content() {
    let schema = json!({"output_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"}},
        "required": ["city", "temperature_c"]
    }});
    let result = assert_row(
        call_one("weather", schema.clone(), json!({"city": "Bergen"})).await,
        (false, false, 1),
        "temperature_c",
    );
    assert_eq!(
        result.structured_content.as_ref().unwrap()["city"],
        "Bergen"
    );
    assert_eq!(result.content.len(), 1, "the JSON text counts once");
    assert_row(
        call_one("weather_broken", schema, json!({})).await,
        (true, true, 1),
        "does not match output_schema",
    );
}

#[tokio::test]
async fn text_plain_is_one_text_block_and_204_an_empty_result() {
    let result = assert_row(
        call_one("text", HTTP(), json!({"message": "hi"})).await,
        (false, false, 1),
        "you said: hi",
    );
    assert_eq!(result.content.len(), 1);
    let result = assert_row(
        call_one("no-content", HTTP(), json!({})).await,
        (false, false, 1),
        "",
    );
    assert!(result.content.is_empty(), "{result:?}");
}

#[tokio::test]
async fn client_errors_refuse_the_request_with_a_known_outcome() {
    for code in [400, 403, 404, 405, 413, 415, 422] {
        assert_row(
            call_one(&format!("status/{code}"), HTTP(), json!({})).await,
            (true, false, 1),
            &format!("HTTP {code}"),
        );
    }
    // The body's start goes into the message.
    assert_row(
        call_one("status/422", HTTP(), json!({})).await,
        (true, false, 1),
        "fault: status 422",
    );
}

#[tokio::test]
async fn timeouts_conflicts_rate_limits_and_server_errors_have_an_unknown_outcome() {
    for code in [408, 409, 429, 500, 502, 503] {
        assert_row(
            call_one(&format!("status/{code}"), HTTP(), json!({})).await,
            (true, true, 1),
            &format!("fault: status {code}"),
        );
    }
    for code in [429, 500] {
        assert_row(
            call_one(&format!("status/{code}"), SSE(), json!({})).await,
            (true, true, 1),
            &format!("HTTP {code}"),
        );
    }
}

#[tokio::test]
async fn a_refused_token_is_named_never_shown() {
    let server = TestServer::start(Faults {
        require_token: Some("the-right-one".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let config = config(vec![binding(
        &server,
        "echo_tool",
        "echo",
        json!({"token_env": "ECHO_TOKEN"}),
    )]);
    let runtime = Runtime::builder(&config)
        .env(|_| Some("a-wrong-secret".to_owned()))
        .build()
        .unwrap();
    let result = runtime
        .call(request("echo_tool", "c", json!({})))
        .result()
        .await;
    let result = assert_row(
        (result, Stats::get(&server.tools.requests)),
        (true, false, 0),
        "the token in ECHO_TOKEN was refused",
    );
    assert!(!format!("{result:?}").contains("a-wrong-secret"));
}

#[tokio::test]
async fn redirects_are_not_followed() {
    // The redirect's target is the echo endpoint of the same server: it is never reached.
    assert_row(
        call_one("redirect", HTTP(), json!({})).await,
        (true, true, 1),
        "does not follow redirects",
    );
}

#[tokio::test]
async fn a_dropped_connection_after_the_request_has_an_unknown_outcome() {
    check_rows(vec![
        (
            "drop-before",
            HTTP(),
            json!({}),
            (true, true, 1),
            "the tool may have run",
        ),
        (
            "drop-after",
            HTTP(),
            json!({}),
            (true, true, 1),
            "the tool may have run",
        ),
        (
            "sse/drop",
            SSE(),
            json!({}),
            (true, true, 1),
            "the tool may have run",
        ),
    ])
    .await;
}

#[tokio::test]
async fn connection_refused_has_a_known_outcome() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = config(vec![json!({
        "name": "gone", "description": "Nothing listens here.", "input_schema": {"type": "object"},
        "url": format!("http://127.0.0.1:{port}/tools/echo"), "tenants": ["local"]
    })]);
    let runtime = Runtime::new(&config).unwrap();
    let result = runtime.call(request("gone", "c", json!({}))).result().await;
    assert_row((result, 0), (true, false, 0), "could not connect");
}

#[tokio::test]
async fn wrong_content_types_and_invalid_json_have_an_unknown_outcome() {
    check_rows(vec![
        (
            "wrong-type",
            HTTP(),
            json!({}),
            (true, true, 1),
            "text/html",
        ),
        (
            "invalid-json",
            HTTP(),
            json!({}),
            (true, true, 1),
            "not valid JSON",
        ),
        (
            "sse/wrong-type",
            SSE(),
            json!({}),
            (true, true, 1),
            "not an event stream",
        ),
    ])
    .await;
}

#[tokio::test]
async fn a_stalled_or_dribbling_server_times_out_with_an_unknown_outcome() {
    for (path, patch) in [
        ("stall", json!({"timeout_seconds": 1})),
        ("slow-body", json!({"timeout_seconds": 1})),
        (
            "sse/stall",
            json!({"timeout_seconds": 1, "transport": "sse"}),
        ),
    ] {
        let started = Instant::now();
        assert_row(
            call_one(path, patch, json!({"seconds": 30})).await,
            (true, true, 1),
            "timed out after 1s",
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{path}");
    }
}

#[tokio::test]
async fn bodies_and_events_over_the_byte_bound_fail_the_call() {
    // max_output_bytes 1024: the raw bound is 1024 × 6 + 64 KiB = 71,680 bytes.
    let small = |sse: bool| {
        let mut patch = json!({"max_output_bytes": 1024});
        if sse {
            patch["transport"] = json!("sse");
        }
        patch
    };
    check_rows(vec![
        (
            "huge",
            small(false),
            json!({"bytes": 8 << 20}),
            (true, true, 1),
            "exceeded 71680 bytes",
        ),
        (
            "sse/huge-event",
            small(true),
            json!({"bytes": 8 << 20}),
            (true, true, 1),
            "exceeded 71680 bytes",
        ),
    ])
    .await;
    // Under the raw bound but over max_output_bytes once converted.
    assert_row(
        call_one("huge", small(false), json!({"bytes": 4000})).await,
        (true, true, 1),
        "over max_output_bytes (1024)",
    );
}

#[tokio::test]
async fn sse_progress_arrives_live_and_in_order_then_the_result() {
    let server = server().await;
    let runtime = Runtime::new(&config(vec![binding(
        &server,
        "steps",
        "sse/progress",
        SSE(),
    )]))
    .unwrap();
    let (progress, result) = events(runtime.call(request(
        "steps",
        "call-p",
        json!({"steps": 4, "delay_ms": 20}),
    )))
    .await;
    for p in &progress {
        assert_eq!((p.call_id.as_str(), p.total), ("call-p", Some(4.0)));
    }
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(progress[0].message.as_deref(), Some("step 1 of 4"));
    assert_row(
        (result, Stats::get(&server.tools.requests)),
        (false, false, 1),
        "done after 4 steps",
    );
}

#[tokio::test]
async fn sse_results_convert_like_mcp_results() {
    assert_row(
        call_one("sse/error", SSE(), json!({})).await,
        (true, false, 1),
        "no such city",
    );
    let result = assert_row(
        call_one("sse/image", SSE(), json!({})).await,
        (false, false, 1),
        "image/png",
    );
    assert_eq!(result.content.len(), 2);
    assert_row(
        call_one("sse/no-result", SSE(), json!({})).await,
        (true, true, 1),
        "ended without a `result` event",
    );
}

#[tokio::test]
async fn an_http_tool_may_answer_with_an_event_stream() {
    assert_row(
        call_one("sse/progress", HTTP(), json!({"steps": 2})).await,
        (false, false, 1),
        "done after 2 steps",
    );
}

#[tokio::test]
async fn a_progress_flood_is_delivered_in_order_without_failing_the_call() {
    // 100,000 progress events: far more bytes than the raw result bound (71,680 here), which
    // bounds each event, not the stream.
    let server = server().await;
    let runtime = Runtime::new(&config(vec![binding(
        &server,
        "flood",
        "sse/flood",
        json!({"transport": "sse", "max_output_bytes": 1024, "timeout_seconds": 120}),
    )]))
    .unwrap();
    let (progress, result) =
        events(runtime.call(request("flood", "call-f", json!({"count": 100_000})))).await;
    assert_eq!(progress.len(), 100_000);
    assert!(
        progress.windows(2).all(|w| w[0].progress < w[1].progress),
        "in order"
    );
    assert_row(
        (result, Stats::get(&server.tools.requests)),
        (false, false, 1),
        "flooded 100000",
    );
}

#[tokio::test]
async fn refusals_by_the_gate_send_nothing() {
    let server = server().await;
    let mut tool = binding(
        &server,
        "echo_tool",
        "echo",
        json!({"token_env": "UNSET_VAR"}),
    );
    tool["input_schema"] = json!({
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]
    });
    let mut plain = binding(&server, "plain", "echo", json!({}));
    plain["tenants"] = json!(["other"]);
    let config = config(vec![tool, plain]);
    let runtime = Runtime::builder(&config)
        .env(|_| None)
        .allow_missing_tokens()
        .build()
        .unwrap();
    for (name, arguments, needle) in [
        ("echo_tool", json!({"n": 1}), "UNSET_VAR is not set"),
        ("plain", json!({}), "may not call"),
    ] {
        let result = runtime.call(request(name, "c", arguments)).result().await;
        assert_row((result, 0), (true, false, 0), needle);
    }
    let config = brain_config::parse(
        json!({"tools": [binding(&server, "typed", "echo", json!({"input_schema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]
        }}))]})
        .to_string()
        .as_bytes(),
        "x.json",
    )
    .unwrap();
    let runtime = Runtime::new(&config).unwrap();
    let result = runtime
        .call(request("typed", "c", json!({"n": "x"})))
        .result()
        .await;
    assert_row(
        (result, 0),
        (true, false, 0),
        "do not match the input schema",
    );
    assert_eq!(Stats::get(&server.tools.requests), 0);
}

#[tokio::test]
async fn inspect_session_sends_a_token_the_host_can_verify() {
    let server = server().await;
    let config = config(vec![binding(
        &server,
        "inspect",
        "sse/inspect",
        json!({"transport": "sse", "inspect_session": true, "timeout_seconds": 60}),
    )]);
    let runtime = Runtime::builder(&config)
        .env(|var| (var == "BRAIN_SESSION_TOKEN_KEY").then(|| KEY.to_owned()))
        .build()
        .unwrap();
    let before = SystemTime::now();
    let (progress, result) = events(runtime.call(request("inspect", "call-i", json!({})))).await;
    assert_eq!(progress.len(), 2);
    let result = assert_row(
        (result, Stats::get(&server.tools.requests)),
        (false, false, 1),
        "verified session token of tenant local",
    );
    // What the server verified: this call's scope, the binding's name, the call's deadline.
    let claims = result.structured_content.unwrap();
    assert_eq!(claims["tenant_id"], "local");
    assert_eq!(claims["session_id"], "session-7");
    assert_eq!(claims["call_id"], "call-i");
    assert_eq!(claims["tool"], "inspect");
    let deadline = before
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 60;
    let exp = claims["exp"].as_u64().unwrap();
    assert!(
        (deadline..=deadline + 2).contains(&exp),
        "exp {exp}, deadline {deadline}"
    );
    // The token itself went out marked sensitive and is verifiable with the key only.
    let token = server.tools.last_headers.lock().unwrap()["brain-session-token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(brain_runtime::verify_session_token(&token, KEY.as_bytes(), SystemTime::now()).is_ok());
    assert!(matches!(
        brain_runtime::verify_session_token(&token, &[7u8; 40], SystemTime::now()),
        Err(brain_runtime::SessionTokenError::WrongKey)
    ));
}

#[tokio::test]
async fn inspect_session_without_a_usable_key_is_a_start_up_error() {
    let server = server().await;
    let config = config(vec![binding(
        &server,
        "inspect",
        "sse/inspect",
        json!({"transport": "sse", "inspect_session": true}),
    )]);
    let error = Runtime::builder(&config).env(|_| None).build().unwrap_err();
    assert!(matches!(error, RuntimeError::MissingTokens(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("BRAIN_SESSION_TOKEN_KEY (inspect_session of inspect)"),
        "{error}"
    );
    let error = Runtime::builder(&config)
        .env(|_| Some("too-short".into()))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("at least 32"), "{error}");
    assert!(!error.to_string().contains("too-short"), "{error}");
    // Allowed to start without it: calls to that binding are refused, without I/O.
    let runtime = Runtime::builder(&config)
        .env(|_| None)
        .allow_missing_tokens()
        .build()
        .unwrap();
    let result = runtime
        .call(request("inspect", "c", json!({})))
        .result()
        .await;
    assert_row((result, 0), (true, false, 0), "BRAIN_SESSION_TOKEN_KEY");
    assert_eq!(Stats::get(&server.tools.requests), 0);
}

#[tokio::test]
async fn no_mcp_request_ever_carries_a_session_token() {
    let server = server().await;
    let mut bindings = tests::server::bindings_json(&server.url, |_, _| {});
    bindings.retain(|b| b["name"] == "echo" || b["name"] == "progress");
    bindings.push(binding(
        &server,
        "inspect",
        "sse/inspect",
        json!({"transport": "sse", "inspect_session": true}),
    ));
    let config = config(bindings);
    let runtime = Runtime::builder(&config)
        .env(|var| (var == "BRAIN_SESSION_TOKEN_KEY").then(|| KEY.to_owned()))
        .build()
        .unwrap();
    for (tool, arguments) in [
        ("echo", json!({"message": "x"})),
        ("progress", json!({"steps": 2})),
        ("inspect", json!({})),
    ] {
        let result = runtime.call(request(tool, "c", arguments)).result().await;
        assert!(!result.is_error, "{tool}: {result:?}");
    }
    runtime.wait_for_cleanup().await;
    assert!(
        Stats::get(&server.stats.requests) >= 4,
        "the MCP calls arrived"
    );
    assert_eq!(Stats::get(&server.stats.session_token_requests), 0);
    assert_eq!(Stats::get(&server.tools.requests), 1);
}

#[tokio::test]
async fn a_cancelled_call_ends_at_once_with_an_unknown_outcome() {
    let server = server().await;
    let runtime = Runtime::new(&config(vec![binding(
        &server,
        "stalled",
        "sse/stall",
        json!({"transport": "sse", "timeout_seconds": 60}),
    )]))
    .unwrap();
    let mut call = runtime.call(request("stalled", "call-c", json!({})));
    // The first progress event: the request has reached the tool.
    assert!(matches!(call.next().await, Some(Event::Progress(_))));
    let started = Instant::now();
    call.cancel();
    let result = call.result().await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_row(
        (result, Stats::get(&server.tools.requests)),
        (true, true, 1),
        "interrupted",
    );
    // Nothing is left to clean up: the connection closed with the call.
    runtime.wait_for_cleanup().await;
}
