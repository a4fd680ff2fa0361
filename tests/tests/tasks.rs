//! MCP tasks against the task server (`tests::tasks`), one row per fault and flavour (2025-11-25's
//! tasks; 2026-07-28's tasks extension): every row asserts `(is_error, unknown_outcome)` and the
//! requests the server counted by method.

use std::collections::BTreeMap;

use brain_runtime::journal::Journal;
use brain_runtime::{CallRequest, Event, Runtime, Scope, ToolResult};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tests::client::text;
use tests::tasks::TaskServer;

/// What one row expects: the result's flags, a text the result holds, and the counts of
/// `tools/call`, `tasks/get`, `tasks/result`, `tasks/cancel` (`tasks/get` at least, since
/// polls follow the clock).
struct Row {
    mode: &'static str,
    timeout_seconds: u64,
    step_ms: u64,
    is_error: bool,
    unknown_outcome: bool,
    says: &'static str,
    tools_call: u64,
    tasks_get_at_least: u64,
    tasks_result: u64,
    tasks_cancel: u64,
    /// 2026-07-28's tasks extension rather than 2025-11-25's tasks.
    extension: bool,
    /// The binding opts into tasks (`task`).
    task: bool,
    /// The binding declines elicitations (`on_input_request`).
    decline: bool,
    /// The server offers no task cancellation (2025-11-25).
    no_cancel: bool,
    tasks_update: u64,
}

const DEFAULT: Row = Row {
    mode: "complete",
    timeout_seconds: 30,
    step_ms: 200,
    is_error: false,
    unknown_outcome: false,
    says: "report: rows",
    tools_call: 1,
    tasks_get_at_least: 1,
    tasks_result: 1,
    tasks_cancel: 0,
    extension: false,
    task: true,
    decline: false,
    no_cancel: false,
    tasks_update: 0,
};

/// A row of 2026-07-28's tasks extension: no `tasks/result`, the result inline.
const EXTENSION: Row = Row {
    extension: true,
    tasks_result: 0,
    ..DEFAULT
};

/// Calls `research` in `row`'s mode: the result, its progress messages, the server's counts.
async fn run(row: &Row) -> (ToolResult, Vec<String>, BTreeMap<String, u64>) {
    let server = if row.no_cancel {
        TaskServer::start_without_cancel().await.unwrap()
    } else {
        TaskServer::start().await.unwrap()
    };
    let mut binding = if row.extension {
        server.stateless_binding("research", row.timeout_seconds)
    } else {
        server.binding("research", row.timeout_seconds)
    };
    if !row.task {
        binding.as_object_mut().unwrap().remove("task");
    }
    if row.decline {
        binding["on_input_request"] = json!("decline");
    }
    let text = json!({"tools": [binding]}).to_string();
    let config =
        brain_config::parse(text.as_bytes(), "tasks.json").unwrap_or_else(|e| panic!("{e}"));
    let runtime = Runtime::builder(&config)
        .journal(Journal::memory())
        .build()
        .unwrap();
    let request = CallRequest::new(
        "research",
        Scope {
            tenant_id: "local".into(),
            session_id: "session-1".into(),
        },
        json!({"topic": "rows", "mode": row.mode, "step_ms": row.step_ms}),
    )
    .with_call_id(format!("row-{}", row.mode));
    let mut call = runtime.call(request);
    let mut messages = Vec::new();
    let mut result = None;
    let mut last = None;
    while let Some(event) = call.next().await {
        match event {
            Event::Progress(progress) => {
                // One counter that only grows, whatever moved it (a status, the server).
                assert!(
                    last.is_none_or(|last| progress.progress > last),
                    "{}: {:?} after {last:?}",
                    row.mode,
                    progress.progress
                );
                last = Some(progress.progress);
                messages.push(progress.message.unwrap_or_default());
            }
            Event::Result(ended) => result = Some(ended),
            other => panic!("unexpected: {other:?}"),
        }
    }
    runtime.wait_for_cleanup().await;
    (result.expect("a result"), messages, server.counts())
}

