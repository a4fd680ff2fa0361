//! `cargo xtask check`: validate a host config, print every diagnostic.

use std::path::Path;
use std::process::ExitCode;

use brain_config::{BindingKind, ConfigError, HostConfig};

/// Checks the config at `path`: diagnostics on stderr and exit 1, or a one-line summary and exit 0.
pub(crate) fn run(path: &Path) -> anyhow::Result<ExitCode> {
    match brain_config::load_file(path) {
        Ok(config) => {
            println!("ok: {}: {}", path.display(), summary(&config));
            for (api, note) in brain_config::model_api::strictness_notes(&config) {
                println!("note: {api}: {note}");
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
    if kinds.is_empty() {
        format!("{n} binding{plural}, no errors")
    } else {
        format!("{n} binding{plural} ({}), no errors", kinds.join(", "))
    }
}
