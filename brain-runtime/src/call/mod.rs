//! One call's lifecycle, the same for every transport. This module decides the order; a
//! transport ([`Transport`]) supplies the steps and reports facts:
//!
//! 1. *gate* — `Runtime::call`, before this module runs: tool, tenant, token, arguments (a
//!    refusal does no I/O);
//! 2. *admit* ([`admit`]) — before anything is opened, and before the call's own timeout runs:
//!    the call journal answers a call id it has seen (a recorded result, a call running
//!    elsewhere, a call whose process died, a conflicting reuse) without contacting the server.
//!    A transport that opens nothing ([`Transport::OPENS`]) skips it, unless the binding runs
//!    its tool as a task (a retry may resume the task): its claim, next, meets a call id seen
//!    before and answers the same way, and a wait there for a call running elsewhere is bounded
//!    as admit's is. A call the policies hold for a person's approval is always admitted: for
//!    a new call, the journal's store looks up this very call's approval (approved: the claim
//!    uses it, in its own transaction; else a pending one is recorded and the call refused
//!    `approval_required`);
//!    Then the call's *limits* (`limited.rs`) are charged, once the journal has said the call
//!    is new — here, or in the claim's transaction where the claim is the journal's first look;
//!    a refusal does no I/O and is never journaled;
//! 3. *open* ([`Transport::open`]) — a session, a server process, or nothing; then *verify*
//!    ([`Transport::verify`], `pins.rs`) — that the server lists the tool as it was pinned, for
//!    a call the journal found new: under a verified, unexpired listing, or the call is refused
//!    (`pin_drift`, or not sent);
//! 4. *send* (`send.rs`) — the single point where the call becomes "sent" ([`send::claim`]:
//!    the journal's claim, committed durably), before the first byte of `tools/call` (or an
//!    HTTP tool's POST) leaves; then each round's
//!    write ([`Transport::write`]) — later rounds, and OAuth's re-POSTs of a refused request
//!    inside `wire::Endpoint`, happen within the send, never as new sends;
//! 5. *read* (`read.rs`) — what the write is answered with, in wire order: progress, server
//!    requests, the response; when the response is an MCP task (`task.rs`: 2025-11-25, and
//!    2026-07-28's tasks extension), its polling: `tasks/get` until it ends, its status as
//!    progress, then its result;
//! 6. *convert* (`convert.rs`) — the response into a `tool.result`;
//! 7. *classify* (`outcome.rs`) — a failure's facts into `unknown_outcome` and its kind;
//! 8. *clean up* ([`Transport::clean_up`]) — off the caller's path, tracked; so is the
//!    journal's record of the outcome.
//!
//! The whole exchange (3–6) is bounded by the binding's timeout and by cancellation.

mod exchange;
mod limited;
mod read;
mod rounds;
mod send;
mod task;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Span;

use crate::auth::Authorizing;
use crate::event::ToolResult;
use crate::http::HttpClient;
use crate::journal::{Admitted, TaskRecord, Ticket};
use crate::outcome::{Fact, Failure, Interruption, Kind};
use crate::tool::{Scope, Tool};
use crate::wire::Endpoint;

pub(crate) use exchange::{
    CONTROL_TIMEOUT, CallState, Events, Exchange, Incoming, MAX_HEARD, Reading, Transport,
    Withdrawal,
};
pub(crate) use limited::{CallLimits, Keeper};
pub(crate) use rounds::{CALL_ID, Round, call_message};

/// How much longer than the call's timeout the admit step may take, and a claim that met the
/// call running elsewhere: the wait for it lasts until its owner's deadline plus the
/// journal's grace (5 s).
const ADMIT_GRACE: Duration = Duration::from_secs(10);

/// A call the gate let through, as the runtime hands it to the lifecycle.
pub(crate) struct Started<'a> {
    /// The pooled client the call's requests go through (borrowed: a call in flight holds no
    /// copy of it; a cleanup that outlives the call takes its own).
    pub(crate) http: &'a HttpClient,
    /// The call's journal entry, when the runtime keeps a journal.
    pub(crate) ticket: Option<&'a Ticket>,
    /// The call's limits, when its binding or tenant has any.
    pub(crate) limits: Option<&'a CallLimits>,
    pub(crate) tool: Arc<Tool>,
    pub(crate) call_id: &'a str,
    pub(crate) scope: &'a Scope,
    /// The caller's own token, for a binding on behalf of users.
    pub(crate) subject: Option<&'a crate::subject::SubjectToken>,
    pub(crate) arguments: &'a Value,
    pub(crate) events: &'a Events,
    /// Cancelled when the caller drops or cancels the call.
    pub(crate) cancel: CancellationToken,
    /// Whether the caller withdrew the call (cancel unless sent), decided at the claim.
    pub(crate) withdrawal: &'a Withdrawal,
    /// Where the cleanup is spawned, tracked.
    pub(crate) cleanups: &'a TaskTracker,
    /// The call's span.
    pub(crate) span: &'a Span,
    /// The runtime's verified listings (`pins.rs`).
    pub(crate) pins: &'a Arc<crate::pins::Pins>,
}

