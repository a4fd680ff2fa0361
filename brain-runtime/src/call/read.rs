//! The read phase: what a written round is answered with, in wire order. A progress
//! notification becomes a `tool.progress` event, a server request is answered (a ping) or
//! refused (user input: by the binding's `on_input_request`), the response to `tools/call` ends
//! the round and is converted; anything else (logging, list changes, stray responses) is passed
//! over. The transport only reads and writes ([`Reading`]).

use serde_json::{Value, json};

use super::exchange::{CONTROL_TIMEOUT, Exchange, Incoming, Reading};
use super::rounds::{Reply, Round, input_answer};
use crate::convert::convert;
use crate::event::{Event, Progress, ToolResult};
use crate::outcome::{Fact, Failure};
use crate::revision::STATELESS;

/// The most server requests (`ping`, or requests brain refuses) a call answers: past them the
/// call fails and nothing more is answered, so a server cannot make one call send unbounded
/// requests back.
pub(crate) const MAX_SERVER_REQUESTS: usize = 16;
/// How long brain keeps reading a side stream that carried the call's messages after the result
/// arrived on the call's own stream: the two travel on different connections, and progress the
/// server sent before the result may arrive just after it.
const SIDE_GRACE: std::time::Duration = std::time::Duration::from_millis(25);
/// The notification a server sends when its list of tools changed.
const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// What one message read during a call means for it.
enum Step {
    /// Progress, an answered server request, or a message for someone else: read on.
    Continue,
    /// The response to `tools/call`.
    Answered(Result<Reply, Failure>),
}

