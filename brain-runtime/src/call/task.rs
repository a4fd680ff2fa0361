//! A call run as an MCP task (2025-11-25): the server answered `tools/call` with a
//! `CreateTaskResult` — the send, done once — and the call goes on by reading the task: `tasks/get`
//! at the server's `pollInterval` (within [`MIN_POLL`] and [`MAX_POLL`]) until the task ends,
//! each change of its status or status message a `tool.progress` event, then `tasks/result`,
//! converted like any result. Bounded: the call's timeout (whose cleanup sends `tasks/cancel`),
//! [`MAX_POLLS`] polls, the binding's bytes per message. Nothing here is sent twice: polls only
//! read.

use std::time::Duration;

use serde_json::{Value, json};

use super::exchange::{Exchange, Transport};
use crate::event::ToolResult;
use crate::journal::TaskRecord;
use crate::outcome::Failure;

/// The shortest wait between two polls, whatever the server's `pollInterval`.
pub(crate) const MIN_POLL: Duration = Duration::from_millis(250);
/// The longest wait between two polls, whatever the server's `pollInterval`.
pub(crate) const MAX_POLL: Duration = Duration::from_secs(5);
/// The wait between two polls when the server names none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// At most this many `tasks/get` requests a call (an hour at [`MIN_POLL`] is 14,400).
pub(crate) const MAX_POLLS: u64 = 20_000;
/// The JSON-RPC id of a task's first request; each later one adds 1.
const FIRST_TASK_REQUEST: u64 = 100;

/// A task's state as `CreateTaskResult` or `tasks/get` tells it.
struct Snapshot {
    status: String,
    message: Option<String>,
    poll: Duration,
}

impl Snapshot {
    fn of(task: &Value) -> Result<Snapshot, Failure> {
        let Some(status) = task.get("status").and_then(Value::as_str) else {
            return Err(Failure::broken(
                "the server's task has no status; the tool may have run",
            ));
        };
        let poll = task
            .get("pollInterval")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL);
        Ok(Snapshot {
            status: status.to_owned(),
            message: task
                .get("statusMessage")
                .and_then(Value::as_str)
                .map(str::to_owned),
            poll,
        })
    }

    /// What a `tool.progress` event says of it.
    fn text(&self) -> String {
        match &self.message {
            Some(message) => message.clone(),
            None => format!("task {}", self.status),
        }
    }
}

/// Where following a task starts.
pub(crate) enum Start<'a> {
    /// The task a `CreateTaskResult` just created (its `task`).
    Created(Value),
    /// A task recorded in the journal by an owner that stopped, taken over: its id. Its state
    /// is asked at once.
    Recorded(&'a str),
}

