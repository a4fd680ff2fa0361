//! The session transport (MCP 2024-11-05 to 2025-11-25): a fresh session per call —
//! initialize, `notifications/initialized`, `tools/call` on the session (server requests answered
//! on it, a closed response stream resumed), then `notifications/cancelled` if the call is still
//! unanswered, and DELETE.
//!
//! Revisions: a binding that pins one offers it and requires exactly it; a binding that pins none
//! offers the newest session revision and accepts any brain speaks, or — when the server refuses
//! sessions and supports 2026-07-28 — hands the call to the stateless transport before
//! `tools/call` was ever sent.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use crate::auth::Authorizing;
use crate::call::{
    BackChannel, CALL_ID, CONTROL_TIMEOUT, CallState, Exchange, Reply, Resume, Round, Tool,
    Transport, rpc_error_text,
};
use crate::event::ToolResult;
use crate::http::HttpClient;
use crate::outcome::Failure;
use crate::revision;
use crate::stateless::Stateless;
use crate::wire::{Endpoint, Messages, SESSION_HEADER, error_chain};

/// Bound on the body of an initialize response.
const INIT_LIMIT: u64 = 1024 * 1024;
/// How long initialize's response stream may take to end after its answer before the session
/// goes on without waiting (the rest is read off the call's path).
const INIT_STREAM_END: std::time::Duration = std::time::Duration::from_millis(20);
/// The JSON-RPC id of initialize.
const INIT_ID: u64 = 0; // as revision::initialize sends it
/// How long to wait before resuming a closed stream when the server gave no `retry`.
const DEFAULT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// Sessions at revisions before this one also listen on the session's GET stream during the
/// call: SDKs of that era (the Python SDK's `ctx.report_progress` in mcp 1.x) send a call's
/// progress there instead of on the call's own stream.
const LISTEN_BEFORE: &str = "2025-11-25";
/// Bound on opening that GET stream: a server that does not answer it in time is called without.
const LISTEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);
/// JSON-RPC error code of a rejected protocol revision (SEP-2575).
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The session transport.
pub(crate) struct Session;

/// What initialize opened.
enum Opened {
    /// A session at `revision`; `headers` go on every later request of it.
    Session { headers: HeaderMap },
    /// The server refused a session and supports 2026-07-28 (only when the binding pins none).
    StatelessOnly,
}

impl Transport for Session {
    async fn exchange(&self, call: &Exchange<'_>) -> Result<ToolResult, Failure> {
        let opening = crate::telemetry::phase("initialize", Some(INIT_ID), call.span);
        let opened = initialize(call, &opening).await?;
        if let Opened::Session { headers } = &opened {
            initialized(call, headers).await?;
        }
        drop(opening);
        let headers = match opened {
            Opened::Session { headers } => headers,
            Opened::StatelessOnly => {
                call.tool.stateless_only.store(true, Ordering::Relaxed);
                // No session was opened: nothing to cancel on or close afterwards.
                call.state().session_id = None;
                return Stateless.exchange(call).await;
            }
        };
        let revision = call.state().revision.unwrap_or(revision::SESSIONS[0]);
        let side = if revision < LISTEN_BEFORE {
            listen(call, &headers).await
        } else {
            None
        };
        let back = SessionChannel {
            call,
            headers: &headers,
            listening: side.is_some(),
            side: tokio::sync::Mutex::new(side),
            heard: std::sync::atomic::AtomicBool::new(false),
        };
        match call
            .call(headers.clone(), Map::new(), &Round::first(), &back)
            .await?
        {
            Reply::Complete(result) => Ok(result),
            Reply::InputRequired(_) => Err(Failure::sent(
                "the server answered with an `input_required` result on a session revision, \
                 where MCP does not allow it; the tool may have run",
            )),
        }
    }

    /// Cancels an unanswered `tools/call` and closes the session, bounded in time.
    async fn clean_up(&self, http: HttpClient, tool: Arc<Tool>, state: CallState) {
        let Some(session) = state
            .session_id
            .and_then(|s| HeaderValue::from_str(&s).ok())
        else {
            return;
        };
        let endpoint = Endpoint {
            http: &http,
            url: tool.binding.url.as_deref().unwrap_or_default(),
            auth: Authorizing {
                credentials: &tool.credentials,
                tenant: &state.tenant,
            },
        };
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(SESSION_HEADER), session);
        if let Some(revision) = state.revision {
            revision::set_protocol_header(&mut headers, revision);
        }
        let work = async {
            if state.call_sent && !state.answered {
                let cancelled = json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {
                        "requestId": state.request_id.max(CALL_ID),
                        "reason": "cancelled by brain (timeout, interruption or a request brain refused)"
                    }
                });
                let _ = endpoint.post(&cancelled, headers.clone()).await;
            }
            endpoint.delete(headers).await;
        };
        let _ = tokio::time::timeout(CONTROL_TIMEOUT, work).await;
    }
}

