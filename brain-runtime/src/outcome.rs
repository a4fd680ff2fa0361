//! The one classifier: what a failed call's facts mean for the caller — `unknown_outcome` (might
//! the tool have run?) and the failure's kind, which telemetry reports as `error.type`.
//!
//! Transports and the lifecycle never decide `unknown_outcome` themselves: they report a
//! [`Fact`] (was `tools/call` written? what status or JSON-RPC error came back? how did the
//! stream end?) with a message, and [`classify`] turns it into an [`Outcome`]. The table (docs/src/reference/unknown-outcome.md):
//!
//! | fact | `unknown_outcome` |
//! |---|---|
//! | refused by the gate (a limit included, or a call held for approval), could not connect or start, session setup failed, the tool listed otherwise than pinned (`pin_drift`) or its listing not verified | false |
//! | `tools/call` not written (round 0) | false |
//! | `tools/call` answered with 401, 403, 404, 405, 406 or 415 (round 0), or JSON-RPC -32601 | false |
//! | an HTTP tool's 4xx, except 408, 409 and 429 | false |
//! | an MCP task the server cancelled, that failed without a result, asked for input, or was lost (expired, unknown) | true |
//! | anything else after `tools/call` was written (another status or JSON-RPC error, a dropped, truncated, malformed or oversized response, a request for user input, a result brain cannot convert) | true |
//! | timeout or interruption | whether `tools/call` had been written |
//!
//! An upstream rate limit after `tools/call` was sent — HTTP 429, or JSON-RPC `-32023`
//! (SEP-3304) — is `unknown_outcome: true` like any error after sending; its
//! `data.retryAfterMs` (else its `Retry-After`) becomes the result's `retry_after_ms`. SEP-3304
//! (open) would make `-32023` mean "not processed": if it is accepted, its row moves to
//! `false` beside `-32601`, and nothing else changes.

use crate::event::{Reason, ToolResult};

/// What happened to a call that produced no tool result, as a transport or the lifecycle saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fact {
    /// Refused before any I/O, for the reason given: the gate, a value no request can carry,
    /// a replay whose result was not kept, a front end stopping.
    Refused(Reason),
    /// Refused by a limit (a rate or a concurrency quota) before anything was opened.
    Limited,
    /// Refused by the host config's policies at the gate: no permit, a forbid, or an error in
    /// evaluating one. Nothing was sent or journaled.
    PolicyDenied,
    /// Held by an `@approval` policy for a person's approval, which this very call does not
    /// have yet (a pending approval is recorded). Nothing was sent or journaled.
    ApprovalRequired,
    /// The server lists the tool otherwise than it was reviewed (its pin): a change that
    /// refuses, its absence, or its name listed twice. Reported before the send, for a call
    /// the journal found new; nothing was sent.
    PinDrift,
    /// Refused by the call journal: the call id was used for another call.
    JournalConflict,
    /// The call journal could not record the call, so it was never sent.
    StoreFailed,
    /// Nothing reached the server: no connection, no usable token, no process.
    Unreachable,
    /// The session (or the server process) could not be set up; `tools/call` was never written.
    SetupFailed,
    /// `tools/call` of `round` could not be written (no connection, a closed pipe).
    NotWritten {
        /// 0 for the call, 1.. for the rounds the server asked for.
        round: u64,
    },
    /// The server answered the request carrying `tools/call` of `round` with an HTTP error
    /// status.
    CallStatus {
        /// The status.
        status: u16,
        /// 0 for the call, 1.. for the rounds.
        round: u64,
    },
    /// The server answered `tools/call` with a JSON-RPC error.
    RpcError {
        /// Its code, when it has one.
        code: Option<i64>,
    },
    /// An HTTP or SSE tool answered with a non-2xx status.
    ToolStatus(u16),
    /// After `tools/call` was written: the exchange broke (the connection failed, the stream
    /// ended without a result, a malformed or oversized message, a server that would not stop
    /// asking) or the server asked for something brain does not do (user input, an unknown
    /// result type).
    Broken,
    /// The result cannot be converted: an unsupported content type, over `max_output_bytes`,
    /// `structuredContent` that does not match `output_schema`.
    Unconvertible,
    /// The call's timeout passed, or the caller cancelled it.
    Interrupted {
        /// Which of the two.
        by: Interruption,
        /// `tools/call` had been written when it happened.
        written: bool,
    },
}

