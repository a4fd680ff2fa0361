//! Loading: all errors at once, positions, defaults, and the committed JSON Schema.

use std::path::Path;

use brain_config::{BindingKind, Rule, parse};
use serde_json::{Value, json};

fn binding(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Search the knowledge base.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "url": "https://mcp.example.com/mcp",
        "mcp_tool": "search",
        "token_env": "MCP_API_KEY",
        "tenants": ["local"]
    })
}

fn text(tools: Vec<Value>) -> String {
    serde_json::to_string_pretty(&json!({ "tools": tools })).unwrap()
}

#[test]
fn five_errors_in_five_bindings_are_all_reported() {
    let mut tools: Vec<Value> = (0..5).map(|i| binding(&format!("tool_{i}"))).collect();
    tools[0]["inspect_session"] = json!(true);
    tools[1]["timeout_seconds"] = json!(0);
    tools[2]["url"] = json!("ftp://mcp.example.com/mcp");
    tools[3]["tenants"] = json!([]);
    tools[4]["timeout_secs"] = json!(30);
    let errors = parse(text(tools).as_bytes(), "host.json").unwrap_err();
    let found: Vec<(Rule, &str, Option<&str>)> = errors
        .errors
        .iter()
        .map(|d| (d.rule, d.pointer.as_str(), d.tool.as_deref()))
        .collect();
    assert_eq!(
        found,
        [
            (
                Rule::InspectSessionOnMcp,
                "/tools/0/inspect_session",
                Some("tool_0")
            ),
            (
                Rule::TimeoutRange,
                "/tools/1/timeout_seconds",
                Some("tool_1")
            ),
            (Rule::UrlInvalid, "/tools/2/url", Some("tool_2")),
            (Rule::EmptyTenants, "/tools/3/tenants", Some("tool_3")),
            (Rule::UnknownField, "/tools/4/timeout_secs", Some("tool_4")),
        ]
    );
    assert!(
        errors
            .to_string()
            .ends_with("error: host.json has 5 errors")
    );
}

#[test]
fn inspect_session_on_an_mcp_binding_names_rule_pointer_and_tool() {
    let mut tools = vec![
        binding("docs_fetch"),
        binding("other"),
        binding("a"),
        binding("docs_search"),
    ];
    tools[1]["mcp_tool"] = json!("fetch");
    tools[3]["inspect_session"] = json!(false);
    let errors = parse(text(tools).as_bytes(), "bindings/host.json").unwrap_err();
    assert_eq!(errors.errors.len(), 1, "{errors}");
    let rendered = errors.errors[0].render(&errors.file);
    assert!(
        rendered.starts_with(
            "error[inspect-session-on-mcp]: bindings/host.json:74:7 /tools/3/inspect_session \
             (tool \"docs_search\"): "
        ),
        "{rendered}"
    );
    assert!(
        rendered.contains("\n  help: remove `inspect_session`"),
        "{rendered}"
    );
}

#[test]
fn errors_inside_one_binding_are_all_reported() {
    let mut tool = binding("docs.search");
    tool["timeout_seconds"] = json!("300");
    tool["tenants"] = json!(["local", 7]);
    tool["description"] = json!("");
    tool["url"] = json!("http://mcp.example.com/mcp#x");
    tool.as_object_mut().unwrap().remove("input_schema");
    let errors = parse(text(vec![tool]).as_bytes(), "host.json").unwrap_err();
    let mut rules: Vec<Rule> = errors.errors.iter().map(|d| d.rule).collect();
    rules.sort();
    assert_eq!(
        rules,
        [
            Rule::InvalidType,
            Rule::InvalidType,
            Rule::MissingField,
            Rule::NamePattern,
            Rule::EmptyDescription,
            Rule::UrlFragment,
            Rule::TokenOverPlainHttp,
        ],
        "{errors}"
    );
}

#[test]
fn defaults_are_filled_and_kinds_derived() {
    let mut http = binding("weather");
    http.as_object_mut().unwrap().remove("mcp_tool");
    let mut sse = http.clone();
    sse["name"] = json!("weather_stream");
    sse["transport"] = json!("sse");
    let config = parse(
        text(vec![binding("docs_search"), http, sse]).as_bytes(),
        "host.json",
    )
    .unwrap();
    let kinds: Vec<BindingKind> = config.tools.iter().map(|b| b.kind()).collect();
    assert_eq!(
        kinds,
        [BindingKind::Mcp, BindingKind::Http, BindingKind::Sse]
    );
    assert_eq!(config.tools[0].timeout_seconds, 300);
    assert_eq!(config.tools[0].max_output_bytes, 1_048_576);
    assert_eq!(config.tools[0].pinned_revision(), None);
    assert_eq!(
        config.tools[0].on_input_request(),
        brain_config::OnInputRequest::Fail
    );
    // What is loaded validates again when built in code.
    assert_eq!(brain_config::validate(&config), []);
}

