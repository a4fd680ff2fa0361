//! MCP tasks (2025-11-25) against a server we did not write: server-everything's
//! `simulate-research-query` (`taskSupport: "required"`, about 4 s in four stages), bound with the
//! library functions `cargo xtask discover` uses, called through brain-harness, and counted at
//! the server's door (`tests::counting`): the status messages as progress and the report as the
//! result, with one `tools/call`; a timeout shorter than the task sends `tasks/cancel` and is
//! `unknown_outcome: true`; a harness killed with SIGKILL mid-task is resumed by a retry with the
//! same call id (SQLite, and PostgreSQL across processes), which gets the report with one
//! `tools/call` at the server.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The bindings discovery makes of `simulate-research-query`: `research` (timeout 30 s) and
/// `research_short` (2 s, shorter than the task), in a config in `dir`.
fn bindings(url: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let discovery = tests::peers::discover(url);
    assert_eq!(discovery.protocol_version, "2025-11-25");
    assert!(discovery.server_tasks, "server-everything declares tasks");
    let tool = discovery
        .tools
        .iter()
        .find(|tool| tool["name"] == "simulate-research-query")
        .expect("the task tool is listed");
    let binding = |name: &str, timeout_seconds: u64| {
        let settings = brain_config::discovery::BindingSettings {
            timeout_seconds,
            ..tests::peers::local_settings(url, &discovery)
        };
        let mut binding = brain_config::discovery::binding_from_tool(tool, &settings);
        binding.name = name.to_owned();
        assert_eq!(
            (binding.task, binding.server_tasks),
            (Some(true), Some(true))
        );
        binding
    };
    let config = brain_config::HostConfig {
        serve: None,
        tenant_limits: None,
        policies: None,
        approvals: None,
        audit: None,
        model_apis: None,
        schema: None,
        tools: vec![binding("research", 30), binding("research_short", 2)],
    };
    let path = dir.join("host.json");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    brain_config::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// `brain-harness call` of `tool` with `arguments`: its exit code and events.
fn call(config: &std::path::Path, tool: &str, arguments: Value) -> (Option<i32>, Vec<Value>) {
    let output = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .env("BRAIN_STATE_URL", "memory:")
        .arg("--config")
        .arg(config)
        .args(["call", "--tenant", "local", tool])
        .arg(arguments.to_string())
        .output()
        .expect("brain-harness runs");
    let events = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (output.status.code(), events)
}

#[test]
fn server_everything_research_runs_as_a_task() {
    let peer = tests::peers::Peer::everything();
    let door = tests::counting::Counting::start(&peer.url);
    let dir = tempfile::tempdir().unwrap();
    let config = bindings(&door.url, dir.path());
    let listed = door.counts();

    let (code, events) = call(&config, "research", json!({"topic": "rust"}));
    assert_eq!(code, Some(0), "{events:?}");
    let messages: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool.progress")
        .filter_map(|e| e["message"].as_str())
        .collect();
    for stage in [
        "Gathering sources...",
        "Analyzing content...",
        "Synthesizing findings...",
        "Generating report...",
    ] {
        assert!(messages.contains(&stage), "{stage}: {events:?}");
    }
    let counters: Vec<f64> = events
        .iter()
        .filter(|e| e["type"] == "tool.progress")
        .map(|e| e["progress"].as_f64().unwrap())
        .collect();
    assert!(counters.windows(2).all(|w| w[0] < w[1]), "{counters:?}");
    let result = events.last().unwrap();
    assert_eq!(result["type"], "tool.result", "{events:?}");
    assert_eq!(
        (&result["is_error"], &result["unknown_outcome"]),
        (&json!(false), &json!(false))
    );
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Research Report: rust"),
        "{result}"
    );
    let count = |method: &str| door.count(method) - listed.get(method).copied().unwrap_or(0);
    assert_eq!(count("tools/call"), 1, "{:?}", door.counts());
    assert_eq!(count("tasks/result"), 1, "{:?}", door.counts());
    assert!(count("tasks/get") >= 3, "{:?}", door.counts());
    assert_eq!(count("tasks/cancel"), 0, "{:?}", door.counts());

    // A timeout shorter than the task: the task is cancelled at the server, and the outcome is
    // unknown (the research may have run in part).
    let (code, events) = call(&config, "research_short", json!({"topic": "go"}));
    assert_eq!(code, Some(1), "{events:?}");
    let result = events.last().unwrap();
    assert_eq!(
        (&result["is_error"], &result["unknown_outcome"]),
        (&json!(true), &json!(true)),
        "{result}"
    );
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{result}"
    );
    assert_eq!(count("tools/call"), 2, "{:?}", door.counts());
    assert_eq!(count("tasks/cancel"), 1, "{:?}", door.counts());
    assert_eq!(count("tasks/result"), 1, "{:?}", door.counts());
}

