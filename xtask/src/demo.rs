//! `cargo xtask demo`: the main job on the embedded default config, `bindings/host.json`.
//!
//! Today that job is the config compiler: it validates the default config and lists its bindings,
//! then shows what the compiler says about a copy with typical mistakes. Discovery (issue 4),
//! calls through the runtime (issue 3) and typed codegen (issue 5) join it as they are built.

use std::process::ExitCode;

use anyhow::Context;
use brain_config::{ConfigError, HostConfig};
use serde_json::{Value, json};

use crate::workspace_root;

pub(crate) fn run() -> anyhow::Result<ExitCode> {
    let path = workspace_root().join("bindings/host.json");
    println!("== 1. validate the default config: cargo xtask check --config bindings/host.json");
    let config = match brain_config::load_file(&path) {
        Ok(config) => config,
        Err(ConfigError::Invalid(diagnostics)) => {
            eprintln!("{diagnostics}");
            return Ok(ExitCode::FAILURE);
        }
        Err(error) => return Err(error.into()),
    };
    println!(
        "ok: bindings/host.json: {}\n",
        crate::check::summary(&config)
    );
    print_bindings(&config);

    println!("\n== 2. the same config with three mistakes a reviewer might miss");
    let broken = break_config(&config)?;
    println!("   - `inspect_session` on an MCP binding");
    println!("   - `timeout_secs` instead of `timeout_seconds`");
    println!("   - a second binding named `echo`\n");
    match brain_config::parse(broken.as_bytes(), "broken-host.json") {
        Err(diagnostics) => println!("{diagnostics}"),
        Ok(_) => anyhow::bail!("the broken config was accepted"),
    }

    println!("\n== not built yet");
    println!("   discovery from a live server (issue 4), calls with progress and unknown_outcome");
    println!("   through brain-runtime (issue 3), typed codegen and brain-harness (issue 5)");
    Ok(ExitCode::SUCCESS)
}

fn print_bindings(config: &HostConfig) {
    println!(
        "   {:<12} {:<5} {:<10} {:<28} {:<16} {:>7} {:>10}",
        "name", "kind", "mcp_tool", "url", "tenants", "timeout", "max output"
    );
    for binding in &config.tools {
        println!(
            "   {:<12} {:<5} {:<10} {:<28} {:<16} {:>6}s {:>10}",
            binding.name,
            binding.kind().as_str(),
            binding.mcp_tool.as_deref().unwrap_or("-"),
            binding.url,
            binding.tenants.join(","),
            binding.timeout_seconds,
            binding.max_output_bytes
        );
    }
}

/// The config's text with three mistakes put in.
fn break_config(config: &HostConfig) -> anyhow::Result<String> {
    let mut value = serde_json::to_value(config)?;
    let tools = value["tools"]
        .as_array_mut()
        .context("the config has a tools array")?;
    let first = tools
        .first()
        .cloned()
        .context("the default config has a binding")?;
    tools[0]["inspect_session"] = json!(true);
    if let Some(Value::Object(last)) = tools.last_mut() {
        let timeout = last.remove("timeout_seconds").unwrap_or(json!(30));
        last.insert("timeout_secs".into(), timeout);
    }
    tools.push(first);
    Ok(serde_json::to_string_pretty(&value)?)
}
