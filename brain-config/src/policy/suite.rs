//! Policy tests: `{"name"?, "principal", "binding", "arguments", "expect", "via"?}` — a file
//! holds one test or a list. Each runs as the gate would decide the call: the tenant allowlist
//! and the input schema first, then both policy passes. A failing test fails the load.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::request::{Decision, PolicyRequest, Principal, Via};
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::HostConfig;
use crate::policy_config::SourceKind;
use crate::source::SourceIndex;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    #[serde(default)]
    name: Option<String>,
    principal: CasePrincipal,
    binding: String,
    #[serde(default = "empty_object")]
    arguments: Value,
    expect: Expect,
    #[serde(default)]
    via: Option<Via>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CasePrincipal {
    /// A tenant.
    Tenant(String),
    /// `{"tenant"}`, or a user: `{"tenant", "issuer", "subject"}`.
    Object {
        tenant: String,
        #[serde(default)]
        issuer: Option<String>,
        #[serde(default)]
        subject: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Expect {
    Allow,
    Deny,
    Approval,
}

impl Expect {
    fn as_str(self) -> &'static str {
        match self {
            Expect::Allow => "allow",
            Expect::Deny => "deny",
            Expect::Approval => "approval",
        }
    }
}

/// Runs every test of the config's test files, reporting each malformed or failing one.
pub(super) fn run(
    decide: &dyn Fn(&PolicyRequest<'_>) -> Decision,
    config: &HostConfig,
    dir: &Path,
    errors: &mut Vec<Diagnostic>,
) {
    let Some(policy_config) = &config.policies else {
        return;
    };
    for source in &policy_config.sources {
        if source.kind != SourceKind::Tests {
            continue;
        }
        let file = dir.join(&source.path).display().to_string();
        let error = |pointer: &str, location, message: String, help: &str| Diagnostic {
            location,
            file: Some(file.clone()),
            ..Diagnostic::new(Rule::PolicyTest, pointer, message, help)
        };
        let document: Value = match serde_json::from_str(&source.text) {
            Ok(document) => document,
            Err(e) => {
                errors.push(error(
                    "",
                    Some(crate::source::Location {
                        line: e.line().max(1),
                        column: e.column().max(1),
                    }),
                    format!("the test file is not JSON: {e}"),
                    "write a test object, or a list of them",
                ));
                continue;
            }
        };
        let index = SourceIndex::new(&source.text);
        let cases: Vec<(String, Value)> = match document {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("/{i}"), v))
                .collect(),
            other => vec![(String::new(), other)],
        };
        for (pointer, value) in cases {
            let location = index.locate(&pointer);
            let case: Case = match serde_json::from_value(value) {
                Ok(case) => case,
                Err(e) => {
                    errors.push(error(
                        &pointer,
                        location,
                        format!("not a policy test: {e}"),
                        "write {\"principal\": \"TENANT\", \"binding\": \"NAME\", \"arguments\": \
                         {...}, \"expect\": \"allow\" | \"deny\" | \"approval\"}",
                    ));
                    continue;
                }
            };
            if let Err((message, help)) = check_case(decide, config, &case) {
                let name = case
                    .name
                    .as_deref()
                    .map(|n| format!("test {n:?}: "))
                    .unwrap_or_default();
                errors.push(error(&pointer, location, format!("{name}{message}"), &help));
            }
        }
    }
}

fn check_case(
    decide: &dyn Fn(&PolicyRequest<'_>) -> Decision,
    config: &HostConfig,
    case: &Case,
) -> Result<(), (String, String)> {
    let Some(binding) = config.tools.iter().find(|b| b.name == case.binding) else {
        let near = config
            .tools
            .iter()
            .map(|b| b.name.as_str())
            .min_by_key(|n| strsim::levenshtein(n, &case.binding))
            .unwrap_or_default();
        return Err((
            format!("there is no binding {:?}", case.binding),
            format!("did you mean {near:?}?"),
        ));
    };
    let principal = match &case.principal {
        CasePrincipal::Tenant(tenant) => Principal::Tenant(tenant.clone()),
        CasePrincipal::Object {
            tenant,
            issuer: None,
            subject: None,
        } => Principal::Tenant(tenant.clone()),
        CasePrincipal::Object {
            tenant,
            issuer: Some(issuer),
            subject: Some(subject),
        } => Principal::User {
            tenant: tenant.clone(),
            issuer: issuer.clone(),
            subject: subject.clone(),
        },
        CasePrincipal::Object { .. } => {
            return Err((
                "a user principal needs both `issuer` and `subject`".to_owned(),
                "write {\"tenant\", \"issuer\", \"subject\"}, or only the tenant".to_owned(),
            ));
        }
    };
    let got = if !binding.tenants.iter().any(|t| t == principal.tenant()) {
        (
            Expect::Deny,
            format!(
                "the tenant allowlist of {:?} refuses tenant {:?} before any policy",
                binding.name,
                principal.tenant()
            ),
        )
    } else {
        let validator = crate::schema::compile_schema(&binding.input_schema)
            .map_err(|e| (format!("the binding's input schema: {e:?}"), String::new()))?;
        if let Some(e) = validator.iter_errors(&case.arguments).next() {
            return Err((
                format!(
                    "the arguments do not match the input schema of {:?} at `{}`: {e}",
                    binding.name,
                    e.instance_path()
                ),
                "a test's arguments must pass the gate's schema check, as a call's do".to_owned(),
            ));
        }
        let request = PolicyRequest {
            principal: &principal,
            binding: &binding.name,
            arguments: &case.arguments,
            via: case.via.unwrap_or(Via::Rust),
            session: "policy-test",
            granted: false,
            subject: None,
        };
        match decide(&request) {
            Decision::Allow => (Expect::Allow, "allowed".to_owned()),
            Decision::Deny {
                reason,
                approvable: true,
            } => (Expect::Approval, reason),
            Decision::Deny { reason, .. } => (Expect::Deny, reason),
        }
    };
    if got.0 == case.expect {
        return Ok(());
    }
    Err((
        format!(
            "expected {}, got {}: {}",
            case.expect.as_str(),
            got.0.as_str(),
            got.1
        ),
        "fix the policy, or the test's `expect` if the policy is right".to_owned(),
    ))
}
