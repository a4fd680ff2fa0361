//! Calling the test server through brain-runtime, for the end-to-end tests: a config of bindings
//! to every test-server tool, a call as tenant `local` (session `session-1`, call `call-1`), the
//! result's text, and waiting for a counter the server updates after the client has its result.

use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use brain_runtime::{CallRequest, ContentBlock, Runtime, Scope, ToolResult};
use serde_json::{Value, json};

use crate::server::{Stats, bindings_json};

/// A host config with one binding per test-server tool at `url`, named as on the server;
/// `patch` may change each (it gets the tool's name). Validated with every rule.
pub fn config(url: &str, patch: impl Fn(&str, &mut Value)) -> brain_config::HostConfig {
    let text = serde_json::to_string(&json!({ "tools": bindings_json(url, patch) }))
        .expect("JSON serializes");
    brain_config::parse(text.as_bytes(), "test.json").unwrap_or_else(|e| panic!("{e}"))
}

/// The request the tests make: `tool` with `arguments`, as tenant `local`, session
/// `session-1`, call id `call-1`.
pub fn request(tool: &str, arguments: Value) -> CallRequest {
    CallRequest::new(
        tool,
        Scope {
            tenant_id: "local".into(),
            session_id: "session-1".into(),
        },
        arguments,
    )
    .with_call_id("call-1")
}

/// Calls `tool` and waits for its result.
pub async fn call(runtime: &Runtime, tool: &str, arguments: Value) -> ToolResult {
    runtime.call(request(tool, arguments)).result().await
}

/// The result's content as text: text blocks as they are, images as `<mime type>`, one a line.
pub fn text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::Image { mime_type, .. } => format!("<{mime_type}>"),
            other => panic!("a content block the tests do not know: {other:?}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits (bounded, 2 s) for a counter the server updates after the client has its result.
pub async fn eventually(counter: &AtomicUsize, at_least: usize) -> usize {
    for _ in 0..100 {
        if Stats::get(counter) >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Stats::get(counter)
}
