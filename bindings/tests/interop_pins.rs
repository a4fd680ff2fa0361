//! Pins enforced at run time against third-party servers that change a tool after review: the
//! official Python SDK (`mcp==2.3.0`, `tests/interop/python_server.py`, at 2026-07-28 and in a
//! 2025-11-25 session) and the official TypeScript SDK (`@modelcontextprotocol/sdk@1.32.2`,
//! `tests/interop/ts_server.mjs`, 2025-11-25 sessions; it sends `notifications/tools/list_changed`
//! to its connected sessions). Their tools are discovered with the library functions `cargo
//! xtask discover` uses (pinned), then called through `brain-harness call`, counted at the
//! server: after `refund`'s `amount` turns from an integer into a string, its next call is
//! refused `pin_drift` naming `inputSchema` and the server counts none; `echo` still runs;
//! `brain-harness drift --live` names the change; put back, `refund` runs again.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use tests::peers::Peer;

fn harness(config: &Path, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let output = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .env("BRAIN_STATE_URL", "memory:")
        // Only what a test sets: no logs, no export to a developer's collector.
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("brain-harness runs");
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    (output.status.code(), lines)
}

fn call(config: &Path, call_id: &str, tool: &str, arguments: Value) -> Value {
    let args = ["call", "--tenant", "local", "--call-id", call_id, tool];
    let (_, lines) = harness(config, &[&args[..], &[&arguments.to_string()]].concat());
    lines.last().cloned().unwrap_or(Value::Null)
}

/// `echo` and `refund` of `peer`, discovered and pinned, at `revision` (else the one found).
fn config(dir: &Path, peer: &Peer, revision: Option<&str>) -> std::path::PathBuf {
    let discovery = tests::peers::discover(&peer.url);
    let mut settings = tests::peers::local_settings(&peer.url, &discovery);
    if let Some(revision) = revision {
        settings.protocol_version = revision.to_owned();
    }
    let bindings: Vec<brain_config::ToolBinding> = ["echo", "refund"]
        .iter()
        .map(|name| {
            let tool = discovery.tools.iter().find(|t| t["name"] == *name).unwrap();
            brain_config::discovery::binding_from_tool(tool, &settings)
        })
        .collect();
    assert!(bindings.iter().all(|b| b.pin.is_some()), "discovery pins");
    let path = dir.join(format!("host-{}.json", revision.unwrap_or("found")));
    std::fs::write(&path, json!({ "tools": bindings }).to_string()).unwrap();
    path
}

fn a_changed_tool_is_refused_before_the_send(peer: &Peer, revision: Option<&str>) {
    let what = format!("{} at {revision:?}", peer.url);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), peer, revision);
    let refund = json!({"order": "o-1", "amount": 5});
    let before = peer.tool_calls();
    let ran = call(&config, "1", "refund", refund.clone());
    assert_eq!(ran["is_error"], json!(false), "{what}: {ran}");
    assert_eq!(peer.tool_calls(), before + 1, "{what}");

    peer.drift("refund");
    let refused = call(&config, "2", "refund", refund.clone());
    assert_eq!(refused["kind"], json!("pin_drift"), "{what}: {refused}");
    assert_eq!(
        refused["unknown_outcome"],
        json!(false),
        "{what}: {refused}"
    );
    let said = refused["content"][0]["text"].as_str().unwrap_or_default();
    assert!(said.contains("`inputSchema`"), "{what}: {said}");
    assert_eq!(peer.tool_calls(), before + 1, "{what}: nothing sent");
    let echo = call(&config, "3", "echo", json!({"message": "hi"}));
    assert_eq!(echo["is_error"], json!(false), "{what}: {echo}");
    assert_eq!(peer.tool_calls(), before + 2, "{what}");

    let (code, live) = harness(&config, &["drift", "--live", "--json"]);
    assert_eq!(code, Some(1), "{what}: {live:?}");
    let refund_live = live
        .iter()
        .find(|l| l["binding"] == json!("refund"))
        .unwrap();
    assert_eq!(refund_live["fields"], json!(["inputSchema"]), "{what}");
    assert_eq!(refund_live["refused"], json!(true), "{what}");

    peer.drift("none");
    let back = call(&config, "4", "refund", refund);
    assert_eq!(back["is_error"], json!(false), "{what}: {back}");
    assert_eq!(peer.tool_calls(), before + 3, "{what}");
    let (code, _) = harness(&config, &["drift", "--live", "--json"]);
    assert_eq!(code, Some(0), "{what}");
}

#[test]
fn the_python_sdk_server_changing_a_tool_is_refused_at_both_eras() {
    let peer = Peer::python();
    a_changed_tool_is_refused_before_the_send(&peer, None);
    a_changed_tool_is_refused_before_the_send(&peer, Some("2025-11-25"));
}

#[test]
fn the_typescript_sdk_server_changing_a_tool_is_refused() {
    let peer = Peer::typescript();
    a_changed_tool_is_refused_before_the_send(&peer, None);
}
