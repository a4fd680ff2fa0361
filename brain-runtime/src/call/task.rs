//! A call run as an MCP task: the server answered `tools/call` with a `CreateTaskResult` — the
//! send, done once — and the call goes on by reading the task: `tasks/get` at the server's poll
//! interval (within [`MIN_POLL`] and [`MAX_POLL`]) until the task ends, each change of its status
//! or status message a `tool.progress` event; then its result, converted like any result.
//!
//! Both flavours brain's revisions define: 2025-11-25's tasks (the result read with
//! `tasks/result`), and 2026-07-28's tasks extension (SEP-2663: the result inline in the ended
//! task, a task asking for input answered with `tasks/update` as the binding's
//! `on_input_request` allows). Bounded: the call's timeout (whose cleanup sends `tasks/cancel`),
//! [`MAX_POLLS`] polls, [`MAX_INPUT_ANSWERS`] answered input requests, the binding's bytes per
//! message. Nothing here is sent twice: polls only read.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use super::exchange::{Exchange, Transport};
use super::rounds::input_answer;
use crate::event::ToolResult;
use crate::journal::TaskRecord;
use crate::outcome::Failure;
use crate::revision::STATELESS;

/// The shortest wait between two polls, whatever the server's `pollInterval`.
pub(crate) const MIN_POLL: Duration = Duration::from_millis(250);
/// The longest wait between two polls, whatever the server's `pollInterval`.
pub(crate) const MAX_POLL: Duration = Duration::from_secs(5);
/// The wait between two polls when the server names none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// At most this many `tasks/get` requests a call (an hour at [`MIN_POLL`] is 14,400).
pub(crate) const MAX_POLLS: u64 = 20_000;
/// At most this many of a task's input requests are answered (2026-07-28, `tasks/update`).
pub(crate) const MAX_INPUT_ANSWERS: usize = 8;
/// The JSON-RPC id of a task's first request; each later one adds 1.
const FIRST_TASK_REQUEST: u64 = 100;

/// A task's state as `CreateTaskResult` or `tasks/get` tells it.
struct Snapshot {
    status: String,
    message: Option<String>,
    poll: Duration,
    /// The task as the server sent it (at 2026-07-28 an ended one holds its `result` or
    /// `error`, one asking for input its `inputRequests`).
    task: Value,
}

