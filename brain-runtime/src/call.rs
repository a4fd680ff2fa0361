//! One call's lifecycle, shared by every transport: the binding ready to call, the call's state,
//! the timeout and cancellation around the exchange, the `tools/call` message, its response read
//! in wire order (progress, server requests, the reply), what brain does when the server asks
//! for user input, and the cleanup handed to the transport afterwards.
//!
//! A transport (`session.rs`, `stateless.rs`, `stdio.rs`, `http_tool.rs`) implements [`Transport`]: it owns how the call
//! travels, never the gate, the conversion or the `unknown_outcome` rules, which live here and in
//! `convert.rs`/`outcome.rs`.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use brain_config::{OnInputRequest, ToolBinding};
use http::StatusCode;
use http::header::HeaderMap;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Span;

use crate::auth::{Authorizing, Credentials};
use crate::convert::convert;
use crate::event::{Event, Progress, ToolResult};
use crate::http::{HttpClient, HttpError};
use crate::outcome::Failure;
use crate::routing::ParamHeader;
use crate::telemetry::{Instruments, Peer};
use crate::wire::{Endpoint, Messages, ReadError, error_chain};

/// Bound on the requests that clean up after a call (cancel, DELETE) and on answers to server
/// requests.
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);
/// The JSON-RPC id of the first `tools/call` of a call; rounds add their number.
pub(crate) const CALL_ID: u64 = 1;
/// At most this many resumptions in a row that bring no message.
const MAX_IDLE_RESUMES: u32 = 16;
/// The most server requests (`ping`, or requests brain refuses) a call answers: past them the
/// call fails and nothing more is answered, so a server cannot make one call send unbounded
/// requests back.
pub(crate) const MAX_SERVER_REQUESTS: usize = 16;

/// A binding ready to call: its schemas compiled once, its token read once.
pub(crate) struct Tool {
    pub(crate) binding: ToolBinding,
    pub(crate) input: jsonschema::Validator,
    pub(crate) output: Option<jsonschema::Validator>,
    /// How its requests are authorized (`token_env` or `auth`).
    pub(crate) credentials: Credentials,
    /// Arguments promoted to `Mcp-Param-*` headers (2026-07-28).
    pub(crate) param_headers: Vec<ParamHeader>,
    /// `token_env` is set but the variable was not (only with
    /// `RuntimeBuilder::allow_missing_tokens`).
    pub(crate) missing_token: bool,
    /// Variables an `auth` names that were not set (only with
    /// `RuntimeBuilder::allow_missing_tokens`).
    pub(crate) missing_auth: Vec<String>,
    /// `env_from` host variables that were not set (only with
    /// `RuntimeBuilder::allow_missing_tokens`).
    pub(crate) missing_env: Vec<String>,
    /// A binding that pins no revision learned that its server speaks only 2026-07-28 (it
    /// refused a session): later calls go there at once.
    pub(crate) stateless_only: AtomicBool,
    /// A stdio binding: how its server process starts.
    pub(crate) launch: Option<Arc<crate::stdio::Launch>>,
    /// A stdio binding with `prewarm`: its spare processes.
    pub(crate) spares: Option<Arc<crate::stdio::Spares>>,
    /// An HTTP or SSE tool with `inspect_session`: the key its session inspection tokens are
    /// signed with.
    pub(crate) session_key: Option<Arc<crate::session_token::SessionTokenKey>>,
    /// `inspect_session` is set but `BRAIN_SESSION_TOKEN_KEY` was not (only with
    /// `RuntimeBuilder::allow_missing_tokens`).
    pub(crate) missing_session_key: bool,
    /// Where its calls go, as spans and metrics name it.
    pub(crate) peer: Peer,
    /// The runtime's metric instruments.
    pub(crate) instruments: Arc<Instruments>,
}

