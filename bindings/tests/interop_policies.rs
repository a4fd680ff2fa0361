//! Policies on a third-party server's tools: the official Python SDK (`mcp==2.3.0`, serving
//! `tests/interop/python_server.py`), its tools discovered with the library functions `cargo
//! xtask discover` uses (its `Literal` becomes a string `enum`, a Cedar enum type), then called
//! through `brain-harness call`, counted at the server: a refund over the limit is refused and
//! never sent, one under it runs once; a typo'd attribute fails the load with file:line:column.

use std::process::Command;

use serde_json::{Value, json};

const POLICIES: &str = r#"// Refunds: up to 100, in dollars, for local.
@id("refunds-up-to-100")
@reason("larger refunds go through finance")
permit (principal == Brain::Tenant::"local", action == Brain::Action::"tool:refund", resource)
when {
  context.input.amount <= 100 &&
  (if context.input has currency then context.input.currency == Brain::refund_currency::"usd"
   else true)
};
"#;

fn call(config: &std::path::Path, call_id: &str, arguments: Value) -> (Option<i32>, Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .env("BRAIN_STATE_URL", "memory:")
        .arg("--config")
        .arg(config)
        .args(["call", "--tenant", "local", "--call-id", call_id, "refund"])
        .arg(arguments.to_string())
        .output()
        .expect("brain-harness runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result = stdout
        .lines()
        .last()
        .map(|line| serde_json::from_str(line).unwrap())
        .unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), result, stderr)
}

#[test]
fn a_refund_over_the_limit_is_refused_at_the_gate_and_one_under_it_runs() {
    let peer = tests::peers::Peer::python();
    let discovery = tests::peers::discover(&peer.url);
    let settings = tests::peers::local_settings(&peer.url, &discovery);
    let refund = discovery
        .tools
        .iter()
        .find(|tool| tool["name"] == "refund")
        .expect("the server lists refund");
    let binding = brain_config::discovery::binding_from_tool(refund, &settings);
    assert_eq!(
        binding.input_schema["properties"]["currency"]["enum"],
        json!(["usd", "eur"])
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    std::fs::write(dir.path().join("policies/refunds.cedar"), POLICIES).unwrap();
    let config = dir.path().join("host.json");
    std::fs::write(
        &config,
        json!({"policies": {"files": ["policies/*.cedar"]}, "tools": [binding]}).to_string(),
    )
    .unwrap();

    let before = peer.tool_calls();
    let (code, over, stderr) = call(&config, "refund-1", json!({"order": "o-1", "amount": 400}));
    assert_eq!(code, Some(1), "{over} {stderr}");
    assert_eq!(over["kind"], json!("policy_denied"), "{over}");
    assert_eq!(over["unknown_outcome"], json!(false), "{over}");
    assert_eq!(
        over["content"][0]["text"],
        json!("refused by policy: no policy permits \"refund\" for Brain::Tenant::\"local\"")
    );
    let (_, euros, _) = call(
        &config,
        "refund-2",
        json!({"order": "o-1", "amount": 5, "currency": "eur"}),
    );
    assert_eq!(euros["kind"], json!("policy_denied"), "{euros}");
    assert_eq!(peer.tool_calls() - before, 0, "a denied call is never sent");

    let (code, under, stderr) = call(&config, "refund-3", json!({"order": "o-1", "amount": 40}));
    assert_eq!(code, Some(0), "{under} {stderr}");
    assert_eq!(under["content"][0]["text"], json!("refunded 40 usd of o-1"));
    assert_eq!(peer.tool_calls() - before, 1, "the allowed call ran once");

    // A typo'd attribute: the load fails, naming the file, line and column, and nothing runs.
    std::fs::write(
        dir.path().join("policies/refunds.cedar"),
        POLICIES.replace("context.input.amount", "context.input.amout"),
    )
    .unwrap();
    let (code, _, stderr) = call(&config, "refund-4", json!({"order": "o-1", "amount": 40}));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("policies/refunds.cedar:6:3: policy \"refunds-up-to-100\""),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `amount`?"), "{stderr}");
    assert_eq!(peer.tool_calls() - before, 1);
}
