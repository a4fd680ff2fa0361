//! `cargo xtask discover --check CONFIG`: every pinned MCP binding of a config against its live
//! server, the drift printed, and the policies the drift would break named.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use brain_config::discovery::{Server, drift, likely_rename};
use brain_config::{BindingKind, ConfigError, HostConfig, ToolBinding};
use brain_runtime::discover::Discovery;

use super::{Access, DiscoverArgs, list, where_};

impl DiscoverArgs {
    /// `--check CONFIG`: every MCP binding against its live server (those on behalf of users
    /// listed as the user whose token `--subject-token-env` names).
    pub(super) async fn check_config(&self, path: &Path) -> anyhow::Result<ExitCode> {
        check(path, self.subject_token_env.as_deref()).await
    }
}

/// `--check CONFIG`: every MCP binding against its live server.
async fn check(path: &Path, subject_token_env: Option<&str>) -> anyhow::Result<ExitCode> {
    let config = match brain_config::load_file(path) {
        Ok(config) => config,
        Err(ConfigError::Invalid(diagnostics)) => {
            eprintln!("{diagnostics}");
            return Ok(ExitCode::FAILURE);
        }
        Err(error) => return Err(error.into()),
    };
    type Credential<'a> = (Option<&'a str>, Option<String>);
    let mut servers: BTreeMap<(Server, Credential<'_>), Vec<&ToolBinding>> = BTreeMap::new();
    for binding in config.tools.iter().filter(|b| b.kind() == BindingKind::Mcp) {
        if let Some(server) = Server::of(binding) {
            let auth = binding
                .auth
                .as_ref()
                .map(|auth| serde_json::to_string(auth).unwrap_or_default());
            servers
                .entry((server, (binding.token_env.as_deref(), auth)))
                .or_default()
                .push(binding);
        }
    }
    let mut drifted = 0;
    let mut checked = 0;
    // Each drifted binding's live input schema (`None`: the tool is gone), for the policies.
    let mut changed: Vec<(String, Option<serde_json::Value>)> = Vec::new();
    for ((server, (token_env, _)), bindings) in servers {
        let first = bindings[0];
        let tenant = first
            .tenants
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let access = Access {
            token_env,
            auth: first.auth.as_ref(),
            tenant,
            subject_token_env,
        };
        let discovery: Discovery = list(&server, &access, first.ca_file.as_deref())
            .await
            .with_context(|| format!("cannot check the bindings served by {server}"))?;
        for binding in &bindings {
            checked += 1;
            let mcp_tool = binding.mcp_tool.as_deref().unwrap_or_default();
            let (live, lines) = live_drift(binding, &bindings, &discovery);
            if lines.is_empty() {
                continue;
            }
            drifted += 1;
            changed.push((
                binding.name.clone(),
                live.map(|tool| tool["inputSchema"].clone()),
            ));
            println!(
                "drift: tool {:?} (mcp_tool {mcp_tool:?} {}):",
                binding.name,
                where_(&server)
            );
            for line in lines {
                println!("  {line}");
            }
        }
    }
    if drifted > 0 {
        if let Some(report) = broken_policies(&config, path, &changed) {
            print!("{report}");
        }
        println!(
            "error: {drifted} of {checked} MCP bindings drifted from their servers\n  help: review \
             the changes, then re-run `cargo xtask discover ... --write {}`",
            path.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    println!("ok: {checked} MCP bindings match their servers");
    Ok(ExitCode::SUCCESS)
}

/// How `binding` drifted from its live tool in `discovery` (`bindings`: the ones bound on the
/// same server): its schemas and description, a likely rename when it is gone, the protocol
/// revision it pins; with the live tool (`None`: gone).
fn live_drift<'a>(
    binding: &ToolBinding,
    bindings: &[&ToolBinding],
    discovery: &'a Discovery,
) -> (Option<&'a serde_json::Value>, Vec<String>) {
    let mcp_tool = binding.mcp_tool.as_deref().unwrap_or_default();
    let live = discovery.tools.iter().find(|t| t["name"] == mcp_tool);
    let mut lines = drift(binding, live);
    if live.is_none() {
        let bound: Vec<&str> = bindings
            .iter()
            .filter_map(|b| b.mcp_tool.as_deref())
            .collect();
        if let Some(new_name) = likely_rename(binding, &discovery.tools, &bound) {
            lines.push(format!(
                "it was most likely renamed to {new_name:?} (an unbound tool with the \
                 same input schema); bind it with --tools {new_name}"
            ));
        }
    }
    if let Some(pinned) = binding.pinned_revision()
        && live.is_some()
        && pinned != discovery.protocol_version
    {
        lines.push(format!(
            "protocol_version: pinned {pinned}, the server now speaks {}",
            discovery.protocol_version
        ));
    }
    (live, lines)
}

/// Which policies the drift breaks: the config's policies compiled against the bindings as
/// re-discovery would write them (each changed tool's live input schema; a tool that is gone,
/// removed). `None` without policies.
fn broken_policies(
    config: &HostConfig,
    path: &Path,
    changed: &[(String, Option<serde_json::Value>)],
) -> Option<String> {
    config.policies.as_ref()?;
    let mut after = config.clone();
    after.tools.retain(|binding| {
        !changed
            .iter()
            .any(|(name, live)| *name == binding.name && live.is_none())
    });
    for binding in &mut after.tools {
        if let Some((_, Some(schema))) = changed.iter().find(|(name, _)| *name == binding.name) {
            binding.input_schema = schema.clone();
        }
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    Some(
        match brain_config::policy::Policies::compile_in(&after, dir) {
            Ok(_) => "policies: the changes break none of them\n".to_owned(),
            Err(errors) => {
                let diagnostics = brain_config::Diagnostics {
                    file: path.display().to_string(),
                    errors,
                };
                let mut report =
                    "policies: re-discovering these tools would break them:\n".to_owned();
                for line in diagnostics.to_string().lines() {
                    report += &format!("  {line}\n");
                }
                report
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// A tool whose `amount` became a string breaks the policy that compares it; a tool that is
    /// gone breaks the policy that names it; a description's change breaks nothing.
    #[test]
    fn drift_names_the_policies_it_breaks() {
        let dir = tempfile::tempdir().unwrap();
        let tool = |name: &str| {
            json!({"name": name, "description": "d", "mcp_tool": name,
            "url": "http://127.0.0.1:9/mcp", "tenants": ["acme"], "input_schema": {"type": "object",
            "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}})
        };
        let config =
            json!({"policies": {"files": ["p.cedar"]}, "tools": [tool("refund"), tool("void")]});
        std::fs::write(dir.path().join("p.cedar"), "@id(\"limit\")\npermit (principal, \
            action == Brain::Action::\"tool:refund\", resource) when { context.input.amount <= 100 };\n\
            @id(\"voids\")\npermit (principal, action == Brain::Action::\"tool:void\", resource);\n").unwrap();
        let path = dir.path().join("host.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let config = brain_config::load_file(&path).unwrap();
        let string = json!({"type": "object", "properties": {"amount": {"type": "string"}}});
        let report = super::broken_policies(
            &config,
            &path,
            &[("refund".into(), Some(string)), ("void".into(), None)],
        )
        .unwrap();
        assert!(report.contains("would break them"), "{report}");
        assert!(report.contains("policy \"limit\""), "{report}");
        assert!(report.contains("policy \"voids\""), "{report}");
        let same = config.tools[0].input_schema.clone();
        let report = super::broken_policies(&config, &path, &[("refund".into(), Some(same))]);
        assert_eq!(
            report.as_deref(),
            Some("policies: the changes break none of them\n")
        );
    }
}