impl Exchange<'_> {
    /// Reads the answer to `round` from `reading`, in wire order.
    pub(crate) async fn read(
        &self,
        reading: &mut impl Reading,
        round: &Round,
    ) -> Result<Reply, Failure> {
        let request_id = json!(round.request_id());
        let mut last_progress: Option<f64> = None;
        loop {
            match reading.next(self).await? {
                Incoming::Message(message) => {
                    if let Step::Answered(reply) = self
                        .on_message(&message, &request_id, &mut last_progress, reading)
                        .await?
                    {
                        if reading.answered() {
                            self.settle(reading, &mut last_progress).await;
                        }
                        return reply;
                    }
                }
                Incoming::Side(message) => {
                    let method = message.get("method").and_then(Value::as_str);
                    match (method, message.get("id")) {
                        (Some("notifications/progress"), None) => {
                            self.progress(&message["params"], &mut last_progress).await;
                        }
                        (Some(LIST_CHANGED), None) => self.list_changed(),
                        (Some(method), Some(id)) => {
                            Box::pin(self.server_request(method, id, &message["params"], reading))
                                .await?;
                        }
                        _ => {}
                    }
                }
                Incoming::Progress(params) => {
                    self.report_progress(&params, &mut last_progress).await;
                }
                Incoming::Result(result) => return Ok(Reply::Complete(result)),
            }
        }
    }

    /// One message read after `tools/call` (id `request_id`).
    async fn on_message(
        &self,
        message: &Value,
        request_id: &Value,
        last_progress: &mut Option<f64>,
        reading: &mut impl Reading,
    ) -> Result<Step, Failure> {
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (Some("notifications/progress"), None) => {
                self.progress(&message["params"], last_progress).await;
            }
            (Some(LIST_CHANGED), None) => self.list_changed(),
            (Some(method), Some(id)) => {
                Box::pin(self.server_request(method, id, &message["params"], reading)).await?;
            }
            (None, Some(id)) if id == request_id => {
                self.state().answered = true;
                return Ok(Step::Answered(self.response(message)));
            }
            _ => {}
        }
        Ok(Step::Continue)
    }

    /// The server said its tools changed: its verified listing (HTTP) is expired at once, so
    /// that the next call verifies against a new one.
    fn list_changed(&self) {
        if self.tool.binding.url.is_some() {
            self.pins
                .expire(self.tool, &self.scope.tenant_id, self.endpoint.auth.subject);
        }
    }

    /// Progress still arriving on the side stream after the result, within [`SIDE_GRACE`] and
    /// well before the call's deadline (the result is in hand: it must not be lost to the
    /// timeout). Events that do not fit in the channel at once are dropped, never waited for.
    async fn settle(&self, reading: &mut impl Reading, last_progress: &mut Option<f64>) {
        let until = (tokio::time::Instant::now() + SIDE_GRACE).min(self.deadline - SIDE_GRACE);
        let grace = tokio::time::sleep_until(until);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                biased;
                () = &mut grace => return,
                side = reading.late() => {
                    if side.get("method").and_then(Value::as_str) == Some("notifications/progress")
                        && let Some(event) = self.progress_event(&side["params"], last_progress)
                    {
                        let _ = self.events.try_send(Box::new(event));
                    }
                }
            }
        }
    }

    /// Sends the `tool.progress` event `params` (`progress`, `total`, `message`) stand for, if
    /// it moves forward; waits while the caller is behind (the event channel is bounded).
    pub(crate) async fn report_progress(&self, params: &Value, last: &mut Option<f64>) {
        if let Some(event) = self.progress_update(params, last) {
            let _ = self.events.send(Box::new(event)).await;
        }
    }

    /// A progress notification for this call, if it moves forward, becomes a `tool.progress`.
    pub(crate) async fn progress(&self, params: &Value, last: &mut Option<f64>) {
        if let Some(event) = self.progress_event(params, last) {
            let _ = self.events.send(Box::new(event)).await;
        }
    }

    /// The `tool.progress` event a notification stands for, if it is this call's and moves
    /// forward.
    fn progress_event(&self, params: &Value, last: &mut Option<f64>) -> Option<Event> {
        let token_matches = match params.get("progressToken") {
            Some(Value::String(token)) => token == self.call_id,
            _ => false,
        };
        if !token_matches {
            return None;
        }
        self.progress_update(params, last)
    }

    /// The `tool.progress` event of `params`, if its `progress` moves forward.
    fn progress_update(&self, params: &Value, last: &mut Option<f64>) -> Option<Event> {
        let progress = params.get("progress").and_then(Value::as_f64)?;
        if last.is_some_and(|last| progress <= last) {
            return None;
        }
        *last = Some(progress);
        let total = params.get("total").and_then(Value::as_f64);
        crate::telemetry::progress(self.span, progress, total);
        Some(Event::Progress(Progress {
            call_id: self.call_id.to_owned(),
            progress,
            total,
            message: params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }))
    }

    /// A request from the server in the middle of the call. A ping is answered. A request for
    /// user input is answered as the binding's `on_input_request` says: by default it is refused
    /// with a JSON-RPC error and the call fails (the cleanup then cancels the request), so the
    /// server is never left waiting. Anything else is refused and fails the call.
    async fn server_request(
        &self,
        method: &str,
        id: &Value,
        params: &Value,
        reading: &mut impl Reading,
    ) -> Result<(), Failure> {
        let received = {
            let mut state = self.state();
            state.server_requests += 1;
            state.server_requests
        };
        if received > MAX_SERVER_REQUESTS {
            return Err(Failure::broken(format!(
                "the server sent more than {MAX_SERVER_REQUESTS} requests during the call (the \
                 last a {method} request); brain stopped answering them and cancelled the call; \
                 the tool may have run"
            )));
        }
        let decided = if method == "ping" {
            Ok(json!({}))
        } else {
            input_answer(self.tool.binding.on_input_request(), method, params)
        };
        let answer = match &decided {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(_) => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": format!("brain does not provide {method}: handle approval inside the tool"),
            }}),
        };
        let sent = tokio::time::timeout(CONTROL_TIMEOUT, reading.answer(self, &answer))
            .await
            .unwrap_or(false);
        match decided {
            Ok(_) if sent => Ok(()),
            Ok(_) => Err(Failure::broken(format!(
                "the server sent a {method} request, which brain cannot answer on this \
                 transport; the call was cancelled and the tool may have run"
            ))),
            Err(failure) => Err(failure),
        }
    }

    /// The JSON-RPC response to `tools/call`, converted.
    fn response(&self, message: &Value) -> Result<Reply, Failure> {
        if let Some(error) = message.get("error") {
            let text = crate::mcp::rpc_error_text(error);
            let code = error.get("code").and_then(Value::as_i64);
            let what = if code == Some(-32601) {
                format!("the server does not offer tools/call: {text}")
            } else if crate::mcp::needs_tasks(error) {
                format!(
                    "the server runs this tool only as a task, and refused it without: {text}. \
                     Add `\"task\": true` to the binding (its server declared the tasks \
                     extension at discovery: `server_tasks`)"
                )
            } else if code == Some(crate::mcp::MISSING_CLIENT_CAPABILITY) {
                format!(
                    "the server refused tools/call for a client capability brain does not have: \
                     {text}"
                )
            } else {
                format!(
                    "the server answered tools/call with an error: {text}; the tool may have run"
                )
            };
            let retry_after = crate::outcome::retry_after(
                error.pointer("/data/retryAfterMs"),
                None,
                self.tool.binding.timeout_seconds.saturating_mul(1000),
            );
            return Err(Failure::new(Fact::RpcError { code }, what).retry_after(retry_after));
        }
        let Some(result) = message.get("result") else {
            return Err(Failure::broken(
                "the server's answer to tools/call has neither result nor error",
            ));
        };
        if let Some(task) = result.get("task").filter(|task| task.is_object()) {
            if self.tool.binding.runs_as_task() {
                return Ok(Reply::Task(task.clone()));
            }
            return Err(Failure::broken(
                "the server answered tools/call with a task brain did not ask for; the tool may \
                 have run",
            ));
        }
        match result.get("resultType").and_then(Value::as_str) {
            None | Some("complete") => {}
            Some("input_required") => return Ok(Reply::InputRequired(result.clone())),
            // 2026-07-28's tasks extension: the result is the task.
            Some("task") => {
                if self.tool.binding.runs_as_task() && self.state().revision == Some(STATELESS) {
                    return Ok(Reply::Task(result.clone()));
                }
                return Err(Failure::broken(
                    "the server answered tools/call with a task though brain did not declare \
                     the tasks extension; the tool may have run",
                ));
            }
            Some(other) => {
                return Err(Failure::broken(format!(
                    "the server answered with a `{other}` result, which brain does not support; \
                     the tool may have run"
                )));
            }
        }
        self.converted(result).map(Reply::Complete)
    }

    /// A `CallToolResult` (a response's, or a task's), converted.
    pub(crate) fn converted(&self, result: &Value) -> Result<ToolResult, Failure> {
        let revision = self.state().revision;
        convert(
            self.call_id,
            result,
            self.tool.output.as_ref(),
            self.tool.binding.max_output_bytes,
        )
        .map_err(|mut failure| {
            if let Some(revision) = revision.filter(|r| *r < brain_config::STRUCTURED_REVISION)
                && result.get("structuredContent").is_none()
                && self.tool.output.is_some()
            {
                failure.message += &format!(
                    " (the server speaks MCP {revision}, which has no structured content: pin \
                     the binding to a newer revision the server speaks, or remove output_schema)"
                );
            }
            failure
        })
    }
}
