//! brain-runtime against the fault-injecting test server over real HTTP on loopback: one test per
//! row of the `unknown_outcome` table and per conversion rule, each asserting `is_error`,
//! `unknown_outcome`, the content, and how many `tools/call` requests reached the server.

use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use brain_runtime::{ContentBlock, Event, Runtime, ToolResult};
use futures_util::StreamExt;
use serde_json::json;
use tests::client::{call, config, eventually, request, text};
use tests::content::TINY_PNG;
use tests::server::{Faults, Resume, Stats, TestServer};

fn runtime(url: &str) -> Runtime {
    Runtime::new(&config(url, |_, _| {})).unwrap()
}

async fn start(faults: Faults) -> TestServer {
    TestServer::start(faults).await.unwrap()
}

fn count(counter: &AtomicUsize) -> usize {
    Stats::get(counter)
}

#[track_caller]
fn assert_outcome(result: &ToolResult, is_error: bool, unknown_outcome: bool, needle: &str) {
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (is_error, unknown_outcome),
        "{result:?}"
    );
    assert!(
        text(result).contains(needle),
        "{needle:?} not in {result:?}"
    );
}

/// Calls `echo` on a server with `faults` and checks the outcome, the message, and how many
/// `tools/call` requests reached the server.
async fn check_echo_under(
    faults: Faults,
    (is_error, unknown_outcome): (bool, bool),
    needle: &str,
    calls: usize,
) {
    let server = start(faults).await;
    let result = call(&runtime(&server.url), "echo", json!({"message": "x"})).await;
    assert_outcome(&result, is_error, unknown_outcome, needle);
    assert_eq!(count(&server.stats.calls), calls, "{needle}");
}

// Conversion rules.

#[tokio::test]
async fn text_result() {
    let server = start(Faults::default()).await;
    let result = call(&runtime(&server.url), "echo", json!({"message": "hello"})).await;
    assert_outcome(&result, false, false, "hello");
    assert_eq!(result.content, [ContentBlock::text("hello")]);
    assert_eq!(count(&server.stats.calls), 1);
    // The session is closed afterwards, off the caller's path.
    assert_eq!(eventually(&server.stats.deletes, 1).await, 1);
}

