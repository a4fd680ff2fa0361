//! What a call produces: zero or more `tool.progress` events, then exactly one `tool.result`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One event of a call, serialized as one JSON object with a `type` field.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum Event {
    /// A progress notification from the server (live-only: never stored or replayed).
    #[serde(rename = "tool.progress")]
    Progress(Progress),
    /// The call's outcome. Always the last event.
    #[serde(rename = "tool.result")]
    Result(ToolResult),
}

/// A `tool.progress` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The call it belongs to.
    pub call_id: String,
    /// How far the tool is; strictly increasing within a call.
    pub progress: f64,
    /// The total, when the server knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A human-readable message, when the server sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A `tool.result` event: what the model sees. Built by the runtime; a host's own results (a
/// test double, a tool of its own) start from [`ToolResult::success`] or
/// [`ToolResult::tool_error`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolResult {
    /// The call it belongs to.
    pub call_id: String,
    /// The tool failed, or brain could not complete the call.
    pub is_error: bool,
    /// The tool may or may not have run: the call failed after brain sent it. The model should
    /// check the resource with another tool rather than call this one again.
    pub unknown_outcome: bool,
    /// The result's content blocks.
    pub content: Vec<ContentBlock>,
    /// The tool's structured output, when it returned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// The result comes from the call journal: this call id was called before, and this is
    /// that call's outcome (nothing was sent now). Serialized only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    /// What kind of failure this is, for a host to act on without reading words: refused by
    /// the gate, a journal conflict, an unknown outcome, a timeout… `None` for a success.
    /// Serialized only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<OutcomeKind>,
    /// Why a call of kind [`OutcomeKind::Refused`] was refused: an unknown tool, a tenant not
    /// allowed, arguments that do not match… Set for every refusal, and only for one; a host
    /// matches on it, never on the message. Serialized only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// When to try again, in milliseconds, where that is known: a call refused by one of
    /// brain's limits (the time until its next token), or one the server rate-limited (its
    /// `data.retryAfterMs`, else its `Retry-After`, at most the binding's timeout). Serialized
    /// only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The approval a call held for a person's approval waits for (kind `approval_required`):
    /// an approver decides it (`brain-harness approvals approve ID`), then the same call —
    /// same call id, same arguments — runs once. Serialized only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

/// A content block of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// The image's bytes, base64.
        data: String,
        /// Its media type, e.g. `image/png`.
        mime_type: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// An image block: its bytes base64-encoded, and its media type.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ContentBlock::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }
}

impl ToolResult {
    /// A successful result of the call `call_id`.
    pub fn success(call_id: impl Into<String>, content: Vec<ContentBlock>) -> Self {
        ToolResult {
            call_id: call_id.into(),
            is_error: false,
            unknown_outcome: false,
            content,
            structured_content: None,
            replayed: false,
            kind: None,
            reason: None,
            retry_after_ms: None,
            approval_id: None,
        }
    }

    /// A result in which the tool reported an error (`isError`; kind [`OutcomeKind::ToolError`]).
    ///
    pub fn tool_error(call_id: impl Into<String>, content: Vec<ContentBlock>) -> Self {
        ToolResult {
            is_error: true,
            kind: Some(OutcomeKind::ToolError),
            ..ToolResult::success(call_id, content)
        }
    }

    /// The same result with structured content.
    pub fn with_structured_content(mut self, value: Value) -> Self {
        self.structured_content = Some(value);
        self
    }

    /// A failed call: one text block saying what happened.
    pub(crate) fn failure(call_id: &str, unknown_outcome: bool, message: String) -> Self {
        ToolResult {
            call_id: call_id.to_owned(),
            is_error: true,
            unknown_outcome,
            content: vec![ContentBlock::text(message)],
            structured_content: None,
            replayed: false,
            kind: None,
            reason: None,
            retry_after_ms: None,
            approval_id: None,
        }
    }

    /// The result's size as `max_output_bytes` counts it: the bytes of its content blocks' text,
    /// and of its images' base64 `data` and `mime_type`. Structured content counts once: through
    /// the text block that carries its JSON (the conversion always adds one), or, when no text
    /// block holds it, as its compact JSON.
    pub fn size(&self) -> usize {
        let content: usize = self.content.iter().map(ContentBlock::size).sum();
        let structured = match &self.structured_content {
            Some(value) if !self.carries_as_text(value) => value.to_string().len(),
            _ => 0,
        };
        content + structured
    }

    /// Whether a text block holds `value` as JSON.
    fn carries_as_text(&self, value: &Value) -> bool {
        self.content.iter().any(|block| match block {
            ContentBlock::Text { text } => {
                serde_json::from_str::<Value>(text).is_ok_and(|parsed| parsed == *value)
            }
            ContentBlock::Image { .. } => false,
        })
    }
}