/// Where the harness processes of a resume test keep their journal.
enum State {
    /// No flag: `$XDG_STATE_HOME/brain/state.db`.
    Default(tempfile::TempDir),
    Postgres(tests::postgres::Cluster),
}

impl State {
    fn command(&self, config: &std::path::Path, call_id: &str, arguments: &Value) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_brain-harness"));
        command
            .env_remove("RUST_LOG")
            .env_remove("BRAIN_STATE_URL")
            .arg("--config")
            .arg(config)
            .args([
                "call",
                "--tenant",
                "local",
                "--call-id",
                call_id,
                "research",
            ])
            .arg(arguments.to_string());
        match self {
            State::Default(dir) => command.env("XDG_STATE_HOME", dir.path()),
            State::Postgres(cluster) => command.env("BRAIN_STATE_URL", &cluster.url),
        };
        command
    }

    /// The call run to its end: exit code and events.
    fn call(
        &self,
        config: &std::path::Path,
        call_id: &str,
        arguments: &Value,
    ) -> (Option<i32>, Vec<Value>) {
        let output = self
            .command(config, call_id, arguments)
            .output()
            .expect("brain-harness runs");
        let events = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        (output.status.code(), events)
    }
}

/// The task call started, and killed with SIGKILL once its task is created (its first progress
/// event is written after the task is in the journal).
fn killed_mid_task(state: &State, config: &std::path::Path, call_id: &str, arguments: &Value) {
    let mut child = state
        .command(config, call_id, arguments)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("brain-harness starts");
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let Some(Ok(first)) = lines.next() else {
        let output = child.wait_with_output().unwrap();
        panic!("no event: {}", String::from_utf8_lossy(&output.stderr));
    };
    let event: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(event["type"], "tool.progress", "{event}");
    child.kill().unwrap();
    let _ = child.wait();
}

fn a_task_call_killed_mid_task_is_resumed_by_its_retry(state: &State) {
    let peer = tests::peers::Peer::everything();
    let door = tests::counting::Counting::start(&peer.url);
    let dir = tempfile::tempdir().unwrap();
    let config = bindings(&door.url, dir.path());
    let listed = door.counts();
    let count = |method: &str| door.count(method) - listed.get(method).copied().unwrap_or(0);
    let arguments = json!({"topic": "crash recovery"});

    killed_mid_task(state, &config, "resume-1", &arguments);
    assert_eq!(count("tools/call"), 1, "{:?}", door.counts());
    let started = Instant::now();
    let (code, events) = state.call(&config, "resume-1", &arguments);
    assert_eq!(code, Some(0), "{events:?}");
    let result = events.last().unwrap();
    assert_eq!(result["type"], "tool.result", "{events:?}");
    assert_eq!(
        (&result["is_error"], &result["unknown_outcome"]),
        (&json!(false), &json!(false)),
        "{result}"
    );
    let report = result["content"][0]["text"].as_str().unwrap();
    assert!(
        report.contains("Research Report: crash recovery"),
        "{result}"
    );
    // The dead owner's lease (5 s) is waited for, not the binding's 30 s timeout.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // One task, followed by two processes: no second tools/call, one tasks/result.
    assert_eq!(count("tools/call"), 1, "{:?}", door.counts());
    assert_eq!(count("tasks/result"), 1, "{:?}", door.counts());
    assert_eq!(count("tasks/cancel"), 0, "{:?}", door.counts());
    assert_eq!(
        count("initialize"),
        1,
        "no new session: {:?}",
        door.counts()
    );

    // Once more: the journal's recorded report, nothing sent.
    let (code, events) = state.call(&config, "resume-1", &arguments);
    assert_eq!(code, Some(0), "{events:?}");
    let replayed = events.last().unwrap();
    assert_eq!(replayed["replayed"], json!(true), "{replayed}");
    assert_eq!(replayed["content"], result["content"]);
    assert_eq!(count("tools/call"), 1, "{:?}", door.counts());
    assert_eq!(count("tasks/result"), 1, "{:?}", door.counts());
}

