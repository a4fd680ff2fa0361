//! The session transport (MCP 2024-11-05 to 2025-11-25): a fresh session per call —
//! initialize, `notifications/initialized`, `tools/call` on the session (server requests answered
//! on it, a closed response stream resumed: `streamable.rs`), then `notifications/cancelled` if
//! the call is still unanswered, and DELETE. Discovery opens and closes its sessions here too.
//!
//! Revisions: a binding that pins one offers it and requires exactly it; a binding that pins none
//! offers the newest session revision and accepts any brain speaks, or — when the server refuses
//! sessions and supports 2026-07-28 — goes on without a session, before `tools/call` was ever
//! sent (and its later calls go there at once).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use crate::call::{CALL_ID, CONTROL_TIMEOUT, CallState, Exchange, Round, Transport};
use crate::http::{HttpClient, HttpError};
use crate::journal::TaskRecord;
use crate::mcp::{INIT_ID, rpc_error_text, stateless_supported};
use crate::outcome::{Fact, Failure};
use crate::revision;
use crate::tool::Tool;
use crate::transport::streamable::{self, HttpReading, McpHttp};
use crate::wire::{Endpoint, Messages, SESSION_HEADER, error_chain, error_object};

/// The JSON-RPC id of the cleanup's `tasks/cancel`.
const CANCEL_ID: u64 = 99;
/// Bound on the body of an initialize response.
const INIT_LIMIT: u64 = 1024 * 1024;
/// How long initialize's response stream may take to end after its answer before the session
/// goes on without waiting (the rest is read off the call's path).
const INIT_STREAM_END: std::time::Duration = std::time::Duration::from_millis(20);
/// Sessions at revisions before this one also listen on the session's GET stream during the
/// call: SDKs of that era (the Python SDK's `ctx.report_progress` in mcp 1.x) send a call's
/// progress there instead of on the call's own stream.
const LISTEN_BEFORE: &str = "2025-11-25";
/// Bound on opening that GET stream: a server that does not answer it in time is called without.
const LISTEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The session transport, for one call.
pub(crate) struct Session {
    pub(crate) route: Arc<McpHttp>,
}

/// What the open phase left.
pub(crate) enum Opened {
    /// A session; `headers` go on every later request of it; `side` is its GET stream, when
    /// listened to.
    Session {
        headers: HeaderMap,
        side: Mutex<Option<Messages>>,
    },
    /// The server refused a session and supports 2026-07-28 (only when the binding pins none).
    Stateless,
}

impl Transport for Session {
    type Opened = Opened;
    type Reading = HttpReading;

    /// Against the upstream's verified listing (`pins.rs`), taken on this session when it
    /// expired or was never taken.
    async fn verify(&self, call: &Exchange<'_>, opened: &Opened) -> Result<(), Failure> {
        let session = match opened {
            Opened::Session { headers, .. } => Some(headers),
            Opened::Stateless => None,
        };
        call.pins
            .verify_http(call.verifying(), call.tool, session)
            .await
    }

    async fn open(&self, call: &Exchange<'_>) -> Result<Opened, Failure> {
        let opening = crate::telemetry::phase("initialize", Some(INIT_ID), call.span);
        let pinned = call.tool.binding.pinned_revision();
        let (session_id, opened) = initialize(&call.endpoint, pinned, &opening).await;
        call.state().session_id = session_id;
        let session = match opened {
            Ok(session) => session,
            Err(OpenError::StatelessOnly(_)) => {
                self.route.stateless_only.store(true, Ordering::Relaxed);
                // No session was opened: nothing to cancel on or close afterwards.
                let mut state = call.state();
                state.session_id = None;
                state.revision = Some(revision::STATELESS);
                return Ok(Opened::Stateless);
            }
            Err(error) => return Err(error.failure(call)),
        };
        {
            let mut state = call.state();
            state.revision = Some(session.revision);
            state.task_uncancellable = !session.cancels_tasks;
        }
        if call.tool.binding.runs_as_task() && !session.tasks {
            return Err(Failure::new(
                Fact::SetupFailed,
                "the server no longer declares that it runs tool calls as tasks \
                 (`tasks.requests.tools.call`), and the binding calls its tool as one; \
                 tools/call was not sent: re-run `cargo xtask discover`",
            ));
        }
        initialized(&call.endpoint, &session.headers)
            .await
            .map_err(|error| match error {
                OpenError::Post(error) => Failure::new(
                    Fact::SetupFailed,
                    format!("session setup failed: {}", error_chain(&error)),
                ),
                OpenError::Status { status, .. } => Failure::new(
                    Fact::SetupFailed,
                    format!("session setup failed: notifications/initialized got HTTP {status}"),
                ),
                error => error.failure(call),
            })?;
        drop(opening);
        let side = if session.revision < LISTEN_BEFORE {
            listen(call, &session.headers).await
        } else {
            None
        };
        Ok(Opened::Session {
            headers: session.headers,
            side: Mutex::new(side),
        })
    }

