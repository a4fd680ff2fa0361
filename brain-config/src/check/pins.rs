//! What discovery pins on an MCP binding: the protocol revision the server negotiated, and what
//! the tool's pinned description allows at that revision.

use serde_json::Value;

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::{BindingKind, PROTOCOL_VERSIONS, STRUCTURED_REVISION};

/// `protocol_version` is set only on MCP bindings, and names a revision brain speaks.
pub(super) fn protocol_version(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(version) = &draft.binding.protocol_version else {
        return;
    };
    if draft.binding.kind() != BindingKind::Mcp {
        out.push(draft.error(
            Rule::ProtocolVersionOnHttp,
            "protocol_version",
            format!(
                "`protocol_version` is set on an {} tool, which is not MCP",
                draft.binding.kind().as_str().to_uppercase()
            ),
            "remove it, or add `mcp_tool` if this is an MCP binding",
        ));
    } else if !PROTOCOL_VERSIONS.contains(&version.as_str()) {
        out.push(draft.error(
            Rule::ProtocolVersionUnknown,
            "protocol_version",
            format!("`protocol_version` {version:?} is not an MCP revision brain speaks"),
            format!(
                "use one of {}, or remove it to accept whichever of them the server speaks; \
                 `cargo xtask discover` records the revision the server negotiated",
                PROTOCOL_VERSIONS.join(", ")
            ),
        ));
    }
}

/// A binding pinned to a revision older than 2025-06-18 has no `output_schema`: those
/// revisions have no structured content, so no result could ever be checked against it.
pub(super) fn output_schema_before_structured(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(version) = draft.binding.pinned_revision() else {
        return;
    };
    let known = PROTOCOL_VERSIONS.contains(&version);
    if draft.binding.output_schema.is_some() && known && version < STRUCTURED_REVISION {
        out.push(draft.error(
            Rule::OutputSchemaBeforeStructured,
            "output_schema",
            format!(
                "`output_schema` is set, but the binding pins {version}, which has no structured \
                 content (from {STRUCTURED_REVISION} on)"
            ),
            "remove `output_schema`, or re-run `cargo xtask discover` if the server now speaks a \
             newer revision",
        ));
    }
}

/// A tool whose pinned `execution.taskSupport` is `required` runs only as an MCP task, and brain
/// calls tools without tasks: every call would fail, so the binding is refused.
pub(super) fn task_required(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let required = draft
        .binding
        .execution
        .as_ref()
        .and_then(|execution| execution.get("taskSupport"))
        .and_then(Value::as_str)
        == Some("required");
    if required {
        out.push(draft.error(
            Rule::TaskRequired,
            "execution/taskSupport",
            "the tool requires MCP task augmentation (`taskSupport: \"required\"`), and brain \
             does not run MCP tasks: every call would fail",
            "remove this binding; brain can bind the server's tools whose `taskSupport` is \
             \"optional\" or \"forbidden\" (or absent)",
        ));
    }
}
