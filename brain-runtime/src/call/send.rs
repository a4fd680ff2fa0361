//! The send phase: the single point where a call becomes "sent", on every transport, and the
//! rounds written after it.
//!
//! [`claim`] runs once per call, after the transport opened what the call travels on and before
//! the first byte of `tools/call` (or an HTTP tool's POST) leaves. It is the at-most-once point:
//! nothing else marks a call sent. It is async and fallible, so that a claim which cannot be
//! recorded refuses the call before anything is written. Later rounds (2026-07-28
//! `input_required`) are written inside this phase, not as new sends; so are OAuth's re-POSTs of
//! a request the server refused for its token (`wire::Endpoint`).

use super::exchange::{Exchange, Transport};
use super::rounds::{Reply, Round, Rounds};
use crate::event::ToolResult;
use crate::journal::Claiming;
use crate::outcome::{Fact, Failure, Interruption};
use crate::revision::STATELESS;

/// Claims the call as sent: from here on a failure may leave the tool's outcome unknown. With a
/// journal, the claim is committed to it first (a claim that cannot be recorded refuses the
/// call); a caller that finds the call id claimed by another gets the journal's answer
/// instead, and sends nothing. Where the claim is the journal's first look at the call, its
/// limits are charged in the claim's transaction (a refusal sends and records nothing).
pub(crate) async fn claim(call: &Exchange<'_>) -> Result<Option<ToolResult>, Failure> {
    let withdrawn = || {
        Failure::new(
            Fact::Interrupted {
                by: Interruption::Cancelled,
                written: false,
            },
            "the call was withdrawn (its client's session ended) before tools/call was sent",
        )
    };
    if !call.withdrawal.claim() {
        return Err(withdrawn());
    }
    if let Some(ticket) = call.ticket {
        let claimed = match call.claim_limits {
            None => ticket.claim(None).await?,
            // Charged in the claim's transaction, waited for as the binding allows.
            Some(limits) => {
                limits
                    .waiting(|| async {
                        // Each attempt is a claim: a withdrawal while the limit is waited for
                        // (released below) is decided against the next one.
                        if !call.withdrawal.claim() {
                            return Err(withdrawn());
                        }
                        let charge = |owner: &str| limits.charge(owner);
                        Ok(match ticket.claim(Some(&charge)).await? {
                            Claiming::Refused(refusals) => {
                                if !call.withdrawal.release() {
                                    return Err(withdrawn());
                                }
                                Err(refusals)
                            }
                            claimed => {
                                if let Claiming::Claimed = claimed {
                                    limits.charged();
                                }
                                Ok(claimed)
                            }
                        })
                    })
                    .await?
            }
        };
        if let Claiming::Answer(answer) = claimed {
            return Ok(Some(answer));
        }
    }
    call.state().call_sent = true;
    // From here the call's own requests count: did one leave?
    call.endpoint.departure.reset();
    Ok(None)
}

/// After an interruption (the timeout, a cancellation): a call claimed as sent whose request was
/// handed to the HTTP client but never read by a connection — it waited for a socket, a
/// connection, or a stream of an HTTP/2 connection at the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` — did not leave, and is not sent (`http::Departure`).
/// Returns whether the call is sent.
pub(crate) fn settle_interrupted(
    state: &std::sync::Mutex<super::exchange::CallState>,
    departure: &crate::http::Departure,
) -> bool {
    let Ok(mut state) = state.lock() else {
        return true;
    };
    if state.call_sent && departure.only_waited() {
        state.call_sent = false;
    }
    state.call_sent
}

/// A call this process took over from an owner that stopped while the call's MCP task ran
/// (`Ticket::admit`): it was sent by that owner, and is not sent again; a failure from here on
/// may leave the tool's outcome unknown.
pub(crate) fn resumed(call: &Exchange<'_>) {
    // Sent by the owner before: a withdrawal from here on lets it run to its result.
    let _ = call.withdrawal.claim();
    let mut state = call.state();
    state.call_sent = true;
    // Answered with the task's creation: what is left to cancel is the task.
    state.answered = true;
}

/// Claims the call, then writes each round and reads its answer until the tool's result (or
/// the failure that ends the call).
pub(crate) async fn send<T: Transport>(
    transport: &T,
    call: &Exchange<'_>,
    opened: &T::Opened,
) -> Result<ToolResult, Failure> {
    // Boxed, as the write below: both end before the answer is read.
    if let Some(answer) = Box::pin(claim(call)).await? {
        return Ok(answer);
    }
    let rounds_allowed = call.state().revision == Some(STATELESS);
    let mut rounds = Rounds::new(call.tool.binding.on_input_request(), rounds_allowed);
    loop {
        let reply = round(transport, call, opened, rounds.current()).await?;
        let reply = match reply {
            // The task's creation was the send; what follows only reads it.
            Reply::Task(task) if rounds.current().number == 0 => {
                let start = super::task::Start::Created(task);
                // Boxed: a task's polling is a large future that few calls need; inline, every
                // call in flight would carry its size (`cargo xtask bench`, T2 and T3).
                return Box::pin(super::task::follow(transport, call, opened, start)).await;
            }
            reply => reply,
        };
        if let Some(result) = rounds.after(reply)? {
            return Ok(result);
        }
    }
}

/// One round: its request written once, its answer read.
async fn round<T: Transport>(
    transport: &T,
    call: &Exchange<'_>,
    opened: &T::Opened,
    round: &Round,
) -> Result<Reply, Failure> {
    {
        let mut state = call.state();
        state.answered = false;
        state.request_id = round.request_id();
    }
    let answered = match Box::pin(transport.write(call, opened, round)).await {
        // Boxed: a call waiting for its answer's head holds only the write's state, not
        // also the space of the read that follows (memory per call in flight, T2 and T3).
        Ok(mut reading) => Box::pin(call.read(&mut reading, round)).await,
        Err(failure) => Err(failure),
    };
    answered.inspect_err(|failure| {
        if failure.fact.before_execution() {
            // The server has not seen it, or refused it before running it: nothing to cancel,
            // and the call is not sent.
            call.state().call_sent = false;
        }
    })
}
