//! Not API: the runtime's own work for one call without the network, for benchmarks (P4).

use serde_json::{Map, Value};

use super::{CallRequest, Runtime};
use crate::call::{Round, call_message};
use crate::event::ToolResult;

/// The gate (tool, tenant, token, argument validation, policies), the `tools/call` message as the
/// binding's revision sends it (its `_meta`, and for 2026-07-28 its headers) serialized to
/// bytes, and the conversion of `result` into a `tool.result` — everything a call does but
/// the I/O. `None` when the gate refuses.
pub fn per_call_work(
    runtime: &Runtime,
    request: &CallRequest,
    result: &Value,
) -> Option<ToolResult> {
    let bound = runtime.check(request).ok()?;
    let tool = &bound.tool;
    let call_id = request.call_id.as_deref().unwrap_or("bench");
    let binding = &tool.binding;
    let meta = if binding.pinned_revision() == Some(crate::revision::STATELESS) {
        let name = binding.mcp_tool.as_deref().unwrap_or_default();
        std::hint::black_box(crate::routing::headers(
            name,
            &request.arguments,
            bound.route.param_headers(),
        ));
        crate::mcp::stateless_meta()
    } else {
        Map::new()
    };
    let message = call_message(
        binding,
        call_id,
        &request.scope,
        &request.arguments,
        meta,
        &Round::first(),
        false,
    );
    std::hint::black_box(serde_json::to_vec(&message).ok()?);
    crate::convert::convert(
        call_id,
        result,
        tool.output.as_ref(),
        binding.max_output_bytes,
    )
    .ok()
}
