//! Not API: the runtime's own work for one call without the network (P4), the verification of
//! a listing (P13), and P13's baseline, for benchmarks.

use serde_json::{Map, Value};

use super::{CallRequest, Runtime, RuntimeBuilder};
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
    let call_id = request.call_id.as_deref().unwrap_or("bench");
    let (bound, _) = runtime.inner.gate.check(request, call_id).ok()?;
    let tool = &bound.tool;
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

/// P13's baseline: a runtime that sends calls without verifying their tools against their pins
/// (no `tools/list` on or off the call path is asked for by a call; a stdio binding's spares
/// are still listed at prewarm). Never for a host: it undoes the guarantee P13 prices.
pub fn without_pin_verification(mut builder: RuntimeBuilder<'_>) -> RuntimeBuilder<'_> {
    builder.verify_pins = false;
    builder
}

/// What verifying a listing costs (P13): one `tools/list` result as read (`result`'s bytes)
/// parsed, indexed by name, and every binding of `runtime` checked against its pin under it.
/// Returns the number of bindings the listing lets through.
pub fn verify_listing(runtime: &Runtime, result: &[u8]) -> Result<usize, serde_json::Error> {
    let mut page: Value = serde_json::from_slice(result)?;
    let tools = match page.get_mut("tools").map(Value::take) {
        Some(Value::Array(tools)) => tools,
        _ => Vec::new(),
    };
    let listed =
        crate::pins::Listed::new(tools, std::time::Duration::ZERO, std::time::Instant::now());
    Ok(runtime
        .inner
        .gate
        .tools
        .values()
        .filter(|bound| {
            let tool = &bound.tool;
            (runtime.inner.pins)
                .verdict(tool, &listed.named(crate::pins::mcp_tool(tool)))
                .is_ok()
        })
        .count())
}
