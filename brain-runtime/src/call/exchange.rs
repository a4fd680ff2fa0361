//! What every phase of a call works with: the call's [`Exchange`] and [`CallState`], and the two
//! traits a transport implements — [`Transport`] (its steps) and [`Reading`] (how a written
//! round is read).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tracing::Span;

use super::rounds::{Round, call_message};
use crate::event::{Event, ToolResult};
use crate::http::HttpClient;
use crate::journal::{TaskRecord, Ticket};
use crate::outcome::Failure;
use crate::tool::{Scope, Tool};
use crate::wire::Endpoint;

/// Bound on the requests that clean up after a call (cancel, DELETE) and on answers to server
/// requests.
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// At most this many notifications are kept from the stream of one task request (the rest are
/// passed over).
pub(crate) const MAX_HEARD: usize = 256;

/// What the cleanup after a call needs to know.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    /// The session the server assigned, to DELETE afterwards.
    pub(crate) session_id: Option<String>,
    /// The calling tenant (the cleanup's requests are authorized for it).
    pub(crate) tenant: String,
    /// The caller's own token, for a binding on behalf of users (the cleanup's requests carry
    /// the token issued for that user, never another's).
    pub(crate) subject: Option<crate::subject::SubjectToken>,
    /// The revision the call is made at, once known.
    pub(crate) revision: Option<&'static str>,
    /// The call was claimed as sent (`send::claim`): from here on, a failure may have an
    /// unknown outcome. Reset when the server cannot have seen it.
    pub(crate) call_sent: bool,
    /// The JSON-RPC id of the last `tools/call` written.
    pub(crate) request_id: u64,
    /// The call's response arrived: nothing to cancel.
    pub(crate) answered: bool,
    /// Server requests received during the call (see `read::MAX_SERVER_REQUESTS`).
    pub(crate) server_requests: usize,
    /// The call's MCP task while it has not ended: the cleanup cancels it (`tasks/cancel`).
    pub(crate) task: Option<String>,
    /// The server declared no way to cancel a task (2025-11-25 without `tasks.cancel`).
    pub(crate) task_uncancellable: bool,
}

/// Where a call's events go: boxed, so that the channel's first block of 32 slots holds
/// pointers, not events (about 3 KiB less per call in flight; P5' measured about 2 MB less for
/// 1,000 calls).
pub(crate) type Events = mpsc::Sender<Box<Event>>;

/// Everything one call's exchange uses.
pub(crate) struct Exchange<'a> {
    pub(crate) endpoint: Endpoint<'a>,
    pub(crate) tool: &'a Arc<Tool>,
    pub(crate) call_id: &'a str,
    pub(crate) scope: &'a Scope,
    pub(crate) arguments: &'a Value,
    pub(crate) events: &'a Events,
    pub(crate) state: &'a Mutex<CallState>,
    /// When the call times out.
    pub(crate) deadline: tokio::time::Instant,
    /// The call's span: its phases' parent.
    pub(crate) span: &'a Span,
    /// The call's journal entry, when the runtime keeps a journal.
    pub(crate) ticket: Option<&'a Ticket>,
    /// The call's limits, when they are charged in the claim's transaction (the claim is the
    /// journal's first look at the call).
    pub(crate) claim_limits: Option<&'a super::limited::CallLimits>,
    /// The caller's withdrawal, decided against the claim.
    pub(crate) withdrawal: &'a Withdrawal,
    /// The runtime's verified listings (`pins.rs`).
    pub(crate) pins: &'a Arc<crate::pins::Pins>,
}

