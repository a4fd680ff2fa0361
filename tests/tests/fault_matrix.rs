//! The fault matrix: every fault switch of the test server × both protocol revisions. Each case
//! must end in exactly one `tool.result` with the `is_error`/`unknown_outcome` that the
//! `unknown_outcome` table in docs/src/reference/unknown-outcome.md gives (`true` when the tool may have run), within the
//! binding's timeout plus one second, and the server must have counted at most one `tools/call` —
//! exactly the number the case expects. HTTP and SSE tools have their own matrix:
//! every fault endpoint of the test server × both kinds of binding.

use std::time::{Duration, Instant};

use brain_runtime::{Call, CallRequest, Event, Runtime, Scope, ToolResult};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tests::server::{Faults, Resume, Stats, TestServer, bindings_json};

/// What a case must end in, per revision: `(is_error, unknown_outcome, tools/call counted)`.
type Outcome = (bool, bool, usize);

struct Case {
    name: &'static str,
    faults: Faults,
    session: Outcome,
    stateless: Outcome,
}

const OK: Outcome = (false, false, 1);
/// Refused before `tools/call` was sent, or before the server took it in.
const NOT_SENT: Outcome = (true, false, 0);
/// Rejected at the HTTP or JSON-RPC layer before the tool ran (the layer counted it).
const REJECTED: Outcome = (true, false, 1);
/// After `tools/call` was sent: the tool may have run.
const UNKNOWN: Outcome = (true, true, 1);

fn case(name: &'static str, faults: Faults, session: Outcome, stateless: Outcome) -> Case {
    Case {
        name,
        faults,
        session,
        stateless,
    }
}

fn cases() -> Vec<Case> {
    let f = Faults::default;
    let status = |code| Faults {
        call_status: Some(code),
        ..f()
    };
    let closing = |resume| Faults {
        close_call_stream: Some(10),
        resume,
        ..f()
    };
    let mut cases = vec![
        case("no fault", f(), OK, OK),
        case(
            "token required, none sent",
            Faults {
                require_token: Some("s3cret".into()),
                ..f()
            },
            NOT_SENT,
            NOT_SENT,
        ),
        // 2026-07-28 has no initialize: its faults never fire.
        case(
            "initialize HTTP 500",
            Faults {
                initialize_500: true,
                ..f()
            },
            NOT_SENT,
            OK,
        ),
        case(
            "initialize JSON-RPC error",
            Faults {
                initialize_rpc_error: true,
                ..f()
            },
            NOT_SENT,
            OK,
        ),
        case("tools/call HTTP 500", status(500), UNKNOWN, UNKNOWN),
        // Dropped before the server read it: not counted, but brain cannot know that.
        case(
            "dropped before reading tools/call",
            Faults {
                drop_before_call: true,
                ..f()
            },
            (true, true, 0),
            (true, true, 0),
        ),
        case(
            "dropped after reading tools/call",
            Faults {
                drop_after_call: true,
                ..f()
            },
            UNKNOWN,
            UNKNOWN,
        ),
        case(
            "stalled (timeout)",
            Faults {
                stall_call: true,
                ..f()
            },
            UNKNOWN,
            UNKNOWN,
        ),
        case(
            "malformed JSON",
            Faults {
                malformed_call: true,
                ..f()
            },
            UNKNOWN,
            UNKNOWN,
        ),
        case(
            "truncated SSE",
            Faults {
                truncated_call: true,
                ..f()
            },
            UNKNOWN,
            UNKNOWN,
        ),
        case(
            "JSON-RPC -32601",
            Faults {
                call_method_not_found: true,
                ..f()
            },
            REJECTED,
            REJECTED,
        ),
        case("Nagle on", Faults { nagle: true, ..f() }, OK, OK),
        case(
            "128 extra tools",
            Faults {
                extra_tools: 128,
                ..f()
            },
            OK,
            OK,
        ),
        case(
            "paginated tools/list",
            Faults {
                page_size: Some(3),
                ..f()
            },
            OK,
            OK,
        ),
        // The server lists echo otherwise than the binding was reviewed: refused before the
        // send (`pin_drift`).
        case(
            "drifted echo",
            Faults {
                drifted: true,
                ..f()
            },
            NOT_SENT,
            NOT_SENT,
        ),
        // Streams are resumed on sessions only; 2026-07-28 has no stream to resume.
        case(
            "stream closed, resumed",
            closing(Resume::Answer),
            OK,
            UNKNOWN,
        ),
        case(
            "stream closed, resumption refused",
            closing(Resume::Refuse),
            UNKNOWN,
            UNKNOWN,
        ),
        case(
            "stream closed again and again",
            closing(Resume::CloseAgain),
            UNKNOWN,
            UNKNOWN,
        ),
        case(
            "server/discover rejected once",
            Faults {
                reject_revision_once: Some(vec!["2026-07-28".into()]),
                ..f()
            },
            OK,
            OK,
        ),
        // Redirects are never followed: a session is refused at initialize, and a
        // 2026-07-28 call at the tools/list that would verify its pin, before tools/call.
        case(
            "every request redirected",
            Faults {
                redirect_to: Some("http://127.0.0.1:9/mcp".into()),
                ..f()
            },
            NOT_SENT,
            NOT_SENT,
        ),
    ];
    for code in [401, 403, 404, 405, 406, 415] {
        cases.push(case(
            "tools/call rejected",
            status(code),
            REJECTED,
            REJECTED,
        ));
    }
    cases
}