/// Follows the task `start` names to the call's result or failure.
pub(crate) async fn follow<T: Transport>(
    transport: &T,
    call: &Exchange<'_>,
    opened: &T::Opened,
    start: Start<'_>,
) -> Result<ToolResult, Failure> {
    let mut next_id = FIRST_TASK_REQUEST;
    let (task_id, first) = match start {
        Start::Created(task) => {
            let Some(task_id) = task.get("taskId").and_then(Value::as_str) else {
                return Err(Failure::broken(
                    "the server's task has no taskId; the tool may have run",
                ));
            };
            (task_id.to_owned(), Some(task))
        }
        Start::Recorded(task_id) => (task_id.to_owned(), None),
    };
    call.state().task = Some(task_id.clone());
    let mut snapshot = match first {
        Some(task) => {
            tracing::debug!(call_id = call.call_id, task_id, "task created");
            record(call, &task_id).await;
            Snapshot::of(&task)?
        }
        None => {
            tracing::debug!(call_id = call.call_id, task_id, "task resumed");
            get(transport, call, opened, &task_id, &mut next_id).await?
        }
    };
    let mut counter = 0u64;
    let mut last_progress = None;
    let mut said: Option<(String, Option<String>)> = None;
    let mut polls = 0u64;
    loop {
        let now = (snapshot.status.clone(), snapshot.message.clone());
        if said.as_ref() != Some(&now) {
            counter += 1;
            let params = json!({"progress": counter, "message": snapshot.text()});
            call.report_progress(&params, &mut last_progress).await;
            said = Some(now);
        }
        match snapshot.status.as_str() {
            "working" => {}
            "completed" | "failed" => break,
            "cancelled" => {
                call.state().task = None;
                return Err(Failure::broken(format!(
                    "the server cancelled task {task_id}{}; the tool may have run",
                    said_by(&snapshot)
                )));
            }
            "input_required" => {
                return Err(Failure::broken(format!(
                    "task {task_id} asks for user input (input_required){}, which brain does not \
                     provide; the task was cancelled and the tool may have run",
                    said_by(&snapshot)
                )));
            }
            other => {
                return Err(Failure::broken(format!(
                    "task {task_id} has a status brain does not know ({other:?}); the task was \
                     cancelled and the tool may have run"
                )));
            }
        }
        polls += 1;
        if polls > MAX_POLLS {
            return Err(Failure::broken(format!(
                "task {task_id} was still running after {MAX_POLLS} polls; brain cancelled it, \
                 and the tool may have run"
            )));
        }
        tokio::time::sleep(snapshot.poll).await;
        if let Some(ticket) = call.ticket
            && !ticket.still_owned().await
        {
            // Another process follows the task now: this one leaves it, and its session, alone.
            let mut state = call.state();
            state.task = None;
            state.session_id = None;
            return Err(Failure::broken(format!(
                "another process took task {task_id} over while this one's journal lease had \
                 expired; that process reports its result (retry with the same call id)"
            )));
        }
        snapshot = get(transport, call, opened, &task_id, &mut next_id).await?;
    }
    // Ended: its result is there to read.
    call.state().task = None;
    let request = crate::mcp::task_request(next_id, "tasks/result", &task_id);
    let read = transport.request(call, opened, &request).await;
    let failed = snapshot.status == "failed";
    // A failed task's result is an `isError` result when the server keeps one (the tool ran and
    // said it failed); without one, nothing says how far the tool got.
    read.and_then(|response| answer(&response, "tasks/result", &task_id))
        .map_err(|failure| {
            if failed {
                Failure::broken(format!(
                    "the server says task {task_id} failed{}, and gave no result ({}); the tool \
                     may have run",
                    said_by(&snapshot),
                    failure.message
                ))
            } else {
                failure
            }
        })
        .and_then(|result| call.converted(&result))
}

/// Records the task in the call's journal entry before its first poll, when the call is
/// journaled: a retry after this process stops resumes it.
async fn record(call: &Exchange<'_>, task_id: &str) {
    let Some(ticket) = call.ticket else {
        return;
    };
    let task = {
        let state = call.state();
        TaskRecord {
            task_id: task_id.to_owned(),
            session: state.session_id.clone(),
            revision: state.revision.unwrap_or_default().to_owned(),
            stdio: call.tool.binding.command.is_some(),
        }
    };
    ticket.task_created(&task).await;
}

/// One `tasks/get` of the task: its state.
async fn get<T: Transport>(
    transport: &T,
    call: &Exchange<'_>,
    opened: &T::Opened,
    task_id: &str,
    next_id: &mut u64,
) -> Result<Snapshot, Failure> {
    let request = crate::mcp::task_request(*next_id, "tasks/get", task_id);
    *next_id += 1;
    let response = transport.request(call, opened, &request).await?;
    if response["error"]["code"] == -32602 {
        // The server no longer knows the task: nothing to cancel.
        call.state().task = None;
    }
    Snapshot::of(&answer(&response, "tasks/get", task_id)?)
}

/// ": its message" when the task has a status message.
fn said_by(snapshot: &Snapshot) -> String {
    snapshot
        .message
        .as_ref()
        .map(|message| format!(": {message:?}"))
        .unwrap_or_default()
}

/// The `result` of the response to a task request, or the failure its error means.
fn answer(response: &Value, method: &str, task_id: &str) -> Result<Value, Failure> {
    if let Some(error) = response.get("error") {
        let text = crate::mcp::rpc_error_text(error);
        let lost = error.get("code").and_then(Value::as_i64) == Some(-32602);
        let what = if lost {
            format!(
                "the server no longer knows task {task_id} ({method}: {text}): it expired or was \
                 lost; the tool may have run"
            )
        } else {
            format!("{method} of task {task_id} failed: {text}; the tool may have run")
        };
        return Err(Failure::broken(what));
    }
    match response.get("result") {
        Some(result) if result.is_object() => Ok(result.clone()),
        _ => Err(Failure::broken(format!(
            "the server's answer to {method} of task {task_id} has no result; the tool may have \
             run"
        ))),
    }
}