/// What ended a call from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interruption {
    /// `timeout_seconds` passed.
    Timeout,
    /// The caller dropped or cancelled the call.
    Cancelled,
}

/// The classifier's name for the kind.
pub(crate) use crate::event::OutcomeKind as Kind;
use crate::event::OutcomeKind;

impl OutcomeKind {
    /// The kind of a result the call delivered: none for a success, a tool error for a tool's
    /// `isError`; a result replayed from the call journal keeps the kind its flags say (a call
    /// whose process died before recording it is an unknown outcome).
    pub(crate) fn of_result(result: &ToolResult) -> Option<Kind> {
        match (result.is_error, result.unknown_outcome) {
            (false, _) => None,
            (true, false) => Some(Kind::ToolError),
            (true, true) => Some(Kind::UnknownOutcome),
        }
    }

    /// The value of telemetry's `error.type` for this kind: `refused`, `policy_denied`,
    /// `approval_required`, `pin_drift`,
    /// `not_sent`, `unknown_outcome`, `timeout`, `cancelled` or `tool_error` (a journal conflict
    /// and a limit are `refused`, a store that could not record the call `not_sent`).
    pub fn error_type(self) -> &'static str {
        match self {
            Kind::Refused | Kind::JournalConflict | Kind::Limited => "refused",
            Kind::PolicyDenied => "policy_denied",
            Kind::ApprovalRequired => "approval_required",
            Kind::PinDrift => "pin_drift",
            Kind::NotSent | Kind::StoreUnavailable => "not_sent",
            Kind::UnknownOutcome => "unknown_outcome",
            Kind::Timeout => "timeout",
            Kind::Cancelled => "cancelled",
            Kind::ToolError => "tool_error",
        }
    }

    /// The kind as serialized (`"journal_conflict"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Refused => "refused",
            Kind::JournalConflict => "journal_conflict",
            Kind::StoreUnavailable => "store_unavailable",
            Kind::NotSent => "not_sent",
            Kind::UnknownOutcome => "unknown_outcome",
            Kind::Timeout => "timeout",
            Kind::Cancelled => "cancelled",
            Kind::ToolError => "tool_error",
            Kind::Limited => "limited",
            Kind::PolicyDenied => "policy_denied",
            Kind::ApprovalRequired => "approval_required",
            Kind::PinDrift => "pin_drift",
        }
    }
}

/// What a fact means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Whether the tool may have run.
    pub(crate) unknown_outcome: bool,
    /// The kind, for telemetry.
    pub(crate) kind: Kind,
}

/// The classification: the only place that decides `unknown_outcome`.
pub(crate) fn classify(fact: Fact) -> Outcome {
    let (unknown_outcome, kind) = match fact {
        Fact::Refused(_) => (false, Kind::Refused),
        Fact::Limited => (false, Kind::Limited),
        Fact::PolicyDenied => (false, Kind::PolicyDenied),
        Fact::ApprovalRequired => (false, Kind::ApprovalRequired),
        Fact::PinDrift => (false, Kind::PinDrift),
        Fact::JournalConflict => (false, Kind::JournalConflict),
        Fact::StoreFailed => (false, Kind::StoreUnavailable),
        Fact::Unreachable | Fact::SetupFailed => (false, Kind::NotSent),
        Fact::NotWritten { .. } | Fact::CallStatus { .. } if fact.before_execution() => {
            (false, Kind::NotSent)
        }
        Fact::NotWritten { .. } | Fact::CallStatus { .. } => (true, Kind::UnknownOutcome),
        // Method not found; a client capability missing (2026-07-28): refused, not run.
        Fact::RpcError {
            code: Some(-32601 | -32021),
        } => (false, Kind::NotSent),
        Fact::RpcError { .. } => (true, Kind::UnknownOutcome),
        Fact::ToolStatus(status) => match status {
            408 | 409 | 429 => (true, Kind::UnknownOutcome),
            400..=499 => (false, Kind::NotSent),
            _ => (true, Kind::UnknownOutcome),
        },
        Fact::Broken | Fact::Unconvertible => (true, Kind::UnknownOutcome),
        Fact::Interrupted { by, written } => (
            written,
            match by {
                Interruption::Timeout => Kind::Timeout,
                Interruption::Cancelled => Kind::Cancelled,
            },
        ),
    };
    Outcome {
        unknown_outcome,
        kind,
    }
}