impl Snapshot {
    fn of(task: &Value) -> Result<Snapshot, Failure> {
        let Some(status) = task.get("status").and_then(Value::as_str) else {
            return Err(Failure::broken(
                "the server's task has no status; the tool may have run",
            ));
        };
        // `pollInterval` at 2025-11-25, `pollIntervalMs` in the tasks extension.
        let poll = task
            .get("pollInterval")
            .or_else(|| task.get("pollIntervalMs"))
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
            task: task.clone(),
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
    let mut task = Follower {
        transport,
        call,
        opened,
        revision: call.state().revision,
        task_id: &task_id,
        next_id: FIRST_TASK_REQUEST,
        last_progress: None,
        answered: BTreeSet::new(),
    };
    let snapshot = match first {
        Some(created) => {
            tracing::debug!(call_id = call.call_id, task_id, "task created");
            record(call, &task_id).await;
            Snapshot::of(&created)?
        }
        None => {
            tracing::debug!(call_id = call.call_id, task_id, "task resumed");
            task.get().await?
        }
    };
    let extension = task.revision == Some(STATELESS);
    let snapshot = task.until_ended(snapshot, extension).await?;
    // Ended: its result is there to read.
    call.state().task = None;
    if extension {
        return ended(call, &snapshot, &task_id);
    }
    let read = task.request("tasks/result").await;
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

/// One call's task being followed: its requests, and the progress it reports.
struct Follower<'a, 'c, T: Transport> {
    transport: &'a T,
    call: &'a Exchange<'c>,
    opened: &'a T::Opened,
    revision: Option<&'static str>,
    task_id: &'a str,
    /// The JSON-RPC id of the task's next request.
    next_id: u64,
    /// The last `tool.progress` value reported: each event's is greater.
    last_progress: Option<f64>,
    /// The input requests answered (2026-07-28), by key.
    answered: BTreeSet<String>,
}

impl<T: Transport> Follower<'_, '_, T> {
    /// Polls the task from its first `snapshot` until it completes or fails (its status as
    /// progress; with the tasks `extension`, its input requests answered); the ending
    /// snapshot. A task cancelled, asking for input brain cannot give, of an unknown status,
    /// polled too often, or taken over by another process is a failure.
    async fn until_ended(
        &mut self,
        snapshot: Snapshot,
        extension: bool,
    ) -> Result<Snapshot, Failure> {
        let (call, task_id) = (self.call, self.task_id);
        let mut snapshot = snapshot;
        let mut said: Option<(String, Option<String>)> = None;
        let mut polls = 0u64;
        loop {
            let now = (snapshot.status.clone(), snapshot.message.clone());
            if said.as_ref() != Some(&now) {
                self.status_changed(&snapshot).await;
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
                "input_required" if extension => self.answer_inputs(&snapshot.task).await?,
                "input_required" => {
                    return Err(Failure::broken(format!(
                        "task {task_id} asks for user input (input_required){}, which brain \
                         does not provide; the task was cancelled and the tool may have run",
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
            snapshot = self.get().await?;
        }
        Ok(snapshot)
    }

    /// Sends the task request `method` (`params` beyond the task id), and passes the
    /// server's progress notifications that came before its answer on to the caller.
    async fn send(
        &mut self,
        method: &str,
        params: Option<(&str, Value)>,
    ) -> Result<Value, Failure> {
        let mut request =
            crate::mcp::task_request(self.next_id, method, self.task_id, self.revision);
        self.next_id += 1;
        if let Some((name, value)) = params {
            request["params"][name] = value;
        }
        let mut heard = Vec::new();
        let response = self
            .transport
            .request(self.call, self.opened, &request, &mut heard)
            .await;
        for note in &heard {
            if note["method"] == "notifications/progress" {
                self.call
                    .progress(&note["params"], &mut self.last_progress)
                    .await;
            }
        }
        response
    }

    async fn request(&mut self, method: &str) -> Result<Value, Failure> {
        self.send(method, None).await
    }

    /// One `tasks/get` of the task: its state.
    async fn get(&mut self) -> Result<Snapshot, Failure> {
        let response = self.request("tasks/get").await?;
        if response["error"]["code"] == -32602 {
            // The server no longer knows the task: nothing to cancel.
            self.call.state().task = None;
        }
        Snapshot::of(&answer(&response, "tasks/get", self.task_id)?)
    }

    /// A change of the task's status or status message, as a `tool.progress` event one past
    /// the last reported (the server's own notifications move it on too).
    async fn status_changed(&mut self, snapshot: &Snapshot) {
        let progress = self.last_progress.map_or(1.0, |last| last.floor() + 1.0);
        let params = json!({"progress": progress, "message": snapshot.text()});
        self.call
            .report_progress(&params, &mut self.last_progress)
            .await;
    }

    /// Answers the input requests of a task of the tasks extension (`asked`) that are not
    /// answered yet, as the binding's `on_input_request` allows — with one `tasks/update` — or
    /// fails the call (the cleanup cancels the task).
    async fn answer_inputs(&mut self, asked: &Value) -> Result<(), Failure> {
        let policy = self.call.tool.binding.on_input_request();
        let mut responses = serde_json::Map::new();
        let requests = asked.get("inputRequests").and_then(Value::as_object);
        for (key, request) in requests.into_iter().flatten() {
            if self.answered.contains(key) {
                continue;
            }
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let params = request.get("params").unwrap_or(&Value::Null);
            responses.insert(key.clone(), input_answer(policy, method, params)?);
        }
        if responses.is_empty() {
            // Answered already: the server has yet to take the answers in.
            return Ok(());
        }
        if self.answered.len() + responses.len() > MAX_INPUT_ANSWERS {
            return Err(Failure::broken(format!(
                "task {} asked for input more than {MAX_INPUT_ANSWERS} times; brain cancelled \
                 it, and the tool may have run",
                self.task_id
            )));
        }
        self.answered.extend(responses.keys().cloned());
        let inputs = ("inputResponses", Value::Object(responses));
        let response = self.send("tasks/update", Some(inputs)).await?;
        answer(&response, "tasks/update", self.task_id).map(drop)
    }
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

/// The result of a task of the tasks extension that ended (`completed` or `failed`): inline.
fn ended(call: &Exchange<'_>, snapshot: &Snapshot, task_id: &str) -> Result<ToolResult, Failure> {
    if snapshot.status == "failed" {
        // A JSON-RPC error while the tool ran: nothing says how far it got.
        let error = snapshot
            .task
            .get("error")
            .map_or_else(|| "no error given".to_owned(), crate::mcp::rpc_error_text);
        return Err(Failure::broken(format!(
            "the server says task {task_id} failed{} ({error}); the tool may have run",
            said_by(snapshot)
        )));
    }
    match snapshot.task.get("result") {
        Some(result) if result.is_object() => call.converted(result),
        _ => Err(Failure::broken(format!(
            "the server says task {task_id} completed, but gave no result; the tool may have run"
        ))),
    }
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