#[test]
fn a_task_call_killed_mid_task_is_resumed_on_sqlite() {
    let state = State::Default(tempfile::tempdir().unwrap());
    a_task_call_killed_mid_task_is_resumed_by_its_retry(&state);
}

#[test]
fn a_task_call_killed_mid_task_is_resumed_by_another_process_on_postgres() {
    let state = State::Postgres(tests::postgres::Cluster::start());
    a_task_call_killed_mid_task_is_resumed_by_its_retry(&state);
}

/// Runs the harness `command` and `SIGKILL`s it while the task server holds its task's first
/// `tasks/get` (the task is recorded by then).
async fn killed_at_first_poll(server: &tests::tasks::TaskServer, mut command: Command) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("brain-harness starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.count("tasks/get") == 0 {
        assert!(Instant::now() < deadline, "no poll: {:?}", server.counts());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap();
    let _ = child.wait();
}

/// Killed in the window right after `CreateTaskResult` arrived: the task server holds the
/// task's first `tasks/get` (the task's id is recorded before it), the harness is SIGKILLed
/// while it waits, and the retry resumes the task — at 2025-11-25 in its session, without a new
/// initialize; at 2026-07-28 (the tasks extension) by its id alone.
async fn killed_while_its_first_poll_is_held(extension: bool, state: State) {
    let server = tests::tasks::TaskServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let binding = if extension {
        server.stateless_binding("research", 30)
    } else {
        server.binding("research", 30)
    };
    std::fs::write(&config, json!({"tools": [binding]}).to_string()).unwrap();
    let arguments = json!({"topic": "held", "mode": "hold", "hold_ms": 20_000});
    killed_at_first_poll(&server, state.command(&config, "held-1", &arguments)).await;
    let (code, events) = state.call(&config, "held-1", &arguments);
    assert_eq!(code, Some(0), "{events:?}");
    let result = events.last().unwrap();
    assert_eq!(
        (&result["is_error"], &result["unknown_outcome"]),
        (&json!(false), &json!(false)),
        "{result}"
    );
    assert_eq!(result["content"][0]["text"], "report: held", "{result}");
    let counts = server.counts();
    let count = |method: &str| counts.get(method).copied().unwrap_or(0);
    assert_eq!(count("tools/call"), 1, "{counts:?}");
    assert_eq!(count("initialize"), u64::from(!extension), "{counts:?}");
    assert_eq!(count("tasks/result"), u64::from(!extension), "{counts:?}");
    assert_eq!(count("tasks/cancel"), 0, "{counts:?}");
    assert_eq!(count("bad routing"), 0, "{counts:?}");
    assert!(count("tasks/get") >= 2, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_its_first_poll_is_held_the_task_is_resumed_not_created_again() {
    let state = State::Default(tempfile::tempdir().unwrap());
    killed_while_its_first_poll_is_held(false, state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_killed_while_its_first_poll_is_held_the_task_is_resumed_by_its_id() {
    let state = State::Default(tempfile::tempdir().unwrap());
    killed_while_its_first_poll_is_held(true, state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_killed_while_its_first_poll_is_held_is_resumed_by_another_process_on_postgres() {
    let state = State::Postgres(tests::postgres::Cluster::start());
    killed_while_its_first_poll_is_held(true, state).await;
}

/// A task is bound to the authorization context that created it: a retry whose token is not
/// that one takes the call over, is refused by the server, and gets `unknown_outcome: true`,
/// saying why — never a second task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_resumed_with_another_token_is_unknown_saying_why() {
    let server = tests::tasks::TaskServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let mut binding = server.binding("research", 30);
    binding["token_env"] = json!("RESEARCH_TOKEN");
    std::fs::write(&config, json!({"tools": [binding]}).to_string()).unwrap();
    let state = State::Default(tempfile::tempdir().unwrap());
    let arguments = json!({"topic": "held", "mode": "hold", "hold_ms": 20_000});
    let mut first = state.command(&config, "token-1", &arguments);
    first.env("RESEARCH_TOKEN", "alpha");
    killed_at_first_poll(&server, first).await;
    let output = state
        .command(&config, "token-1", &arguments)
        .env("RESEARCH_TOKEN", "beta")
        .output()
        .expect("brain-harness runs");
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let result = events.last().unwrap();
    assert_eq!(
        (&result["is_error"], &result["unknown_outcome"]),
        (&json!(true), &json!(true)),
        "{result}"
    );
    let said = result["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("authorization context"), "{said}");
    assert!(!said.contains("alpha") && !said.contains("beta"), "{said}");
    let counts = server.counts();
    assert_eq!(counts.get("tools/call"), Some(&1), "{counts:?}");
    // Its poll refused (and the cleanup's tasks/cancel, with the same token).
    assert!(counts.get("forbidden") >= Some(&1), "{counts:?}");
}

/// A stdio task lives in the server's process, which ends with the harness that started it:
/// a retry after a SIGKILL gets `unknown_outcome: true`, saying so, and starts nothing.
#[test]
fn a_stdio_task_whose_harness_was_killed_is_unknown_on_retry() {
    let script = tests::workspace_root()
        .join("tests/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.exists(), "run tests/interop/setup.sh");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let command = [
        "node".to_owned(),
        script.display().to_string(),
        "stdio".to_owned(),
    ];
    let listed = tests::peers::discover_command(&command).tools;
    let research = listed
        .iter()
        .find(|tool| tool["name"] == "simulate-research-query")
        .unwrap();
    let tools = json!({"tools": [{
        "name": "research", "description": "A research report, run as an MCP task.",
        "pin": brain_config::ToolPin::of(research),
        "command": command, "mcp_tool": "simulate-research-query",
        "tenants": ["local"], "timeout_seconds": 30, "protocol_version": "2025-11-25",
        "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}},
                         "required": ["topic"]},
        "execution": {"taskSupport": "required"}, "task": true, "server_tasks": true,
        "sandbox": {"read": [tests::workspace_root().join("tests/interop/node_modules")]},
    }]});
    std::fs::write(&config, tools.to_string()).unwrap();
    let state = State::Default(tempfile::tempdir().unwrap());
    let arguments = json!({"topic": "pipes"});
    killed_mid_task(&state, &config, "stdio-1", &arguments);
    let (code, events) = state.call(&config, "stdio-1", &arguments);
    assert_eq!(code, Some(1), "{events:?}");
    let result = events.last().unwrap();
    assert_eq!(
        (
            &result["is_error"],
            &result["unknown_outcome"],
            &result["replayed"]
        ),
        (&json!(true), &json!(true), &json!(true)),
        "{result}"
    );
    let said = result["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("stdio server's process"), "{said}");
}
