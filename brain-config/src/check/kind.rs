//! Fields that belong to one kind of binding: `inspect_session` and `transport` to HTTP and SSE
//! tools, `on_input_request` to MCP bindings.

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::BindingKind;

/// `inspect_session` applies to HTTP and SSE tools only: an MCP binding must not set it (brain
/// never sends session inspection tokens to MCP servers).
pub(super) fn inspect_session_on_mcp(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.kind() == BindingKind::Mcp && draft.binding.inspect_session.is_some() {
        out.push(draft.error(
            Rule::InspectSessionOnMcp,
            "inspect_session",
            "`inspect_session` is not allowed on an MCP binding",
            "remove `inspect_session`: it applies to HTTP and SSE tools, and brain never sends \
             session inspection tokens to MCP servers",
        ));
    }
}

/// `transport` chooses between HTTP and SSE tools: an MCP binding must not set it (it speaks
/// Streamable HTTP with `url`, or stdio with `command`).
pub(super) fn transport_on_mcp(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.kind() == BindingKind::Mcp && draft.binding.transport.is_some() {
        out.push(draft.error(
            Rule::TransportOnMcp,
            "transport",
            "`transport` is not allowed on an MCP binding",
            "remove `transport`: MCP bindings use Streamable HTTP (`url`) or stdio (`command`)",
        ));
    }
}

/// `on_input_request` is set only on MCP bindings: only MCP servers ask for user input.
pub(super) fn on_drift_on_http(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.on_drift.is_some() && draft.binding.kind() != BindingKind::Mcp {
        out.push(draft.error(
            Rule::OnDriftOnHttp,
            "on_drift",
            format!(
                "`on_drift` is set on an {} tool, which has no tools/list to drift from",
                draft.binding.kind().as_str().to_uppercase()
            ),
            "remove it, or add `mcp_tool` if this is an MCP binding",
        ));
    }
}

pub(super) fn on_input_request_on_http(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.on_input_request.is_some() && draft.binding.kind() != BindingKind::Mcp {
        out.push(draft.error(
            Rule::OnInputRequestOnHttp,
            "on_input_request",
            format!(
                "`on_input_request` is set on an {} tool, which is not MCP",
                draft.binding.kind().as_str().to_uppercase()
            ),
            "remove it, or add `mcp_tool` if this is an MCP binding",
        ));
    }
}
