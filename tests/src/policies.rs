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
