//! What a client is told of its `tools/call`, and what the operator is: the ids a call's
//! `_meta` names, the call's server span in the client's trace, the result as a
//! `CallToolResult` with brain's outcome in `_meta` (a failure rephrased so that nothing
//! internal reaches the client), and the call's log line with the runtime's own detail.

use std::collections::HashMap;
use std::time::Instant;

use brain_runtime::{ContentBlock, OutcomeKind, Reason, ToolResult};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::clients::Client;
use super::log::CallLine;

/// `_meta` keys a client may set.
pub(crate) const SESSION_KEY: &str = "brain.dev/session_id";
pub(crate) const CALL_KEY: &str = "brain.dev/call_id";
const SCOPE_KEY: &str = "brain.dev/scope";
/// The `_meta` key of every result's outcome.
pub(crate) const OUTCOME_KEY: &str = "brain.dev/outcome";

/// What the call's log line names, owned for the length of the call.
pub(crate) struct Line {
    pub(crate) tool: String,
    pub(crate) client: Client,
    pub(crate) session: String,
    pub(crate) call_id: String,
    pub(crate) upstream: String,
    pub(crate) mcp_session: Option<String>,
    pub(crate) started: Instant,
}

impl Line {
    /// The answer to the call that ended with `result`: what its client may read of it (see
    /// [`for_the_client`]), with the call's log line written (JSON when `json_log`).
    pub(crate) fn answer(&self, mut result: ToolResult, json_log: bool) -> CallToolResult {
        let detail = for_the_client(&mut result, &self.tool);
        let written = CallLine {
            tool: &self.tool,
            client: &self.client,
            session: &self.session,
            call_id: &self.call_id,
            upstream: &self.upstream,
            mcp_session: self.mcp_session.as_deref(),
        };
        written.write(&result, detail.as_deref(), self.started.elapsed(), json_log);
        call_tool_result(&result, &self.call_id)
    }
}

/// The client's request as a server span: the parent of brain's client span.
pub(crate) fn server_span(
    name: &str,
    client: &Client,
    call_id: &str,
    mcp_session: Option<&str>,
) -> tracing::Span {
    tracing::info_span!(
        "brain serve tools/call",
        otel.name = format!("tools/call {name}"),
        otel.kind = "server",
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        mcp.session.id = mcp_session,
        brain.tenant_id = client.tenant.as_str(),
        brain.call_id = call_id,
    )
}