impl Tool {
    /// How many raw response bytes a result may take before brain stops reading: JSON escaping
    /// can take 6 bytes per byte of text (`\u0000`), plus room for the envelope.
    pub(crate) fn raw_limit(&self) -> u64 {
        self.binding.max_output_bytes.saturating_mul(6) + 64 * 1024
    }
}

/// Who is calling: the session's identity, sent to the server as `_meta["brain.dev/scope"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The tenant the session belongs to; checked against the binding's `tenants`.
    pub tenant_id: String,
    /// The agent session.
    pub session_id: String,
}

/// What the cleanup after a call needs to know.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    /// The session the server assigned, to DELETE afterwards.
    pub(crate) session_id: Option<String>,
    /// The calling tenant (the cleanup's requests are authorized for it).
    pub(crate) tenant: String,
    /// The revision the call is made at, once known.
    pub(crate) revision: Option<&'static str>,
    /// `tools/call` was written: from here on, a failure has an unknown outcome.
    pub(crate) call_sent: bool,
    /// The JSON-RPC id of the last `tools/call` written.
    pub(crate) request_id: u64,
    /// The call's response arrived: nothing to cancel.
    pub(crate) answered: bool,
    /// Server requests received during the call (see [`MAX_SERVER_REQUESTS`]).
    pub(crate) server_requests: usize,
}

/// Where a call's events go: boxed, so that the channel's first block of 32 slots holds
/// pointers, not events (about 3 KiB less per call in flight; P5' measured about 2 MB less for
/// 1,000 calls).
pub(crate) type Events = mpsc::Sender<Box<Event>>;

/// Everything one call's exchange uses.
pub(crate) struct Exchange<'a> {
    pub(crate) endpoint: Endpoint<'a>,
    pub(crate) tool: &'a Tool,
    pub(crate) call_id: &'a str,
    pub(crate) scope: &'a Scope,
    pub(crate) arguments: &'a Value,
    pub(crate) events: &'a Events,
    pub(crate) state: &'a Mutex<CallState>,
    /// When the call times out.
    pub(crate) deadline: tokio::time::Instant,
    /// The call's span: its phases' parent.
    pub(crate) span: &'a Span,
}

/// How a call travels: one implementation per transport.
pub(crate) trait Transport: Send + Sync + 'static {
    /// Runs the exchange to the call's result; [`run`] bounds it in time and by cancellation.
    fn exchange(
        &self,
        call: &Exchange<'_>,
    ) -> impl Future<Output = Result<ToolResult, Failure>> + Send;

    /// Whether the call left anything for [`Transport::clean_up`] to do (when not, no cleanup
    /// task is spawned).
    fn leaves_work(&self, _state: &CallState) -> bool {
        true
    }

    /// After the call (answered, failed, timed out or interrupted): cancels what is still
    /// running on the server and closes what the call opened, bounded by [`CONTROL_TIMEOUT`].
    fn clean_up(
        &self,
        http: HttpClient,
        tool: Arc<Tool>,
        state: CallState,
    ) -> impl Future<Output = ()> + Send;
}

