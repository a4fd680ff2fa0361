//! Real stdio MCP servers, installed by `tests/interop/setup.sh` (pinned): discovered with
//! `brain_runtime::discover::discover_command` (what `cargo xtask discover --command` runs),
//! turned into bindings with `binding_from_tool` (every config rule checked), then called through
//! the runtime, one fresh process per call: `@modelcontextprotocol/server-filesystem@2026.8.31`
//! on a temporary directory, `@modelcontextprotocol/server-everything@2026.8.31` in its stdio
//! mode (progress, a timeout, cancellation, and a binding pinned to 2026-07-28: no initialize),
//! `@modelcontextprotocol/server-memory@2026.8.31` keeping its graph in its folder, and
//! `mcp-server-time==2026.10.19` from PyPI — each under the stdio sandbox, given what it needs
//! (its package's `node_modules` read, its folder written; `mcp-server-time` the default alone).

use std::path::PathBuf;
use std::time::Duration;

use brain_config::HostConfig;
use brain_config::discovery::{BindingSettings, Server, binding_from_tool};
use brain_runtime::discover::{CommandOptions, discover_command};
use brain_runtime::{Event, Runtime};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tests::client::{call, request, text};

fn interop(path: &str) -> String {
    let path: PathBuf = tests::workspace_root().join("tests/interop").join(path);
    assert!(
        path.exists(),
        "{} is missing: run tests/interop/setup.sh (cargo xtask ci does)",
        path.display()
    );
    path.display().to_string()
}

/// Discovers `tools` of the server `command` starts and returns a runtime over their bindings
/// (`patch` changes each), with the revision the server negotiated.
async fn discovered(
    command: Vec<String>,
    tools: &[&str],
    patch: impl Fn(&mut Value),
) -> (Runtime, String) {
    let discovery = discover_command(&CommandOptions {
        command: command.clone(),
        env: Vec::new(),
        secrets: Vec::new(),
        timeout: Duration::from_secs(30),
        // Discovered under the sandbox too: the peers readable, the tests' temporary
        // directories (the counting wrappers' stats) writable.
        sandbox: Some(brain_config::SandboxRules {
            read: vec![interop("")],
            write: vec![std::env::temp_dir().display().to_string()],
            ..Default::default()
        }),
    })
    .await
    .unwrap_or_else(|error| panic!("discovery of {command:?} failed: {error}"));
    let settings = BindingSettings {
        server: Server::Command {
            command,
            env: Default::default(),
            env_from: Default::default(),
            sandbox: None,
        },
        token_env: None,
        tenants: vec!["local".into()],
        timeout_seconds: 30,
        max_output_bytes: brain_config::DEFAULT_MAX_OUTPUT_BYTES,
        protocol_version: discovery.protocol_version.clone(),
        on_input_request: None,
        auth: None,
        server_tasks: discovery.server_tasks,
        ca_file: None,
    };
    let bindings: Vec<Value> = tools
        .iter()
        .map(|name| {
            let tool = discovery
                .tools
                .iter()
                .find(|t| t["name"] == *name)
                .unwrap_or_else(|| panic!("the server has no tool {name}"));
            let mut binding = serde_json::to_value(binding_from_tool(tool, &settings)).unwrap();
            // The default sandbox, the Node packages readable (a test's patch may widen it).
            binding["sandbox"] = json!({"read": [interop("node_modules")]});
            patch(&mut binding);
            binding
        })
        .collect();
    let text = json!({"tools": bindings}).to_string();
    let config: HostConfig =
        brain_config::parse(text.as_bytes(), "discovered.json").unwrap_or_else(|e| panic!("{e}"));
    (Runtime::new(&config).unwrap(), discovery.protocol_version)
}

fn node(script: &str, args: &[&str]) -> Vec<String> {
    let mut command = vec!["node".to_owned(), interop(script)];
    command.extend(args.iter().map(|a| (*a).to_owned()));
    command
}