impl ContentBlock {
    /// The block's bytes as `max_output_bytes` counts them.
    pub(crate) fn size(&self) -> usize {
        match self {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Image { data, mime_type } => data.len() + mime_type.len(),
        }
    }
}

/// What kind of outcome a call had, for a host to act on without reading words: every
/// `tool.result` that is an error carries one ([`ToolResult::kind`]); a success has none.
///
/// Serialized in snake case (`"refused"`, `"journal_conflict"`, …). Telemetry reports the
/// coarser `error.type` of the MCP semantic conventions ([`OutcomeKind::error_type`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutcomeKind {
    /// Refused by the gate before any I/O: an unknown tool, a tenant not allowed, arguments that
    /// do not validate, a token variable not set. Nothing was sent.
    Refused,
    /// Refused by the call journal: the call id was used before for another call (another
    /// binding or other arguments). Nothing was sent; a new call needs a new call id.
    JournalConflict,
    /// The call journal (the state store) could not record the call, so it was not sent.
    StoreUnavailable,
    /// The tool cannot have run: nothing reached the server, or it refused the call before
    /// running it.
    NotSent,
    /// The tool may have run (`unknown_outcome: true`): check before calling it again.
    UnknownOutcome,
    /// The call's `timeout_seconds` passed (`unknown_outcome` says whether it had been sent).
    Timeout,
    /// The caller cancelled the call (`unknown_outcome` says whether it had been sent).
    Cancelled,
    /// Refused by a limit of the host config (`limits`, `tenant_limits`) or of `serve`, before
    /// anything was opened or sent: try again after `retry_after_ms` when it is set.
    Limited,
    /// The tool ran and reported an error (`isError`).
    ToolError,
    /// Refused by the host config's policies (`policies`) at the gate: no policy permits the
    /// call, a `forbid` applies, or evaluating one failed. Nothing was sent or journaled; the
    /// message names the deciding policies.
    PolicyDenied,
    /// Held by an `@approval` policy for a person's approval (`approval_id` names it): nothing
    /// was sent or journaled. Once an approver approves it, the same call — same call id and
    /// arguments, in the same session — runs once.
    ApprovalRequired,
    /// The server lists the tool otherwise than it was reviewed (the binding's pin): its
    /// schemas, annotations or anything else but its texts changed (its texts too with
    /// `on_drift: "refuse"`), it is gone, or its name is listed twice. Nothing was sent; the
    /// message names the fields that changed. Re-pin with `cargo xtask discover`.
    PinDrift,
}

/// Why a call was refused before anything was sent ([`OutcomeKind::Refused`]): a host acts on
/// it without reading words. Serialized in snake case (`"unknown_tool"`, …).
///
/// A reason never tells a client what another tenant may call: through `serve`, a tool the
/// client's tenant cannot call is [`Reason::UnknownTool`]; the Rust API and `brain-harness call`,
/// which the operator runs, say [`Reason::TenantNotAllowed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// No binding has the tool's name.
    UnknownTool,
    /// The call's tenant is not among the binding's `tenants`.
    TenantNotAllowed,
    /// The arguments do not match the binding's input schema (the message says where).
    InvalidArguments,
    /// The binding cannot be called in this deployment: a token variable not set, a command
    /// not installed… (the message says what to fix).
    Unavailable,
    /// The call id or the session is not an id: too long, or holding a control character.
    InvalidId,
    /// A value the call must send as an HTTP header (the tenant, the session) cannot be one.
    InvalidHeader,
    /// The call id was called before and that call's result was not kept (over the journal's
    /// cap): it is not sent again.
    ResultNotKept,
    /// The front end is stopping (`serve` draining at SIGTERM): retry elsewhere or later.
    Stopping,
    /// The binding acts on behalf of users (`auth.type` `token_exchange`) and the call carries
    /// no user token of its own ([`CallRequest::with_subject_token`](crate::CallRequest::with_subject_token)):
    /// nothing is sent, and no other credential stands in for the user's.
    UserCredentialRequired,
}

impl Reason {
    /// The reason as serialized (`"unknown_tool"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::UnknownTool => "unknown_tool",
            Reason::TenantNotAllowed => "tenant_not_allowed",
            Reason::InvalidArguments => "invalid_arguments",
            Reason::Unavailable => "unavailable",
            Reason::InvalidId => "invalid_id",
            Reason::InvalidHeader => "invalid_header",
            Reason::ResultNotKept => "result_not_kept",
            Reason::Stopping => "stopping",
            Reason::UserCredentialRequired => "user_credential_required",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