    async fn write(
        &self,
        call: &Exchange<'_>,
        opened: &Opened,
        round: &Round,
    ) -> Result<HttpReading, Failure> {
        match opened {
            Opened::Session { headers, side } => {
                let side = side.lock().unwrap_or_else(|p| p.into_inner()).take();
                let back = streamable::BackChannel {
                    headers: headers.clone(),
                    side,
                };
                streamable::write(call, headers.clone(), Map::new(), round, Some(back)).await
            }
            Opened::Stateless => streamable::write_stateless(call, &self.route, round).await,
        }
    }

    async fn request(
        &self,
        call: &Exchange<'_>,
        opened: &Opened,
        message: &Value,
        heard: &mut Vec<Value>,
    ) -> Result<Value, Failure> {
        match opened {
            Opened::Session { headers, .. } => {
                streamable::task_request(call, headers.clone(), message, heard).await
            }
            Opened::Stateless => Err(Failure::broken(
                "a 2026-07-28 call cannot carry a 2025-11-25 task; the tool may have run",
            )),
        }
    }

    /// The recorded session, as it was: its id and revision header on every request, no
    /// initialize (a new session would not know the task), no GET stream.
    async fn resume(&self, call: &Exchange<'_>, task: &TaskRecord) -> Result<Opened, Failure> {
        let revision = revision::SESSIONS
            .iter()
            .find(|revision| **revision == task.revision);
        let session = task
            .session
            .as_deref()
            .and_then(|session| Some((session, HeaderValue::from_str(session).ok()?)));
        let (Some(revision), Some((session, value))) = (revision, session) else {
            return Err(Failure::broken(format!(
                "task {} was recorded without a session (revision {:?}) it can be followed in; \
                 the tool may have run",
                task.task_id, task.revision
            )));
        };
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(SESSION_HEADER), value);
        revision::set_protocol_header(&mut headers, revision);
        let mut state = call.state();
        state.session_id = Some(session.to_owned());
        state.revision = Some(revision);
        Ok(Opened::Session {
            headers,
            side: Mutex::new(None),
        })
    }

    /// Cancels an unanswered `tools/call` (or a task that has not ended) and closes the session,
    /// bounded in time.
    async fn clean_up(self, http: HttpClient, tool: Arc<Tool>, state: CallState) {
        let Some(session) = state
            .session_id
            .as_deref()
            .and_then(|s| HeaderValue::from_str(s).ok())
        else {
            return;
        };
        let endpoint = streamable::cleanup_endpoint(&http, &tool, &state);
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(SESSION_HEADER), session);
        if let Some(revision) = state.revision {
            revision::set_protocol_header(&mut headers, revision);
        }
        // A server that declared no `tasks.cancel` is not asked: the task runs on.
        if let Some(task) = state.task.as_ref().filter(|_| !state.task_uncancellable) {
            let cancel = crate::mcp::task_request(CANCEL_ID, "tasks/cancel", task, state.revision);
            let _ = tokio::time::timeout(CONTROL_TIMEOUT, endpoint.post(&cancel, headers.clone()))
                .await;
        }
        let unanswered =
            (state.call_sent && !state.answered).then_some(state.request_id.max(CALL_ID));
        close(&endpoint, headers, unanswered).await;
    }
}

/// Ends a session: `notifications/cancelled` for `unanswered`, then DELETE, within
/// [`CONTROL_TIMEOUT`].
pub(crate) async fn close(endpoint: &Endpoint<'_>, headers: HeaderMap, unanswered: Option<u64>) {
    let work = async {
        if let Some(request_id) = unanswered {
            let _ = endpoint
                .post(&crate::mcp::cancelled(request_id), headers.clone())
                .await;
        }
        endpoint.delete(headers).await;
    };
    let _ = tokio::time::timeout(CONTROL_TIMEOUT, work).await;
}

/// A session initialize opened.
pub(crate) struct Initialized {
    /// What goes on every later request of the session: its id, the revision's header.
    pub(crate) headers: HeaderMap,
    /// The revision the session speaks.
    pub(crate) revision: &'static str,
    /// The server declared that it runs tool calls as tasks (`tasks.requests.tools.call`).
    pub(crate) tasks: bool,
    /// The server declared that it accepts `tasks/cancel` (`tasks.cancel`).
    pub(crate) cancels_tasks: bool,
}

/// Why a session could not be opened, as facts each caller words (a call, discovery).
pub(crate) enum OpenError {
    /// The POST failed: no connection, no usable token.
    Post(HttpError),
    /// The server answered with an error status, and this JSON-RPC error if its body had one.
    Status {
        status: StatusCode,
        error: Option<Value>,
    },
    /// The answer could not be read.
    Read(String),
    /// The response ended without an answer to initialize.
    Unanswered,
    /// initialize was answered with this JSON-RPC error.
    Rpc(Value),
    /// The server refused sessions with this error and supports 2026-07-28 (only when no
    /// revision is pinned).
    StatelessOnly(Value),
    /// The server offered a revision brain does not accept: `why`, and what it offered.
    Revision {
        offered: Option<String>,
        why: String,
    },
}

