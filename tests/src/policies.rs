//! Twenty Cedar policies over one binding, for the bench (P12) and the performance gate: one
//! `permit` every call of the tenant `local` meets, and nineteen `forbid`s that read the
//! arguments and never fire for a message without "secret" — so each call evaluates all twenty.

use brain_config::HostConfig;
use brain_config::policy::{PolicyConfig, PolicySource, SourceKind};

/// How many policies [`twenty`] writes.
pub const POLICIES: usize = 20;

/// The policies' text, over the binding `tool` whose `message` is a string.
pub fn twenty(tool: &str) -> String {
    let mut text = format!(
        "@id(\"local-calls-{tool}\")\npermit (principal in Brain::Tenant::\"local\", \
         action == Brain::Action::\"tool:{tool}\", resource);\n"
    );
    for n in 1..POLICIES {
        text += &format!(
            "@id(\"no-secret-{n}\")\n@reason(\"secret {n} stays in\")\nforbid (principal, \
             action == Brain::Action::\"tool:{tool}\", resource)\nwhen {{ \
             context.input.message like \"*secret-{n}*\" }};\n"
        );
    }
    text
}

/// `config` with [`twenty`] policies over `tool`, their text in place (as a loaded config or
/// codegen's carries it).
pub fn with_twenty(mut config: HostConfig, tool: &str) -> HostConfig {
    config.policies = Some(PolicyConfig {
        files: vec!["twenty.cedar".into()],
        tests: Vec::new(),
        sources: vec![PolicySource {
            path: "twenty.cedar".into(),
            kind: SourceKind::Policies,
            text: twenty(tool),
        }],
    });
    config
}

/// The token of [`with_approver`]'s approver `ops`.
pub const OPS_TOKEN: &str = "ops-token";

/// A host config of the test server's tools at `url` (timeouts 30 s) with `policies` in
/// `dir/calls.cedar` and the approver `ops` (token [`OPS_TOKEN`]) for the tenant `local`,
/// written to `dir/host.json` and loaded as a user's is.
pub fn with_approver(dir: &std::path::Path, url: &str, policies: &str) -> HostConfig {
    use sha2::{Digest, Sha256};
    let tools = crate::server::bindings_json(url, |_, binding| {
        binding["timeout_seconds"] = serde_json::json!(30);
    });
    let token: String = Sha256::digest(OPS_TOKEN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(dir.join("calls.cedar"), policies).unwrap();
    let host = serde_json::json!({
        "policies": {"files": ["calls.cedar"]},
        "approvals": {"approvers": [{"name": "ops", "tenants": ["local"], "token_sha256": token}]},
        "tools": tools,
    });
    let path = dir.join("host.json");
    std::fs::write(&path, host.to_string()).unwrap();
    brain_config::load_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The approver token of [`held_for_approval`]'s approver `gate`.
pub const APPROVER_TOKEN: &str = "gate-approver-token";

/// `config` with one `@approval` policy that holds every call of `tool` for a person, and the
/// approver `gate` (token [`APPROVER_TOKEN`]) for the tenant `local`.
pub fn held_for_approval(mut config: HostConfig, tool: &str) -> HostConfig {
    use sha2::{Digest, Sha256};
    let text = format!(
        "@id(\"held-{tool}\")\n@approval\npermit (principal, action == \
         Brain::Action::\"tool:{tool}\", resource)\nwhen {{ context.call.approval.granted == \
         true }};\n"
    );
    config.policies = Some(PolicyConfig {
        files: vec!["held.cedar".into()],
        tests: Vec::new(),
        sources: vec![PolicySource {
            path: "held.cedar".into(),
            kind: SourceKind::Policies,
            text,
        }],
    });
    let token: String = Sha256::digest(APPROVER_TOKEN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    config.approvals = Some(brain_config::approvals::ApprovalsConfig {
        approvers: vec![brain_config::approvals::ApproverConfig {
            name: "gate".into(),
            tenants: vec!["local".into()],
            token_sha256: Some(token),
            public_key: None,
            public_key_source: None,
        }],
        expires_seconds: None,
    });
    config
}

/// [`held_for_approval`], its approver `gate` known by the Ed25519 public key `public_pem`
/// (SPKI PEM): each decision signed, and checked by the claim.
pub fn held_for_key_approval(config: HostConfig, tool: &str, public_pem: &str) -> HostConfig {
    let mut config = held_for_approval(config, tool);
    if let Some(approver) = config
        .approvals
        .as_mut()
        .and_then(|a| a.approvers.first_mut())
    {
        approver.token_sha256 = None;
        approver.public_key = Some("gate.pub".into());
        approver.public_key_source = Some(brain_config::audit::PublicKeySource {
            path: "gate.pub".into(),
            text: public_pem.to_owned(),
        });
    }
    config
}
