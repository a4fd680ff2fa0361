//! MCP's JSON-RPC messages as brain sends them, and what it reads from the server's errors: pure
//! functions that every transport and discovery share (no I/O).

use serde_json::{Map, Value, json};
use tracing::Span;

use crate::revision::STATELESS;

/// The JSON-RPC id of `initialize`.
pub(crate) const INIT_ID: u64 = 0;
/// JSON-RPC error code of a rejected protocol revision (SEP-2575).
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The `initialize` request (JSON-RPC id 0) offering `revision`, with no client capabilities:
/// brain offers no elicitation, sampling or roots. Within a call, `_meta` carries the trace
/// context of `span`, the call's `initialize` span.
pub(crate) fn initialize(revision: &str, span: &Span) -> Value {
    let mut request = json!({
        "jsonrpc": "2.0",
        "id": INIT_ID,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "brain", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let mut meta = Map::new();
    crate::telemetry::inject(&mut meta, span);
    if !meta.is_empty() {
        request["params"]["_meta"] = Value::Object(meta);
    }
    request
}

/// `notifications/initialized`.
pub(crate) fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// `notifications/cancelled` for the request `request_id`.
pub(crate) fn cancelled(request_id: u64) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {
            "requestId": request_id,
            "reason": "cancelled by brain (timeout, interruption or a request brain refused)"
        }
    })
}

/// One page of `tools/list` (JSON-RPC id `id`), after `cursor`; `meta` for 2026-07-28.
pub(crate) fn tools_list(id: u64, cursor: Option<&str>, meta: Option<Map<String, Value>>) -> Value {
    let mut params = Map::new();
    if let Some(cursor) = cursor {
        params.insert("cursor".into(), json!(cursor));
    }
    if let Some(meta) = meta {
        params.insert("_meta".into(), Value::Object(meta));
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})
}

/// The `_meta` key of a 2026-07-28 request's revision.
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// The `_meta` entries that replace initialize on 2026-07-28.
pub(crate) fn stateless_meta() -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(PROTOCOL_VERSION_META.into(), json!(STATELESS));
    meta.insert(
        "io.modelcontextprotocol/clientInfo".into(),
        json!({"name": "brain", "version": env!("CARGO_PKG_VERSION")}),
    );
    // No capabilities: no elicitation, sampling or roots.
    meta.insert(CLIENT_CAPABILITIES.into(), json!({}));
    meta
}

/// Whether a JSON-RPC error rejects the revision and names 2026-07-28 among the supported ones.
pub(crate) fn stateless_supported(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64) == Some(UNSUPPORTED_PROTOCOL_VERSION)
        && error["data"]["supported"]
            .as_array()
            .is_some_and(|versions| versions.iter().any(|v| v == STATELESS))
}

/// `JSON-RPC error -32602: unknown tool` from a JSON-RPC error object.
pub(crate) fn rpc_error_text(error: &Value) -> String {
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .unwrap_or_default();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    format!("JSON-RPC error {code}: {message}")
}

/// The next `tools/list` cursor of a page's result, `None` when the listing is done (no cursor,
/// an empty one, or the same one again).
pub(crate) fn next_cursor(result: &Value, cursor: Option<&str>) -> Option<String> {
    result
        .get("nextCursor")
        .and_then(Value::as_str)
        .filter(|next| !next.is_empty() && Some(*next) != cursor)
        .map(str::to_owned)
}

/// A request about the task `task_id`, JSON-RPC id `id`: at 2025-11-25 `tasks/get`,
/// `tasks/result` or `tasks/cancel`; at 2026-07-28 (`revision`, the tasks extension) `tasks/get`,
/// `tasks/update` or `tasks/cancel`, with the revision's `_meta` declaring the extension.
pub(crate) fn task_request(id: u64, method: &str, task_id: &str, revision: Option<&str>) -> Value {
    let mut request =
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"taskId": task_id}});
    if revision == Some(STATELESS) {
        let mut meta = stateless_meta();
        declare_tasks(&mut meta);
        request["params"]["_meta"] = Value::Object(meta);
    }
    request
}

/// The tasks extension's identifier (2026-07-28, SEP-2663).
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The `_meta` key of a 2026-07-28 request's client capabilities.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// JSON-RPC error code of a request that needs a client capability brain did not declare
/// (2026-07-28): the server refused it without running it.
pub(crate) const MISSING_CLIENT_CAPABILITY: i64 = -32021;

/// Declares the tasks extension in a 2026-07-28 request's `_meta` (brain's only client
/// capability): the server may answer with a task.
pub(crate) fn declare_tasks(meta: &mut Map<String, Value>) {
    meta.insert(
        CLIENT_CAPABILITIES.into(),
        json!({"extensions": {TASKS_EXTENSION: {}}}),
    );
}

/// Whether `meta` is a 2026-07-28 request's (it names the revision).
pub(crate) fn is_stateless_meta(meta: &Map<String, Value>) -> bool {
    meta.contains_key(PROTOCOL_VERSION_META)
}

/// Whether a server's capabilities (`server/discover`) declare the tasks extension.
pub(crate) fn declares_tasks(capabilities: &Value) -> bool {
    capabilities["extensions"][TASKS_EXTENSION].is_object()
}

/// Whether a JSON-RPC error says the request needs the tasks extension declared.
pub(crate) fn needs_tasks(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64) == Some(MISSING_CLIENT_CAPABILITY)
        && error["data"]["requiredCapabilities"]["extensions"][TASKS_EXTENSION].is_object()
}