/// The timeout of every binding in the matrix.
const TIMEOUT_SECONDS: u64 = 1;

async fn run_case(faults: Faults, revision: &str, expected: Outcome) -> Result<(), String> {
    let server = TestServer::start(faults).await.map_err(|e| e.to_string())?;
    let text = serde_json::to_string(
        &json!({"tools": bindings_json(&server.url, |_, binding: &mut Value| {
            binding["protocol_version"] = json!(revision);
            binding["timeout_seconds"] = json!(TIMEOUT_SECONDS);
        })}),
    )
    .unwrap();
    let config = brain_config::parse(text.as_bytes(), "matrix.json").map_err(|e| e.to_string())?;
    let runtime = Runtime::new(&config).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let call = runtime.call(
        CallRequest::new(
            "echo",
            Scope {
                tenant_id: "local".into(),
                session_id: "matrix".into(),
            },
            json!({"message": "matrix"}),
        )
        .with_call_id("matrix-1"),
    );
    let result = one_result(call).await?;
    let elapsed = started.elapsed();
    // Not a pause: once brain's cleanup is done and the server has seen every connection
    // closed, whatever brain sent has been counted, and a late duplicate could not hide.
    runtime.wait_for_cleanup().await;
    drop(runtime);
    server.closed_by_client().await;
    let calls = Stats::get(&server.stats.calls);
    let seen = (result.is_error, result.unknown_outcome, calls);
    if seen != expected {
        return Err(format!(
            "expected {expected:?}, got {seen:?} after {elapsed:?}: {:?}",
            result.content
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_on_both_revisions() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in cases() {
        for (revision, expected) in [("2025-11-25", case.session), ("2026-07-28", case.stateless)] {
            ran += 1;
            let label = format!(
                "{} ({}) at {revision}",
                case.name,
                fault_detail(&case.faults)
            );
            // A panic inside the runtime would surface here as a failed case, not abort the rest.
            let outcome = tokio::spawn(run_case(case.faults.clone(), revision, expected))
                .await
                .unwrap_or_else(|panic| Err(format!("panicked: {panic}")));
            if let Err(why) = outcome {
                failures.push(format!("{label}: {why}"));
            }
        }
    }
    assert!(ran >= 50, "{ran} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn fault_detail(faults: &Faults) -> String {
    match faults.call_status {
        Some(code) => format!("HTTP {code}"),
        None => "switch".into(),
    }
}

/// HTTP and SSE tools: every fault endpoint of the test server × both kinds of binding. Each
/// row ends in exactly one result with the wire contract's flags (docs/src/guides/http-tools.md),
/// within the timeout plus one second, the endpoint having received exactly the requests
/// expected (never more than one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_and_sse_tool_fault() {
    // (endpoint under /tools, arguments, HTTP tool, SSE tool)
    let rows: Vec<(&str, Value, Outcome, Outcome)> = vec![
        ("echo", json!({}), OK, UNKNOWN),
        ("text", json!({"message": "m"}), OK, UNKNOWN),
        ("no-content", json!({}), OK, UNKNOWN),
        ("sse/progress", json!({"steps": 3}), OK, OK),
        ("sse/flood", json!({"count": 5000}), OK, OK),
        ("sse/error", json!({}), REJECTED, REJECTED),
        ("status/400", json!({}), REJECTED, REJECTED),
        ("status/401", json!({}), REJECTED, REJECTED),
        ("status/404", json!({}), REJECTED, REJECTED),
        ("status/422", json!({}), REJECTED, REJECTED),
        ("status/408", json!({}), UNKNOWN, UNKNOWN),
        ("status/409", json!({}), UNKNOWN, UNKNOWN),
        ("status/429", json!({}), UNKNOWN, UNKNOWN),
        ("status/500", json!({}), UNKNOWN, UNKNOWN),
        ("status/503", json!({}), UNKNOWN, UNKNOWN),
        ("redirect", json!({}), UNKNOWN, UNKNOWN),
        ("drop-before", json!({}), UNKNOWN, UNKNOWN),
        ("drop-after", json!({}), UNKNOWN, UNKNOWN),
        ("stall", json!({}), UNKNOWN, UNKNOWN),
        ("slow-body", json!({"seconds": 30}), UNKNOWN, UNKNOWN),
        ("wrong-type", json!({}), UNKNOWN, UNKNOWN),
        ("invalid-json", json!({}), UNKNOWN, UNKNOWN),
        ("huge", json!({"bytes": 4 << 20}), UNKNOWN, UNKNOWN),
        ("sse/no-result", json!({}), UNKNOWN, UNKNOWN),
        ("sse/drop", json!({}), UNKNOWN, UNKNOWN),
        ("sse/stall", json!({}), UNKNOWN, UNKNOWN),
        (
            "sse/huge-event",
            json!({"bytes": 4 << 20}),
            UNKNOWN,
            UNKNOWN,
        ),
        ("sse/wrong-type", json!({}), OK, UNKNOWN),
    ];
    let mut failures = Vec::new();
    let mut ran = 0;
    for (path, arguments, http, sse) in rows {
        for (transport, expected) in [("http", http), ("sse", sse)] {
            ran += 1;
            let outcome = tokio::spawn(run_tool_case(path, transport, arguments.clone(), expected))
                .await
                .unwrap_or_else(|panic| Err(format!("panicked: {panic}")));
            if let Err(why) = outcome {
                failures.push(format!("/tools/{path} as an {transport} tool: {why}"));
            }
        }
    }
    assert!(ran >= 50, "{ran} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn run_tool_case(
    path: &str,
    transport: &str,
    arguments: Value,
    expected: Outcome,
) -> Result<(), String> {
    let server = TestServer::start(Faults::default())
        .await
        .map_err(|e| e.to_string())?;
    let url = format!("{}/tools/{path}", server.url.trim_end_matches("/mcp"));
    let text = json!({"tools": [{
        "name": "tool", "description": "A fault endpoint.", "input_schema": {"type": "object"},
        "url": url, "tenants": ["local"], "transport": transport,
        "timeout_seconds": TIMEOUT_SECONDS, "max_output_bytes": 4096
    }]})
    .to_string();
    let config = brain_config::parse(text.as_bytes(), "matrix.json").map_err(|e| e.to_string())?;
    let runtime = Runtime::new(&config).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let call = runtime.call(
        CallRequest::new(
            "tool",
            Scope {
                tenant_id: "local".into(),
                session_id: "matrix".into(),
            },
            arguments,
        )
        .with_call_id("matrix-1"),
    );
    let result = one_result(call).await?;
    let elapsed = started.elapsed();
    let requests = Stats::get(&server.tools.requests);
    let seen = (result.is_error, result.unknown_outcome, requests);
    if seen != expected {
        return Err(format!(
            "expected {expected:?}, got {seen:?} after {elapsed:?}: {:?}",
            result.content
        ));
    }
    Ok(())
}

/// Reads `call` to its end within the timeout plus one second: its one result, or why not.
async fn one_result(mut call: Call) -> Result<ToolResult, String> {
    let deadline = Duration::from_secs(TIMEOUT_SECONDS + 1);
    let mut results = Vec::new();
    let drained = tokio::time::timeout(deadline, async {
        while let Some(event) = call.next().await {
            if let Event::Result(result) = event {
                results.push(result);
            }
        }
    })
    .await;
    if drained.is_err() {
        return Err(format!("no end within {deadline:?}"));
    }
    match <[ToolResult; 1]>::try_from(results) {
        Ok([result]) => Ok(result),
        Err(results) => Err(format!("{} results: {results:?}", results.len())),
    }
}

/// A chatty server (the test server's `chatty` tool, its stream written by the server's layer
/// at every revision and over stdio) on every MCP transport: 100,000 progress notifications then
/// the result succeed under a 64 KiB `max_output_bytes` (progress is not the result: it never
/// counts against the result's bound), every progress event delivered, in order; one
/// notification over the 64 KiB bound for notifications fails the call; 10,000 pings fail it
/// after at most 16 answers. Each row: `(is_error, unknown_outcome, tools/call count)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chatty_servers_on_every_transport() {
    let mut failures = Vec::new();
    for transport in ["2025-11-25", "2026-07-28", "stdio"] {
        for (row, arguments) in [
            ("100,000 progress", json!({"progress": 100_000})),
            (
                "a 100 KB notification",
                json!({"notification_bytes": 100_000}),
            ),
            ("10,000 pings", json!({"pings": 10_000})),
        ] {
            let outcome = tokio::spawn(chatty_row(transport, arguments))
                .await
                .unwrap_or_else(|panic| Err(format!("panicked: {panic}")));
            let expected_ok = row.starts_with("100,000");
            match outcome {
                Err(why) => failures.push(format!("{row} over {transport}: {why}")),
                Ok(seen) => {
                    let expected = if expected_ok { OK } else { UNKNOWN };
                    if (seen.is_error, seen.unknown_outcome, seen.calls) != expected {
                        failures.push(format!(
                            "{row} over {transport}: expected {expected:?}, got {:?}: {}",
                            (seen.is_error, seen.unknown_outcome, seen.calls),
                            seen.text
                        ));
                    }
                    if expected_ok
                        && seen.progress != (1..=100_000).map(f64::from).collect::<Vec<_>>()
                    {
                        failures.push(format!(
                            "{row} over {transport}: {} progress events, not 1..=100000 in order",
                            seen.progress.len()
                        ));
                    }
                    if row.starts_with("a 100 KB") && !seen.text.contains("65536 bytes") {
                        failures.push(format!("{row} over {transport}: {}", seen.text));
                    }
                    if row.starts_with("10,000") {
                        let most = if transport == "2026-07-28" { 0 } else { 16 };
                        if seen.answers > most
                            || !seen.text.contains("more than 16 requests") && most > 0
                        {
                            failures.push(format!(
                                "{row} over {transport}: {} answers (at most {most}): {}",
                                seen.answers, seen.text
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What a chatty row ended in.
struct Chatty {
    is_error: bool,
    unknown_outcome: bool,
    calls: usize,
    text: String,
    progress: Vec<f64>,
    /// Answers to server requests that reached the server.
    answers: usize,
}

async fn chatty_row(transport: &str, arguments: Value) -> Result<Chatty, String> {
    let stats_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let stats_file = stats_dir.path().join("stats");
    let server = match transport {
        "stdio" => None,
        _ => Some(
            TestServer::start(Faults::default())
                .await
                .map_err(|e| e.to_string())?,
        ),
    };
    let url = server
        .as_ref()
        .map_or("http://unused.invalid/mcp", |s| s.url.as_str());
    let text = serde_json::to_string(
        &json!({"tools": bindings_json(url, |_, binding: &mut Value| {
            binding["timeout_seconds"] = json!(60);
            binding["max_output_bytes"] = json!(65_536);
            if transport == "stdio" {
                binding.as_object_mut().unwrap().remove("url");
                binding["command"] = json!([
                    tests::process::test_server_binary().display().to_string(),
                    "--stdio", "--stats-file", stats_file.display().to_string()
                ]);
                binding["sandbox"] = json!({"write": [stats_file.parent().unwrap()]});
            } else {
                binding["protocol_version"] = json!(transport);
            }
        })}),
    )
    .unwrap();
    let config = brain_config::parse(text.as_bytes(), "chatty.json").map_err(|e| e.to_string())?;
    let runtime = Runtime::new(&config).map_err(|e| e.to_string())?;
    let mut call = runtime.call(
        CallRequest::new(
            "chatty",
            Scope {
                tenant_id: "local".into(),
                session_id: "chatty".into(),
            },
            arguments,
        )
        .with_call_id("chatty-1"),
    );
    let mut progress = Vec::new();
    let mut result = None;
    while let Some(event) = call.next().await {
        match event {
            Event::Progress(event) => progress.push(event.progress),
            Event::Result(done) => result = Some(done),
            other => return Err(format!("an event the test does not know: {other:?}")),
        }
    }
    let result = result.ok_or("no tool.result")?;
    runtime.wait_for_cleanup().await;
    drop(runtime);
    let (calls, answers) = match &server {
        Some(server) => {
            server.closed_by_client().await;
            (
                Stats::get(&server.stats.calls),
                Stats::get(&server.stats.client_answers),
            )
        }
        None => (
            tests::stdio::count(&stats_file, "tools/call"),
            tests::stdio::count(&stats_file, "answer"),
        ),
    };
    Ok(Chatty {
        is_error: result.is_error,
        unknown_outcome: result.unknown_outcome,
        calls,
        text: result
            .content
            .iter()
            .map(|c| serde_json::to_string(c).unwrap())
            .collect(),
        progress,
        answers,
    })
}
