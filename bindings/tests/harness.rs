//! brain-harness as a user runs it: the real binary against the test server on loopback (and,
//! exporting OpenTelemetry, to an OTLP/HTTP collector in this process that decodes what arrives).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::otlp::{Collector, Silent, Span};
use tests::server::{Faults, TestServer, bindings_json};

/// A config file with one binding per test-server tool.
fn write_config(dir: &Path, url: &str, patch: impl Fn(&mut Value)) -> String {
    let tools = bindings_json(url, |_, binding| patch(binding));
    let path = dir.join("host.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "tools": tools })).unwrap(),
    )
    .unwrap();
    path.display().to_string()
}

async fn harness(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args(&args)
            // Only what a test sets: no logs, no export to a developer's collector.
            .env_remove("RUST_LOG")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            .env_remove("OTEL_SERVICE_NAME")
            .env_remove("OTEL_RESOURCE_ATTRIBUTES")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .envs(env)
            .output()
            .expect("brain-harness runs")
    })
    .await
    .unwrap()
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// The text of the first content block of the first event printed.
fn first_text(output: &Output) -> String {
    lines(output)[0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn lists_the_compiled_in_bindings() {
    let output = harness(&["tools"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.starts_with("echo "), "{out}");
    assert!(out.contains("\nlong_task "), "{out}");
}

#[tokio::test]
async fn a_call_prints_json_lines_and_exits_0() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "local",
            "--call-id",
            "c1",
            "progress",
            r#"{"steps": 3}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = lines(&output);
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(
        events[0],
        json!({"type": "tool.progress", "call_id": "c1", "progress": 1.0, "total": 3.0, "message": "step 1/3"})
    );
    assert_eq!(
        events[3],
        json!({"type": "tool.result", "call_id": "c1", "is_error": false, "unknown_outcome": false,
               "content": [{"type": "text", "text": "done 3 steps"}]})
    );
}

#[tokio::test]
async fn arguments_from_stdin() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args([
                "--config", &config, "call", "--tenant", "local", "echo", "-",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(br#"{"message": "from stdin"}"#)
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(lines(&output)[0]["content"][0]["text"], json!("from stdin"));
}

#[tokio::test]
async fn error_results_exit_1() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let output = harness(
        &["--config", &config, "call", "--tenant", "local", "audio"],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    let result = &lines(&output)[0];
    assert_eq!(
        (
            result["is_error"].clone(),
            result["unknown_outcome"].clone()
        ),
        (json!(true), json!(true))
    );

    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "intruder",
            "echo",
            r#"{"message": "x"}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(lines(&output)[0]["unknown_outcome"], json!(false));
    assert_eq!(tests::server::Stats::get(&server.stats.calls), 1);
}

#[tokio::test]
async fn usage_and_config_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"tools": [{"name": "x"}]}"#).unwrap();
    let output = harness(&["--config", bad.to_str().unwrap(), "tools"], &[]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("error[missing-field]: "),
        "{}",
        stderr(&output)
    );

    let output = harness(&["call", "echo"], &[]).await;
    assert_eq!(output.status.code(), Some(2), "--tenant is required");

    let output = harness(&["call", "--tenant", "local", "echo", "not json"], &[]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("the arguments are not JSON"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn an_unset_token_variable_refuses_only_its_bindings() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |binding| {
        if binding["name"] == "fail" {
            binding["token_env"] = json!("BRAIN_HARNESS_TEST_UNSET");
        }
    });
    // `tools` marks the binding.
    let output = harness(&["--config", &config, "tools"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listed = String::from_utf8_lossy(&output.stdout).into_owned();
    let fail_line = listed.lines().find(|l| l.starts_with("fail ")).unwrap();
    assert!(
        fail_line.contains("unavailable: the token variable BRAIN_HARNESS_TEST_UNSET is not set"),
        "{listed}"
    );
    assert!(
        !listed
            .lines()
            .any(|l| l.starts_with("echo ") && l.contains("unavailable"))
    );

    // The other bindings work.
    let call = |tool: &'static str, args: &'static str| {
        let config = config.clone();
        async move {
            harness(
                &["--config", &config, "call", "--tenant", "local", tool, args],
                &[],
            )
            .await
        }
    };
    let output = call("echo", r#"{"message": "still here"}"#).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = tests::server::Stats::get(&server.stats.requests);

    // The affected binding is refused before any I/O, naming the variable.
    let output = call("fail", "{}").await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let events = lines(&output);
    let result = events.last().unwrap();
    assert_eq!(
        (&result["is_error"], &result["unknown_outcome"]),
        (&json!(true), &json!(false))
    );
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("BRAIN_HARNESS_TEST_UNSET is not set"),
        "{result}"
    );
    assert_eq!(tests::server::Stats::get(&server.stats.requests), requests);
}

#[tokio::test]
async fn token_values_never_appear() {
    let server = TestServer::start(Faults {
        require_token: Some("tok-123".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |binding| {
        binding["token_env"] = json!("BRAIN_HARNESS_TEST_TOKEN");
    });
    for (value, code) in [("tok-123", 0), ("tok-wrong", 1)] {
        let output = harness(
            &[
                "--config",
                &config,
                "call",
                "--tenant",
                "local",
                "echo",
                r#"{"message": "x"}"#,
            ],
            &[("BRAIN_HARNESS_TEST_TOKEN", value)],
        )
        .await;
        assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        );
        assert!(!all.contains(value), "{all}");
    }
}

/// Starts `brain-harness call` on `tool`, waits until `ready` says so, sends `signal`, and
/// returns the exit code, the events printed, and how long the harness took to exit after the
/// signal.
async fn interrupt(
    config: &str,
    tool: &str,
    args: &str,
    signal: &str,
    env: &[(&str, &str)],
    ready: impl Fn() -> bool,
) -> (Option<i32>, Vec<Value>, Duration) {
    use std::io::Read as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .args([
            "--config", config, "call", "--tenant", "local", "--json", tool, args,
        ])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("brain-harness runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "the call never got going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the harness settle into waiting for the answer.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = Instant::now();
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let (code, took, out) = tokio::task::spawn_blocking(move || {
        let code = child.wait().unwrap().code();
        let took = sent.elapsed();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        (code, took, out)
    })
    .await
    .unwrap();
    let events = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    (code, events, took)
}

#[tokio::test]
async fn a_signal_cancels_the_call_and_the_server_sees_it() {
    use tests::server::Stats;
    // Spans go to a collector that never answers: the exit still comes within 2 s.
    let silent = Silent::start().await.unwrap();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", silent.endpoint.as_str())];
    for (signal, exit) in [("-INT", 130), ("-TERM", 143)] {
        for revision in ["2025-11-25", "2026-07-28"] {
            let server = TestServer::start(Faults::default()).await.unwrap();
            let dir = tempfile::tempdir().unwrap();
            let config = write_config(dir.path(), &server.url, |binding| {
                binding["protocol_version"] = json!(revision);
            });
            let stats = &server.stats;
            let (code, events, took) =
                interrupt(&config, "slow", r#"{"seconds": 60}"#, signal, &env, || {
                    Stats::get(&stats.calls) == 1
                })
                .await;
            let what = format!("{signal} at {revision}");
            assert_eq!(code, Some(exit), "{what}");
            assert!(took < Duration::from_secs(2), "{what}: {took:?}");
            let last = events.last().unwrap_or_else(|| panic!("{what}: no events"));
            assert_eq!(last["type"], "tool.result", "{what}");
            assert_eq!(
                (&last["is_error"], &last["unknown_outcome"]),
                (&json!(true), &json!(true)),
                "{what}: {last}"
            );
            assert!(
                last["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .contains("interrupted")
            );
            // The server saw the cancellation: the tool stopped; on a session, the cancel
            // notification and the DELETE arrived before the harness exited.
            for _ in 0..100 {
                if Stats::get(&stats.cancelled_runs) == 1 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(Stats::get(&stats.cancelled_runs), 1, "{what}");
            if revision == "2025-11-25" {
                assert_eq!(Stats::get(&stats.cancellations), 1, "{what}");
                assert_eq!(Stats::get(&stats.deletes), 1, "{what}");
            }
            assert_eq!(Stats::get(&stats.calls), 1, "{what}");
        }
    }
}

#[tokio::test]
async fn a_signal_before_tools_call_reports_a_known_outcome() {
    // A server that accepts connections and never answers: the call never gets past
    // initialize.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&accepted);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url, |_| {});
    let (code, events, took) =
        interrupt(&config, "echo", r#"{"message": "x"}"#, "-INT", &[], || {
            accepted.load(std::sync::atomic::Ordering::SeqCst) > 0
        })
        .await;
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(2), "{took:?}");
    let last = events.last().unwrap();
    assert_eq!(
        (&last["type"], &last["is_error"], &last["unknown_outcome"]),
        (&json!("tool.result"), &json!(true), &json!(false)),
        "{last}"
    );
    assert!(
        last["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("before tools/call was sent")
    );
}

#[tokio::test]
async fn a_signal_cancels_a_stdio_call_and_its_process_group_ends() {
    use tests::stdio::{children, count};
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    let server = tests::process::test_server_binary().display().to_string();
    let config = write_config(dir.path(), "http://unused.invalid/mcp", |binding| {
        binding.as_object_mut().unwrap().remove("url");
        binding["command"] = json!([
            server,
            "--stdio",
            "--stats-file",
            stats.display().to_string(),
            "--spawn-child"
        ]);
    });
    let (code, events, took) =
        interrupt(&config, "slow", r#"{"seconds": 60}"#, "-INT", &[], || {
            count(&stats, "tools/call") == 1
        })
        .await;
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(2), "{took:?}");
    let last = events.last().unwrap();
    assert_eq!(
        (&last["type"], &last["is_error"], &last["unknown_outcome"]),
        (&json!("tool.result"), &json!(true), &json!(true)),
        "{last}"
    );
    assert!(
        last["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    // Before the harness exited, the server was told and its process ended, with its child.
    assert_eq!(count(&stats, "cancelled"), 1);
    assert_eq!(count(&stats, "exit"), 1);
    assert_eq!(count(&stats, "tools/call"), 1);
    for child in children(&stats) {
        assert!(
            tests::process::eventually_gone(child).await,
            "the server's child {child} survived the harness"
        );
    }
}

#[tokio::test]
async fn http_and_sse_tools_through_the_harness() {
    let key = "harness-session-token-key-0123456789abcdef";
    let server = TestServer::start(Faults {
        session_token_key: Some(key.as_bytes().to_vec()),
        require_token: Some("hook-secret-token".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let tools = server.url.replace("/mcp", "/tools");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    let binding = |name: &str, path: &str, extra: Value| {
        let mut binding = json!({
            "name": name, "description": "A tool endpoint of the test server.",
            "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}},
            "url": format!("{tools}/{path}"), "tenants": ["local"], "token_env": "HOOK_TOKEN"
        });
        for (k, v) in extra.as_object().unwrap() {
            binding[k] = v.clone();
        }
        binding
    };
    let config = json!({"tools": [
        binding("hook", "text", json!({})),
        binding("steps", "sse/progress", json!({"transport": "sse"})),
        binding("claims", "sse/inspect", json!({"transport": "sse", "inspect_session": true})),
    ]});
    std::fs::write(&path, config.to_string()).unwrap();
    let config = path.display().to_string();
    let call = |tool: &'static str, tenant: &'static str, args: &'static str| {
        let config = config.clone();
        async move {
            harness(
                &[
                    "--config",
                    &config,
                    "call",
                    "--tenant",
                    tenant,
                    "--call-id",
                    "h1",
                    tool,
                    args,
                ],
                &[
                    ("BRAIN_SESSION_TOKEN_KEY", key),
                    ("HOOK_TOKEN", "hook-secret-token"),
                ],
            )
            .await
        }
    };
    let output = call("hook", "local", r#"{"message": "hi"}"#).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        lines(&output),
        [
            json!({"type": "tool.result", "call_id": "h1", "is_error": false,
                "unknown_outcome": false, "content": [{"type": "text", "text": "you said: hi"}]})
        ]
    );
    // Progress as JSON Lines when piped, then the result.
    let output = call("steps", "local", "{}").await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = lines(&output);
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(
        events[0],
        json!({"type": "tool.progress", "call_id": "h1", "progress": 1.0, "total": 3.0,
               "message": "step 1 of 3"})
    );
    assert_eq!(events[3]["content"][0]["text"], "done after 3 steps");
    let output = call("claims", "local", "{}").await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = lines(&output).pop().unwrap();
    assert_eq!(result["structured_content"]["tool"], "claims");
    assert_eq!(result["structured_content"]["call_id"], "h1");
    // The gate: a tenant not allowed, and arguments that do not validate, send nothing.
    let requests = server
        .tools
        .requests
        .load(std::sync::atomic::Ordering::SeqCst);
    let output = call("hook", "intruder", "{}").await;
    assert_ne!(output.status.code(), Some(0));
    assert!(first_text(&output).contains("may not call"));
    let output = call("hook", "local", r#"{"message": 7}"#).await;
    assert_ne!(output.status.code(), Some(0));
    assert_eq!(
        server
            .tools
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        requests
    );
    // Without the token variable: refused before any I/O, the variable named.
    let output = harness(
        &[
            "--config", &config, "call", "--tenant", "local", "hook", "{}",
        ],
        &[("BRAIN_SESSION_TOKEN_KEY", key)],
    )
    .await;
    assert_ne!(output.status.code(), Some(0));
    assert!(
        first_text(&output).contains("HOOK_TOKEN is not set"),
        "{output:?}"
    );
    assert_eq!(
        server
            .tools
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        requests
    );
    let all = format!("{output:?}");
    assert!(!all.contains(key) && !all.contains("hook-secret-token"));
}

fn result(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{e}: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn attribute<'a>(span: &'a Span, key: &str) -> &'a Value {
    span.attributes.get(key).unwrap_or(&Value::Null)
}

/// The spans of one trace, by name (each name once).
fn by_name(spans: &[Span], trace_id: &str) -> BTreeMap<String, Span> {
    spans
        .iter()
        .filter(|span| span.trace_id == trace_id)
        .map(|span| (span.name.clone(), span.clone()))
        .collect()
}

#[tokio::test]
async fn a_call_is_a_client_span_with_phases_metrics_and_its_trace_context_on_the_wire() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let collector = Collector::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "agent-host"),
    ];
    let call = |tool: &'static str, args: &'static str, tenant: &'static str, id: &'static str| {
        let config = config.clone();
        async move {
            harness(
                &[
                    "--config",
                    &config,
                    "call",
                    "--tenant",
                    tenant,
                    "--call-id",
                    id,
                    tool,
                    args,
                ],
                &env,
            )
            .await
        }
    };

    // echo_meta: the server returns the `_meta` it received.
    let output = call("echo_meta", "{}", "local", "meta-1").await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let seen = result(&output)["structured_content"]["meta"].clone();
    let traceparent = seen["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("{seen}"));
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!((parts[0], parts[3]), ("00", "01"), "{traceparent}");
    let (trace_id, parent_id) = (parts[1], parts[2]);

    // A call with arguments and a result that must never be recorded, and progress.
    let output = call(
        "echo",
        r#"{"message": "personal-data-in-arguments"}"#,
        "local",
        "echo-1",
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let output = call("progress", r#"{"steps": 3}"#, "local", "progress-1").await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // Refused by the gate: a span and a counter, no I/O.
    let output = call("echo", r#"{"message": "x"}"#, "intruder", "refused-1").await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");

    let spans = collector.spans();
    let trace = by_name(&spans, trace_id);
    let names: Vec<&String> = trace.keys().collect();
    assert_eq!(
        names,
        [
            "brain-harness call echo_meta",
            "initialize",
            "session close",
            "tools/call",
            "tools/call echo_meta"
        ],
        "{spans:#?}"
    );
    let root = &trace["brain-harness call echo_meta"];
    let client = &trace["tools/call echo_meta"];
    assert_eq!(root.parent_span_id, "", "the harness's span is the root");
    assert_eq!(root.service.as_deref(), Some("agent-host"));
    assert_eq!(client.parent_span_id, root.span_id);
    assert_eq!(client.kind, 3, "a CLIENT span");
    for phase in ["initialize", "tools/call", "session close"] {
        assert_eq!(trace[phase].parent_span_id, client.span_id, "{phase}");
    }
    // The server continues the trace from the `tools/call` request's own span.
    assert_eq!(trace["tools/call"].span_id, parent_id);
    let port = url::Url::parse(&server.url).unwrap().port().unwrap();
    let session = attribute(client, "mcp.session.id")
        .as_str()
        .unwrap_or_default();
    assert!(!session.is_empty(), "{client:#?}");
    for (key, value) in [
        ("mcp.method.name", json!("tools/call")),
        ("gen_ai.operation.name", json!("execute_tool")),
        ("gen_ai.tool.name", json!("echo_meta")),
        ("mcp.protocol.version", json!("2025-11-25")),
        ("jsonrpc.request.id", json!("1")),
        ("server.address", json!("127.0.0.1")),
        ("server.port", json!(port)),
        ("network.transport", json!("tcp")),
        ("brain.tenant_id", json!("local")),
        ("brain.call_id", json!("meta-1")),
        ("brain.unknown_outcome", json!(false)),
        ("brain.binding.kind", json!("mcp")),
    ] {
        assert_eq!(attribute(client, key), &value, "{key}: {client:#?}");
    }
    assert_eq!(attribute(client, "error.type"), &Value::Null);
    assert_eq!(
        attribute(&trace["initialize"], "mcp.method.name"),
        "initialize"
    );

    // Progress: three events on the call's span, numbers only.
    let request = spans
        .iter()
        .find(|span| span.name == "tools/call progress")
        .expect("the progress call's span");
    let events: Vec<&Value> = request
        .events
        .iter()
        .filter(|(name, _)| name == "progress")
        .map(|(_, attributes)| &attributes["progress"])
        .collect();
    assert_eq!(
        events,
        [&json!(1.0), &json!(2.0), &json!(3.0)],
        "{request:#?}"
    );
    assert!(
        request
            .events
            .iter()
            .all(|(_, a)| !a.contains_key("message")),
        "progress messages are not recorded: {request:#?}"
    );

    // The refused call.
    let refused = spans
        .iter()
        .find(|span| attribute(span, "brain.call_id") == "refused-1")
        .expect("the refused call's span");
    assert_eq!(attribute(refused, "error.type"), "refused");
    assert_eq!(refused.status, 2, "status error");

    // Never arguments or results.
    let everything = format!("{spans:?}");
    assert!(
        !everything.contains("personal-data-in-arguments"),
        "{everything}"
    );

    // Metrics: the duration histogram and the calls counter (one process per call: each
    // exported its own).
    let points = collector.points();
    let durations: Vec<_> = points
        .iter()
        .filter(|p| p.metric == "mcp.client.operation.duration")
        .collect();
    let echo_meta = durations
        .iter()
        .find(|p| p.attributes.get("gen_ai.tool.name") == Some(&json!("echo_meta")))
        .unwrap_or_else(|| panic!("{points:#?}"));
    assert_eq!(echo_meta.unit, "s");
    assert_eq!(echo_meta.count, 1.0);
    assert!(
        echo_meta.sum.is_some_and(|s| s > 0.0 && s < 30.0),
        "{echo_meta:?}"
    );
    for (key, value) in [
        ("mcp.method.name", json!("tools/call")),
        ("gen_ai.operation.name", json!("execute_tool")),
        ("mcp.protocol.version", json!("2025-11-25")),
        ("server.address", json!("127.0.0.1")),
        ("server.port", json!(port)),
    ] {
        assert_eq!(
            echo_meta.attributes.get(key),
            Some(&value),
            "{key}: {echo_meta:?}"
        );
    }
    let count = |outcome: &str| -> f64 {
        points
            .iter()
            .filter(|p| {
                p.metric == "brain.client.calls"
                    && p.attributes.get("brain.outcome") == Some(&json!(outcome))
            })
            .map(|p| p.count)
            .sum()
    };
    assert_eq!((count("ok"), count("refused")), (3.0, 1.0), "{points:#?}");
}

#[tokio::test]
async fn an_otlp_protocol_the_harness_does_not_speak_is_named() {
    let output = harness(
        &["tools"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = stderr(&output);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported")
            && stderr.contains("port (usually 4318)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_collector_that_never_answers_costs_the_call_nothing() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let silent = Silent::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let started = Instant::now();
    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "local",
            "echo",
            r#"{"message": "hi"}"#,
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", silent.endpoint.as_str()),
            // The exporter would wait this long for each export.
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
        ],
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(result(&output)["is_error"], json!(false));
    // The connection the harness opened is accepted here once this test's task runs again.
    let tried = async {
        while silent.accepted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), tried)
        .await
        .expect("the harness tried to export");
    // The call and the exit wait at most the flush bound (0.5 s) for the collector, never the
    // exporter's 60 s.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
}