#[test]
fn validate_checks_configs_built_in_code() {
    let mut config = parse(text(vec![binding("docs_search")]).as_bytes(), "host.json").unwrap();
    config.tools.push(config.tools[0].clone());
    config.tools[0].inspect_session = Some(true);
    let rules: Vec<Rule> = brain_config::validate(&config)
        .iter()
        .map(|d| d.rule)
        .collect();
    assert_eq!(rules, [Rule::InspectSessionOnMcp, Rule::DuplicateName]);
}

#[test]
fn committed_json_schema_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("host-config.schema.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == brain_config::host_config_schema(),
        "{} is stale: run `cargo xtask codegen`",
        path.display()
    );
}

#[test]
fn json_schema_accepts_valid_configs_and_rejects_invalid_ones() {
    let schema: Value = serde_json::from_str(&brain_config::host_config_schema()).unwrap();
    let validator = brain_config::compile_schema(&schema).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let valid: Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("valid/mixed.json")).unwrap()).unwrap();
    assert!(validator.is_valid(&valid));
    for rule in [
        "unknown-field",
        "name-pattern",
        "timeout-range",
        "empty-tenants",
        "invalid-type",
    ] {
        let path = fixtures.join(format!("invalid/{rule}.json"));
        let invalid: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert!(
            !validator.is_valid(&invalid),
            "the schema accepts the {rule} fixture"
        );
    }
}

/// A mistake inside `serve` is reported where it is, as the binding fields' are.
#[test]
fn serve_fields_are_checked_where_they_are() {
    let config = |serve: Value| {
        serde_json::to_string_pretty(&json!({"serve": serve, "tools": [binding("docs_search")]}))
            .unwrap()
    };
    let cases = [
        (
            json!({"client": []}),
            Rule::UnknownField,
            "/serve/client",
            "unknown field `client`",
        ),
        (
            json!({"clients": [{"tenant": "local"}]}),
            Rule::MissingField,
            "/serve/clients/0",
            "missing field `token_env`",
        ),
        (
            json!({"concurrent_calls": "8"}),
            Rule::InvalidType,
            "/serve/concurrent_calls",
            "invalid type",
        ),
    ];
    for (serve, rule, pointer, words) in cases {
        let errors = parse(config(serve).as_bytes(), "host.json").unwrap_err();
        assert_eq!(errors.errors.len(), 1, "{errors}");
        let error = &errors.errors[0];
        assert_eq!((error.rule, error.pointer.as_str()), (rule, pointer));
        assert!(error.message.contains(words), "{errors}");
        assert!(error.location.is_some(), "{errors}");
    }
    let loaded = parse(
        config(json!({"clients": [{"tenant": "local", "token_env": "BRAIN_SERVE_TOKEN"}]}))
            .as_bytes(),
        "host.json",
    )
    .unwrap();
    let serve = loaded.serve.unwrap();
    assert_eq!(serve.clients[0].tenant, "local");
    assert_eq!(serve.concurrent_calls_per_client(), 64);
}

/// `audit.public_keys`: read when the config loads (their text kept for codegen, never written
/// back), each an Ed25519 public key; a private key is refused by name and its text never
/// repeated.
#[test]
fn audit_public_keys_are_read_and_a_private_key_is_refused() {
    use ed25519_dalek::pkcs8::{EncodePrivateKey, EncodePublicKey};
    let dir = tempfile::tempdir().unwrap();
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let public = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .unwrap();
    let private = key.to_pkcs8_pem(Default::default()).unwrap();
    std::fs::create_dir(dir.path().join("keys")).unwrap();
    std::fs::write(dir.path().join("keys/audit.pub"), &public).unwrap();
    std::fs::write(dir.path().join("keys/audit.pem"), private.as_bytes()).unwrap();
    std::fs::write(dir.path().join("keys/garbage.pub"), "not a key").unwrap();
    let file = dir.path().join("host.json");
    let config = |keys: Value| {
        let text = serde_json::to_string(&json!({
            "tools": [binding("docs_search")],
            "audit": {"checkpoint_seconds": 30, "public_keys": keys}
        }))
        .unwrap();
        parse(text.as_bytes(), file.to_str().unwrap())
    };

    let loaded = config(json!(["keys/audit.pub"])).unwrap();
    let audit = loaded.audit.as_ref().unwrap();
    assert_eq!(audit.checkpoint_seconds(), 30);
    assert_eq!(audit.retention_days(), 400);
    assert!(audit.enabled());
    assert_eq!(audit.public_key_sources[0].text, public);
    assert_eq!(audit.verifying_keys().unwrap(), [key.verifying_key()]);
    // A written config names the file; its text is not a field one may write.
    let mut written = serde_json::to_value(&loaded).unwrap();
    assert!(written["audit"]["public_key_sources"].is_array());
    written["audit"]["public_key_sources"] = json!([{"path": "x", "text": public}]);
    let errors = parse(written.to_string().as_bytes(), file.to_str().unwrap()).unwrap_err();
    assert_eq!(errors.errors[0].rule, Rule::UnknownField, "{errors}");

    let errors = config(json!([
        "keys/audit.pem",
        "keys/garbage.pub",
        "keys/none.pub"
    ]))
    .unwrap_err();
    let found: Vec<(Rule, &str)> = errors
        .errors
        .iter()
        .map(|d| (d.rule, d.pointer.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (Rule::AuditPublicKey, "/audit/public_keys/0"),
            (Rule::AuditPublicKey, "/audit/public_keys/1"),
            (Rule::AuditPublicKey, "/audit/public_keys/2"),
        ],
        "{errors}"
    );
    let rendered = errors.to_string();
    assert!(rendered.contains("this is a private key"), "{rendered}");
    assert!(!rendered.contains("PRIVATE KEY"), "{rendered}");
    let secret = private.lines().nth(1).unwrap();
    assert!(!rendered.contains(secret), "{rendered}");
}

