//! What the two Streamable HTTP transports (sessions, `session.rs`; 2026-07-28, `stateless.rs`)
//! share: an MCP binding's own facts ([`McpHttp`]), the POST that carries a round's
//! `tools/call` with the facts its status gives, and [`HttpReading`], its answer read as a JSON
//! body or an SSE stream — with a session's way back (answers to server requests, resumption of
//! a closed stream, the session's GET stream) when there is one.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use http::StatusCode;
use http::header::HeaderMap;
use serde_json::{Map, Value};
use tracing::Span;

use crate::auth::Authorizing;
use crate::call::{CallState, Exchange, Incoming, MAX_HEARD, Reading, Round};
use crate::http::HttpClient;
use crate::http::HttpError;
use crate::outcome::{Fact, Failure};
use crate::routing::ParamHeader;
use crate::tool::Tool;
use crate::wire::{Endpoint, Messages, ReadError, error_chain, error_detail};

/// At most this many resumptions in a row that bring no message.
const MAX_IDLE_RESUMES: u32 = 16;
/// How long to wait before resuming a closed stream when the server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// An MCP binding over Streamable HTTP: what its calls need beyond the shared facts.
pub(crate) struct McpHttp {
    /// Arguments promoted to `Mcp-Param-*` headers (2026-07-28).
    pub(crate) param_headers: Vec<ParamHeader>,
    /// A binding that pins no revision learned that its server speaks only 2026-07-28 (it
    /// refused a session): later calls go there at once.
    pub(crate) stateless_only: AtomicBool,
}

/// The endpoint a call's cleanup sends on (cancellation, DELETE): the binding's URL, authorized
/// for the calling tenant (and user, on behalf of users), as the call was.
pub(crate) fn cleanup_endpoint<'a>(
    http: &'a HttpClient,
    tool: &'a Tool,
    state: &'a CallState,
) -> Endpoint<'a> {
    Endpoint {
        http,
        url: tool.binding.url.as_deref().unwrap_or_default(),
        auth: Authorizing {
            credentials: &tool.credentials,
            tenant: &state.tenant,
            subject: state.subject.as_ref(),
        },
        departure: Default::default(),
    }
}

/// A session's way back to the server while a round is read.
pub(crate) struct BackChannel {
    /// The session's headers, for answers and resumption.
    pub(crate) headers: HeaderMap,
    /// The session's GET stream, when listened to.
    pub(crate) side: Option<Messages>,
}

/// Writes a 2026-07-28 round: one POST with the revision's `_meta` and the routing headers.
pub(crate) async fn write_stateless(
    call: &Exchange<'_>,
    route: &McpHttp,
    round: &Round,
) -> Result<HttpReading, Failure> {
    let name = call.tool.binding.mcp_tool.as_deref().unwrap_or_default();
    let headers = crate::routing::headers(name, call.arguments, &route.param_headers);
    write(call, headers, crate::mcp::stateless_meta(), round, None).await
}