/// Continues the client's trace: its `_meta` `traceparent` and `tracestate` (MCP's place for
/// them), else the HTTP request's headers.
pub(crate) fn continue_trace(
    span: &tracing::Span,
    meta: &serde_json::Map<String, Value>,
    headers: Option<&http::HeaderMap>,
) {
    use opentelemetry::propagation::TextMapPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let mut carrier: HashMap<String, String> = HashMap::new();
    for key in ["traceparent", "tracestate"] {
        if let Some(value) = meta.get(key).and_then(Value::as_str) {
            carrier.insert(key.to_owned(), value.to_owned());
        }
    }
    if !carrier.contains_key("traceparent")
        && let Some(headers) = headers
    {
        for key in ["traceparent", "tracestate"] {
            if let Some(value) = headers.get(key).and_then(|v| v.to_str().ok()) {
                carrier.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    if carrier.contains_key("traceparent") {
        let parent =
            opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        let _ = span.set_parent(parent);
    }
}

/// A string at `key` of `meta`, or at `field` of its `brain.dev/scope` (a brain in front of a
/// brain sends that).
pub(crate) fn named(
    meta: &serde_json::Map<String, Value>,
    key: &str,
    field: &str,
) -> Option<String> {
    let direct = meta.get(key).and_then(Value::as_str);
    let scoped = || meta.get(SCOPE_KEY)?.get(field)?.as_str();
    direct
        .or_else(scoped)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The `CallToolResult` of a brain result: its content as brain converted it, and the outcome in
/// `_meta` under the client's call id.
pub(crate) fn call_tool_result(result: &ToolResult, call_id: &str) -> CallToolResult {
    let content = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => rmcp::model::ContentBlock::text(text.as_str()),
            ContentBlock::Image { data, mime_type } => {
                rmcp::model::ContentBlock::image(data.as_str(), mime_type.as_str())
            }
            other => {
                rmcp::model::ContentBlock::text(serde_json::to_string(other).unwrap_or_default())
            }
        })
        .collect();
    let mut answer = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    answer.structured_content = result.structured_content.clone();
    let mut meta = serde_json::Map::new();
    meta.insert(OUTCOME_KEY.to_owned(), outcome(result, call_id));
    answer.meta = Some(rmcp::model::MetaObject(meta));
    answer
}

/// `_meta["brain.dev/outcome"]`.
fn outcome(result: &ToolResult, call_id: &str) -> Value {
    let mut outcome = json!({
        "call_id": call_id,
        "unknown_outcome": result.unknown_outcome,
        "replayed": result.replayed,
        "error_type": result.kind.map(OutcomeKind::as_str),
    });
    if let Some(reason) = result.reason {
        outcome["reason"] = json!(reason);
    }
    if let Some(ms) = result.retry_after_ms {
        outcome["retry_after_ms"] = json!(ms);
    }
    if let Some(id) = &result.approval_id {
        outcome["approval_id"] = json!(id);
    }
    outcome
}

/// What a client reads of a failure the runtime reported: what it may act on, naming the
/// binding — never a store's path or address, an upstream URL or address, or brain's derived
/// upstream call id. The runtime's own text (the operator's detail) is returned beside it for
/// the log, joined by the call id. A tool's own result (success or `isError`) and the argument
/// and limit refusals (the client's own doing, with nothing internal in them) pass unchanged.
fn for_the_client(result: &mut ToolResult, tool: &str) -> Option<String> {
    let kind = result.kind?;
    let detail = match result.content.first() {
        Some(ContentBlock::Text { text }) => text.clone(),
        _ => String::new(),
    };
    let told = match kind {
        // A policy's refusal names the deciding policies and their `@reason`s: the client acts
        // on it (other arguments, another tool), as on a schema mismatch; a call held for
        // approval says which approval to wait for.
        OutcomeKind::ToolError
        | OutcomeKind::Limited
        | OutcomeKind::PolicyDenied
        | OutcomeKind::ApprovalRequired => return None,
        OutcomeKind::Refused if result.reason == Some(Reason::InvalidArguments) => return None,
        // Serve's own check answers first, as for a tool that does not exist; should the
        // runtime's ever answer, the client learns no more.
        OutcomeKind::Refused if result.reason == Some(Reason::TenantNotAllowed) => {
            result.reason = Some(Reason::UnknownTool);
            format!("{tool}: refused: there is no such tool; nothing was sent")
        }
        OutcomeKind::Refused => format!(
            "{tool}: refused: this tool cannot be called now (the operator's log says why); \
             nothing was sent"
        ),
        OutcomeKind::JournalConflict => format!(
            "{tool}: refused: this call id was used before for another call (another tool or \
             other arguments); nothing was sent — use a new call id"
        ),
        OutcomeKind::PinDrift => format!(
            "{tool}: refused: its server now describes this tool otherwise than the operator \
             reviewed it; nothing was sent — it cannot be called until the operator reviews \
             the change"
        ),
        OutcomeKind::StoreUnavailable => format!(
            "{tool}: not sent: brain's state store is unavailable now; nothing was sent — \
             retry with the same call id shortly"
        ),
        OutcomeKind::NotSent => format!(
            "{tool}: not sent: the tool's server could not be reached or refused the call \
             before running it; retry with the same call id"
        ),
        OutcomeKind::Timeout | OutcomeKind::Cancelled => {
            let what = if kind == OutcomeKind::Timeout {
                "timed out"
            } else {
                "was cancelled"
            };
            if result.unknown_outcome {
                format!(
                    "{tool}: the call {what} after it was sent: the tool may have run — check \
                     before calling it again"
                )
            } else {
                format!("{tool}: the call {what} before it was sent; nothing ran")
            }
        }
        _ => format!(
            "{tool}: the outcome is unknown: the tool may have run — check before calling it \
             again; a retry with the same call id returns what brain recorded"
        ),
    };
    result.content = vec![ContentBlock::text(told)];
    result.structured_content = None;
    Some(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result as the journal or the runtime would have it, with `kind` (a refusal with
    /// `reason`: `kind` is `refused/REASON`).
    fn failed(kind: &str, unknown: bool, text: &str) -> ToolResult {
        let (kind, reason) = match kind.split_once('/') {
            Some((kind, reason)) => (kind, Some(reason)),
            None => (kind, None),
        };
        serde_json::from_value(json!({"call_id": "c1", "is_error": true,
            "unknown_outcome": unknown, "content": [{"type": "text", "text": text}],
            "kind": kind, "reason": reason}))
        .unwrap()
    }

    #[test]
    fn a_client_is_told_what_it_may_do_and_nothing_internal() {
        let internal = [
            (
                "store_unavailable",
                false,
                "the call journal (SQLite /var/lib/brain/state.db) failed",
            ),
            (
                "store_unavailable",
                false,
                "the call journal (PostgreSQL db.internal:5432) failed",
            ),
            (
                "not_sent",
                false,
                "could not connect to http://10.0.0.7:8080/internal-mcp",
            ),
            (
                "journal_conflict",
                false,
                "call id 1b4e28ba-2fa1-4d2b-8f0e-9c3a1f2b3c4d was used",
            ),
            (
                "unknown_outcome",
                true,
                "http://10.0.0.7:8080/internal-mcp dropped the stream",
            ),
            (
                "timeout",
                true,
                "the call timed out after 30s (http://10.0.0.7/mcp)",
            ),
            (
                "cancelled",
                false,
                "interrupted before tools/call was sent to 10.0.0.7",
            ),
            (
                "refused/unavailable",
                false,
                "refused: MCP_API_KEY is not set; export it",
            ),
        ];
        for (kind, unknown, text) in internal {
            let mut result = failed(kind, unknown, text);
            let detail = for_the_client(&mut result, "docs_search");
            assert_eq!(detail.as_deref(), Some(text), "the log keeps the detail");
            let ContentBlock::Text { text: told } = &result.content[0] else {
                panic!("a text block");
            };
            assert!(told.starts_with("docs_search: "), "{told}");
            for secret in [
                "/var/lib",
                "db.internal",
                "10.0.0.7",
                "1b4e28ba",
                "MCP_API_KEY",
            ] {
                assert!(!told.contains(secret), "{kind}: {told}");
            }
            assert_eq!(result.unknown_outcome, unknown, "the outcome is unchanged");
        }
        // The client's own doing passes as it is.
        for (kind, text) in [
            (
                "refused/invalid_arguments",
                "refused: the arguments do not match the input schema of \"x\": at `/q`",
            ),
            (
                "limited",
                "refused: over the limit of x (1 a minute); retry in 3 s",
            ),
            ("tool_error", "the tool's own words"),
        ] {
            let mut result = failed(kind, false, text);
            assert_eq!(for_the_client(&mut result, "x"), None);
            assert_eq!(result.content, vec![ContentBlock::text(text)]);
        }
    }
}