#[tokio::test]
async fn server_filesystem_reads_lists_and_reports_a_tool_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "first line\nsecond line\n").unwrap();
    let command = node(
        "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        &[root.to_str().unwrap()],
    );
    // Under the sandbox: its package readable, its root readable and writable.
    let sandbox = json!({"read": [interop("node_modules")], "write": [root]});
    let (runtime, revision) = discovered(command, &["read_text_file", "list_directory"], |b| {
        b["sandbox"] = sandbox.clone();
    })
    .await;
    assert_eq!(revision, "2025-11-25");

    let path = root.join("notes.txt").display().to_string();
    let read = call(&runtime, "read_text_file", json!({"path": path})).await;
    assert!(!read.is_error, "{read:?}");
    assert!(text(&read).contains("second line"), "{read:?}");

    let listed = call(
        &runtime,
        "list_directory",
        json!({"path": root.display().to_string()}),
    )
    .await;
    assert!(text(&listed).contains("[FILE] notes.txt"), "{listed:?}");

    // Outside the allowed directory: the server's own tool error, a known outcome.
    let refused = call(&runtime, "read_text_file", json!({"path": "/etc/hostname"})).await;
    assert_eq!(
        (refused.is_error, refused.unknown_outcome),
        (true, false),
        "{refused:?}"
    );
    assert!(text(&refused).contains("Access denied"), "{refused:?}");
    runtime.wait_for_cleanup().await;
}

#[tokio::test]
async fn server_everything_stdio_progress_timeout_and_cancellation() {
    let command = node(
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        &["stdio"],
    );
    let (runtime, _) = discovered(
        command,
        &["echo", "trigger-long-running-operation"],
        |binding| {
            if binding["name"] == "trigger-long-running-operation" {
                binding["timeout_seconds"] = json!(2);
            }
        },
    )
    .await;
    let echoed = call(&runtime, "echo", json!({"message": "hello, everything"})).await;
    assert!(text(&echoed).contains("hello, everything"), "{echoed:?}");

    // The same server pinned to 2026-07-28: no initialize, the revision in `_meta`.
    let (stateless, _) = discovered(
        node(
            "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            &["stdio"],
        ),
        &["echo"],
        |binding| binding["protocol_version"] = json!("2026-07-28"),
    )
    .await;
    let echoed = call(&stateless, "echo", json!({"message": "no session"})).await;
    assert!(!echoed.is_error, "{echoed:?}");
    assert!(text(&echoed).contains("no session"), "{echoed:?}");

    let mut long = runtime.call(request(
        "trigger-long-running-operation",
        json!({"duration": 1, "steps": 4}),
    ));
    let mut steps = Vec::new();
    let mut result = None;
    while let Some(event) = long.next().await {
        match event {
            Event::Progress(progress) => steps.push(progress.progress),
            Event::Result(done) => result = Some(done),
            other => panic!("unexpected: {other:?}"),
        }
    }
    let result = result.unwrap();
    assert!(!result.is_error, "{result:?}");
    assert_eq!(steps, vec![1.0, 2.0, 3.0, 4.0]);

    let slow = call(
        &runtime,
        "trigger-long-running-operation",
        json!({"duration": 10, "steps": 2}),
    )
    .await;
    assert_eq!(
        (slow.is_error, slow.unknown_outcome),
        (true, true),
        "{slow:?}"
    );
    assert!(text(&slow).contains("timed out after 2s"), "{slow:?}");

    // Cancelled once the tool runs (its first progress), not after a guessed delay: on a busy
    // machine the process may not have started by then, and the call would honestly end as
    // "not sent".
    let mut cancelled = runtime.call(request(
        "trigger-long-running-operation",
        json!({"duration": 10, "steps": 10}),
    ));
    match cancelled.next().await {
        Some(Event::Progress(_)) => cancelled.cancel(),
        other => panic!("expected a progress event first, got {other:?}"),
    }
    let cancelled = cancelled.result().await;
    assert_eq!(
        (cancelled.is_error, cancelled.unknown_outcome),
        (true, true),
        "{cancelled:?}"
    );
    assert!(text(&cancelled).contains("interrupted"), "{cancelled:?}");
    runtime.wait_for_cleanup().await;
}