/// POSTs the round's `tools/call` (once; OAuth's re-POSTs of a refused request happen inside
/// `wire::Endpoint`) and opens its answer. `meta` holds the revision's own `_meta` entries.
pub(crate) async fn write(
    call: &Exchange<'_>,
    headers: HeaderMap,
    meta: Map<String, Value>,
    round: &Round,
    back: Option<BackChannel>,
) -> Result<HttpReading, Failure> {
    let span = call.round_span(round);
    // Serialized now: the message's JSON tree is not kept while the call waits.
    let body = crate::wire::serialize(&call.tools_call(meta, round, &span));
    let round_number = round.number;
    let response = match call.endpoint.post_message(body, headers).await {
        Ok(response) => response,
        Err(error) if call.endpoint.never_left(&error) => {
            let message = match &error {
                HttpError::Auth(why) => {
                    format!("tools/call was not sent: no usable token: {why}")
                }
                _ if !error.is_connect() => format!(
                    "the connection to {} failed before tools/call left: {}",
                    call.url(),
                    error_chain(&error)
                ),
                _ => format!(
                    "could not connect to {} to send tools/call: {}",
                    call.url(),
                    error_chain(&error)
                ),
            };
            return Err(Failure::new(
                Fact::NotWritten {
                    round: round_number,
                },
                message,
            ));
        }
        Err(error) => {
            return Err(Failure::broken(format!(
                "the connection failed after tools/call was sent: {}; the tool may have run",
                error_chain(&error)
            )));
        }
    };
    let status = response.status();
    if !status.is_success() {
        let fact = Fact::CallStatus {
            status: status.as_u16(),
            round: round_number,
        };
        let retry_after = crate::outcome::retry_after_header(
            response.headers(),
            call.tool.binding.timeout_seconds,
        );
        let message = if fact.before_execution() {
            format!(
                "the server rejected tools/call with HTTP {status} before running it{}{}",
                call.auth_hint(status),
                error_detail(response).await
            )
        } else {
            format!(
                "tools/call got HTTP {status}{}; the tool may have run",
                error_detail(response).await
            )
        };
        return Err(Failure::new(fact, message).retry_after(retry_after));
    }
    let max_output_bytes = call.tool.binding.max_output_bytes;
    let messages = Messages::read(response, call.tool.raw_limit())
        .await
        .map_err(|error| error.failure(max_output_bytes))?;
    let (session, side) = match back {
        Some(back) => (Some(back.headers), back.side),
        None => (None, None),
    };
    Ok(HttpReading {
        messages: Some(messages),
        listening: side.is_some(),
        session,
        side,
        heard: false,
        idle_resumes: 0,
        _span: span,
    })
}

/// The answer to a round written over Streamable HTTP.
pub(crate) struct HttpReading {
    /// The round's response stream (`None` once answered and released).
    messages: Option<Messages>,
    /// The session's headers; `None` on 2026-07-28, which has no way back.
    session: Option<HeaderMap>,
    /// The session's GET stream while it lasts.
    side: Option<Messages>,
    /// A GET stream was opened for the call.
    listening: bool,
    /// The GET stream has carried a message.
    heard: bool,
    idle_resumes: u32,
    /// The round's `tools/call` span, open while the round is read.
    _span: Span,
}

impl Reading for HttpReading {
    async fn next(&mut self, call: &Exchange<'_>) -> Result<Incoming, Failure> {
        let max_output_bytes = call.tool.binding.max_output_bytes;
        loop {
            let Some(messages) = self.messages.as_mut() else {
                return Err(Failure::broken(
                    "the server ended its response without a result; the tool may have run",
                ));
            };
            // The side stream first: an older server may send a call's progress there just
            // before the result arrives on the call's own stream.
            let next = tokio::select! {
                biased;
                side = next_side(&mut self.side) => {
                    self.heard = true;
                    // Progress and server requests only: the reply comes on the POST's stream.
                    if side.get("method").is_some() {
                        return Ok(Incoming::Side(side));
                    }
                    continue;
                }
                next = messages.next() => next,
            };
            let closed_early = matches!(next, None | Some(Err(ReadError::Transport(_))));
            if closed_early
                && messages.resumable()
                && let Some(headers) = &self.session
            {
                self.idle_resumes += 1;
                if self.idle_resumes > MAX_IDLE_RESUMES {
                    return Err(Failure::broken(format!(
                        "the server closed the response stream of tools/call {MAX_IDLE_RESUMES} \
                         times in a row without sending anything; brain stopped resuming it, and \
                         the tool may have run"
                    )));
                }
                let last_event_id = messages.last_event_id.clone().unwrap_or_default();
                let retry = messages.retry;
                // Boxed, as every rare request made while reading: a call in flight keeps only
                // what reading needs (memory per call in flight, `cargo xtask bench` T2/T3).
                let resumed = Box::pin(resume(call, headers, last_event_id, retry)).await?;
                self.messages = Some(resumed);
                continue;
            }
            return match next {
                None => Err(Failure::broken(
                    "the server ended its response without a result; the tool may have run",
                )),
                Some(Err(error)) => Err(error.failure(max_output_bytes)),
                Some(Ok(message)) => {
                    self.idle_resumes = 0;
                    Ok(Incoming::Message(message))
                }
            };
        }
    }

    async fn answer(&mut self, call: &Exchange<'_>, message: &Value) -> bool {
        let Some(headers) = &self.session else {
            return false;
        };
        Box::pin(call.endpoint.post(message, headers.clone()))
            .await
            .is_ok_and(|response| response.status().is_success())
    }

