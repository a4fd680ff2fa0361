//! `cargo xtask codegen [--check]`: the generated files, written or proven fresh.
//!
//! - `brain-config/host-config.schema.json`: the host config's JSON Schema;
//! - `bindings/src/generated/`: the typed bindings of `bindings/host.json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use brain_config::ConfigError;

use crate::workspace::workspace_root;

/// One generated file: where it lives and what it must contain.
struct Generated {
    path: PathBuf,
    contents: String,
}

/// The directory `cargo xtask codegen` owns entirely.
const BINDINGS_DIR: &str = "bindings/src/generated";

fn generated() -> anyhow::Result<Vec<Generated>> {
    let root = workspace_root();
    let mut files = vec![Generated {
        path: root.join("brain-config/host-config.schema.json"),
        contents: brain_config::host_config_schema(),
    }];
    let config = match brain_config::load_file(&root.join("bindings/host.json")) {
        Ok(config) => config,
        Err(ConfigError::Invalid(diagnostics)) => {
            eprintln!("{diagnostics}");
            bail!("bindings/host.json is invalid; fix it, then run `cargo xtask codegen`");
        }
        Err(error) => return Err(error.into()),
    };
    let bindings = brain_codegen::generate(&config, "bindings/host.json")?;
    files.extend(bindings.into_iter().map(|file| Generated {
        path: root.join(BINDINGS_DIR).join(file.path),
        contents: file.contents,
    }));
    Ok(files)
}

fn shown(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Files in the generated directory that codegen would not write.
fn leftovers(files: &[Generated]) -> Vec<PathBuf> {
    let dir = workspace_root().join(BINDINGS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut extra: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| !files.iter().any(|file| file.path == *path))
        .collect();
    extra.sort();
    extra
}

/// Writes every generated file that changed (removing leftovers), or with `check` only reports
/// the stale ones.
pub(crate) fn run(check: bool) -> anyhow::Result<ExitCode> {
    let files = generated()?;
    let mut stale = Vec::new();
    for file in &files {
        let current = std::fs::read_to_string(&file.path).unwrap_or_default();
        if current == file.contents {
            continue;
        }
        if check {
            stale.push(shown(&file.path));
        } else {
            if let Some(dir) = file.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&file.path, &file.contents)
                .with_context(|| format!("cannot write {}", shown(&file.path)))?;
            println!("wrote {}", shown(&file.path));
        }
    }
    for extra in leftovers(&files) {
        if check {
            stale.push(format!("{} (not generated any more)", shown(&extra)));
        } else {
            std::fs::remove_file(&extra)
                .with_context(|| format!("cannot remove {}", shown(&extra)))?;
            println!("removed {}", shown(&extra));
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