/// How a call travels: the steps one transport supplies to the lifecycle. A transport reports
/// facts ([`Failure`]'s [`Fact`]); it never decides the order of the phases or a failure's
/// `unknown_outcome`.
pub(crate) trait Transport: Send + Sync + 'static {
    /// What opening leaves for the writes: a session's headers, a process, nothing.
    type Opened: Send + Sync;
    /// What a written round is read from.
    type Reading: Reading;

    /// Opens what the call travels on (initialize, a process, nothing), and records the
    /// revision the call is made at in the call's state. Nothing here is `tools/call`.
    fn open(
        &self,
        call: &Exchange<'_>,
    ) -> impl Future<Output = Result<Self::Opened, Failure>> + Send;

    /// Whether [`Transport::open`] does anything (a session, a process) that a call the
    /// journal answers should be spared: then the journal is asked at *admit*, before opening;
    /// when not, the claim at the send point, which meets a call id seen before, answers alone
    /// (one statement a call rather than two).
    const OPENS: bool = true;

    /// Verifies, after [`Transport::open`] and before the send, that the server lists the
    /// call's tool as it was pinned (`pins.rs`): [`Fact::PinDrift`](crate::outcome::Fact::PinDrift)
    /// when it does not, a setup failure when no listing could be taken. Asked only for a call
    /// the journal found new (or, where the claim is the journal's first look, answered by the
    /// journal first when it refuses). HTTP tools have no listing.
    fn verify(
        &self,
        _call: &Exchange<'_>,
        _opened: &Self::Opened,
    ) -> impl Future<Output = Result<(), Failure>> + Send {
        std::future::ready(Ok(()))
    }

    /// Writes the round's request (MCP `tools/call`, or an HTTP tool's POST) once; a request
    /// refused for its token is re-sent inside, at most once per kind of refusal. Called only
    /// after the send point.
    fn write(
        &self,
        call: &Exchange<'_>,
        opened: &Self::Opened,
        round: &Round,
    ) -> impl Future<Output = Result<Self::Reading, Failure>> + Send;

    /// Sends one request of the call's MCP task (`tasks/get`, `tasks/result`, `tasks/update`)
    /// on what [`Transport::open`] opened, and returns the JSON-RPC response to it; the
    /// notifications that came before it on its stream go into `heard` (at most [`MAX_HEARD`]).
    /// A transport that cannot carry tasks says so (a binding's check refuses tasks there
    /// first).
    fn request(
        &self,
        _call: &Exchange<'_>,
        _opened: &Self::Opened,
        _message: &Value,
        _heard: &mut Vec<Value>,
    ) -> impl Future<Output = Result<Value, Failure>> + Send {
        std::future::ready(Err(Failure::broken(
            "this transport cannot carry MCP tasks; the tool may have run",
        )))
    }

    /// Reopens what a call whose MCP task `task` this process took over travels on (at
    /// 2025-11-25, the recorded session, without a new initialize), and records the session
    /// and revision in the call's state. The call was sent: a failure is `Failure::broken`. A
    /// transport whose tasks end with their process cannot resume one.
    fn resume(
        &self,
        _call: &Exchange<'_>,
        task: &TaskRecord,
    ) -> impl Future<Output = Result<Self::Opened, Failure>> + Send {
        std::future::ready(Err(Failure::broken(format!(
            "task {} cannot be resumed on this transport; the tool may have run",
            task.task_id
        ))))
    }

    /// Whether the call left anything for [`Transport::clean_up`] to do (when not, no cleanup
    /// task is spawned).
    fn leaves_work(&self, _state: &CallState) -> bool {
        true
    }

    /// After the call (answered, failed, timed out or interrupted): cancels what is still
    /// running on the server and closes what the call opened, bounded by [`CONTROL_TIMEOUT`].
    fn clean_up(
        self,
        http: HttpClient,
        tool: Arc<Tool>,
        state: CallState,
    ) -> impl Future<Output = ()> + Send;
}

/// One thing a transport read after writing a round.
pub(crate) enum Incoming {
    /// A JSON-RPC message on the round's own stream (or pipe).
    Message(Value),
    /// A message from another stream the transport listens on during the call (a session's GET
    /// stream): progress and server requests only, never the response.
    Side(Value),
    /// Progress in an HTTP or SSE tool's own form (`progress`, `total`, `message`; no token).
    Progress(Value),
    /// An HTTP or SSE tool's result, converted.
    Result(ToolResult),
}