/// An approver's `public_key`: read when the config loads, compiled in with the config (its text
/// never a field one may write); exactly one of `public_key` and `token_sha256`, no key shared
/// with another approver or with the audit, never a private key (its text not repeated). A token
/// approver is warned about: a store writer can forge its decisions.
#[test]
fn approver_keys_are_read_and_checked() {
    use ed25519_dalek::pkcs8::{EncodePrivateKey, EncodePublicKey};
    let dir = tempfile::tempdir().unwrap();
    let pem = |seed: u8| {
        ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap()
    };
    let private = ed25519_dalek::SigningKey::from_bytes(&[9; 32])
        .to_pkcs8_pem(Default::default())
        .unwrap();
    std::fs::write(dir.path().join("ops.pub"), pem(1)).unwrap();
    std::fs::write(dir.path().join("audit.pub"), pem(2)).unwrap();
    std::fs::write(dir.path().join("ops.pem"), private.as_bytes()).unwrap();
    let file = dir.path().join("host.json");
    let token = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let config = |approvers: Value| {
        let text = serde_json::to_string(&json!({
            "tools": [binding("docs_search")],
            "approvals": {"approvers": approvers},
            "audit": {"public_keys": ["audit.pub"]},
        }))
        .unwrap();
        parse(text.as_bytes(), file.to_str().unwrap())
    };

    let loaded = config(json!([
        {"name": "ops", "tenants": ["local"], "public_key": "ops.pub"},
        {"name": "clerk", "tenants": ["local"], "token_sha256": token},
    ]))
    .unwrap();
    let approvals = loaded.approvals.as_ref().unwrap();
    let ops = &approvals.approvers[0];
    assert_eq!(ops.public_key_source.as_ref().unwrap().text, pem(1));
    assert!(matches!(ops.verifying_key(), Some(Ok(_))));
    let warned = brain_config::approvals::warnings(approvals);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("\"clerk\"") && warned[0].contains("forge"));
    let mut written = serde_json::to_value(&loaded).unwrap();
    assert!(written["approvals"]["approvers"][0]["public_key_source"].is_object());
    written["approvals"]["approvers"][0]["public_key_source"] = json!({"path": "x", "text": "y"});
    let errors = parse(written.to_string().as_bytes(), file.to_str().unwrap()).unwrap_err();
    assert_eq!(errors.errors[0].rule, Rule::UnknownField, "{errors}");

    let errors = config(json!([
        {"name": "ops", "tenants": ["local"], "public_key": "ops.pub"},
        {"name": "both", "tenants": ["local"], "public_key": "ops.pub", "token_sha256": token},
        {"name": "neither", "tenants": ["local"]},
        {"name": "auditor", "tenants": ["local"], "public_key": "audit.pub"},
        {"name": "twin", "tenants": ["local"], "public_key": "ops.pub"},
        {"name": "secret", "tenants": ["local"], "public_key": "ops.pem"},
        {"name": "outside", "tenants": ["local"], "public_key": "../ops.pub"},
    ]))
    .unwrap_err();
    let found: Vec<(Rule, &str)> = errors
        .errors
        .iter()
        .map(|d| (d.rule, d.pointer.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (Rule::ApproverInvalid, "/approvals/approvers/1/token_sha256"),
            (Rule::ApproverInvalid, "/approvals/approvers/2/name"),
            (Rule::ApproverInvalid, "/approvals/approvers/3/public_key"),
            (Rule::ApproverInvalid, "/approvals/approvers/4/public_key"),
            (Rule::ApproverInvalid, "/approvals/approvers/5/public_key"),
            (Rule::ApproverInvalid, "/approvals/approvers/6/public_key"),
        ],
        "{errors}"
    );
    let rendered = errors.to_string();
    assert!(
        rendered.contains("also one of `audit.public_keys`"),
        "{rendered}"
    );
    assert!(rendered.contains("shares its public key"), "{rendered}");
    assert!(rendered.contains("this is a private key"), "{rendered}");
    assert!(
        !rendered.contains(private.lines().nth(1).unwrap()),
        "{rendered}"
    );
}
