//! One call on a fresh MCP session (2025-11-25 and earlier revisions): initialize,
//! `notifications/initialized`, `tools/call` read in wire order, then cancel and DELETE as needed.

use std::sync::Mutex;

use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::convert::convert;
use crate::event::{Event, Progress, ToolResult};
use crate::outcome::Failure;
use crate::runtime::{Scope, Tool};
use crate::stateless;
use crate::wire::{Endpoint, Messages, PROTOCOL_HEADER, ReadError, SESSION_HEADER, error_chain};

/// Bound on the body of an initialize response.
const INIT_LIMIT: u64 = 1024 * 1024;
/// The JSON-RPC ids brain uses within a session.
const INIT_ID: u64 = 0;
const CALL_ID: u64 = 1;
/// How long to wait before resuming a closed stream when the server gave no `retry`.
const DEFAULT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// At most this many `input_required` rounds after the call (2026-07-28).
const MAX_ROUNDS: u64 = 8;
/// At most this many resumptions in a row that bring no message.
const MAX_IDLE_RESUMES: u32 = 16;

/// What the cleanup after a call needs to know.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    /// The session the server assigned, to DELETE afterwards.
    pub(crate) session_id: Option<String>,
    /// `tools/call` was written: from here on, a failure has an unknown outcome.
    pub(crate) call_sent: bool,
    /// The call's response arrived: nothing to cancel.
    pub(crate) answered: bool,
}

/// Everything one call's exchange uses.
pub(crate) struct Exchange<'a> {
    pub(crate) endpoint: Endpoint<'a>,
    pub(crate) tool: &'a Tool,
    pub(crate) call_id: &'a str,
    pub(crate) scope: &'a Scope,
    pub(crate) arguments: &'a Value,
    pub(crate) events: &'a mpsc::Sender<Event>,
    pub(crate) state: &'a Mutex<CallState>,
}

