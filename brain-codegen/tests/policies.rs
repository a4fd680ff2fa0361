//! Policies on the codegen corpus's real tools (192 bindings from real MCP servers, names with
//! `-`, numbers Cedar cannot type): the Cedar schema derived from all of them, the policies in
//! `tests/policies/corpus.cedar` validated strictly against it, and the policy tests beside them
//! (`corpus.tests.json`: allow, deny, forbid over permit, an optional argument absent, Long
//! bounds, Set membership, enums, `like` on a path) run by the load itself, as
//! `cargo xtask check` runs them.

use brain_config::policy::{Decision, Policies, PolicyRequest, Principal, Via};
use serde_json::{Value, json};

fn corpus_with_policies() -> brain_config::HostConfig {
    let here = env!("CARGO_MANIFEST_DIR");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{here}/corpus/host.json")).unwrap())
            .unwrap();
    config["policies"] = json!({"files": ["*.cedar"], "tests": ["*.tests.json"]});
    let text = serde_json::to_string_pretty(&config).unwrap();
    // Named as if it were `tests/policies/host.json`: the files are relative to it.
    brain_config::parse(text.as_bytes(), &format!("{here}/tests/policies/host.json"))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_corpus_policies_validate_and_their_tests_pass() {
    let config = corpus_with_policies();
    let policies = Policies::compile(&config).unwrap().expect("policies");
    assert_eq!(policies.ids().len(), 7);
    let schema = policies.cedar_schema();
    assert_eq!(
        schema.matches("action \"tool:").count(),
        config.tools.len(),
        "an action per binding"
    );
    assert!(schema.contains("\"tool:everything_get-sum\""), "{schema}");
}

#[test]
fn a_deny_names_the_forbid_and_its_reason() {
    let config = corpus_with_policies();
    let policies = Policies::compile(&config).unwrap().unwrap();
    let decision = policies.decide(&PolicyRequest {
        principal: &Principal::Tenant("local".into()),
        binding: "filesystem_write_file",
        arguments: &json!({"path": "/tmp/agent/prod.env", "content": "x"}),
        via: Via::Serve,
        session: "s",
        granted: false,
        subject: None,
    });
    assert_eq!(
        decision,
        Decision::Deny {
            reason: "refused by policy: forbid \"no-env-files\" (env files hold secrets)".into(),
            approvable: false
        }
    );
}
