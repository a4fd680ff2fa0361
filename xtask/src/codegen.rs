//! `cargo xtask codegen [--check] [--config PATH --out DIR]`: the generated files, written or
//! proven fresh, through brain-codegen's one engine.
//!
//! Without `--config`: this workspace's own generated files,
//! - `brain-config/host-config.schema.json`: the host config's JSON Schema;
//! - `bindings/src/generated/mod.rs`: the typed bindings of `bindings/host.json`.
//!
//! With `--config PATH --out DIR`: a host's committed bindings, `DIR/mod.rs` from `PATH` (a
//! directory holding a file brain-codegen did not write is refused, untouched).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use brain_codegen::{Builder, DirMode, DirReport};

use crate::workspace::workspace_root;

/// The directory `cargo xtask codegen` writes the bindings crate's code into.
const BINDINGS_DIR: &str = "bindings/src/generated";

/// A host's config and where its committed code goes.
pub(crate) struct Target {
    pub(crate) config: PathBuf,
    pub(crate) out: PathBuf,
}

fn shown(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Writes every generated file that changed (removing brain-codegen's own leftovers), or with
/// `check` only reports the stale ones; `target` instead of this workspace's files.
pub(crate) fn run(check: bool, target: Option<Target>) -> anyhow::Result<ExitCode> {
    let mode = if check {
        DirMode::Check
    } else {
        DirMode::Write
    };
    let mut stale = Vec::new();
    let report = match target {
        Some(Target { config, out }) => Builder::new()
            .source_name(config.display().to_string())
            .write_dir(&config, &out, mode),
        None => {
            let root = workspace_root();
            let schema = root.join("brain-config/host-config.schema.json");
            let contents = brain_config::host_config_schema();
            if std::fs::read_to_string(&schema).unwrap_or_default() != contents {
                if check {
                    stale.push(shown(&schema));
                } else {
                    std::fs::write(&schema, contents)
                        .with_context(|| format!("cannot write {}", shown(&schema)))?;
                    println!("wrote {}", shown(&schema));
                }
            }
            Builder::new().source_name("bindings/host.json").write_dir(
                root.join("bindings/host.json"),
                root.join(BINDINGS_DIR),
                mode,
            )
        }
    };
    let report = match report {
        Ok(report) => report,
        // Its diagnostics are on stderr already.
        Err(error @ brain_codegen::Error::Invalid(_)) => {
            bail!("{error}; then run `cargo xtask codegen`")
        }
        Err(error) => return Err(error.into()),
    };
    let DirReport {
        written, removed, ..
    } = &report;
    if check {
        stale.extend(written.iter().map(|path| shown(path)));
        stale.extend(
            removed
                .iter()
                .map(|path| format!("{} (not generated any more)", shown(path))),
        );
    } else {
        for path in written {
            println!("wrote {}", shown(path));
        }
        for path in removed {
            println!("removed {}", shown(path));
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