impl OpenError {
    /// The call's failure (nothing was sent).
    fn failure(self, call: &Exchange<'_>) -> Failure {
        let setup =
            |what: String| Failure::new(Fact::SetupFailed, format!("session setup failed: {what}"));
        match self {
            OpenError::Post(HttpError::Auth(why)) => Failure::new(
                Fact::Unreachable,
                format!("session setup failed: no usable token: {why}"),
            ),
            OpenError::Post(error) => Failure::new(
                Fact::Unreachable,
                format!(
                    "could not connect to {}: {}",
                    call.url(),
                    error_chain(&error)
                ),
            ),
            OpenError::Status { status, error } => {
                let detail = error
                    .map(|error| format!(": {}", rpc_error_text(&error)))
                    .unwrap_or_default();
                Failure::new(
                    Fact::SetupFailed,
                    format!(
                        "the server refused to open a session: HTTP {status}{}{detail}",
                        call.auth_hint(status),
                    ),
                )
            }
            OpenError::Read(what) => setup(what),
            OpenError::Unanswered => setup("no answer to initialize".to_owned()),
            OpenError::Rpc(error) | OpenError::StatelessOnly(error) => {
                setup(format!("initialize failed: {}", rpc_error_text(&error)))
            }
            OpenError::Revision { why, .. } => setup(format!("the server {why}")),
        }
    }
}

/// Opens a session: initialize offering the binding's `pinned` revision (exactly), or the
/// newest session revision with any revision brain speaks accepted. Returns the session id the
/// server assigned (even when opening then failed: it is closed afterwards) and the session.
pub(crate) async fn initialize(
    endpoint: &Endpoint<'_>,
    pinned: Option<&str>,
    span: &tracing::Span,
) -> (Option<String>, Result<Initialized, OpenError>) {
    let offer = pinned.unwrap_or(revision::SESSIONS[0]);
    let request = crate::mcp::initialize(offer, span);
    let response = match endpoint.post(&request, HeaderMap::new()).await {
        Ok(response) => response,
        Err(error) => return (None, Err(OpenError::Post(error))),
    };
    let session = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let opened = read_initialized(response, pinned, session.as_deref()).await;
    (session, opened)
}

async fn read_initialized(
    response: crate::http::Response,
    pinned: Option<&str>,
    session: Option<&str>,
) -> Result<Initialized, OpenError> {
    let status = response.status();
    if !status.is_success() {
        let error = error_object(response).await;
        if let Some(error) = error
            .as_ref()
            .filter(|error| pinned.is_none() && stateless_supported(error))
        {
            return Err(OpenError::StatelessOnly(error.clone()));
        }
        return Err(OpenError::Status { status, error });
    }
    let mut messages = Messages::read(response, INIT_LIMIT)
        .await
        .map_err(|error| OpenError::Read(error.to_string()))?;
    let result = loop {
        let message = match messages.next().await {
            None => return Err(OpenError::Unanswered),
            Some(Err(error)) => return Err(OpenError::Read(error.to_string())),
            Some(Ok(message)) => message,
        };
        if message.get("id") != Some(&json!(INIT_ID)) || message.get("method").is_some() {
            continue;
        }
        if let Some(error) = message.get("error") {
            if pinned.is_none() && stateless_supported(error) {
                return Err(OpenError::StatelessOnly(error.clone()));
            }
            return Err(OpenError::Rpc(error.clone()));
        }
        break message.get("result").cloned().unwrap_or_default();
    };
    // The stream ends right after the answer: once it has, `notifications/initialized` and
    // `tools/call` reuse its connection (a connection per request costs more than the call).
    messages.finish(INIT_STREAM_END).await;
    let offered = result.get("protocolVersion").and_then(Value::as_str);
    let revision = revision::accept(pinned, offered.unwrap_or("(none)")).map_err(|why| {
        OpenError::Revision {
            offered: offered.map(str::to_owned),
            why,
        }
    })?;
    let mut headers = HeaderMap::new();
    if let Some(session) = session
        && let Ok(value) = HeaderValue::from_str(session)
    {
        headers.insert(HeaderName::from_static(SESSION_HEADER), value);
    }
    revision::set_protocol_header(&mut headers, revision);
    let tasks = result["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object();
    let cancels_tasks = result["capabilities"]["tasks"]["cancel"].is_object();
    Ok(Initialized {
        headers,
        revision,
        tasks,
        cancels_tasks,
    })
}

/// `notifications/initialized` on the session `headers` name.
pub(crate) async fn initialized(
    endpoint: &Endpoint<'_>,
    headers: &HeaderMap,
) -> Result<(), OpenError> {
    let response = endpoint
        .post(&crate::mcp::initialized(), headers.clone())
        .await
        .map_err(OpenError::Post)?;
    let status = response.status();
    if !status.is_success() {
        return Err(OpenError::Status {
            status,
            error: None,
        });
    }
    Ok(())
}

/// Opens the session's GET stream, where older servers send a call's progress; `None` when the
/// server offers none (405) or it cannot be opened within [`LISTEN_TIMEOUT`]. Its bytes are
/// bounded like the call's.
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
