//! stdio bindings end to end: brain starts `brain-test-server --stdio` as a real process per call
//! and the server records what arrives in a stats file. Every fault row asserts `(is_error,
//! unknown_outcome, tools/call count)`: spawn failure, exit or garbage before `tools/call` was
//! written → `false`; exit, garbage, an overlong line, a timeout or a request for user input after
//! it → `true`; `tools/call` is written at most once. Also: the clean environment, `env_from`
//! redacted from stderr tails, progress, cancellation, the process group killed (the server's
//! own child too, and a server that ignores SIGTERM), a flood on stderr, 5,000 progress
//! notifications in order, revisions (pinned exactly, or any when unpinned), and `prewarm` spares
//! used once each and reaped with the runtime.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brain_runtime::{Event, Runtime};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tests::client::{call, config, request, text};
use tests::process::{eventually_gone, test_server_binary};
use tests::stdio::{children, count};

/// A runtime over every test-server tool, served by `brain-test-server --stdio FLAGS` with its
/// stats in `stats`; `patch` changes each binding further.
fn runtime(stats: &Path, flags: &[&str], patch: impl Fn(&mut Value)) -> Runtime {
    let mut command = vec![
        json!(test_server_binary().display().to_string()),
        json!("--stdio"),
        json!("--stats-file"),
        json!(stats.display().to_string()),
    ];
    command.extend(flags.iter().map(|flag| json!(flag)));
    let mut tools: Vec<Value> = config("http://unused.invalid/mcp", |_, _| {})
        .tools
        .iter()
        .map(|binding| serde_json::to_value(binding).unwrap())
        .collect();
    tools.push(
        json!({"name": "environment", "description": "The process's environment.",
        "input_schema": {"type": "object", "properties": {}}, "mcp_tool": "environment",
        "tenants": ["local"]}),
    );
    for binding in &mut tools {
        binding.as_object_mut().unwrap().remove("url");
        binding["command"] = json!(command);
        binding["timeout_seconds"] = json!(20);
        // The default sandbox, and the stats file's directory writable.
        binding["sandbox"] = json!({"write": [stats.parent().unwrap()]});
        patch(binding);
    }
    let text = json!({ "tools": tools }).to_string();
    let config =
        brain_config::parse(text.as_bytes(), "stdio.json").unwrap_or_else(|e| panic!("{e}"));
    Runtime::builder(&config)
        .env(|var| (var == "HOST_SECRET").then(|| "s3cr3t-value-42".to_owned()))
        .build()
        .unwrap()
}