/// Runs one call to its result: the exchange, bounded by the timeout and by cancellation, then
/// the transport's cleanup, off the caller's path (tracked by `cleanups`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<T: Transport>(
    transport: T,
    http: HttpClient,
    tool: Arc<Tool>,
    call_id: &str,
    scope: &Scope,
    arguments: &Value,
    events: &Events,
    cancel: CancellationToken,
    cleanups: &TaskTracker,
    span: &Span,
) -> ToolResult {
    let state = Mutex::new(CallState {
        tenant: scope.tenant_id.clone(),
        ..CallState::default()
    });
    let timeout = Duration::from_secs(tool.binding.timeout_seconds);
    let deadline = tokio::time::Instant::now() + timeout;
    let exchange = Exchange {
        endpoint: Endpoint {
            http: &http,
            url: tool.binding.url.as_deref().unwrap_or_default(),
            auth: Authorizing {
                credentials: &tool.credentials,
                tenant: &scope.tenant_id,
            },
        },
        tool: &tool,
        call_id,
        scope,
        arguments,
        events,
        state: &state,
        deadline,
        span,
    };
    let started = std::time::Instant::now();
    tracing::debug!(
        tool = %tool.binding.name,
        call_id,
        server = %server(&tool.binding),
        pinned = tool.binding.pinned_revision().unwrap_or("any"),
        "call started"
    );
    let interrupted = |what: String| {
        let sent = state.lock().map(|s| s.call_sent).unwrap_or(true);
        if sent {
            Failure::sent(format!(
                "{what}; the request was cancelled and the tool may have run"
            ))
        } else {
            Failure::not_sent(format!("{what} before tools/call was sent"))
        }
    };
    let (outcome, ended_by) = tokio::select! {
        biased;
        outcome = transport.exchange(&exchange) => (outcome, None),
        () = tokio::time::sleep_until(deadline) => (
            Err(interrupted(format!("the call timed out after {}s", timeout.as_secs()))),
            Some("timeout"),
        ),
        () = cancel.cancelled() => (
            Err(interrupted("the call was interrupted".to_owned())),
            Some("cancelled"),
        ),
    };
    let state = state.into_inner().unwrap_or_else(|p| p.into_inner());
    let revision = state.revision;
    let error_type = match &outcome {
        Ok(result) if result.is_error => Some("tool_error"),
        Ok(_) => None,
        Err(_) if ended_by.is_some() => ended_by,
        Err(failure) if failure.unknown_outcome => Some("unknown_outcome"),
        Err(_) => Some("not_sent"),
    };
    let result = outcome.unwrap_or_else(|failure| {
        ToolResult::failure(call_id, failure.unknown_outcome, failure.message)
    });
    let elapsed = started.elapsed();
    crate::telemetry::record_outcome(
        span,
        revision,
        state.session_id.as_deref(),
        state.call_sent.then_some(state.request_id),
        error_type,
        &result,
    );
    tool.instruments
        .ended(&tool.peer, revision, error_type, &result, elapsed);
    tracing::debug!(
        call_id,
        revision = revision.unwrap_or("none"),
        is_error = result.is_error,
        unknown_outcome = result.unknown_outcome,
        elapsed_ms = elapsed.as_millis() as u64,
        "call ended"
    );
    if transport.leaves_work(&state) {
        let closing = crate::telemetry::phase("session close", None, span);
        cleanups.spawn(async move {
            let _closing = closing;
            transport.clean_up(http, tool, state).await
        });
    }
    result
}

/// Where a binding's server is, for logs and messages: its URL, or its program.
pub(crate) fn server(binding: &ToolBinding) -> &str {
    match (&binding.url, &binding.command) {
        (Some(url), _) => url,
        (None, Some(command)) => command.first().map_or("", String::as_str),
        (None, None) => "",
    }
}

/// What a transport offers while the response to `tools/call` is read. Only answering is
/// required; the rest is Streamable HTTP's.
pub(crate) trait BackChannel {
    /// Sends `message` (an answer to a server request) to the server; `false` when the
    /// transport has no way to (2026-07-28).
    async fn answer(&self, message: &Value) -> bool;

    /// Whether the transport can reopen a response stream the server closed before the result.
    fn resumes(&self) -> bool {
        false
    }

    /// Reopens a response stream the server closed before the result, after `from` (only
    /// called when [`BackChannel::resumes`]).
    async fn resume(&self, _from: &Resume) -> Result<Messages, Failure> {
        Err(Failure::sent("this response stream cannot be resumed"))
    }

    /// The next message of another stream the transport listens on during the call (a
    /// session's GET stream); never completes when there is none.
    async fn side_message(&self) -> Value {
        std::future::pending().await
    }

    /// Whether that other stream has carried messages during this call: then a progress
    /// notification the server sent there just before the result may still be on its way.
    fn side_heard(&self) -> bool {
        false
    }
}