/// Runs one call to its result: the phases in order, bounded by the timeout and by
/// cancellation; the outcome classified and recorded; then the transport's cleanup, off the
/// caller's path (tracked by `cleanups`).
pub(crate) async fn run<T: Transport>(transport: T, started: Started<'_>) -> ToolResult {
    let Started {
        http,
        ticket,
        limits,
        tool,
        call_id,
        scope,
        subject,
        arguments,
        events,
        cancel,
        withdrawal,
        cleanups,
        span,
        pins,
    } = started;
    let state = Mutex::new(CallState {
        tenant: scope.tenant_id.clone(),
        subject: subject.cloned(),
        ..CallState::default()
    });
    let timeout = Duration::from_secs(tool.binding.timeout_seconds);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut exchange = Exchange {
        endpoint: Endpoint {
            http,
            url: tool.binding.url.as_deref().unwrap_or_default(),
            auth: Authorizing {
                credentials: &tool.credentials,
                tenant: &scope.tenant_id,
                subject,
            },
            departure: Default::default(),
        },
        tool: &tool,
        call_id,
        scope,
        arguments,
        events,
        state: &state,
        deadline,
        span,
        ticket,
        claim_limits: None,
        withdrawal,
        pins,
    };
    let started = std::time::Instant::now();
    tracing::debug!(
        tool = %tool.binding.name,
        call_id,
        server = %tool.server(),
        pinned = tool.binding.pinned_revision().unwrap_or("any"),
        "call started"
    );
    let bounds = Bounds {
        timeout,
        deadline,
        cancel: &cancel,
        state: &state,
        departure: exchange.endpoint.departure.clone(),
        ticket,
    };
    let outcome = outcome(&transport, &mut exchange, limits, &bounds).await;
    let state = state.into_inner().unwrap_or_else(|p| p.into_inner());
    let completed = outcome.is_ok();
    let (result, kind) = classified(outcome, call_id);
    observed(
        &tool,
        span,
        call_id,
        &state,
        &result,
        kind,
        started.elapsed(),
    );
    if let Some(ticket) = ticket {
        if let Some(state) = ticket.state() {
            span.record("brain.journal.state", state.as_str());
        }
        ticket.settle(&result, completed, state.call_sent, cleanups.token());
    }
    if let Some(limits) = limits {
        limits.release().await;
    }
    clean_up(transport, http, tool, state, cleanups, span);
    result
}

/// What bounds a call — its timeout (and the deadline it sets), its caller's cancellation —
/// and what a call either interrupts is reported from: its state, its request's departure and
/// its journal entry.
struct Bounds<'a> {
    timeout: Duration,
    deadline: tokio::time::Instant,
    cancel: &'a CancellationToken,
    state: &'a Mutex<CallState>,
    departure: crate::http::Departure,
    ticket: Option<&'a Ticket>,
}

impl Bounds<'_> {
    /// Whether the call's claim met it running elsewhere (another caller runs this call id).
    fn elsewhere(&self) -> bool {
        self.ticket.is_some_and(Ticket::waiting)
    }

    /// The failure of a call interrupted by `by` (`what` says how), saying whether its request
    /// may have reached the server: settled from the call's state and its request's departure.
    fn interrupted(&self, by: Interruption, what: String) -> Failure {
        let claimed = self.state.lock().map(|s| s.call_sent).unwrap_or(true);
        let written = send::settle_interrupted(self.state, &self.departure);
        let message = if self.elsewhere() {
            format!("{what} while another caller ran this call id; the tool may have run")
        } else if written {
            format!("{what}; the request was cancelled and the tool may have run")
        } else if claimed {
            format!(
                "{what} before the request left: it waited for a connection (or a stream of \
                 the server's HTTP/2 connection) and was never sent"
            )
        } else {
            format!("{what} before tools/call was sent")
        };
        let written = written || self.elsewhere();
        Failure::new(Fact::Interrupted { by, written }, message)
    }

    /// The failure of a call its caller cancelled (or dropped).
    fn cancelled(&self) -> Failure {
        self.interrupted(
            Interruption::Cancelled,
            "the call was interrupted".to_owned(),
        )
    }
}