async fn check(row: Row) -> Vec<String> {
    let (result, messages, counts) = run(&row).await;
    let count = |method: &str| counts.get(method).copied().unwrap_or(0);
    let said = text(&result);
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (row.is_error, row.unknown_outcome),
        "{}: {said}",
        row.mode
    );
    assert!(said.contains(row.says), "{}: {said}", row.mode);
    assert_eq!(
        count("tools/call"),
        row.tools_call,
        "{}: {counts:?}",
        row.mode
    );
    assert!(
        count("tasks/get") >= row.tasks_get_at_least,
        "{}: {counts:?}",
        row.mode
    );
    assert_eq!(
        count("tasks/result"),
        row.tasks_result,
        "{}: {counts:?}",
        row.mode
    );
    assert_eq!(
        count("tasks/cancel"),
        row.tasks_cancel,
        "{}: {counts:?}",
        row.mode
    );
    assert_eq!(
        count("tasks/update"),
        row.tasks_update,
        "{}: {counts:?}",
        row.mode
    );
    // Every 2026-07-28 task request named its task in `Mcp-Name`.
    assert_eq!(count("bad routing"), 0, "{}: {counts:?}", row.mode);
    if row.extension {
        assert_eq!(count("initialize"), 0, "{}: {counts:?}", row.mode);
    }
    // Every session brain opened is closed, a task's after it ended.
    assert_eq!(
        count("DELETE"),
        count("initialize"),
        "{}: {counts:?}",
        row.mode
    );
    messages
}

/// A completed task of `row`'s flavour: its result, and its steps as progress, in order.
async fn completed_with_steps(row: Row) {
    let messages = check(Row {
        tasks_get_at_least: 2,
        ..row
    })
    .await;
    let steps: Vec<&str> = messages
        .iter()
        .map(String::as_str)
        .filter(|m| m.starts_with("step"))
        .collect();
    let mut expected: Vec<&str> = vec!["step 1 of 3", "step 2 of 3", "step 3 of 3"];
    // Polls at 250 ms over steps of 200 ms may pass over one; never out of order.
    expected.retain(|step| steps.contains(step));
    assert_eq!(steps, expected, "{messages:?}");
    assert!(steps.len() >= 2, "{messages:?}");
}

#[tokio::test]
async fn a_completed_task_is_the_result_and_its_steps_are_progress() {
    completed_with_steps(DEFAULT).await;
}

#[tokio::test]
async fn the_servers_own_progress_during_a_task_is_passed_through() {
    let messages = check(Row {
        mode: "notify",
        tasks_get_at_least: 2,
        ..DEFAULT
    })
    .await;
    assert!(
        messages.iter().any(|m| m.starts_with("read ")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.starts_with("step")),
        "{messages:?}"
    );
}