struct Stats {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn stats() -> Stats {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats");
    Stats { _dir: dir, path }
}

/// `(is_error, unknown_outcome, tools/call count)` and the message, after the cleanup.
async fn outcome(
    runtime: &Runtime,
    stats: &Path,
    tool: &str,
    args: Value,
) -> (bool, bool, usize, String) {
    let result = call(runtime, tool, args).await;
    runtime.clone().wait_for_cleanup().await;
    (
        result.is_error,
        result.unknown_outcome,
        count(stats, "tools/call"),
        text(&result),
    )
}

#[tokio::test]
async fn a_call_runs_in_a_fresh_process_with_the_scope_and_nothing_is_left() {
    let stats = stats();
    let runtime = runtime(&stats.path, &[], |_| {});
    let (is_error, unknown, calls, text) = outcome(
        &runtime,
        &stats.path,
        "echo",
        json!({"message": "over stdio"}),
    )
    .await;
    assert_eq!((is_error, unknown, calls), (false, false, 1), "{text}");
    assert_eq!(text, "over stdio");
    let result = call(&runtime, "echo_meta", json!({})).await;
    runtime.clone().wait_for_cleanup().await;
    let meta = &result.structured_content.as_ref().unwrap()["meta"];
    assert_eq!(meta["brain.dev/scope"]["tenant_id"], "local", "{meta}");
    assert_eq!(meta["progressToken"], "call-1", "{meta}");
    assert_eq!(count(&stats.path, "initialize"), 2);
    // Each process saw its stdin close and exited on its own.
    assert_eq!(count(&stats.path, "exit"), 2);
}

#[tokio::test]
async fn the_process_gets_a_clean_environment_env_from_and_cwd() {
    let stats = stats();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap().display().to_string();
    let runtime = runtime(&stats.path, &[], |binding| {
        binding["env"] = json!({"PLAIN": "visible"});
        binding["env_from"] = json!({"CHILD_SECRET": "HOST_SECRET"});
        binding["cwd"] = json!(cwd);
    });
    let result = call(&runtime, "environment", json!({})).await;
    let structured = result.structured_content.clone().unwrap();
    let mut names: Vec<&str> = structured["env"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort();
    // This test process has dozens of variables (CARGO_*, NEXTEST_*, ...): none is inherited.
    // TMPDIR is the sandbox's private directory.
    let allowed = ["CHILD_SECRET", "HOME", "LANG", "PATH", "PLAIN", "TMPDIR"];
    assert!(names.iter().all(|n| allowed.contains(n)), "{names:?}");
    assert!(
        names.contains(&"CHILD_SECRET") && names.contains(&"PLAIN"),
        "{names:?}"
    );
    assert_eq!(structured["env"]["CHILD_SECRET"], "s3cr3t-value-42");
    assert_eq!(structured["cwd"], json!(cwd));
}

#[tokio::test]
async fn a_missing_program_fails_before_anything_was_sent() {
    let stats = stats();
    let runtime = runtime(&stats.path, &[], |binding| {
        binding["command"] = json!(["/nonexistent/mcp-server", "--stdio"]);
    });
    let (is_error, unknown, calls, text) =
        outcome(&runtime, &stats.path, "echo", json!({"message": "x"})).await;
    assert_eq!((is_error, unknown, calls), (true, false, 0), "{text}");
    assert!(
        text.contains("could not start the MCP server \"/nonexistent/mcp-server\""),
        "{text}"
    );
    assert!(text.contains("not found"), "{text}");
}

#[tokio::test]
async fn exit_or_garbage_before_the_call_has_a_known_outcome() {
    for flag in ["--exit-on-initialize", "--garbage-on-initialize"] {
        let stats = stats();
        let runtime = runtime(&stats.path, &[flag], |binding| {
            binding["timeout_seconds"] = json!(5);
        });
        let (is_error, unknown, calls, text) =
            outcome(&runtime, &stats.path, "echo", json!({"message": "x"})).await;
        assert_eq!(
            (is_error, unknown, calls),
            (true, false, 0),
            "{flag}: {text}"
        );
        assert!(text.contains("failed to start a session"), "{flag}: {text}");
    }
}

#[tokio::test]
async fn a_crash_after_the_call_is_an_unknown_outcome_with_the_redacted_stderr() {
    let stats = stats();
    let runtime = runtime(
        &stats.path,
        &[
            "--crash-after-call",
            "--stderr-line",
            "token is $CHILD_SECRET",
        ],
        |binding| {
            binding["env_from"] = json!({"CHILD_SECRET": "HOST_SECRET"});
        },
    );
    let (is_error, unknown, calls, text) =
        outcome(&runtime, &stats.path, "echo", json!({"message": "x"})).await;
    assert_eq!((is_error, unknown, calls), (true, true, 1), "{text}");
    assert!(text.contains("exited with status 1"), "{text}");
    assert!(text.contains("token is [redacted]"), "{text}");
    assert!(text.contains("crashing after tools/call"), "{text}");
    assert!(!text.contains("s3cr3t-value-42"), "{text}");
}

#[tokio::test]
async fn garbage_or_an_overlong_line_after_the_call_is_an_unknown_outcome() {
    let stats = stats();
    let garbage = runtime(&stats.path, &["--garbage-after-call"], |_| {});
    let (is_error, unknown, calls, text) =
        outcome(&garbage, &stats.path, "echo", json!({"message": "x"})).await;
    assert_eq!((is_error, unknown, calls), (true, true, 1), "{text}");
    assert!(text.contains("not JSON-RPC"), "{text}");

    // 64 MiB without a newline against a 1 KiB bound: brain stops long before the end.
    let stats = self::stats();
    let runtime = runtime(&stats.path, &["--huge-line", "67108864"], |binding| {
        binding["max_output_bytes"] = json!(1024);
    });
    let (is_error, unknown, calls, text) =
        outcome(&runtime, &stats.path, "echo", json!({"message": "x"})).await;
    assert_eq!((is_error, unknown, calls), (true, true, 1), "{text}");
    assert!(
        text.contains("longer than max_output_bytes (1024)"),
        "{text}"
    );
}

#[tokio::test]
async fn a_hung_server_times_out_and_its_whole_group_is_killed() {
    let stats = stats();
    // It ignores stdin closing and SIGTERM, and has a child of its own.
    let runtime = runtime(
        &stats.path,
        &[
            "--hang",
            "--ignore-stdin-close",
            "--ignore-term",
            "--spawn-child",
        ],
        |binding| {
            binding["timeout_seconds"] = json!(1);
        },
    );
    let (is_error, unknown, calls, text) =
        outcome(&runtime, &stats.path, "echo", json!({"message": "x"})).await;
    assert_eq!((is_error, unknown, calls), (true, true, 1), "{text}");
    assert!(text.contains("timed out after 1s"), "{text}");
    assert_eq!(count(&stats.path, "cancelled"), 1);
    let child = children(&stats.path);
    assert_eq!(child.len(), 1);
    assert!(
        eventually_gone(child[0]).await,
        "the server's child {} survived",
        child[0]
    );
}

#[tokio::test]
async fn cancellation_drop_and_input_requests_end_the_call_once() {
    let stats = stats();
    let runtime = runtime(&stats.path, &[], |_| {});
    let call = runtime.call(request("slow", json!({"seconds": 30})));
    tokio::time::sleep(Duration::from_millis(500)).await;
    call.cancel();
    let result = call.result().await;
    runtime.clone().wait_for_cleanup().await;
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (true, true),
        "{result:?}"
    );
    assert_eq!(count(&stats.path, "tools/call"), 1);
    assert_eq!(count(&stats.path, "cancelled"), 1);

    // Dropping the call cancels it the same way.
    let stats = self::stats();
    let runtime = self::runtime(&stats.path, &[], |_| {});
    let call = runtime.call(request("slow", json!({"seconds": 30})));
    for _ in 0..100 {
        if count(&stats.path, "tools/call") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(call);
    runtime.clone().wait_for_cleanup().await;
    assert_eq!(count(&stats.path, "tools/call"), 1);
    assert_eq!(count(&stats.path, "cancelled"), 1);
    assert_eq!(count(&stats.path, "exit"), 1);

    let stats = self::stats();
    let runtime = self::runtime(&stats.path, &[], |_| {});
    let (is_error, unknown, calls, text) =
        outcome(&runtime, &stats.path, "elicit", json!({})).await;
    assert_eq!((is_error, unknown, calls), (true, true, 1), "{text}");
    assert!(
        text.contains("asked for user input (elicitation/create"),
        "{text}"
    );
    assert_eq!(count(&stats.path, "answer"), 1);
}

#[tokio::test]
async fn progress_arrives_in_order_and_a_stderr_flood_never_blocks() {
    let stats = stats();
    let runtime = runtime(&stats.path, &["--stderr-flood", "33554432"], |_| {});
    let mut call = runtime.call(request("progress", json!({"steps": 20})));
    let mut steps = Vec::new();
    let mut result = None;
    while let Some(event) = call.next().await {
        match event {
            Event::Progress(progress) => steps.push(progress.progress),
            Event::Result(done) => result = Some(done),
            other => panic!("unexpected: {other:?}"),
        }
    }
    let result = result.unwrap();
    assert!(!result.is_error, "{result:?}");
    assert_eq!(text(&result), "done 20 steps");
    assert_eq!(steps, (1..=20).map(f64::from).collect::<Vec<_>>());
}

#[tokio::test]
async fn prewarmed_spares_serve_one_call_each_and_die_with_the_runtime() {
    let stats = stats();
    let runtime = runtime(&stats.path, &["--spawn-child"], |binding| {
        if binding["name"] == "echo" {
            binding["prewarm"] = json!(2);
        }
    });
    for i in 0..4 {
        let result = call(&runtime, "echo", json!({"message": format!("call {i}")})).await;
        assert_eq!(text(&result), format!("call {i}"), "{result:?}");
    }
    runtime.clone().wait_for_cleanup().await;
    assert_eq!(count(&stats.path, "tools/call"), 4);
    // Every call had its own process: the four that served them exited, each after one call.
    assert_eq!(count(&stats.path, "exit"), 4);
    // Two spares are waiting, already initialized.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = children(&stats.path);
    assert!(
        count(&stats.path, "initialize") >= 6,
        "{}",
        count(&stats.path, "initialize")
    );
    drop(runtime);
    for child in started {
        assert!(
            eventually_gone(child).await,
            "a process group survived the runtime ({child})"
        );
    }
}

#[tokio::test]
async fn revisions_pinned_exactly_or_any_and_a_progress_flood() {
    for (pinned, offered) in [
        (Some("2024-11-05"), "2024-11-05"),
        (Some("2025-06-18"), "2025-06-18"),
        (None, "2025-11-25"),
    ] {
        let stats = stats();
        let runtime = runtime(&stats.path, &[], |binding| match pinned {
            Some(revision) => {
                binding["protocol_version"] = json!(revision);
                // No structured content before 2025-06-18 (a config rule).
                binding.as_object_mut().unwrap().remove("output_schema");
            }
            None => {
                binding.as_object_mut().unwrap().remove("protocol_version");
            }
        });
        let (is_error, unknown, calls, text) =
            outcome(&runtime, &stats.path, "echo", json!({"message": "rev"})).await;
        assert_eq!(
            (is_error, unknown, calls),
            (false, false, 1),
            "{pinned:?}: {text}"
        );
        assert_eq!(
            count(&stats.path, &format!("offered {offered}")),
            1,
            "{pinned:?}"
        );
    }

    // 5,000 progress notifications as fast as the server writes them: all delivered, in order.
    let stats = stats();
    let runtime = runtime(&stats.path, &[], |_| {});
    let mut call = runtime.call(request("progress", json!({"steps": 5000})));
    let (mut steps, mut last) = (0, 0.0);
    let mut result = None;
    while let Some(event) = call.next().await {
        match event {
            Event::Progress(progress) => {
                assert!(
                    progress.progress > last,
                    "{} after {last}",
                    progress.progress
                );
                last = progress.progress;
                steps += 1;
            }
            Event::Result(done) => result = Some(done),
            other => panic!("unexpected: {other:?}"),
        }
    }
    assert_eq!(text(&result.unwrap()), "done 5000 steps");
    assert_eq!(steps, 5000);
}
