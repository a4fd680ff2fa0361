//! What the hostile-client tests share (`serve_hostile.rs`, `serve_flood.rs`): a config of the
//! test server's tools, raw requests, a 2026-07-28 call, a session's ping and DELETE.

use serde_json::{Value, json};

use super::*;

/// The test server's tools for acme and globex, with `serve` patched.
pub fn hostile_config(dir: &Path, url: &str, patch: impl Fn(&mut Value)) -> String {
    test_server_config_with(dir, url, patch, |_, _| {})
}

/// Raw bytes to serve: (status, head, body).
pub fn raw(authority: &str, request: &[u8]) -> (u16, String, String) {
    exchange(authority, request)
}

/// The JSON-RPC message of a response body (JSON, or the first SSE `data:`).
pub fn message(body: &str) -> Value {
    let data = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(data).unwrap_or(Value::Null)
}

/// A 2026-07-28 `tools/call` of `tool` as `token`, with `meta`: the JSON-RPC result.
pub fn call(authority: &str, token: &str, tool: &str, arguments: Value, meta: Value) -> Value {
    let mut meta = meta;
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}})
    .to_string();
    let bearer = format!("Bearer {token}");
    let (status, _, body) = post_body(
        authority,
        &[
            ("Authorization", &bearer),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &body,
    );
    assert_eq!(status, 200, "{body}");
    message(&body)["result"].clone()
}

/// The `Mcp-Session-Id` of a response head, if it has one.
pub fn maybe_session(head: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    })
}

/// A `ping` on `session` as `token`: the status.
pub fn ping(authority: &str, token: &str, session: &str) -> u16 {
    let bearer = format!("Bearer {token}");
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    post_body(
        authority,
        &[
            ("Authorization", &bearer),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        &body,
    )
    .0
}

/// A DELETE of `session` as `token`: the status.
pub fn delete(authority: &str, token: &str, session: &str) -> u16 {
    raw(
        authority,
        format!(
            "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\n\
             Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n\
             Connection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .0
}

pub fn initialize_body(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"}}})
    .to_string()
}