    fn answered(&mut self) -> bool {
        if let Some(messages) = self.messages.take() {
            messages.release();
        }
        self.listening && self.heard
    }

    async fn late(&mut self) -> Value {
        next_side(&mut self.side).await
    }
}

/// The next message of the session's GET stream; never completes when there is none (it
/// ended, failed or went over its bound: nothing more comes from it).
async fn next_side(side: &mut Option<Messages>) -> Value {
    if let Some(messages) = side.as_mut() {
        if let Some(Ok(message)) = messages.next().await {
            return message;
        }
        *side = None;
    }
    std::future::pending().await
}

/// Resumes the response stream of `tools/call` after the server closed it before the result
/// (Streamable HTTP resumability, SEP-1699): waits the server's `retry`, then GETs the stream
/// from the last event id. The call itself is never sent again.
async fn resume(
    call: &Exchange<'_>,
    headers: &HeaderMap,
    last_event_id: String,
    retry: Option<Duration>,
) -> Result<Messages, Failure> {
    tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY)).await;
    let response = call
        .endpoint
        .resume(headers.clone(), &last_event_id)
        .await
        .map_err(|error| {
            Failure::broken(format!(
                "the server closed the response stream of tools/call before its result, and \
                 resuming it failed: {}; the tool may have run",
                error_chain(&error)
            ))
        })?;
    let status: StatusCode = response.status();
    if !status.is_success() {
        return Err(Failure::broken(format!(
            "the server closed the response stream of tools/call before its result, and \
             refused to resume it (HTTP {status}); the tool may have run"
        )));
    }
    let mut resumed = Messages::read(response, call.tool.raw_limit())
        .await
        .map_err(|error| error.failure(call.tool.binding.max_output_bytes))?;
    resumed.last_event_id = Some(last_event_id);
    resumed.retry = retry;
    Ok(resumed)
}

/// One request of the call's MCP task (`tasks/get`, `tasks/result`, `tasks/update`) with
/// `headers` (a session's, or 2026-07-28's routing headers): POSTed once, its response read within the binding's byte bound (anything
/// else on its stream passed over). A request that does not reach the server, or whose answer
/// is lost, is the task's failure: the task was created, so the tool may have run. Notifications
/// before the answer go into `heard`.
pub(crate) async fn task_request(
    call: &Exchange<'_>,
    headers: HeaderMap,
    message: &Value,
    heard: &mut Vec<Value>,
) -> Result<Value, Failure> {
    let method = message["method"].as_str().unwrap_or("a task request");
    let headers_had_session = headers.contains_key(crate::wire::SESSION_HEADER);
    let lost = |what: String| {
        Failure::broken(format!(
            "{what}; the task was created, and the tool may have run"
        ))
    };
    let response = call
        .endpoint
        .post(message, headers)
        .await
        .map_err(|error| lost(format!("{method} failed: {}", error_chain(&error))))?;
    let status = response.status();
    if !status.is_success() {
        let gone = match status {
            StatusCode::NOT_FOUND if headers_had_session => {
                " (the server no longer knows the session the task lives in)"
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                " (the server refused this process's authorization for the task: a task is bound \
                 to the authorization context that created it, and this token is not it)"
            }
            _ => "",
        };
        return Err(lost(format!(
            "{method} got HTTP {status}{gone}{}",
            error_detail(response).await
        )));
    }
    let mut messages = Messages::read(response, call.tool.raw_limit())
        .await
        .map_err(|error| error.failure(call.tool.binding.max_output_bytes))?;
    loop {
        match messages.next().await {
            None => {
                return Err(lost(format!(
                    "the server ended its answer to {method} without one"
                )));
            }
            Some(Err(error)) => return Err(error.failure(call.tool.binding.max_output_bytes)),
            Some(Ok(answer))
                if answer.get("method").is_none() && answer.get("id") == message.get("id") =>
            {
                messages.release();
                return Ok(answer);
            }
            Some(Ok(note)) if note.get("id").is_none() && heard.len() < MAX_HEARD => {
                heard.push(note);
            }
            Some(Ok(_)) => {}
        }
    }
}