/// The call's outcome from admit to convert: admitted (the journal's answer, when it has seen
/// the call id) and its limits charged, then — unless answered or interrupted — exchanged.
async fn outcome<'a, T: Transport>(
    transport: &T,
    exchange: &mut Exchange<'a>,
    limits: Option<&'a CallLimits>,
    bounds: &Bounds<'_>,
) -> Result<ToolResult, Failure> {
    let ticket = exchange.ticket;
    // A task binding is admitted on every transport (a retry may take its task over), and so
    // is a call held for approval (its approval is looked up before anything is opened).
    let admits =
        T::OPENS || exchange.tool.binding.runs_as_task() || ticket.is_some_and(Ticket::is_held);
    // Limits are charged once the journal has decided the call is new: in the claim's
    // transaction where the claim is the journal's first look, else after admit, before open.
    let in_claim = ticket.is_some() && !admits;
    exchange.claim_limits = limits.filter(|_| in_claim);
    let admitted = admitted(ticket.filter(|_| admits), bounds).await;
    let admitted = match (admitted, limits.filter(|_| !in_claim)) {
        (Ok(Admitted::Go), Some(limits)) => charged(limits, bounds).await,
        (admitted, _) => admitted,
    };
    match admitted {
        Ok(Admitted::Answer(answer)) => Ok(answer),
        Err(failure) => Err(failure),
        Ok(admitted) => exchanged(transport, exchange, admitted, bounds).await,
    }
}

/// The admit phase ([`admit`], with `ticket` when the call is admitted here), bounded: by the
/// caller's cancellation, and by the call's timeout plus [`ADMIT_GRACE`] for a call journal
/// that stops answering.
async fn admitted(ticket: Option<&Ticket>, bounds: &Bounds<'_>) -> Result<Admitted, Failure> {
    // Before the call's own timeout: a call running elsewhere is waited for until its owner's
    // deadline (plus a grace), which the store bounds; this bounds a store that stops answering.
    let admit_bound = bounds.timeout + ADMIT_GRACE;
    tokio::select! {
        biased;
        admitted = tokio::time::timeout(admit_bound, Box::pin(admit(ticket)))
            => admitted.unwrap_or_else(|_| {
            Err(bounds.interrupted(
                Interruption::Timeout,
                format!("the call journal did not answer within {}s", admit_bound.as_secs()),
            ))
        }),
        () = bounds.cancel.cancelled() => Err(bounds.cancelled()),
    }
}

/// The call's limits charged after admit found the call new, bounded by the call's deadline
/// and by the caller's cancellation.
async fn charged(limits: &CallLimits, bounds: &Bounds<'_>) -> Result<Admitted, Failure> {
    tokio::select! {
        biased;
        charged = limits.admit() => charged.map(|()| Admitted::Go),
        () = tokio::time::sleep_until(bounds.deadline) => Err(bounds.interrupted(
            Interruption::Timeout,
            format!(
                "the call timed out after {}s waiting for its limits",
                bounds.timeout.as_secs()
            ),
        )),
        () = bounds.cancel.cancelled() => Err(bounds.cancelled()),
    }
}

/// The exchange of an admitted call ([`phases`]: open, send, read, convert), bounded by its
/// deadline and by the caller's cancellation. A call whose task this process takes over
/// ([`Admitted::Resume`]) keeps its original deadline; a claim that met the call running
/// elsewhere waits [`ADMIT_GRACE`] longer, as admit would.
async fn exchanged<T: Transport>(
    transport: &T,
    exchange: &mut Exchange<'_>,
    admitted: Admitted,
    bounds: &Bounds<'_>,
) -> Result<ToolResult, Failure> {
    let resume = match admitted {
        Admitted::Resume(resume) => Some(resume),
        _ => None,
    };
    // A resumed call keeps its original deadline.
    let deadline = match &resume {
        Some(resume) => tokio::time::Instant::now() + resume.remaining.min(bounds.timeout),
        None => bounds.deadline,
    };
    exchange.deadline = deadline;
    let exchange = &*exchange;
    // Pinned where it is made: `tokio::pin!` moves the future into a second local, and the
    // moved-from one keeps its space in this future's state too (the phases' size twice).
    let mut phases = std::pin::pin!(phases(
        transport,
        exchange,
        resume.as_ref().map(|r| &r.task)
    ));
    let mut until = deadline;
    loop {
        tokio::select! {
            biased;
            outcome = &mut phases => break outcome,
            () = tokio::time::sleep_until(until) => {
                // A claim that met the call running elsewhere waits as admit would.
                if bounds.elsewhere() && until == deadline {
                    until = deadline + ADMIT_GRACE;
                    continue;
                }
                break Err(bounds.interrupted(
                    Interruption::Timeout,
                    format!("the call timed out after {}s", bounds.timeout.as_secs()),
                ));
            }
            () = bounds.cancel.cancelled() => break Err(bounds.cancelled()),
        }
    }
}

