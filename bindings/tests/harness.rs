//! brain-harness as a user runs it: the real binary against the test server on loopback (its
//! OpenTelemetry export: `harness_telemetry.rs`).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::otlp::Silent;
use tests::server::{Faults, TestServer};

mod common;

use common::{harness, stderr, write_config};

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

#[tokio::test]
async fn lists_the_compiled_in_bindings() {
    let output = harness(&["tools"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.starts_with("echo "), "{out}");
    assert!(out.contains("\nlong_task "), "{out}");
    // A stdio binding's sandbox, in one line under it.
    assert!(
        out.contains("\necho_stdio ") && out.contains("sandbox: default, network: none"),
        "{out}"
    );
}

/// `tools --tenant` lists that tenant's bindings only; `--json` (as `--format json`) one object
/// per binding; `--format openai` the definitions document, on stdout alone.
#[tokio::test]
async fn tools_by_tenant_and_format() {
    let output = harness(&["tools", "--tenant", "staging"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.starts_with("long_task ") && out.lines().count() == 1,
        "{out}"
    );

    let output = harness(&["tools", "--json", "--tenant", "local"], &[]).await;
    let listed: Vec<Value> = lines(&output);
    assert_eq!(listed.len(), 7, "{listed:?}");
    assert_eq!(listed[0]["name"], "echo");
    assert_eq!(listed[0]["kind"], "mcp");
    assert_eq!(listed[1]["kind"], "stdio");
    let same = harness(&["tools", "--format", "json", "--tenant", "local"], &[]).await;
    assert_eq!(same.stdout, output.stdout);

    let output = harness(&["tools", "--format", "openai", "--tenant", "staging"], &[]).await;
    let document: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = document["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["long_task"]);
    assert!(
        stderr(&output).contains("openai: 1 of 1 tools, 1 strict"),
        "{}",
        stderr(&output)
    );

    let output = harness(&["tools", "--format", "claude"], &[]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unknown format \"claude\""),
        "{}",
        stderr(&output)
    );
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
            // Each process its own journal: these tests reuse call ids across calls.
            .env("BRAIN_STATE_URL", "memory:")
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
    assert_eq!(result["reason"], "unavailable", "{result}");
    assert_eq!(tests::server::Stats::get(&server.stats.requests), requests);
}

/// Each refusal says why in `reason`, a word a host matches on: an unknown tool, a tenant the
/// binding does not allow, arguments that do not match, an id that is not one. The server sees
/// none of them.
#[tokio::test]
async fn a_refusal_names_its_reason() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let rows: [(&[&str], &str); 4] = [
        (&["--tenant", "local", "no_such_tool", "{}"], "unknown_tool"),
        (
            &["--tenant", "intruder", "echo", r#"{"message": "x"}"#],
            "tenant_not_allowed",
        ),
        (
            &["--tenant", "local", "echo", r#"{"message": 7}"#],
            "invalid_arguments",
        ),
        (
            &[
                "--tenant",
                "local",
                "--call-id",
                "c1\u{1b}[2K",
                "echo",
                r#"{"message": "x"}"#,
            ],
            "invalid_id",
        ),
    ];
    for (arguments, reason) in rows {
        let mut command = vec!["--config", config.as_str(), "call", "--json"];
        command.extend_from_slice(arguments);
        let output = harness(&command, &[]).await;
        assert_eq!(
            output.status.code(),
            Some(1),
            "{reason}: {}",
            stderr(&output)
        );
        let result = lines(&output).pop().unwrap();
        assert_eq!(
            (
                &result["kind"],
                &result["reason"],
                &result["unknown_outcome"]
            ),
            (&json!("refused"), &json!(reason), &json!(false)),
            "{result}"
        );
    }
    assert_eq!(tests::server::Stats::get(&server.stats.requests), 0);
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
        // Each process its own journal: these tests reuse call ids across calls.
        .env("BRAIN_STATE_URL", "memory:")
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
        binding["sandbox"] = json!({"write": [dir.path()]});
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
