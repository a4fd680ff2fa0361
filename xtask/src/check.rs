//! `cargo xtask check`: validate a host config, print every diagnostic.

use std::path::Path;
use std::process::ExitCode;

use brain_config::{BindingKind, ConfigError, HostConfig};

/// Checks the config at `path`: diagnostics on stderr and exit 1, or a one-line summary and exit 0
/// (with the warnings, rendered as the errors are, on stderr first).
pub(crate) fn run(path: &Path) -> anyhow::Result<ExitCode> {
    match brain_config::load_file(path) {
        Ok(config) => {
            let warnings = warnings(&config, path);
            for warning in &warnings {
                eprint!("{}", warning.render(&path.display().to_string()));
            }
            // Each token approver: a writer of the journal's store can forge its decisions.
            let approvers: Vec<String> = config
                .approvals
                .iter()
                .flat_map(brain_config::approvals::warnings)
                .collect();
            for warning in &approvers {
                eprintln!("warning: {warning}");
            }
            let warned = match warnings.len() + approvers.len() {
                0 => String::new(),
                1 => ", 1 warning".to_owned(),
                n => format!(", {n} warnings"),
            };
            println!("ok: {}: {}{warned}", path.display(), summary(&config));
            for (api, note) in brain_config::model_api::strictness_notes(&config) {
                println!("note: {api}: {note}");
            }
            // Each stdio binding's effective sandbox.
            for binding in config.tools.iter().filter(|b| b.command.is_some()) {
                let sandbox = brain_config::Sandbox::summary(binding.sandbox.as_ref());
                println!("sandbox: {}: {sandbox}", binding.name);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(ConfigError::Invalid(diagnostics)) => {
            eprintln!("{diagnostics}");
            Ok(ExitCode::FAILURE)
        }
        Err(error) => Err(error.into()),
    }
}

/// The warnings of a config that loaded: its stdio bindings' (`sandbox-off`) and its policies'
/// (`policy-look-alike`).
fn warnings(config: &HostConfig, path: &Path) -> Vec<brain_config::Diagnostic> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut warnings = brain_config::sandbox_warnings(config);
    if let Ok(Some(policies)) = brain_config::policy::Policies::compile_in(config, dir) {
        warnings.extend_from_slice(policies.warnings());
    }
    warnings
}

/// `cargo xtask policy schema`: the Cedar schema of the config's bindings, to stdout or `out`.
pub(crate) fn policy_schema(path: &Path, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    // The bindings alone must be valid; the policies need not be (the schema is what fixes them).
    let text = std::fs::read(path)?;
    let mut value: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", path.display()))?;
    if let Some(object) = value.as_object_mut() {
        object.remove("policies");
    }
    let config =
        match brain_config::parse(value.to_string().as_bytes(), &path.display().to_string()) {
            Ok(config) => config,
            Err(diagnostics) => {
                eprintln!("{diagnostics}");
                return Ok(ExitCode::FAILURE);
            }
        };
    let schema = brain_config::policy::cedar_schema(&config);
    match out {
        Some(out) => {
            std::fs::write(out, &schema)?;
            eprintln!("wrote {} ({} bindings)", out.display(), config.tools.len());
        }
        None => print!("{schema}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// "3 bindings (2 MCP, 1 HTTP), no errors".
pub(crate) fn summary(config: &HostConfig) -> String {
    let count = |kind| config.tools.iter().filter(|b| b.kind() == kind).count();
    let kinds: Vec<String> = [
        (BindingKind::Mcp, "MCP"),
        (BindingKind::Http, "HTTP"),
        (BindingKind::Sse, "SSE"),
    ]
    .into_iter()
    .filter(|(kind, _)| count(*kind) > 0)
    .map(|(kind, label)| format!("{} {label}", count(kind)))
    .collect();
    let n = config.tools.len();
    let plural = if n == 1 { "" } else { "s" };
    let policies = match &config.policies {
        Some(policies) => {
            let count = |kind| policies.sources.iter().filter(|s| s.kind == kind).count();
            let files = |n: usize, what: &str| match n {
                1 => format!("1 {what} file"),
                n => format!("{n} {what} files"),
            };
            format!(
                ", {} and {} checked",
                files(count(brain_config::policy::SourceKind::Policies), "policy"),
                files(count(brain_config::policy::SourceKind::Tests), "test")
            )
        }
        None => String::new(),
    };
    if kinds.is_empty() {
        format!("{n} binding{plural}{policies}, no errors")
    } else {
        format!(
            "{n} binding{plural} ({}){policies}, no errors",
            kinds.join(", ")
        )
    }
}