impl Fact {
    /// Whether the server has not seen the call's `tools/call` at all, or refused it before
    /// running it: nothing was sent, the first round's request was not written, or it was
    /// rejected at the HTTP layer (401, 403, 404 unknown session, 405, 406, 415). Nothing is
    /// left to cancel.
    pub(crate) fn before_execution(self) -> bool {
        match self {
            Fact::Refused(_)
            | Fact::Limited
            | Fact::PolicyDenied
            | Fact::ApprovalRequired
            | Fact::PinDrift
            | Fact::JournalConflict
            | Fact::StoreFailed
            | Fact::Unreachable
            | Fact::SetupFailed => true,
            Fact::NotWritten { round } => round == 0,
            Fact::CallStatus { status, round } => {
                round == 0 && matches!(status, 401 | 403 | 404 | 405 | 406 | 415)
            }
            _ => false,
        }
    }
}

/// A call that did not produce a tool result: what happened, and the message for the model and
/// the operator (never a token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// What happened.
    pub(crate) fact: Fact,
    /// What happened, in words.
    pub(crate) message: String,
    /// When to try again, where that is known (a limit's next token, an upstream rate limit).
    pub(crate) retry_after_ms: Option<u64>,
    /// The approval a held call waits for.
    pub(crate) approval_id: Option<String>,
}

impl Failure {
    pub(crate) fn new(fact: Fact, message: impl Into<String>) -> Self {
        Failure {
            fact,
            message: message.into(),
            retry_after_ms: None,
            approval_id: None,
        }
    }

    /// The same failure, naming the approval the call waits for.
    pub(crate) fn approval(mut self, id: impl Into<String>) -> Self {
        self.approval_id = Some(id.into());
        self
    }

    /// The same failure, saying when to try again.
    pub(crate) fn retry_after(mut self, ms: Option<u64>) -> Self {
        self.retry_after_ms = ms;
        self
    }

    /// The exchange broke after `tools/call` was written ([`Fact::Broken`]).
    pub(crate) fn broken(message: impl Into<String>) -> Self {
        Failure::new(Fact::Broken, message)
    }

    /// What the failure means for the caller.
    pub(crate) fn outcome(&self) -> Outcome {
        classify(self.fact)
    }

    /// The call's `tool.result`, classified, and the failure's kind.
    pub(crate) fn into_result(self, call_id: &str) -> (ToolResult, Kind) {
        let Outcome {
            unknown_outcome,
            kind,
        } = self.outcome();
        let mut result = ToolResult::failure(call_id, unknown_outcome, self.message);
        result.kind = Some(kind);
        if let Fact::Refused(reason) = self.fact {
            result.reason = Some(reason);
        }
        result.retry_after_ms = self.retry_after_ms;
        result.approval_id = self.approval_id;
        (result, kind)
    }
}

/// Why a front end (such as `brain-harness serve`) refuses a call before handing it to the
/// runtime. Each is a fact the classifier turns into the result's `kind`, so a front end never
/// sets `unknown_outcome` or `kind` itself. (A policy denial is the runtime's own gate, not a front end's.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A bound of the front end's own (calls in flight per client or in all): `limited`.
    Limited,
    /// The front end is stopping: `refused`, [`Reason::Stopping`].
    Stopping,
    /// The client's call id or session is not an id ([`crate::gate::check_id`]): `refused`,
    /// [`Reason::InvalidId`].
    InvalidId,
}

impl ToolResult {
    /// A call a front end refused before the runtime: nothing was sent, nothing journaled;
    /// `message` says why and what to do. Classified as every result is.
    pub fn refused(call_id: &str, refusal: Refusal, message: impl Into<String>) -> ToolResult {
        let fact = match refusal {
            Refusal::Limited => Fact::Limited,
            Refusal::Stopping => Fact::Refused(Reason::Stopping),
            Refusal::InvalidId => Fact::Refused(Reason::InvalidId),
        };
        Failure::new(fact, message).into_result(call_id).0
    }

