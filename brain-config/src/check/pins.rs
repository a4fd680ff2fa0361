//! What discovery pins on an MCP binding: the protocol revision the server negotiated, and what
//! the tool's pinned description allows at that revision.

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::{
    BindingKind, PROTOCOL_VERSIONS, STRUCTURED_REVISION, TASK_REVISION, TASKS_EXTENSION_REVISION,
};

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

/// A tool whose pinned `execution.taskSupport` is `required` runs only as an MCP task: its
/// binding must say `task: true`, or every call would fail.
pub(super) fn task_required(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.task_support() == Some("required") && !draft.binding.runs_as_task() {
        out.push(draft.error(
            Rule::TaskRequired,
            "execution/taskSupport",
            "the tool requires MCP task augmentation (`taskSupport: \"required\"`), but the \
             binding does not run it as a task: every call would fail",
            "add `\"task\": true` (re-run `cargo xtask discover`, which sets it and pins \
             `server_tasks`), or remove this binding",
        ));
    }
}

/// `task` and `server_tasks` only where a task can be run: an MCP binding (HTTP or stdio) pinned
/// to a revision that has tasks (2025-11-25, or 2026-07-28's tasks extension), a tool that allows
/// them (at 2025-11-25, where the tool says), a server that declared them.
pub(super) fn task_invalid(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    let mut refuse = |field: &str, message: String, help: &str| {
        out.push(draft.error(Rule::TaskInvalid, field, message, help));
    };
    if binding.kind() != BindingKind::Mcp {
        for (field, set) in [
            ("task", binding.task.is_some()),
            ("server_tasks", binding.server_tasks.is_some()),
        ] {
            if set {
                refuse(
                    field,
                    format!("`{field}` is set on a binding that is not MCP"),
                    "remove it: only MCP tools run as tasks",
                );
            }
        }
        return;
    }
    if !binding.runs_as_task() {
        return;
    }
    let pinned = binding.pinned_revision();
    if !matches!(pinned, Some(TASK_REVISION | TASKS_EXTENSION_REVISION)) {
        refuse(
            "task",
            format!(
                "`task: true`, but the binding pins {}: brain runs MCP tasks at {TASK_REVISION} \
                 and, as the tasks extension, at {TASKS_EXTENSION_REVISION} (earlier revisions \
                 have none)",
                pinned.map_or_else(|| "no revision".to_owned(), |p| format!("revision {p}"))
            ),
            "pin `protocol_version` to the revision the server speaks (re-run `cargo xtask \
             discover` against a server that speaks 2025-11-25 or 2026-07-28), or remove `task`",
        );
    }
    // The tool's own word, where there is one: the tasks extension lets the server decide.
    if pinned != Some(TASKS_EXTENSION_REVISION)
        && !matches!(binding.task_support(), Some("optional" | "required"))
    {
        refuse(
            "task",
            format!(
                "`task: true`, but the tool's pinned `execution.taskSupport` is {}: the server \
                 would refuse the task",
                binding
                    .task_support()
                    .map_or_else(|| "absent (forbidden)".to_owned(), |s| format!("{s:?}"))
            ),
            "remove `task`: the tool is called without a task",
        );
    }
    if binding.server_tasks != Some(true) {
        refuse(
            "task",
            "`task: true`, but `server_tasks` is not: the server did not declare at discovery \
             that it runs tool calls as tasks (`tasks.requests.tools.call` at 2025-11-25, the \
             tasks extension `io.modelcontextprotocol/tasks` at 2026-07-28)"
                .to_owned(),
            "re-run `cargo xtask discover`, which pins what the server declares; remove `task` \
             if it declares no tasks",
        );
    }
}
