//! `cargo xtask codegen [--check]`: the generated files, written or proven fresh.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::workspace_root;

/// One generated file: where it lives and what it must contain.
struct Generated {
    path: PathBuf,
    contents: String,
}

fn generated() -> Vec<Generated> {
    vec![Generated {
        path: workspace_root().join("brain-config/host-config.schema.json"),
        contents: brain_config::host_config_schema(),
    }]
}

/// Writes every generated file that changed, or with `check` only reports the stale ones.
pub(crate) fn run(check: bool) -> anyhow::Result<ExitCode> {
    let mut stale = Vec::new();
    for file in generated() {
        let current = std::fs::read_to_string(&file.path).unwrap_or_default();
        if current == file.contents {
            continue;
        }
        let shown = file
            .path
            .strip_prefix(workspace_root())
            .unwrap_or(&file.path)
            .display()
            .to_string();
        if check {
            stale.push(shown);
        } else {
            std::fs::write(&file.path, &file.contents)
                .with_context(|| format!("cannot write {shown}"))?;
            println!("wrote {shown}");
        }
    }
    if stale.is_empty() {
        if check {
            println!("codegen: generated files are fresh");
        }
        return Ok(ExitCode::SUCCESS);
    }
    for shown in &stale {
        eprintln!(
            "error: {shown} is stale\n  help: run `cargo xtask codegen` and commit the result"
        );
    }
    Ok(ExitCode::FAILURE)
}
