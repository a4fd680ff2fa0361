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
    /// The pooled client the call's requests go through.
    pub(crate) http: HttpClient,
    /// The call's journal entry, when the runtime keeps a journal.
    pub(crate) ticket: Option<&'a Ticket>,
    /// The call's limits, when its binding or tenant has any.
    pub(crate) limits: Option<&'a CallLimits>,
    pub(crate) tool: Arc<Tool>,
    pub(crate) call_id: &'a str,
    pub(crate) scope: &'a Scope,
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
        ..CallState::default()
    });
    let timeout = Duration::from_secs(tool.binding.timeout_seconds);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut exchange = Exchange {
        endpoint: Endpoint {
            http: &http,
            url: tool.binding.url.as_deref().unwrap_or_default(),
            auth: Authorizing {
                credentials: &tool.credentials,
                tenant: &scope.tenant_id,
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
    let elsewhere = || ticket.is_some_and(Ticket::waiting);
    let departure = exchange.endpoint.departure.clone();
    let interrupted = |by: Interruption, what: String| {
        let claimed = state.lock().map(|s| s.call_sent).unwrap_or(true);
        let written = send::settle_interrupted(&state, &departure);
        let message = if elsewhere() {
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
        let written = written || elsewhere();
        Failure::new(Fact::Interrupted { by, written }, message)
    };
    // Before the call's own timeout: a call running elsewhere is waited for until its owner's
    // deadline (plus a grace), which the store bounds; this bounds a store that stops answering.
    let admit_bound = timeout + ADMIT_GRACE;
    // A task binding is admitted on every transport (a retry may take its task over), and so
    // is a call held for approval (its approval is looked up before anything is opened).
    let admits = T::OPENS || tool.binding.runs_as_task() || ticket.is_some_and(Ticket::is_held);
    // Limits are charged once the journal has decided the call is new: in the claim's
    // transaction where the claim is the journal's first look, else after admit, before open.
    let in_claim = ticket.is_some() && !admits;
    exchange.claim_limits = limits.filter(|_| in_claim);
    let admitted = tokio::select! {
        biased;
        admitted = tokio::time::timeout(admit_bound, Box::pin(admit(ticket.filter(|_| admits))))
            => admitted.unwrap_or_else(|_| {
            Err(interrupted(
                Interruption::Timeout,
                format!("the call journal did not answer within {}s", admit_bound.as_secs()),
            ))
        }),
        () = cancel.cancelled() => Err(interrupted(
            Interruption::Cancelled,
            "the call was interrupted".to_owned(),
        )),
    };
    let admitted = match (admitted, limits.filter(|_| !in_claim)) {
        (Ok(Admitted::Go), Some(limits)) => tokio::select! {
            biased;
            charged = limits.admit() => charged.map(|()| Admitted::Go),
            () = tokio::time::sleep_until(deadline) => Err(interrupted(
                Interruption::Timeout,
                format!("the call timed out after {}s waiting for its limits", timeout.as_secs()),
            )),
            () = cancel.cancelled() => Err(interrupted(
                Interruption::Cancelled,
                "the call was interrupted".to_owned(),
            )),
        },
        (admitted, _) => admitted,
    };
    let outcome = match admitted {
        Ok(Admitted::Answer(answer)) => Ok(answer),
        Err(failure) => Err(failure),
        Ok(admitted) => {
            let resume = match admitted {
                Admitted::Resume(resume) => Some(resume),
                _ => None,
            };
            // A resumed call keeps its original deadline.
            let deadline = match &resume {
                Some(resume) => tokio::time::Instant::now() + resume.remaining.min(timeout),
                None => deadline,
            };
            exchange.deadline = deadline;
            let exchange = &exchange;
            let phases = phases(&transport, exchange, resume.as_ref().map(|r| &r.task));
            tokio::pin!(phases);
            let mut until = deadline;
            loop {
                tokio::select! {
                    biased;
                    outcome = &mut phases => break outcome,
                    () = tokio::time::sleep_until(until) => {
                        // A claim that met the call running elsewhere waits as admit would.
                        if elsewhere() && until == deadline {
                            until = deadline + ADMIT_GRACE;
                            continue;
                        }
                        break Err(interrupted(
                            Interruption::Timeout,
                            format!("the call timed out after {}s", timeout.as_secs()),
                        ));
                    }
                    () = cancel.cancelled() => break Err(interrupted(
                        Interruption::Cancelled,
                        "the call was interrupted".to_owned(),
                    )),
                }
            }
        }
    };
    let state = state.into_inner().unwrap_or_else(|p| p.into_inner());
    let revision = state.revision;
    let completed = outcome.is_ok();
    let (result, kind) = match outcome {
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
    };
    let error_type = kind.map(Kind::error_type);
    let elapsed = started.elapsed();
    crate::telemetry::record_outcome(
        span,
        revision,
        state.session_id.as_deref(),
        // A JSON-RPC id exists only on MCP bindings.
        (state.call_sent && tool.binding.kind() == brain_config::BindingKind::Mcp)
            .then_some(state.request_id),
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
    if let Some(ticket) = ticket {
        if let Some(state) = ticket.state() {
            span.record("brain.journal.state", state.as_str());
        }
        ticket.settle(&result, completed, state.call_sent, cleanups.token());
    }
    if let Some(limits) = limits {
        limits.release().await;
    }
    if transport.leaves_work(&state) {
        let closing = crate::telemetry::phase("session close", None, span);
        cleanups.spawn(async move {
            let _closing = closing;
            transport.clean_up(http, tool, state).await
        });
    }
    result
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