/// `@modelcontextprotocol/server-memory@2026.8.31` under the default sandbox, its package read
/// and its memory file's folder written: an entity created is in the graph the next process
/// reads (each call its own process), and the file is where the config put it.
#[tokio::test]
async fn server_memory_keeps_its_graph_in_its_folder_under_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let command = node(
        "node_modules/@modelcontextprotocol/server-memory/dist/index.js",
        &[],
    );
    let env = json!({"MEMORY_FILE_PATH": file.display().to_string()});
    let (runtime, _) = discovered(command, &["create_entities", "read_graph"], |binding| {
        binding["env"] = env.clone();
        binding["sandbox"]["write"] = json!([dir.path()]);
    })
    .await;
    let entity = json!({"entities": [{"name": "brain", "entityType": "project",
        "observations": ["confined by the kernel"]}]});
    let created = call(&runtime, "create_entities", entity).await;
    assert!(!created.is_error, "{created:?}");
    let graph = call(&runtime, "read_graph", json!({})).await;
    assert!(text(&graph).contains("confined by the kernel"), "{graph:?}");
    assert!(
        file.exists(),
        "the graph is in the folder the sandbox lets it write"
    );
    runtime.wait_for_cleanup().await;
}

#[tokio::test]
async fn mcp_server_time_from_pypi() {
    let command = vec![
        interop(".venv-time/bin/mcp-server-time"),
        "--local-timezone".to_owned(),
        "UTC".to_owned(),
    ];
    // Under the default sandbox (its venv and the interpreter's installation are readable).
    let (runtime, _) = discovered(command, &["get_current_time"], |b| {
        b["sandbox"] = json!(true);
    })
    .await;
    let now = call(
        &runtime,
        "get_current_time",
        json!({"timezone": "Europe/Oslo"}),
    )
    .await;
    assert!(!now.is_error, "{now:?}");
    assert!(text(&now).contains("Europe/Oslo"), "{now:?}");
    let unknown = call(
        &runtime,
        "get_current_time",
        json!({"timezone": "Mars/Olympus"}),
    )
    .await;
    assert!(unknown.is_error, "{unknown:?}");
    assert!(!unknown.unknown_outcome, "{unknown:?}");
    runtime.wait_for_cleanup().await;
}

/// `mcp-server-time` (a server of the codegen corpus) behind `tests/interop/edit_tools.py`,
/// which changes `get_current_time`'s input schema while the file `edit` exists, counted by
/// `counting_stdio.py` at its door: discovered and pinned unchanged, then changed; the next call
/// (on a new process, with and without a spare) is refused `pin_drift` and no `tools/call`
/// reaches the server; the file removed, the tool runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_changed_after_review_is_refused_before_the_send() {
    for prewarm in [0, 1] {
        let dir = tempfile::tempdir().unwrap();
        let (stats, edit) = (dir.path().join("stats"), dir.path().join("edit"));
        let command = vec![
            interop(".venv/bin/python"),
            interop("counting_stdio.py"),
            stats.display().to_string(),
            interop(".venv/bin/python"),
            interop("edit_tools.py"),
            edit.display().to_string(),
            interop(".venv-time/bin/mcp-server-time"),
            "--local-timezone".to_owned(),
            "UTC".to_owned(),
        ];
        let (runtime, _) = discovered(command, &["get_current_time"], |binding| {
            // The server's venv read, the stats and the edit file's directory written.
            binding["sandbox"] = json!({"read": [interop(".venv-time")], "write": [dir.path()]});
            if prewarm > 0 {
                binding["prewarm"] = json!(prewarm);
            }
        })
        .await;
        let calls = || tests::stdio::count(&stats, "tools/call");
        let now = json!({"timezone": "Europe/Oslo"});
        let ran = call(&runtime, "get_current_time", now.clone()).await;
        assert!(!ran.is_error, "{ran:?}");
        assert_eq!(calls(), 1);

        std::fs::write(&edit, "get_current_time").unwrap();
        // A spare started before the change was verified then: it serves one more call.
        if prewarm > 0 {
            runtime.wait_for_cleanup().await;
            let _ = call(&runtime, "get_current_time", now.clone()).await;
        }
        let sent = calls();
        let refused = call(&runtime, "get_current_time", now.clone()).await;
        assert_eq!(
            refused.kind,
            Some(brain_runtime::OutcomeKind::PinDrift),
            "{refused:?}"
        );
        assert!(!refused.unknown_outcome, "{refused:?}");
        assert!(text(&refused).contains("`inputSchema`"), "{refused:?}");
        assert_eq!(
            calls(),
            sent,
            "prewarm {prewarm}: nothing sent after the change"
        );

        std::fs::remove_file(&edit).unwrap();
        if prewarm > 0 {
            // The spare listed while the change stood is refused once more.
            runtime.wait_for_cleanup().await;
            let _ = call(&runtime, "get_current_time", now.clone()).await;
        }
        let back = call(&runtime, "get_current_time", now).await;
        assert!(!back.is_error, "prewarm {prewarm}: {back:?}");
        runtime.wait_for_cleanup().await;
    }
}