#[tokio::test]
async fn image_result() {
    let server = start(Faults::default()).await;
    let result = call(&runtime(&server.url), "image", json!({})).await;
    assert_outcome(&result, false, false, "");
    assert_eq!(
        result.content,
        [ContentBlock::Image {
            data: TINY_PNG.into(),
            mime_type: "image/png".into()
        }]
    );
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn structured_result_gets_one_json_text_block() {
    let server = start(Faults::default()).await;
    let result = call(&runtime(&server.url), "weather", json!({"city": "Oslo"})).await;
    assert_outcome(&result, false, false, "");
    let structured = json!({"city": "Oslo", "temperature": 21.5});
    assert_eq!(result.structured_content, Some(structured.clone()));
    assert_eq!(result.content, [ContentBlock::text(structured.to_string())]);
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn structured_result_breaking_output_schema_fails() {
    let server = start(Faults::default()).await;
    let result = call(&runtime(&server.url), "weather_broken", json!({})).await;
    assert_outcome(&result, true, true, "does not match output_schema");
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn tool_error_is_an_error_result_with_known_outcome() {
    let server = start(Faults::default()).await;
    let result = call(&runtime(&server.url), "fail", json!({})).await;
    assert_outcome(&result, true, false, "the tool failed");
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn unsupported_content_types_fail_the_call() {
    let server = start(Faults::default()).await;
    let runtime = runtime(&server.url);
    for (tool, kind) in [
        ("audio", "audio"),
        ("resource_link", "resource_link"),
        ("embedded_resource", "resource"),
    ] {
        let result = call(&runtime, tool, json!({})).await;
        assert_outcome(&result, true, true, &format!("type `{kind}`"));
    }
    assert_eq!(count(&server.stats.calls), 3);
}

#[tokio::test]
async fn output_over_max_output_bytes_fails() {
    let server = start(Faults::default()).await;
    let config = config(&server.url, |name, binding| {
        if name == "huge" {
            binding["max_output_bytes"] = json!(1000);
        }
    });
    let runtime = Runtime::new(&config).unwrap();
    let result = call(&runtime, "huge", json!({"bytes": 1001})).await;
    assert_outcome(&result, true, true, "over max_output_bytes (1000)");
    let result = call(&runtime, "huge", json!({"bytes": 100_000})).await;
    assert_outcome(&result, true, true, "brain stopped reading it");
    let result = call(&runtime, "huge", json!({"bytes": 1000})).await;
    assert_outcome(&result, false, false, "xxx");
    assert_eq!(count(&server.stats.calls), 3);
}

#[tokio::test]
async fn structured_output_counts_once_against_max_output_bytes() {
    // The result is `structured_content` plus one text block holding its JSON: the limit counts
    // those bytes once.
    let json_text = json!({"city": "Oslo", "temperature": 21.5}).to_string();
    let size = json_text.len() as u64;
    let server = start(Faults::default()).await;
    for (limit, fits) in [(size, true), (size - 1, false)] {
        let config = config(&server.url, |name, binding| {
            if name == "weather" {
                binding["max_output_bytes"] = json!(limit);
            }
        });
        let result = call(
            &Runtime::new(&config).unwrap(),
            "weather",
            json!({"city": "Oslo"}),
        )
        .await;
        assert_eq!(result.is_error, !fits, "limit {limit}: {result:?}");
        if fits {
            assert_eq!(text(&result), json_text);
            assert_eq!(result.size() as u64, size);
        }
    }
}

// Progress and scope.

#[tokio::test]
async fn progress_arrives_in_order_before_the_result() {
    let server = start(Faults::default()).await;
    let runtime = runtime(&server.url);
    let mut call = runtime.call(request("progress", json!({"steps": 50})));
    let mut progress = Vec::new();
    let mut result = None;
    while let Some(event) = call.next().await {
        match event {
            Event::Progress(p) => {
                assert!(result.is_none(), "progress after the result");
                assert_eq!(p.call_id, "call-1");
                assert_eq!(p.total, Some(50.0));
                progress.push(p.progress);
            }
            Event::Result(r) => result = Some(r),
            other => panic!("unexpected: {other:?}"),
        }
    }
    let expected: Vec<f64> = (1..=50).map(f64::from).collect();
    assert_eq!(progress, expected);
    assert_outcome(&result.unwrap(), false, false, "done 50 steps");
}

#[tokio::test]
async fn server_sees_the_call_id_as_progress_token_and_the_scope() {
    let server = start(Faults::default()).await;
    let result = call(&runtime(&server.url), "echo_meta", json!({})).await;
    assert_outcome(&result, false, false, "");
    let seen = result.structured_content.unwrap();
    assert_eq!(seen["meta"]["progressToken"], json!("call-1"));
    assert_eq!(
        seen["meta"]["brain.dev/scope"],
        json!({"tenant_id": "local", "session_id": "session-1", "call_id": "call-1"})
    );
    assert_eq!(seen["headers"]["mcp-protocol-version"], json!("2025-11-25"));
    assert!(seen["headers"].get("authorization").is_none());
}

#[tokio::test]
async fn generated_call_ids_are_unique() {
    let server = start(Faults::default()).await;
    let runtime = runtime(&server.url);
    let mut a = request("echo", json!({"message": "a"}));
    a.call_id = None;
    let first = runtime.call(a.clone());
    let second = runtime.call(a);
    assert_ne!(first.call_id(), second.call_id());
    assert!(!first.result().await.is_error);
}

// Refusals: no I/O at all.

#[tokio::test]
async fn refusals_do_no_io() {
    let server = start(Faults::default()).await;
    let runtime = runtime(&server.url);
    let result = call(&runtime, "nope", json!({})).await;
    assert_outcome(&result, true, false, "no tool named \"nope\"");
    let result = call(&runtime, "echo", json!({"message": 5})).await;
    assert_outcome(&result, true, false, "at `/message`");
    let result = call(&runtime, "echo", json!({})).await;
    assert_outcome(&result, true, false, "input schema");
    let mut other_tenant = request("echo", json!({"message": "x"}));
    other_tenant.scope.tenant_id = "intruder".into();
    let result = runtime.call(other_tenant).result().await;
    assert_outcome(
        &result,
        true,
        false,
        "tenant \"intruder\" may not call \"echo\"",
    );
    assert_eq!(count(&server.stats.initializes), 0);
    assert_eq!(count(&server.stats.calls), 0);
}

#[tokio::test]
async fn unset_token_variable() {
    let server = start(Faults::default()).await;
    let config = config(&server.url, |_, binding| {
        binding["token_env"] = json!("BRAIN_TEST_TOKEN_THAT_IS_NOT_SET");
    });
    let error = Runtime::builder(&config).env(|_| None).build().unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(
            "environment variables not set: BRAIN_TEST_TOKEN_THAT_IS_NOT_SET (token_env of "
        ),
        "{message}"
    );
    let runtime = Runtime::builder(&config)
        .env(|_| None)
        .allow_missing_tokens()
        .build()
        .unwrap();
    let result = call(&runtime, "echo", json!({"message": "x"})).await;
    assert_outcome(
        &result,
        true,
        false,
        "BRAIN_TEST_TOKEN_THAT_IS_NOT_SET is not set",
    );
    assert_eq!(count(&server.stats.initializes), 0);
}

// Before tools/call: unknown_outcome false.

#[tokio::test]
async fn connection_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let result = call(&runtime(&url), "echo", json!({"message": "x"})).await;
    assert_outcome(&result, true, false, "could not connect");
}

#[tokio::test]
async fn initialize_http_error() {
    let faults = Faults {
        initialize_500: true,
        ..Faults::default()
    };
    check_echo_under(faults, (true, false), "HTTP 500", 0).await;
}

#[tokio::test]
async fn token_refused_and_accepted() {
    let server = start(Faults {
        require_token: Some("s3cret-value".into()),
        ..Faults::default()
    })
    .await;
    let config = config(&server.url, |_, binding| {
        binding["token_env"] = json!("BRAIN_TEST_TOKEN");
    });
    let wrong = Runtime::builder(&config)
        .env(|_| Some("wrong-value".into()))
        .build()
        .unwrap();
    let result = call(&wrong, "echo", json!({"message": "x"})).await;
    assert_outcome(
        &result,
        true,
        false,
        "the token in BRAIN_TEST_TOKEN was refused",
    );
    assert!(!format!("{result:?}").contains("wrong-value"));
    assert!(!format!("{wrong:?}").contains("wrong-value"));
    assert_eq!(count(&server.stats.calls), 0);

    let right = Runtime::builder(&config)
        .env(|_| Some("s3cret-value".into()))
        .build()
        .unwrap();
    let result = call(&right, "echo", json!({"message": "x"})).await;
    assert_outcome(&result, false, false, "x");
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn tools_call_rejected_at_the_http_layer() {
    for status in [401, 403, 404, 405, 406, 415] {
        let faults = Faults {
            call_status: Some(status),
            ..Faults::default()
        };
        check_echo_under(faults, (true, false), &format!("HTTP {status}"), 1).await;
    }
}

#[tokio::test]
async fn tools_call_method_not_found() {
    let faults = Faults {
        call_method_not_found: true,
        ..Faults::default()
    };
    check_echo_under(faults, (true, false), "-32601", 1).await;
}

// After tools/call: unknown_outcome true, and never sent twice.

#[tokio::test]
async fn server_error_status_after_the_call() {
    let faults = Faults {
        call_status: Some(500),
        ..Faults::default()
    };
    check_echo_under(faults, (true, true), "HTTP 500", 1).await;
}

#[tokio::test]
async fn connection_dropped_after_reading_the_call() {
    let faults = Faults {
        drop_after_call: true,
        ..Faults::default()
    };
    check_echo_under(faults, (true, true), "the tool may have run", 1).await;
}

#[tokio::test]
async fn connection_dropped_before_reading_the_call() {
    let faults = Faults {
        drop_before_call: true,
        ..Faults::default()
    };
    check_echo_under(faults, (true, true), "the tool may have run", 0).await;
}

#[tokio::test]
async fn malformed_response() {
    let faults = Faults {
        malformed_call: true,
        ..Faults::default()
    };
    check_echo_under(faults, (true, true), "malformed", 1).await;
}

#[tokio::test]
async fn truncated_sse_stream() {
    let faults = Faults {
        truncated_call: true,
        ..Faults::default()
    };
    check_echo_under(faults, (true, true), "without a result", 1).await;
}

#[tokio::test]
async fn json_rpc_error_after_the_call() {
    let server = start(Faults::default()).await;
    let result = call(&runtime(&server.url), "rpc_error", json!({})).await;
    assert_outcome(&result, true, true, "rpc_error always fails");
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn stalled_server_times_out_and_is_cancelled() {
    let server = start(Faults {
        stall_call: true,
        ..Faults::default()
    })
    .await;
    let config = config(&server.url, |_, binding| {
        binding["timeout_seconds"] = json!(1);
    });
    let started = Instant::now();
    let result = call(
        &Runtime::new(&config).unwrap(),
        "echo",
        json!({"message": "x"}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_outcome(&result, true, true, "timed out after 1s");
    assert_eq!(count(&server.stats.calls), 1);
    assert_eq!(eventually(&server.stats.cancellations, 1).await, 1);
}

#[tokio::test]
async fn slow_tool_times_out_and_the_server_observes_the_cancellation() {
    let server = start(Faults::default()).await;
    let config = config(&server.url, |_, binding| {
        binding["timeout_seconds"] = json!(1);
    });
    let started = Instant::now();
    let result = call(
        &Runtime::new(&config).unwrap(),
        "slow",
        json!({"seconds": 60}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_outcome(&result, true, true, "timed out after 1s");
    assert_eq!(count(&server.stats.calls), 1);
    assert_eq!(eventually(&server.stats.cancelled_runs, 1).await, 1);
}

#[tokio::test]
async fn dropping_the_call_cancels_it() {
    let server = start(Faults::default()).await;
    let runtime = runtime(&server.url);
    let mut call = runtime.call(request("slow", json!({"seconds": 60})));
    // Wait until the tool runs (the server's own count), then walk away.
    assert_eq!(eventually(&server.stats.running, 1).await, 1);
    let _ = futures_util::poll!(call.next());
    drop(call);
    assert_eq!(eventually(&server.stats.cancelled_runs, 1).await, 1);
    assert_eq!(eventually(&server.stats.deletes, 1).await, 1);
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn explicit_cancel_still_yields_a_result() {
    let server = start(Faults::default()).await;
    let runtime = runtime(&server.url);
    let call = runtime.call(request("slow", json!({"seconds": 60})));
    eventually(&server.stats.calls, 1).await;
    call.cancel();
    let result = call.result().await;
    assert_outcome(&result, true, true, "interrupted");
    assert_eq!(eventually(&server.stats.cancelled_runs, 1).await, 1);
}

// MCP 2026-07-28: no session, one POST per call.

fn stateless_runtime(url: &str, timeout_seconds: u64) -> Runtime {
    let config = config(url, |_, binding| {
        binding["protocol_version"] = json!("2026-07-28");
        binding["timeout_seconds"] = json!(timeout_seconds);
    });
    Runtime::new(&config).unwrap()
}

#[tokio::test]
async fn stateless_call_is_one_post_without_a_session() {
    let server = start(Faults::default()).await;
    let runtime = stateless_runtime(&server.url, 30);
    let result = call(&runtime, "echo", json!({"message": "hello"})).await;
    assert_outcome(&result, false, false, "hello");
    let result = call(&runtime, "echo_meta", json!({})).await;
    let seen = result.structured_content.unwrap();
    assert_eq!(seen["meta"]["progressToken"], json!("call-1"));
    assert_eq!(
        seen["meta"]["io.modelcontextprotocol/protocolVersion"],
        json!("2026-07-28")
    );
    assert_eq!(
        seen["meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
    assert_eq!(
        seen["meta"]["brain.dev/scope"],
        json!({"tenant_id": "local", "session_id": "session-1", "call_id": "call-1"})
    );
    assert_eq!(seen["headers"]["mcp-method"], json!("tools/call"));
    assert_eq!(seen["headers"]["mcp-name"], json!("echo_meta"));
    assert_eq!(seen["headers"]["mcp-protocol-version"], json!("2026-07-28"));
    assert_eq!(count(&server.stats.initializes), 0);
    assert_eq!(count(&server.stats.calls), 2);
    runtime.wait_for_cleanup().await;
    drop(runtime);
    server.closed_by_client().await;
    assert_eq!(count(&server.stats.deletes), 0);
}

#[tokio::test]
async fn stateless_param_headers_come_from_x_mcp_header() {
    let server = start(Faults::default()).await;
    let runtime = stateless_runtime(&server.url, 30);
    // The argument travels as the header the pinned schema names, Base64-wrapped as SEP-2243 says.
    let result = call(&runtime, "routed", json!({"region": "eu west é"})).await;
    assert_outcome(&result, false, false, "");
    let seen = result.structured_content.unwrap();
    assert_eq!(
        seen["headers"]["mcp-param-region"],
        json!("=?base64?ZXUgd2VzdCDDqQ==?=")
    );
}

#[tokio::test]
async fn stateless_progress_in_order() {
    let server = start(Faults::default()).await;
    let runtime = stateless_runtime(&server.url, 30);
    let events: Vec<Event> = runtime
        .call(request("progress", json!({"steps": 20})))
        .collect()
        .await;
    let progress: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Progress(p) => Some(p.progress),
            Event::Result(_) => None,
            other => panic!("unexpected: {other:?}"),
        })
        .collect();
    assert_eq!(progress, (1..=20).map(f64::from).collect::<Vec<_>>());
    assert!(matches!(events.last(), Some(Event::Result(r)) if !r.is_error));
}

// 2026-07-28 rounds (SEP-2322): an `input_required` result is a definite "not completed yet".
// Requests for user input, at both revisions: tests/input_requests.rs.

#[tokio::test]
async fn stateless_request_state_rounds_echo_the_state_and_complete() {
    let server = start(Faults::default()).await;
    let runtime = stateless_runtime(&server.url, 30);
    let result = call(&runtime, "input_required", json!({"rounds": 3})).await;
    // The server completes only when round 3 carried the state it gave in round 2, exactly.
    assert_outcome(&result, false, false, "completed after 3 rounds");
    assert!(
        text(&result).contains("input responses: null"),
        "{result:?}"
    );
    assert_eq!(count(&server.stats.calls), 4);
}

#[tokio::test]
async fn stateless_rounds_are_bounded() {
    let server = start(Faults::default()).await;
    let runtime = stateless_runtime(&server.url, 30);
    let result = call(&runtime, "input_required", json!({"rounds": 1000})).await;
    assert_outcome(&result, true, true, "after 8 rounds");
    assert_eq!(count(&server.stats.calls), 9);
}

#[tokio::test]
async fn stateless_timeout_closes_the_stream_and_the_server_observes_it() {
    let server = start(Faults::default()).await;
    let runtime = stateless_runtime(&server.url, 1);
    let started = Instant::now();
    let result = call(&runtime, "slow", json!({"seconds": 60})).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_outcome(&result, true, true, "timed out after 1s");
    assert_eq!(eventually(&server.stats.cancelled_runs, 1).await, 1);
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn non_increasing_progress_is_dropped() {
    let server = start(Faults::default()).await;
    let runtime = runtime(&server.url);
    let events: Vec<Event> = runtime
        .call(request("progress_jumbled", json!({})))
        .collect()
        .await;
    let progress: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Progress(p) => Some(p.progress),
            Event::Result(_) => None,
            other => panic!("unexpected: {other:?}"),
        })
        .collect();
    assert_eq!(progress, [1.0, 3.0, 4.0]);
}

#[tokio::test]
async fn initialize_json_rpc_error() {
    let faults = Faults {
        initialize_rpc_error: true,
        ..Faults::default()
    };
    check_echo_under(faults, (true, false), "Unsupported protocol version", 0).await;
}

#[tokio::test]
async fn tls_failure_is_a_connection_failure() {
    // https to a plain-HTTP server: the TLS handshake fails before anything is sent.
    let server = start(Faults::default()).await;
    let url = server.url.replace("http://", "https://");
    let result = call(&runtime(&url), "echo", json!({"message": "x"})).await;
    assert_outcome(&result, true, false, "could not connect");
    assert_eq!(count(&server.stats.initializes), 0);
}

#[tokio::test]
async fn localhost_is_loopback() {
    let server = start(Faults::default()).await;
    let url = server.url.replace("127.0.0.1", "localhost");
    let result = call(&runtime(&url), "echo", json!({"message": "via localhost"})).await;
    assert_outcome(&result, false, false, "via localhost");
}

// Resuming a response stream (SEP-1699): the call is never sent again.

fn closing(retry_ms: u64, resume: Resume) -> Faults {
    Faults {
        close_call_stream: Some(retry_ms),
        resume,
        ..Faults::default()
    }
}

#[tokio::test]
async fn closed_stream_is_resumed_after_retry_with_last_event_id() {
    let server = start(closing(300, Resume::Answer)).await;
    let result = call(&runtime(&server.url), "echo", json!({"message": "x"})).await;
    assert_outcome(&result, false, false, r#"resumed: {"message":"x"}"#);
    assert_eq!(count(&server.stats.calls), 1);
    let resumes = server.stats.resumes.lock().unwrap().clone();
    assert_eq!(resumes.len(), 1);
    assert_eq!(resumes[0].0.as_deref(), Some("call-1"));
    let closed = server.stats.closed_streams.lock().unwrap()[0];
    let waited = resumes[0].1 - closed;
    assert!(
        waited >= Duration::from_millis(300),
        "resumed after {waited:?}"
    );
}

#[tokio::test]
async fn refused_resumption_is_an_unknown_outcome() {
    let server = start(closing(10, Resume::Refuse)).await;
    let result = call(&runtime(&server.url), "echo", json!({"message": "x"})).await;
    assert_outcome(&result, true, true, "refused to resume it (HTTP 405");
    assert_eq!(count(&server.stats.calls), 1);
}

#[tokio::test]
async fn empty_resumptions_are_bounded() {
    let server = start(closing(10, Resume::CloseAgain)).await;
    let result = call(&runtime(&server.url), "echo", json!({"message": "x"})).await;
    assert_outcome(&result, true, true, "16 times in a row");
    assert_eq!(count(&server.stats.calls), 1);
    assert_eq!(server.stats.resumes.lock().unwrap().len(), 16);
}

// Discovery negotiates the revision (SEP-2575).

/// Discovery against a server that rejects the first `server/discover`, naming `supported`.
async fn discover_rejected_once(
    supported: &str,
) -> (
    Result<brain_runtime::discover::Discovery, String>,
    TestServer,
) {
    let server = start(Faults {
        reject_revision_once: Some(vec![supported.into()]),
        ..Faults::default()
    })
    .await;
    let options = brain_runtime::discover::DiscoverOptions {
        url: server.url.clone(),
        token: None,
        auth: None,
        timeout: Duration::from_secs(10),
        ca_file: None,
    };
    let discovery = brain_runtime::discover::discover(&options)
        .await
        .map_err(|error| error.to_string());
    (discovery, server)
}

#[tokio::test]
async fn discovery_asks_again_when_its_revision_is_rejected_but_supported() {
    let (discovery, server) = discover_rejected_once("2026-07-28").await;
    assert_eq!(discovery.unwrap().protocol_version, "2026-07-28");
    assert_eq!(count(&server.stats.discovers), 2);
    assert_eq!(count(&server.stats.initializes), 0);
}

#[tokio::test]
async fn discovery_falls_back_to_a_session_when_only_2025_is_supported() {
    let (discovery, server) = discover_rejected_once("2025-11-25").await;
    assert_eq!(discovery.unwrap().protocol_version, "2025-11-25");
    assert_eq!(count(&server.stats.discovers), 1);
    assert_eq!(count(&server.stats.initializes), 1);
}

#[tokio::test]
async fn discovery_names_the_revisions_when_none_is_shared() {
    let (discovery, _server) = discover_rejected_once("2099-01-01").await;
    let error = discovery.unwrap_err();
    assert!(error.contains("2099-01-01"), "{error}");
    assert!(error.contains("2026-07-28"), "{error}");
}