/// Opens the session: the binding's pinned revision, exactly, or the newest session revision
/// offered and any revision brain speaks accepted.
async fn initialize(call: &Exchange<'_>, span: &tracing::Span) -> Result<Opened, Failure> {
    let pinned = call.tool.binding.pinned_revision();
    let offer = pinned.unwrap_or(revision::SESSIONS[0]);
    let request = revision::initialize(offer, span);
    let response = call
        .endpoint
        .post(&request, HeaderMap::new())
        .await
        .map_err(|error| match error {
            crate::http::HttpError::Auth(why) => {
                Failure::not_sent(format!("session setup failed: no usable token: {why}"))
            }
            error => Failure::not_sent(format!(
                "could not connect to {}: {}",
                call.url(),
                error_chain(&error)
            )),
        })?;
    let session = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    call.state().session_id.clone_from(&session);
    let status = response.status();
    let setup_failed = |what: String| Failure::not_sent(format!("session setup failed: {what}"));
    if !status.is_success() {
        let error = crate::call::error_object(response).await;
        if let Some(error) = &error
            && pinned.is_none()
            && stateless_supported(error)
        {
            return Ok(Opened::StatelessOnly);
        }
        let detail = error
            .map(|error| format!(": {}", rpc_error_text(&error)))
            .unwrap_or_default();
        return Err(Failure::not_sent(format!(
            "the server refused to open a session: HTTP {status}{}{detail}",
            call.auth_hint(status),
        )));
    }
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
            if pinned.is_none() && stateless_supported(error) {
                return Ok(Opened::StatelessOnly);
            }
            return Err(setup_failed(format!(
                "initialize failed: {}",
                rpc_error_text(error)
            )));
        }
        break message.get("result").cloned().unwrap_or_default();
    };
    // The stream ends right after the answer: once it has, `notifications/initialized` and
    // `tools/call` reuse its connection (a connection per request costs more than the call).
    messages.finish(INIT_STREAM_END).await;
    let offered = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("(none)");
    let revision = revision::accept(pinned, offered)
        .map_err(|why| Failure::not_sent(format!("session setup failed: the server {why}")))?;
    call.state().revision = Some(revision);
    let mut headers = HeaderMap::new();
    if let Some(session) = session
        && let Ok(value) = HeaderValue::from_str(&session)
    {
        headers.insert(HeaderName::from_static(SESSION_HEADER), value);
    }
    revision::set_protocol_header(&mut headers, revision);
    Ok(Opened::Session { headers })
}

/// Whether a JSON-RPC error rejects the revision and names 2026-07-28 among the supported ones.
pub(crate) fn stateless_supported(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64) == Some(UNSUPPORTED_PROTOCOL_VERSION)
        && error["data"]["supported"]
            .as_array()
            .is_some_and(|versions| versions.iter().any(|v| v == revision::STATELESS))
}

async fn initialized(call: &Exchange<'_>, headers: &HeaderMap) -> Result<(), Failure> {
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = call
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

/// Opens the session's GET stream, where older servers send a call's progress; `None` when the
/// server offers none (405) or it cannot be opened within [`LISTEN_TIMEOUT`]. Its bytes are bounded like the call's.
async fn listen(call: &Exchange<'_>, headers: &HeaderMap) -> Option<Messages> {
    let opening = call.endpoint.listen(headers.clone());
    let response = tokio::time::timeout(LISTEN_TIMEOUT, opening)
        .await
        .ok()?
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    Messages::read(response, call.tool.raw_limit()).await.ok()
}

/// The session's way back to the server while `tools/call` is read: answers to its requests,
/// resumption of a closed response stream, and the session's GET stream when listened to.
struct SessionChannel<'a, 'b> {
    call: &'a Exchange<'b>,
    headers: &'a HeaderMap,
    side: tokio::sync::Mutex<Option<Messages>>,
    /// A side stream was opened (otherwise `side_message` never takes the lock).
    listening: bool,
    /// The side stream has carried a message.
    heard: std::sync::atomic::AtomicBool,
}

impl BackChannel for SessionChannel<'_, '_> {
    async fn answer(&self, message: &Value) -> bool {
        self.call
            .endpoint
            .post(message, self.headers.clone())
            .await
            .is_ok_and(|response| response.status().is_success())
    }

    fn resumes(&self) -> bool {
        true
    }

    /// Resumes the response stream of `tools/call` after the server closed it before the
    /// result (Streamable HTTP resumability, SEP-1699): waits the server's `retry`, then GETs the
    /// stream from the last event id. The call itself is never sent again.
    async fn resume(&self, from: &Resume) -> Result<Messages, Failure> {
        tokio::time::sleep(from.retry.unwrap_or(DEFAULT_RETRY)).await;
        let response = self
            .call
            .endpoint
            .resume(self.headers.clone(), &from.last_event_id)
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
        let mut resumed = Messages::read(response, self.call.tool.raw_limit())
            .await
            .map_err(|error| self.call.read_failure(error))?;
        resumed.last_event_id = Some(from.last_event_id.clone());
        resumed.retry = from.retry;
        Ok(resumed)
    }

    async fn side_message(&self) -> Value {
        if !self.listening {
            return std::future::pending().await;
        }
        let mut side = self.side.lock().await;
        if let Some(messages) = side.as_mut() {
            match messages.next().await {
                Some(Ok(message)) => {
                    self.heard.store(true, Ordering::Relaxed);
                    return message;
                }
                // Ended, failed or over its bound: nothing more comes from it.
                _ => *side = None,
            }
        }
        drop(side);
        std::future::pending().await
    }

    fn side_heard(&self) -> bool {
        self.heard.load(Ordering::Relaxed)
    }
}