/// The answer to one written round, as a transport reads it.
pub(crate) trait Reading: Send {
    /// The next thing read; a failure ends the call (its message says how the stream ended).
    fn next(
        &mut self,
        call: &Exchange<'_>,
    ) -> impl Future<Output = Result<Incoming, Failure>> + Send;

    /// Sends `message` (an answer to a server request) to the server; `false` when the
    /// transport has no way to (2026-07-28, an HTTP tool).
    fn answer(
        &mut self,
        _call: &Exchange<'_>,
        _message: &Value,
    ) -> impl Future<Output = bool> + Send {
        std::future::ready(false)
    }

    /// The response is in: releases what it was read on, and says whether a side stream has
    /// carried the call's messages (progress sent there just before the result may still be on
    /// its way).
    fn answered(&mut self) -> bool {
        false
    }

    /// The next message of the side stream, after [`Reading::answered`]; never completes when
    /// there is none.
    fn late(&mut self) -> impl Future<Output = Value> + Send {
        std::future::pending()
    }
}

impl Exchange<'_> {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, CallState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn url(&self) -> &str {
        self.endpoint.url
    }

    /// What verifying the call's tool needs of it (`pins.rs`).
    pub(crate) fn verifying(&self) -> crate::pins::Verifying<'_> {
        crate::pins::Verifying {
            endpoint: &self.endpoint,
            span: self.span,
        }
    }

    /// The span of `round`'s `tools/call`, a child of the call's.
    pub(crate) fn round_span(&self, round: &Round) -> Span {
        crate::telemetry::phase("tools/call", Some(round.request_id()), self.span)
    }

    /// The `tools/call` message of `round`, with the revision's own `_meta` entries and the
    /// trace context of `span`, the round's.
    pub(crate) fn tools_call(
        &self,
        mut meta: Map<String, Value>,
        round: &Round,
        span: &Span,
    ) -> Value {
        crate::telemetry::inject(&mut meta, span);
        // A task binding asks for a task: at 2026-07-28 by declaring the tasks extension (the
        // server decides), on a session revision with the `task` parameter.
        let stateless = crate::mcp::is_stateless_meta(&meta);
        let task = self.tool.binding.runs_as_task();
        if task && stateless {
            crate::mcp::declare_tasks(&mut meta);
        }
        call_message(
            &self.tool.binding,
            self.call_id,
            self.scope,
            self.arguments,
            meta,
            round,
            task && !stateless,
        )
    }

    /// Why the server may have refused a request with `status`, for the failure's message.
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

/// A caller's withdrawal of a call, against its claim: whichever comes first wins. A
/// withdrawal before the claim refuses the claim (the call is cancelled, not sent); a claim
/// first makes the withdrawal a no-op (the call runs to its result).
#[derive(Debug, Default)]
pub(crate) struct Withdrawal {
    claimed: std::sync::atomic::AtomicBool,
    withdrawn: std::sync::atomic::AtomicBool,
}

impl Withdrawal {
    /// Withdraws; whether the call is not claimed (so it must be cancelled).
    pub(crate) fn withdraw(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.withdrawn.store(true, SeqCst);
        !self.claimed.load(SeqCst)
    }

    /// At the claim: whether the call may be claimed (it was not withdrawn first).
    pub(crate) fn claim(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.claimed.store(true, SeqCst);
        !self.withdrawn.load(SeqCst)
    }

    /// A claim that did not happen (a limit refused it, and the call waits): a withdrawal may
    /// cancel the call again. Whether the call is still wanted (not withdrawn meanwhile).
    pub(crate) fn release(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.claimed.store(false, SeqCst);
        !self.withdrawn.load(SeqCst)
    }
}