impl Exchange<'_> {
    fn state(&self) -> std::sync::MutexGuard<'_, CallState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn url(&self) -> &str {
        self.endpoint.url
    }

    /// Runs the whole exchange; the caller bounds it in time and cleans up after it.
    pub(crate) async fn run(&self) -> Result<ToolResult, Failure> {
        let version = self.tool.binding.protocol_version();
        if version == stateless::REVISION {
            return self.stateless_call().await;
        }
        let headers = self.initialize(version).await?;
        self.initialized(&headers).await?;
        match self.call(headers, Map::new(), &Round::first()).await? {
            Reply::Complete(result) => Ok(result),
            Reply::InputRequired(_) => Err(Failure::sent(
                "the server answered with an `input_required` result on a session revision, \
                 where MCP does not allow it; the tool may have run",
            )),
        }
    }

    /// A 2026-07-28 call: one POST, plus the rounds the server asks for (SEP-2322, bounded).
    ///
    /// A round re-requests the call only because the server answered `input_required`, a
    /// definite answer that the tool has not completed: `requestState` is echoed exactly, and
    /// the input requests are answered without a user (an elicitation is declined; brain offers
    /// no sampling or roots, so those fail the call).
    async fn stateless_call(&self) -> Result<ToolResult, Failure> {
        let name = self.tool.binding.mcp_tool.as_deref().unwrap_or_default();
        let mut round = Round::first();
        loop {
            let headers = stateless::headers(name, self.arguments, &self.tool.param_headers);
            let asked = match self.call(headers, stateless::meta(), &round).await? {
                Reply::Complete(result) => return Ok(result),
                Reply::InputRequired(asked) => asked,
            };
            if round.number >= MAX_ROUNDS {
                return Err(Failure::sent(format!(
                    "the server still asked for another round (input_required) after \
                     {MAX_ROUNDS} rounds; brain stopped, and the tool may have run"
                )));
            }
            round = Round::next(round.number + 1, &asked)?;
        }
    }

    async fn initialize(&self, version: &str) -> Result<HeaderMap, Failure> {
        let request = json!({
            "jsonrpc": "2.0",
            "id": INIT_ID,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "brain", "version": env!("CARGO_PKG_VERSION")}
            }
        });
        let response = self
            .endpoint
            .post(&request, HeaderMap::new())
            .await
            .map_err(|error| {
                Failure::not_sent(format!(
                    "could not connect to {}: {}",
                    self.url(),
                    error_chain(&error)
                ))
            })?;
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        self.state().session_id.clone_from(&session);
        let status = response.status();
        if !status.is_success() {
            return Err(Failure::not_sent(format!(
                "the server refused to open a session: HTTP {status}{}{}",
                self.auth_hint(status),
                error_detail(response).await
            )));
        }
        let setup_failed =
            |what: String| Failure::not_sent(format!("session setup failed: {what}"));
        let mut messages = Messages::read(response, INIT_LIMIT)
            .await
            .map_err(|error| setup_failed(error.to_string()))?;
        let result = loop {
            let message = match messages.next().await {
                None => return Err(setup_failed("no answer to initialize".into())),
                Some(Err(error)) => return Err(setup_failed(error.to_string())),
                Some(Ok(message)) => message,
            };
            if message.get("id") != Some(&json!(INIT_ID)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(setup_failed(format!(
                    "initialize failed: {}",
                    rpc_error_text(error)
                )));
            }
            break message.get("result").cloned().unwrap_or_default();
        };
        let negotiated = result.get("protocolVersion").and_then(Value::as_str);
        if negotiated != Some(version) {
            return Err(setup_failed(format!(
                "the server speaks protocol {}, but the binding pins {version}; re-run `cargo \
                 xtask discover --check` and review the binding",
                negotiated.unwrap_or("(none)")
            )));
        }
        let mut headers = HeaderMap::new();
        if let Some(session) = session
            && let Ok(value) = HeaderValue::from_str(&session)
        {
            headers.insert(HeaderName::from_static(SESSION_HEADER), value);
        }
        headers.insert(
            HeaderName::from_static(PROTOCOL_HEADER),
            HeaderValue::from_str(version).expect("protocol versions are header-safe"),
        );
        Ok(headers)
    }

    async fn initialized(&self, headers: &HeaderMap) -> Result<(), Failure> {
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self
            .endpoint
            .post(&notification, headers.clone())
            .await
            .map_err(|error| {
                Failure::not_sent(format!("session setup failed: {}", error_chain(&error)))
            })?;
        if !response.status().is_success() {
            return Err(Failure::not_sent(format!(
                "session setup failed: notifications/initialized got HTTP {}",
                response.status()
            )));
        }
        Ok(())
    }

    /// Sends `tools/call` (once) and reads its response in wire order. `meta` holds the
    /// revision's own `_meta` entries; brain's scope and progress token are added last, so that
    /// they win.
    async fn call(
        &self,
        headers: HeaderMap,
        meta: Map<String, Value>,
        round: &Round,
    ) -> Result<Reply, Failure> {
        let request = call_message(
            &self.tool.binding,
            self.call_id,
            self.scope,
            self.arguments,
            meta,
            round,
        );
        {
            let mut state = self.state();
            state.call_sent = true;
            state.answered = false;
        }
        let response = match self.endpoint.post(&request, headers.clone()).await {
            Ok(response) => response,
            Err(error) if error.is_connect() => {
                self.state().call_sent = false;
                return Err(Failure::not_sent(format!(
                    "could not connect to {} to send tools/call: {}",
                    self.url(),
                    error_chain(&error)
                )));
            }
            Err(error) => {
                return Err(Failure::sent(format!(
                    "the connection failed after tools/call was sent: {}; the tool may have run",
                    error_chain(&error)
                )));
            }
        };
        let status = response.status();
        if rejected_before_execution(status) {
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
        let resumable = self.tool.binding.protocol_version() != stateless::REVISION;
        let mut idle_resumes = 0;
        loop {
            let message = match messages.next().await {
                None if resumable && messages.resumable() => {
                    idle_resumes += 1;
                    let from = Resume::after(&messages);
                    messages = self.resume(from, &headers, idle_resumes).await?;
                    continue;
                }
                Some(Err(ReadError::Transport(_))) if resumable && messages.resumable() => {
                    idle_resumes += 1;
                    let from = Resume::after(&messages);
                    messages = self.resume(from, &headers, idle_resumes).await?;
                    continue;
                }
                None => {
                    return Err(Failure::sent(
                        "the server ended its response without a result; the tool may have run",
                    ));
                }
                Some(Err(error)) => return Err(self.read_failure(error)),
                Some(Ok(message)) => message,
            };
            idle_resumes = 0;
            let method = message.get("method").and_then(Value::as_str);
            match (method, message.get("id")) {
                (Some("notifications/progress"), None) => {
                    self.progress(&message["params"], &mut last_progress).await;
                }
                (Some(method), Some(id)) => {
                    self.server_request(method, id, &headers).await?;
                }
                (None, Some(id)) if Some(id) == request.get("id") => {
                    self.state().answered = true;
                    return self.response(&message);
                }
                // Other notifications (logging, list changes) and stray responses.
                _ => {}
            }
        }
    }

    /// Resumes the response stream of `tools/call` after the server closed it before the
    /// result (Streamable HTTP resumability, SEP-1699): waits the server's `retry`, then GETs the
    /// stream from the last event id. The call itself is never sent again.
    async fn resume(
        &self,
        from: Resume,
        headers: &HeaderMap,
        attempt: u32,
    ) -> Result<Messages, Failure> {
        if attempt > MAX_IDLE_RESUMES {
            return Err(Failure::sent(format!(
                "the server closed the response stream of tools/call {MAX_IDLE_RESUMES} times \
                 in a row without sending anything; brain stopped resuming it, and the tool may \
                 have run"
            )));
        }
        tokio::time::sleep(from.retry.unwrap_or(DEFAULT_RETRY)).await;
        let response = self
            .endpoint
            .resume(headers.clone(), &from.last_event_id)
            .await
            .map_err(|error| {
                Failure::sent(format!(
                    "the server closed the response stream of tools/call before its result, \
                     and resuming it failed: {}; the tool may have run",
                    error_chain(&error)
                ))
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(Failure::sent(format!(
                "the server closed the response stream of tools/call before its result, and \
                 refused to resume it (HTTP {status}); the tool may have run"
            )));
        }
        let mut resumed = Messages::read_after(response, self.tool.raw_limit(), from.bytes_read)
            .await
            .map_err(|error| self.read_failure(error))?;
        resumed.last_event_id = Some(from.last_event_id);
        resumed.retry = from.retry;
        Ok(resumed)
    }

    fn read_failure(&self, error: ReadError) -> Failure {
        match error {
            ReadError::TooLarge(limit) => Failure::sent(format!(
                "the response exceeded {limit} bytes, more than max_output_bytes ({}) allows; \
                 brain stopped reading it",
                self.tool.binding.max_output_bytes
            )),
            other => Failure::sent(format!("{other}; the tool may have run")),
        }
    }

    /// A progress notification for this call, if it moves forward, becomes a `tool.progress`.
    async fn progress(&self, params: &Value, last: &mut Option<f64>) {
        let token_matches = match params.get("progressToken") {
            Some(Value::String(token)) => token == self.call_id,
            _ => false,
        };
        let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
            return;
        };
        if !token_matches || last.is_some_and(|last| progress <= last) {
            return;
        }
        *last = Some(progress);
        let event = Event::Progress(Progress {
            call_id: self.call_id.to_owned(),
            progress,
            total: params.get("total").and_then(Value::as_f64),
            message: params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
        let _ = self.events.send(event).await;
    }

    /// Answers a request from the server. A ping is answered; anything else asks for user
    /// input or client features brain never offers: it is refused, and the call fails.
    async fn server_request(
        &self,
        method: &str,
        id: &Value,
        headers: &HeaderMap,
    ) -> Result<(), Failure> {
        let answer = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": format!("brain does not support {method}: handle approval inside the tool"),
            }})
        };
        let send = self.endpoint.post(&answer, headers.clone());
        let _ = tokio::time::timeout(crate::runtime::CONTROL_TIMEOUT, send).await;
        if method == "ping" {
            return Ok(());
        }
        Err(Failure::sent(format!(
            "the server asked for user input ({method}), which brain does not provide; the call \
             was cancelled and the tool may have run. Handle approval inside the tool instead"
        )))
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
        convert(
            self.call_id,
            result,
            self.tool.output.as_ref(),
            self.tool.binding.max_output_bytes,
        )
        .map(Reply::Complete)
    }

    fn auth_hint(&self, status: StatusCode) -> String {
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

/// The `tools/call` message of one round. `meta` holds the revision's own `_meta` entries;
/// brain's scope and progress token are added last, so that they win.
pub(crate) fn call_message(
    binding: &brain_config::ToolBinding,
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
enum Reply {
    /// The tool's result.
    Complete(ToolResult),
    /// An `input_required` result (2026-07-28): the tool has not completed.
    InputRequired(Value),
}

/// What one round of a 2026-07-28 call carries besides the call itself.
pub(crate) struct Round {
    /// 0 for the call, 1.. for the rounds the server asked for; also offsets the JSON-RPC id.
    number: u64,
    /// The `requestState` of the previous `input_required` result, exactly as received.
    request_state: Option<Value>,
    /// The answers to its `inputRequests`.
    input_responses: Option<Map<String, Value>>,
}

impl Round {
    pub(crate) fn first() -> Self {
        Round {
            number: 0,
            request_state: None,
            input_responses: None,
        }
    }

    /// The round that answers an `input_required` result, or the failure when brain cannot
    /// answer one of its input requests.
    fn next(number: u64, asked: &Value) -> Result<Self, Failure> {
        let mut responses = Map::new();
        if let Some(requests) = asked.get("inputRequests").and_then(Value::as_object) {
            for (key, request) in requests {
                let method = request.get("method").and_then(Value::as_str).unwrap_or("");
                let response = match method {
                    // No user is there to ask: the request is declined, and the server decides.
                    "elicitation/create" => json!({"action": "decline"}),
                    _ => {
                        return Err(Failure::sent(format!(
                            "the server asked for {method:?} (input_required), which brain does \
                             not provide; the tool may have run"
                        )));
                    }
                };
                responses.insert(key.clone(), response);
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
struct Resume {
    last_event_id: String,
    retry: Option<std::time::Duration>,
    bytes_read: u64,
}

impl Resume {
    fn after(closed: &Messages) -> Self {
        Resume {
            last_event_id: closed.last_event_id.clone().unwrap_or_default(),
            retry: closed.retry,
            bytes_read: closed.bytes_read(),
        }
    }
}

/// `: <JSON-RPC error>` when an error response carries one (read within 64 KiB), else nothing.
async fn error_detail(response: crate::http::Response) -> String {
    let Ok(mut messages) = Messages::read(response, 64 * 1024).await else {
        return String::new();
    };
    match messages.next().await {
        Some(Ok(message)) => message
            .get("error")
            .map(|error| format!(": {}", rpc_error_text(error)))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// HTTP statuses with which a server rejects `tools/call` before running the tool.
fn rejected_before_execution(status: StatusCode) -> bool {
    matches!(status.as_u16(), 401 | 403 | 404 | 405 | 406 | 415)
}

/// `-32602: unknown tool` from a JSON-RPC error object.
fn rpc_error_text(error: &Value) -> String {
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