    /// The result of a call whose event stream ended without one (the runtime's task died):
    /// the tool may have run.
    pub fn ended_without_result(call_id: &str) -> ToolResult {
        Failure::broken("the call ended without a result")
            .into_result(call_id)
            .0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table, row by row: each fact and the `unknown_outcome` and kind it must give.
    #[test]
    fn facts_classify_as_the_table_says() {
        use Interruption::{Cancelled, Timeout};
        use Kind::*;
        let rows: &[(Fact, bool, Kind)] = &[
            (Fact::Refused(Reason::UnknownTool), false, Refused),
            (Fact::Limited, false, Limited),
            (Fact::PolicyDenied, false, PolicyDenied),
            (Fact::ApprovalRequired, false, ApprovalRequired),
            (Fact::PinDrift, false, PinDrift),
            (Fact::JournalConflict, false, JournalConflict),
            (Fact::StoreFailed, false, StoreUnavailable),
            (Fact::Unreachable, false, NotSent),
            (Fact::SetupFailed, false, NotSent),
            (Fact::NotWritten { round: 0 }, false, NotSent),
            (Fact::NotWritten { round: 1 }, true, UnknownOutcome),
            (
                Fact::CallStatus {
                    status: 401,
                    round: 0,
                },
                false,
                NotSent,
            ),
            (
                Fact::CallStatus {
                    status: 403,
                    round: 0,
                },
                false,
                NotSent,
            ),
            (
                Fact::CallStatus {
                    status: 404,
                    round: 0,
                },
                false,
                NotSent,
            ),
            (
                Fact::CallStatus {
                    status: 405,
                    round: 0,
                },
                false,
                NotSent,
            ),
            (
                Fact::CallStatus {
                    status: 406,
                    round: 0,
                },
                false,
                NotSent,
            ),
            (
                Fact::CallStatus {
                    status: 415,
                    round: 0,
                },
                false,
                NotSent,
            ),
            (
                Fact::CallStatus {
                    status: 401,
                    round: 2,
                },
                true,
                UnknownOutcome,
            ),
            (
                Fact::CallStatus {
                    status: 400,
                    round: 0,
                },
                true,
                UnknownOutcome,
            ),
            (
                Fact::CallStatus {
                    status: 500,
                    round: 0,
                },
                true,
                UnknownOutcome,
            ),
            (
                Fact::CallStatus {
                    status: 502,
                    round: 0,
                },
                true,
                UnknownOutcome,
            ),
            (Fact::RpcError { code: Some(-32601) }, false, NotSent),
            (Fact::RpcError { code: Some(-32021) }, false, NotSent),
            (Fact::RpcError { code: Some(-32602) }, true, UnknownOutcome),
            (Fact::RpcError { code: Some(-32603) }, true, UnknownOutcome),
            // SEP-3304's rate limit: still after sending (see the module's table).
            (Fact::RpcError { code: Some(-32023) }, true, UnknownOutcome),
            (
                Fact::CallStatus {
                    status: 429,
                    round: 0,
                },
                true,
                UnknownOutcome,
            ),
            (Fact::RpcError { code: None }, true, UnknownOutcome),
            (Fact::ToolStatus(400), false, NotSent),
            (Fact::ToolStatus(401), false, NotSent),
            (Fact::ToolStatus(403), false, NotSent),
            (Fact::ToolStatus(404), false, NotSent),
            (Fact::ToolStatus(408), true, UnknownOutcome),
            (Fact::ToolStatus(409), true, UnknownOutcome),
            (Fact::ToolStatus(422), false, NotSent),
            (Fact::ToolStatus(429), true, UnknownOutcome),
            (Fact::ToolStatus(500), true, UnknownOutcome),
            (Fact::ToolStatus(502), true, UnknownOutcome),
            (Fact::ToolStatus(503), true, UnknownOutcome),
            (Fact::ToolStatus(303), true, UnknownOutcome),
            (Fact::ToolStatus(307), true, UnknownOutcome),
            (Fact::ToolStatus(101), true, UnknownOutcome),
            (Fact::Broken, true, UnknownOutcome),
            (Fact::Unconvertible, true, UnknownOutcome),
            (
                Fact::Interrupted {
                    by: Timeout,
                    written: false,
                },
                false,
                Kind::Timeout,
            ),
            (
                Fact::Interrupted {
                    by: Timeout,
                    written: true,
                },
                true,
                Kind::Timeout,
            ),
            (
                Fact::Interrupted {
                    by: Cancelled,
                    written: false,
                },
                false,
                Kind::Cancelled,
            ),
            (
                Fact::Interrupted {
                    by: Cancelled,
                    written: true,
                },
                true,
                Kind::Cancelled,
            ),
        ];
        for &(fact, unknown_outcome, kind) in rows {
            assert_eq!(
                classify(fact),
                Outcome {
                    unknown_outcome,
                    kind
                },
                "{fact:?}"
            );
        }
    }

    #[test]
    fn error_types_are_the_semantic_conventions_values() {
        let kinds = [
            (Kind::Refused, "refused"),
            (Kind::NotSent, "not_sent"),
            (Kind::UnknownOutcome, "unknown_outcome"),
            (Kind::Timeout, "timeout"),
            (Kind::Cancelled, "cancelled"),
            (Kind::ToolError, "tool_error"),
            (Kind::JournalConflict, "refused"),
            (Kind::StoreUnavailable, "not_sent"),
            (Kind::Limited, "refused"),
        ];
        for (kind, name) in kinds {
            assert_eq!(kind.error_type(), name);
            // The public kind serializes as its name.
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
    }
}

/// An HTTP answer's `Retry-After` (delay-seconds or an HTTP date) in milliseconds, at most
/// `timeout_seconds` (the binding's timeout): see [`retry_after`].
pub(crate) fn retry_after_header(headers: &http::HeaderMap, timeout_seconds: u64) -> Option<u64> {
    let header = headers
        .get(http::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok());
    retry_after(None, header, timeout_seconds.saturating_mul(1000))
}

/// When an upstream rate limit says to try again, in milliseconds, at most `cap_ms` (the
/// binding's timeout): a JSON-RPC error's `data.retryAfterMs` (SEP-3304) first, then an HTTP
/// `Retry-After` — delay-seconds or an HTTP date (RFC 9110 §10.2.3). `None` when neither is
/// there or usable.
pub(crate) fn retry_after(
    retry_after_ms: Option<&serde_json::Value>,
    header: Option<&str>,
    cap_ms: u64,
) -> Option<u64> {
    let from_data = retry_after_ms.and_then(|value| {
        value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|v| *v >= 0.0)
                .map(|v| v.ceil() as u64)
        })
    });
    let from_header = || {
        let header = header?.trim();
        if let Ok(seconds) = header.parse::<u64>() {
            return Some(seconds.saturating_mul(1000));
        }
        let at = httpdate::parse_http_date(header).ok()?;
        let left = at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        Some(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
    };
    from_data.or_else(from_header).map(|ms| ms.min(cap_ms))
}

#[cfg(test)]
mod retry_after_tests {
    use super::retry_after;
    use serde_json::json;

    #[test]
    fn data_first_then_seconds_then_a_date_all_clamped() {
        assert_eq!(
            retry_after(Some(&json!(1500)), Some("9"), 60_000),
            Some(1500)
        );
        assert_eq!(retry_after(None, Some("9"), 60_000), Some(9000));
        assert_eq!(retry_after(None, Some("120"), 60_000), Some(60_000));
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(30);
        let date = httpdate::fmt_http_date(later);
        let ms = retry_after(None, Some(&date), 60_000).unwrap();
        assert!((28_000..=30_000).contains(&ms), "{ms}");
        let past = httpdate::fmt_http_date(std::time::SystemTime::UNIX_EPOCH);
        assert_eq!(retry_after(None, Some(&past), 60_000), Some(0));
        assert_eq!(retry_after(None, Some("soon"), 60_000), None);
        assert_eq!(retry_after(Some(&json!("x")), None, 60_000), None);
    }
}