#[tokio::test]
async fn a_failed_task_with_the_tools_error_is_a_tool_error() {
    check(Row {
        mode: "fail_result",
        is_error: true,
        says: "no sources found",
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_failed_task_without_a_result_is_unknown() {
    check(Row {
        mode: "fail_no_result",
        is_error: true,
        unknown_outcome: true,
        says: "gave no result",
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_task_the_server_cancelled_is_unknown() {
    check(Row {
        mode: "server_cancel",
        is_error: true,
        unknown_outcome: true,
        says: "the server cancelled task",
        tasks_result: 0,
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_task_asking_for_input_is_cancelled_and_unknown() {
    check(Row {
        mode: "input_required",
        is_error: true,
        unknown_outcome: true,
        says: "input_required",
        tasks_result: 0,
        tasks_cancel: 1,
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn an_expired_task_is_unknown_and_not_cancelled() {
    check(Row {
        mode: "expire",
        step_ms: 10_000,
        is_error: true,
        unknown_outcome: true,
        says: "no longer knows task",
        tasks_result: 0,
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_task_id_the_server_never_knew_is_unknown() {
    check(Row {
        mode: "unknown_id",
        is_error: true,
        unknown_outcome: true,
        says: "no longer knows task",
        tasks_result: 0,
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_lost_create_task_result_is_unknown_and_nothing_is_polled() {
    check(Row {
        mode: "lose_create",
        is_error: true,
        unknown_outcome: true,
        says: "may have run",
        tasks_get_at_least: 0,
        tasks_result: 0,
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_server_asking_for_hourly_polls_is_polled_within_brains_bound() {
    // The task ends after 500 ms; the server asks for a poll an hour later; brain waits 5 s.
    check(Row {
        mode: "slow_poller",
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_task_longer_than_its_timeout_is_cancelled_and_unknown() {
    check(Row {
        step_ms: 5_000,
        timeout_seconds: 1,
        is_error: true,
        unknown_outcome: true,
        says: "timed out",
        tasks_result: 0,
        tasks_cancel: 1,
        ..DEFAULT
    })
    .await;
}

#[tokio::test]
async fn a_task_longer_than_its_timeout_on_a_server_without_cancellation_is_unknown() {
    // Nothing to cancel it with: not asked, and the outcome is no less unknown.
    check(Row {
        step_ms: 5_000,
        timeout_seconds: 1,
        no_cancel: true,
        is_error: true,
        unknown_outcome: true,
        says: "timed out",
        tasks_result: 0,
        tasks_cancel: 0,
        ..DEFAULT
    })
    .await;
}

/// A binding of a task-only tool that does not run it as a task is refused before any call.
#[tokio::test]
async fn a_task_only_binding_without_task_is_refused_at_check() {
    let server = TaskServer::start().await.unwrap();
    let mut binding: Value = server.binding("research", 30);
    binding.as_object_mut().unwrap().remove("task");
    binding.as_object_mut().unwrap().remove("server_tasks");
    let text = json!({"tools": [binding]}).to_string();
    let refused = brain_config::parse(text.as_bytes(), "tasks.json").unwrap_err();
    assert!(refused.to_string().contains("task-required"), "{refused}");
}

// 2026-07-28: the tasks extension (SEP-2663).

#[tokio::test]
async fn extension_a_completed_task_is_the_result_and_its_steps_are_progress() {
    completed_with_steps(EXTENSION).await;
}

#[tokio::test]
async fn extension_the_servers_own_progress_during_a_task_is_passed_through() {
    let messages = check(Row {
        mode: "notify",
        tasks_get_at_least: 2,
        ..EXTENSION
    })
    .await;
    assert!(
        messages.iter().any(|m| m.starts_with("read ")),
        "{messages:?}"
    );
}

#[tokio::test]
async fn extension_a_call_the_server_answers_without_a_task_is_its_result() {
    check(Row {
        mode: "direct",
        tasks_get_at_least: 0,
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_binding_that_does_not_opt_in_is_refused_before_the_tool_ran() {
    check(Row {
        task: false,
        is_error: true,
        unknown_outcome: false,
        says: "only as a task",
        tasks_get_at_least: 0,
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_completed_task_with_the_tools_error_is_a_tool_error() {
    check(Row {
        mode: "fail_result",
        is_error: true,
        says: "no sources found",
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_failed_task_is_unknown_and_says_the_error() {
    check(Row {
        mode: "fail_no_result",
        is_error: true,
        unknown_outcome: true,
        says: "the tool's process crashed",
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_task_the_server_cancelled_is_unknown() {
    check(Row {
        mode: "server_cancel",
        is_error: true,
        unknown_outcome: true,
        says: "the server cancelled task",
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_task_asking_for_input_is_cancelled_and_unknown() {
    check(Row {
        mode: "input_required",
        is_error: true,
        unknown_outcome: true,
        says: "elicitation/create",
        tasks_cancel: 1,
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_task_asking_for_input_a_binding_declines_goes_on_after_tasks_update() {
    check(Row {
        mode: "input_required",
        decline: true,
        says: r#"report: rows (input: {"action":"decline"})"#,
        tasks_update: 1,
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_an_expired_task_is_unknown_and_not_cancelled() {
    check(Row {
        mode: "expire",
        step_ms: 10_000,
        is_error: true,
        unknown_outcome: true,
        says: "no longer knows task",
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_task_id_the_server_never_knew_is_unknown() {
    check(Row {
        mode: "unknown_id",
        is_error: true,
        unknown_outcome: true,
        says: "no longer knows task",
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_lost_create_task_result_is_unknown_and_nothing_is_polled() {
    check(Row {
        mode: "lose_create",
        is_error: true,
        unknown_outcome: true,
        says: "may have run",
        tasks_get_at_least: 0,
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_server_asking_for_hourly_polls_is_polled_within_brains_bound() {
    check(Row {
        mode: "slow_poller",
        ..EXTENSION
    })
    .await;
}

#[tokio::test]
async fn extension_a_task_longer_than_its_timeout_is_cancelled_and_unknown() {
    check(Row {
        step_ms: 5_000,
        timeout_seconds: 1,
        is_error: true,
        unknown_outcome: true,
        says: "timed out",
        tasks_cancel: 1,
        ..EXTENSION
    })
    .await;
}

/// A 2026-07-28 task binding whose server did not declare the extension is refused at check.
#[tokio::test]
async fn extension_a_task_binding_without_server_tasks_is_refused_at_check() {
    let server = TaskServer::start().await.unwrap();
    let mut binding: Value = server.stateless_binding("research", 30);
    binding.as_object_mut().unwrap().remove("server_tasks");
    let text = json!({"tools": [binding]}).to_string();
    let refused = brain_config::parse(text.as_bytes(), "tasks.json").unwrap_err();
    assert!(refused.to_string().contains("task-invalid"), "{refused}");
    assert!(refused.to_string().contains("tasks extension"), "{refused}");
}

/// Discovery pins what a 2026-07-28 server declares: the tasks extension (`server_tasks`); the
/// tool says nothing of tasks there, so the binding opts in by hand (`task`).
#[tokio::test]
async fn extension_discovery_pins_the_servers_tasks_extension() {
    let server = TaskServer::start().await.unwrap();
    let discovery = brain_runtime::discover::discover(&brain_runtime::discover::DiscoverOptions {
        url: server.url.clone(),
        token: None,
        auth: None,
        timeout: std::time::Duration::from_secs(10),
        ca_file: None,
    })
    .await
    .unwrap();
    assert_eq!(discovery.protocol_version, "2026-07-28");
    assert!(discovery.server_tasks);
    assert_eq!(discovery.tools[0]["name"], "research");
    assert_eq!(server.count("server/discover"), 1, "{:?}", server.counts());
    assert_eq!(server.count("initialize"), 0, "{:?}", server.counts());
}

/// Task bindings are verified as any MCP call is: once the server lists `research` with a new
/// required argument, the next call is refused `pin_drift` before `tools/call` (no task is
/// created), at 2025-11-25 and with 2026-07-28's tasks extension; listed as reviewed, it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_binding_whose_tool_changed_is_refused_before_the_send() {
    for extension in [false, true] {
        let server = TaskServer::start().await.unwrap();
        let binding = if extension {
            server.stateless_binding("research", 30)
        } else {
            server.binding("research", 30)
        };
        let text = json!({"tools": [binding]}).to_string();
        let config = brain_config::parse(text.as_bytes(), "tasks.json").unwrap();
        let runtime = Runtime::builder(&config)
            .journal(Journal::memory())
            .listing_ttl(std::time::Duration::from_millis(1))
            .build()
            .unwrap();
        let call = |id: &str| {
            let request = CallRequest::new(
                "research",
                Scope {
                    tenant_id: "local".into(),
                    session_id: "drift".into(),
                },
                json!({"topic": "t", "mode": "complete", "step_ms": 1}),
            )
            .with_call_id(id);
            runtime.call(request).result()
        };
        server.drift(true);
        let refused = call("1").await;
        assert_eq!(
            refused.kind,
            Some(brain_runtime::OutcomeKind::PinDrift),
            "extension {extension}: {refused:?}"
        );
        assert!(!refused.unknown_outcome);
        assert_eq!(server.count("tools/call"), 0, "{:?}", server.counts());
        server.drift(false);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let ran = call("2").await;
        assert!(!ran.is_error, "extension {extension}: {ran:?}");
        assert_eq!(server.count("tools/call"), 1, "{:?}", server.counts());
        runtime.wait_for_cleanup().await;
    }
}