/// The call's result and its kind (`None` for a success) from its outcome, as `outcome.rs`
/// classifies them; a result replayed from the journal keeps the kind it was recorded with.
fn classified(outcome: Result<ToolResult, Failure>, call_id: &str) -> (ToolResult, Option<Kind>) {
    match outcome {
        Ok(mut result) => {
            let kind = Kind::of_result(&result);
            // A result replayed from the journal keeps the kind it was recorded with.
            if result.kind.is_none() {
                result.kind = kind;
            }
            (result, kind)
        }
        Err(failure) => {
            let (result, kind) = failure.into_result(call_id);
            (result, Some(kind))
        }
    }
}

/// Records the ended call where it is observed: its span, its binding's instruments and the
/// debug log.
fn observed(
    tool: &Tool,
    span: &Span,
    call_id: &str,
    state: &CallState,
    result: &ToolResult,
    kind: Option<Kind>,
    elapsed: Duration,
) {
    let revision = state.revision;
    let error_type = kind.map(Kind::error_type);
    crate::telemetry::record_outcome(
        span,
        revision,
        state.session_id.as_deref(),
        // A JSON-RPC id exists only on MCP bindings.
        (state.call_sent && tool.binding.kind() == brain_config::BindingKind::Mcp)
            .then_some(state.request_id),
        error_type,
        result,
    );
    tool.instruments
        .ended(&tool.peer, revision, error_type, result, elapsed);
    tracing::debug!(
        call_id,
        revision = revision.unwrap_or("none"),
        is_error = result.is_error,
        unknown_outcome = result.unknown_outcome,
        elapsed_ms = elapsed.as_millis() as u64,
        "call ended"
    );
}

/// The clean-up phase: when the call left work (a session, a server process), the transport's
/// cleanup, spawned off the caller's path and tracked by `cleanups`.
fn clean_up<T: Transport>(
    transport: T,
    http: &HttpClient,
    tool: Arc<Tool>,
    state: CallState,
    cleanups: &TaskTracker,
    span: &Span,
) {
    if transport.leaves_work(&state) {
        let closing = crate::telemetry::phase("session close", None, span);
        let http = http.clone();
        cleanups.spawn(async move {
            let _closing = closing;
            transport.clean_up(http, tool, state).await
        });
    }
}

/// The phases between the gate and the cleanup, in order; for a call whose task this process
/// took over (`resume`), the reopened session and the task's polling.
async fn phases<T: Transport>(
    transport: &T,
    call: &Exchange<'_>,
    resume: Option<&TaskRecord>,
) -> Result<ToolResult, Failure> {
    // The phases that end before the call waits for its answer (resuming, opening) and the
    // rarely needed ones (a task's polling) are boxed: a call in flight then keeps only what
    // its send and read need, not the largest of every phase (memory per call in flight,
    // `cargo xtask bench` T2 and T3).
    if let Some(task) = resume {
        send::resumed(call);
        let opened = Box::pin(transport.resume(call, task)).await?;
        return Box::pin(task::follow(
            transport,
            call,
            &opened,
            task::Start::Recorded(&task.task_id),
        ))
        .await;
    }
    let opened = Box::pin(transport.open(call)).await?;
    let verified = if call.pins.enforced {
        Box::pin(transport.verify(call, &opened)).await
    } else {
        Ok(())
    };
    if let Err(failure) = verified {
        // Where the claim is the journal's first look, a call id it has seen is answered from
        // it: a replay of a completed call is never refused for drift.
        if let (false, Some(ticket)) = (T::OPENS, call.ticket)
            && let Admitted::Answer(answer) = ticket.admit().await?
        {
            return Ok(answer);
        }
        return Err(failure);
    }
    send::send(transport, call, &opened).await
}

/// The admit phase: whether the call is answered before anything is opened — by the journal,
/// when the runtime keeps one and has seen the call id. [`Admitted::Go`]: the call goes on to
/// open and send.
/// The admit step; for a call the journal found new that the policies hold, its approval.
async fn admit(ticket: Option<&Ticket>) -> Result<Admitted, Failure> {
    match ticket {
        Some(ticket) => match ticket.admit().await? {
            Admitted::Go => ticket.approve().await.map(|()| Admitted::Go),
            admitted => Ok(admitted),
        },
        None => Ok(Admitted::Go),
    }
}