/// server-everything over stdio behind `tests/interop/counting_stdio.py`, which appends each
/// request's method to `stats`.
fn counted_everything(stats: &std::path::Path) -> Vec<String> {
    let mut command = vec![
        interop(".venv/bin/python"),
        interop("counting_stdio.py"),
        stats.display().to_string(),
    ];
    command.extend(node(
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        &["stdio"],
    ));
    command
}

/// `simulate-research-query` over stdio (`taskSupport: "required"`): bound with `task: true`,
/// called as a task (its stages as progress, the report as the result), and a timeout shorter
/// than the task: `tasks/cancel` reaches the server, the outcome is unknown. Requests are
/// counted at the server's stdin (`tests/interop/counting_stdio.py`).
#[tokio::test]
async fn server_everything_stdio_research_runs_as_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    let command = counted_everything(&stats);
    let (runtime, revision) = discovered(command, &["simulate-research-query"], |binding| {
        binding["sandbox"]["write"] = json!([dir.path()]);
        assert_eq!(
            (&binding["task"], &binding["server_tasks"]),
            (&json!(true), &json!(true)),
            "{binding}"
        );
    })
    .await;
    assert_eq!(revision, "2025-11-25");
    let count = |method: &str| tests::stdio::count(&stats, method);
    let listed = count("tools/list");

    let mut events = runtime.call(request(
        "simulate-research-query",
        json!({"topic": "pipes"}),
    ));
    let mut messages = Vec::new();
    let mut result = None;
    while let Some(event) = events.next().await {
        match event {
            Event::Progress(progress) => messages.extend(progress.message),
            Event::Result(ended) => result = Some(ended),
            other => panic!("unexpected: {other:?}"),
        }
    }
    let result = result.expect("a result");
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (false, false),
        "{result:?}"
    );
    assert!(
        text(&result).contains("Research Report: pipes"),
        "{result:?}"
    );
    for stage in ["Gathering sources...", "Generating report..."] {
        assert!(messages.iter().any(|m| m == stage), "{stage}: {messages:?}");
    }
    runtime.wait_for_cleanup().await;
    assert_eq!(count("tools/call"), 1);
    assert_eq!(count("tasks/result"), 1);
    assert!(count("tasks/get") >= 3, "{}", count("tasks/get"));
    assert_eq!(count("tasks/cancel"), 0);
    assert_eq!(listed, 1);
}

#[tokio::test]
async fn server_everything_stdio_task_past_its_timeout_is_cancelled_and_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    let command = counted_everything(&stats);
    let (runtime, _) = discovered(command, &["simulate-research-query"], |binding| {
        binding["sandbox"]["write"] = json!([dir.path()]);
        binding["timeout_seconds"] = json!(2);
    })
    .await;
    let result = call(
        &runtime,
        "simulate-research-query",
        json!({"topic": "short"}),
    )
    .await;
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (true, true),
        "{result:?}"
    );
    assert!(text(&result).contains("timed out"), "{result:?}");
    runtime.wait_for_cleanup().await;
    let count = |method: &str| tests::stdio::count(&stats, method);
    assert_eq!(count("tools/call"), 1);
    assert_eq!(count("tasks/cancel"), 1);
    assert_eq!(count("tasks/result"), 0);
}