/// What one message read during a call means for it.
pub(crate) enum Step {
    /// Progress, an answered server request, or a message for someone else: read on.
    Continue,
    /// The response to `tools/call`.
    Answered(Result<Reply, Failure>),
}

/// How long brain keeps reading a side stream that carried the call's messages after the result
/// arrived on the call's own stream: the two travel on different connections, and progress the
/// server sent before the result may arrive just after it.
const SIDE_GRACE: Duration = Duration::from_millis(25);

impl Exchange<'_> {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, CallState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn url(&self) -> &str {
        self.endpoint.url
    }

    /// Sends `tools/call` (once) and reads its response in wire order. `meta` holds the
    /// revision's own `_meta` entries; brain's scope and progress token are added last, so that
    /// they win.
    pub(crate) async fn call(
        &self,
        headers: HeaderMap,
        meta: Map<String, Value>,
        round: &Round,
        back: &impl BackChannel,
    ) -> Result<Reply, Failure> {
        let span = round.span(self.span);
        let request = self.message(meta, round, &span);
        self.sending(round);
        let response = match self.endpoint.post(&request, headers).await {
            Ok(response) => response,
            Err(error) if error.is_connect() => {
                self.state().call_sent = round.number > 0;
                let message = match &error {
                    HttpError::Auth(why) => {
                        format!("tools/call was not sent: no usable token: {why}")
                    }
                    _ => format!(
                        "could not connect to {} to send tools/call: {}",
                        self.url(),
                        error_chain(&error)
                    ),
                };
                return Err(Failure {
                    unknown_outcome: round.number > 0,
                    message,
                });
            }
            Err(error) => {
                return Err(Failure::sent(format!(
                    "the connection failed after tools/call was sent: {}; the tool may have run",
                    error_chain(&error)
                )));
            }
        };
        let status = response.status();
        if rejected_before_execution(status) && round.number == 0 {
            self.state().call_sent = false;
            return Err(Failure::not_sent(format!(
                "the server rejected tools/call with HTTP {status} before running it{}{}",
                self.auth_hint(status),
                error_detail(response).await
            )));
        }
        if !status.is_success() {
            return Err(Failure::sent(format!(
                "tools/call got HTTP {status}{}; the tool may have run",
                error_detail(response).await
            )));
        }
        let mut messages = Messages::read(response, self.tool.raw_limit())
            .await
            .map_err(|error| self.read_failure(error))?;
        let mut last_progress: Option<f64> = None;
        let mut idle_resumes = 0;
        loop {
            // The side stream first: an older server may send a call's progress there just
            // before the result arrives on the call's own stream.
            let next = tokio::select! {
                biased;
                side = back.side_message() => {
                    // Progress and server requests only: the reply comes on the POST's stream.
                    let method = side.get("method").and_then(Value::as_str);
                    match (method, side.get("id")) {
                        (Some("notifications/progress"), None) => {
                            self.progress(&side["params"], &mut last_progress).await;
                        }
                        (Some(method), Some(id)) => {
                            self.server_request(method, id, &side["params"], back).await?;
                        }
                        _ => {}
                    }
                    continue;
                }
                next = messages.next() => next,
            };
            let closed_early = matches!(next, None | Some(Err(ReadError::Transport(_))));
            if closed_early && messages.resumable() && back.resumes() {
                idle_resumes += 1;
                if idle_resumes > MAX_IDLE_RESUMES {
                    return Err(Failure::sent(format!(
                        "the server closed the response stream of tools/call {MAX_IDLE_RESUMES} \
                         times in a row without sending anything; brain stopped resuming it, and \
                         the tool may have run"
                    )));
                }
                messages = back.resume(&Resume::after(&messages)).await?;
                continue;
            }
            let message = match next {
                None => {
                    return Err(Failure::sent(
                        "the server ended its response without a result; the tool may have run",
                    ));
                }
                Some(Err(error)) => return Err(self.read_failure(error)),
                Some(Ok(message)) => message,
            };
            idle_resumes = 0;
            if let Step::Answered(reply) = self
                .on_message(&message, &request["id"], &mut last_progress, back)
                .await?
            {
                messages.release();
                if back.side_heard() {
                    self.settle(back, &mut last_progress).await;
                }
                return reply;
            }
        }
    }

    /// The `tools/call` message of `round`, with the revision's own `_meta` entries and the
    /// trace context of `span`, the round's.
    pub(crate) fn message(
        &self,
        mut meta: Map<String, Value>,
        round: &Round,
        span: &Span,
    ) -> Value {
        crate::telemetry::inject(&mut meta, span);
        call_message(
            &self.tool.binding,
            self.call_id,
            self.scope,
            self.arguments,
            meta,
            round,
        )
    }

    /// Records that `tools/call` of `round` is being written: from here on, a failure has an
    /// unknown outcome (a transport that learns the write failed says so).
    pub(crate) fn sending(&self, round: &Round) {
        let mut state = self.state();
        state.call_sent = true;
        state.answered = false;
        state.request_id = CALL_ID + round.number;
    }

    /// One message read after `tools/call` (id `request_id`): progress becomes an event, a
    /// server request is answered (or fails the call), the response ends the call; anything else
    /// (logging, list changes, stray responses) is passed over.
    pub(crate) async fn on_message(
        &self,
        message: &Value,
        request_id: &Value,
        last_progress: &mut Option<f64>,
        back: &impl BackChannel,
    ) -> Result<Step, Failure> {
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (Some("notifications/progress"), None) => {
                self.progress(&message["params"], last_progress).await;
            }
            (Some(method), Some(id)) => {
                self.server_request(method, id, &message["params"], back)
                    .await?;
            }
            (None, Some(id)) if id == request_id => {
                self.state().answered = true;
                return Ok(Step::Answered(self.response(message)));
            }
            _ => {}
        }
        Ok(Step::Continue)
    }

    /// Progress still arriving on the side stream after the result, within [`SIDE_GRACE`] and
    /// well before the call's deadline (the result is in hand: it must not be lost to the
    /// timeout). Events that do not fit in the channel at once are dropped, never waited for.
    async fn settle(&self, back: &impl BackChannel, last_progress: &mut Option<f64>) {
        let until = (tokio::time::Instant::now() + SIDE_GRACE).min(self.deadline - SIDE_GRACE);
        let grace = tokio::time::sleep_until(until);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                biased;
                () = &mut grace => return,
                side = back.side_message() => {
                    if side.get("method").and_then(Value::as_str) == Some("notifications/progress")
                        && let Some(event) = self.progress_event(&side["params"], last_progress)
                    {
                        let _ = self.events.try_send(Box::new(event));
                    }
                }
            }
        }
    }

    pub(crate) fn read_failure(&self, error: ReadError) -> Failure {
        match error {
            ReadError::TooLarge(limit) => Failure::sent(format!(
                "the response (or one message of its stream) exceeded {limit} bytes, more than \
                 max_output_bytes ({}) allows; brain stopped reading it",
                self.tool.binding.max_output_bytes
            )),
            other => Failure::sent(format!("{other}; the tool may have run")),
        }
    }

    /// A progress notification for this call, if it moves forward, becomes a `tool.progress`.
    async fn progress(&self, params: &Value, last: &mut Option<f64>) {
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

    /// Sends the `tool.progress` event `params` (`progress`, `total`, `message`) stand for, if
    /// it moves forward; waits while the caller is behind (the event channel is bounded).
    pub(crate) async fn report_progress(&self, params: &Value, last: &mut Option<f64>) {
        if let Some(event) = self.progress_update(params, last) {
            let _ = self.events.send(Box::new(event)).await;
        }
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
        back: &impl BackChannel,
    ) -> Result<(), Failure> {
        let received = {
            let mut state = self.state();
            state.server_requests += 1;
            state.server_requests
        };
        if received > MAX_SERVER_REQUESTS {
            return Err(Failure::sent(format!(
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
        let sent = tokio::time::timeout(CONTROL_TIMEOUT, back.answer(&answer))
            .await
            .unwrap_or(false);
        match decided {
            Ok(_) if sent => Ok(()),
            Ok(_) => Err(Failure::sent(format!(
                "the server sent a {method} request, which brain cannot answer on this \
                 transport; the call was cancelled and the tool may have run"
            ))),
            Err(failure) => Err(failure),
        }
    }

    /// The JSON-RPC response to `tools/call`.
    fn response(&self, message: &Value) -> Result<Reply, Failure> {
        if let Some(error) = message.get("error") {
            let text = rpc_error_text(error);
            if error.get("code").and_then(Value::as_i64) == Some(-32601) {
                return Err(Failure::not_sent(format!(
                    "the server does not offer tools/call: {text}"
                )));
            }
            return Err(Failure::sent(format!(
                "the server answered tools/call with an error: {text}; the tool may have run"
            )));
        }
        let Some(result) = message.get("result") else {
            return Err(Failure::sent(
                "the server's answer to tools/call has neither result nor error",
            ));
        };
        match result.get("resultType").and_then(Value::as_str) {
            None | Some("complete") => {}
            Some("input_required") => return Ok(Reply::InputRequired(result.clone())),
            Some(other) => {
                return Err(Failure::sent(format!(
                    "the server answered with a `{other}` result, which brain does not support; \
                     the tool may have run"
                )));
            }
        }
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
        .map(Reply::Complete)
    }

    pub(crate) fn auth_hint(&self, status: StatusCode) -> String {
        if let (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, Some(auth)) =
            (status, &self.tool.binding.auth)
        {
            return format!(
                " (the server refused the token brain obtained with auth type {}, after \
                 obtaining a new one)",
                auth.grant.as_str()
            );
        }
        match (status, &self.tool.binding.token_env) {
            (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, Some(var)) => {
                format!(" (the token in {var} was refused)")
            }
            (StatusCode::UNAUTHORIZED, None) => {
                " (the server wants a token: set `token_env` on the binding)".to_owned()
            }
            _ => String::new(),
        }
    }
}

/// What brain answers to a server's request for user input, by the binding's
/// `on_input_request`: the answer's `result`, or the failure of the call. No user is ever asked:
/// at most an elicitation is declined, when the binding opted in.
pub(crate) fn input_answer(
    policy: OnInputRequest,
    method: &str,
    params: &Value,
) -> Result<Value, Failure> {
    if method == "elicitation/create" && policy == OnInputRequest::Decline {
        return Ok(json!({"action": "decline"}));
    }
    let what = match params.get("message").and_then(Value::as_str) {
        Some(message) => format!("{method}: {message:?}"),
        None => method.to_owned(),
    };
    let help = if method == "elicitation/create" {
        "Handle approval inside the tool instead, or set `\"on_input_request\": \"decline\"` on \
         the binding to decline elicitations and let the server go on"
    } else {
        "Handle it inside the tool instead"
    };
    Err(Failure::sent(format!(
        "the server asked for user input ({what}), which brain does not provide; the call \
         failed and the tool may have run. {help}"
    )))
}

/// The `tools/call` message of one round. `meta` holds the revision's own `_meta` entries;
/// brain's scope and progress token are added last, so that they win.
pub(crate) fn call_message(
    binding: &ToolBinding,
    call_id: &str,
    scope: &Scope,
    arguments: &Value,
    mut meta: Map<String, Value>,
    round: &Round,
) -> Value {
    meta.insert("progressToken".into(), json!(call_id));
    meta.insert(
        "brain.dev/scope".into(),
        json!({
            "tenant_id": scope.tenant_id,
            "session_id": scope.session_id,
            "call_id": call_id,
        }),
    );
    let mut params = Map::new();
    params.insert(
        "name".into(),
        json!(binding.mcp_tool.as_deref().unwrap_or_default()),
    );
    params.insert("arguments".into(), arguments.clone());
    if let Some(responses) = &round.input_responses {
        params.insert("inputResponses".into(), Value::Object(responses.clone()));
    }
    if let Some(state) = &round.request_state {
        params.insert("requestState".into(), state.clone());
    }
    params.insert("_meta".into(), Value::Object(meta));
    json!({"jsonrpc": "2.0", "id": CALL_ID + round.number, "method": "tools/call", "params": params})
}

/// The server's answer to one `tools/call` request.
pub(crate) enum Reply {
    /// The tool's result.
    Complete(ToolResult),
    /// An `input_required` result (2026-07-28): the tool has not completed.
    InputRequired(Value),
}

/// What one round of a 2026-07-28 call carries besides the call itself.
pub(crate) struct Round {
    /// 0 for the call, 1.. for the rounds the server asked for; also offsets the JSON-RPC id.
    pub(crate) number: u64,
    /// The `requestState` of the previous `input_required` result, exactly as received.
    request_state: Option<Value>,
    /// The answers to its `inputRequests`.
    input_responses: Option<Map<String, Value>>,
}

impl Round {
    /// The span of this round's `tools/call`, a child of `call`, the call's.
    pub(crate) fn span(&self, call: &Span) -> Span {
        crate::telemetry::phase("tools/call", Some(CALL_ID + self.number), call)
    }

    pub(crate) fn first() -> Self {
        Round {
            number: 0,
            request_state: None,
            input_responses: None,
        }
    }

    /// The round that continues after an `input_required` result, or the failure when the
    /// result asks for user input that the binding's `policy` does not let brain answer.
    pub(crate) fn next(
        number: u64,
        asked: &Value,
        policy: OnInputRequest,
    ) -> Result<Self, Failure> {
        let mut responses = Map::new();
        if let Some(requests) = asked.get("inputRequests").and_then(Value::as_object) {
            for (key, request) in requests {
                let method = request.get("method").and_then(Value::as_str).unwrap_or("");
                let params = request.get("params").unwrap_or(&Value::Null);
                let answer = input_answer(policy, method, params)?;
                responses.insert(key.clone(), answer);
            }
        }
        Ok(Round {
            number,
            request_state: asked.get("requestState").cloned(),
            input_responses: (!responses.is_empty()).then_some(responses),
        })
    }
}

/// Where a closed response stream resumes.
pub(crate) struct Resume {
    pub(crate) last_event_id: String,
    pub(crate) retry: Option<Duration>,
}

impl Resume {
    fn after(closed: &Messages) -> Self {
        Resume {
            last_event_id: closed.last_event_id.clone().unwrap_or_default(),
            retry: closed.retry,
        }
    }
}

/// `: <JSON-RPC error>` when an error response carries one (read within 64 KiB), else nothing.
async fn error_detail(response: crate::http::Response) -> String {
    error_object(response)
        .await
        .map(|error| format!(": {}", rpc_error_text(&error)))
        .unwrap_or_default()
}

/// The JSON-RPC error object an error response carries, if any (read within 64 KiB).
pub(crate) async fn error_object(response: crate::http::Response) -> Option<Value> {
    let mut messages = Messages::read(response, 64 * 1024).await.ok()?;
    match messages.next().await {
        Some(Ok(message)) => message.get("error").cloned(),
        _ => None,
    }
}

/// HTTP statuses with which a server rejects `tools/call` before running the tool.
fn rejected_before_execution(status: StatusCode) -> bool {
    matches!(status.as_u16(), 401 | 403 | 404 | 405 | 406 | 415)
}

/// `-32602: unknown tool` from a JSON-RPC error object.
pub(crate) fn rpc_error_text(error: &Value) -> String {
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .unwrap_or_default();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    format!("JSON-RPC error {code}: {message}")
}
