//! `cargo xtask check` as a user runs it: the real binary, real files, exit codes and output.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("xtask runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../brain-config/tests/fixtures")
        .join(path)
        .display()
        .to_string()
}

#[test]
fn valid_config_prints_a_summary_and_exits_0() {
    let output = xtask(&["check", "--config", &fixture("valid/mixed.json")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.starts_with("ok: "), "{out}");
    assert!(
        out.ends_with(": 6 bindings (4 MCP, 1 HTTP, 1 SSE), no errors\n"),
        "{out}"
    );
    assert_eq!(stderr(&output), "");
}

#[test]
fn the_default_config_is_bindings_host_json() {
    let output = xtask(&["check"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("host.json: "),
        "{}",
        stdout(&output)
    );
}

#[test]
fn invalid_config_prints_rustc_style_diagnostics_and_exits_1() {
    let file = fixture("invalid/inspect-session-on-mcp.json");
    let output = xtask(&["check", "--config", &file]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.starts_with(&format!(
            "error[inspect-session-on-mcp]: {file}:44:7 /tools/1/inspect_session (tool \"docs_fetch\"): "
        )),
        "{err}"
    );
    assert!(err.contains("\n  help: "), "{err}");
    assert!(
        err.ends_with(&format!("error: {file} has 1 error\n")),
        "{err}"
    );
    assert_eq!(stdout(&output), "");
}

#[test]
fn unreadable_config_exits_1() {
    let output = xtask(&["check", "--config", "/nonexistent/host.json"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("error: cannot read /nonexistent/host.json: "),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_config_with_128_bindings_is_valid() {
    let tools: Vec<_> = (0..128)
        .map(|i| {
            json!({
                "name": format!("tool_{i:03}"),
                "description": format!("Tool number {i}."),
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                        "filters": {"type": "array", "items": {"$ref": "#/$defs/filter"}}
                    },
                    "required": ["query"],
                    "$defs": {"filter": {"type": "object", "properties": {"field": {"type": "string"}}}}
                },
                "output_schema": {"type": "object", "properties": {"hits": {"type": "array"}}},
                "url": format!("https://mcp{}.example.com/mcp", i % 4),
                "mcp_tool": format!("tool_{i}"),
                "token_env": "MCP_API_KEY",
                "tenants": ["local", "staging"],
                "protocol_version": "2025-11-25",
                "annotations": {"readOnlyHint": true}
            })
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "tools": tools })).unwrap(),
    )
    .unwrap();
    let output = xtask(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).ends_with(": 128 bindings (128 MCP), no errors\n"));
}

#[test]
fn usage_errors_exit_2() {
    let output = xtask(&["check", "--conifg", "x.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--config"), "{}", stderr(&output));
}

/// A `forbid` that names one of two bindings of one upstream tool: the config loads (exit 0),
/// and the warning, with both bindings' names and how to fix it, is on stderr.
#[test]
fn a_forbid_naming_one_of_two_bindings_of_a_tool_warns_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let binding = |name: &str| {
        json!({"name": name, "description": "Refund an order.", "url": "https://pay.example.com/mcp",
            "mcp_tool": "refund", "tenants": ["acme"], "input_schema": {"type": "object",
            "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}})
    };
    let config = json!({"policies": {"files": ["p.cedar"]},
        "tools": [binding("refund"), binding("refund_v2")]});
    std::fs::write(dir.path().join("host.json"), config.to_string()).unwrap();
    std::fs::write(
        dir.path().join("p.cedar"),
        "@id(\"all\")\npermit (principal, action, resource);\n\n@id(\"big\")\n\
         forbid (principal, action == Brain::Action::\"tool:refund\", resource)\n\
         when { context.input.amount > 100 };\n",
    )
    .unwrap();
    let path = dir.path().join("host.json");
    let output = xtask(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    let cedar = dir.path().join("p.cedar");
    assert!(
        err.starts_with(&format!(
            "warning[policy-look-alike]: {}:4:1: policy \"big\": ",
            cedar.display()
        )),
        "{err}"
    );
    assert!(err.contains("\"refund\" and not \"refund_v2\""), "{err}");
    assert!(
        err.contains(
            "`action in [Brain::Action::\"tool:refund\", Brain::Action::\"tool:refund_v2\"]`"
        ),
        "{err}"
    );
    assert!(
        stdout(&output).ends_with(", no errors, 1 warning\n"),
        "{}",
        stdout(&output)
    );
}
