//! The workspace, and cargo and tool commands run in it: its root and target directories,
//! nested cargo builds, and the verdicts of the tool binaries it built.

use std::path::PathBuf;
use std::process::ExitCode;

/// The workspace's root directory.
pub(crate) fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_owned()
}

/// Set by `cargo xtask ci`: its builds run without incremental compilation (see [`cargo`]).
pub(crate) static CI: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A `cargo` command for a nested build. The variables cargo sets for the package being built or
/// tested (`CARGO_PKG_*`, `CARGO_MANIFEST_*`, ...) are removed: build scripts such as ring's
/// watch some of them, so inheriting them from `cargo xtask` or a test would rebuild those
/// crates and everything above them on every switch. Under `cargo xtask ci` the builds (and the
/// nested builds of the tests, which inherit it) are not incremental: CI builds once, and the
/// incremental caches of ~30 test binaries cost gigabytes of a CI machine's disk.
pub(crate) fn cargo() -> std::process::Command {
    let mut command =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    if CI.load(std::sync::atomic::Ordering::Relaxed) {
        command.env("CARGO_INCREMENTAL", "0");
    }
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || name.starts_with("CARGO_BIN_")
            || name.starts_with("CARGO_CRATE_")
            || name == "CARGO_PRIMARY_PACKAGE"
            || name == "CARGO_TARGET_TMPDIR"
            || name == "OUT_DIR"
        {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// The workspace's target directory (`CARGO_TARGET_DIR`, else `target/`).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Runs `cargo build --workspace --locked ARGS` (see [`cargo`]); `what` names it in the error.
/// `--workspace` resolves the features the tests' build resolves, so the binaries built here
/// share the workspace's compiled dependencies instead of compiling a second set.
pub(crate) fn cargo_build(args: &[&str], what: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let status = cargo()
        .args(["build", "--workspace", "--locked"])
        .args(args)
        .current_dir(workspace_root())
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        anyhow::bail!("building {what} failed");
    }
    Ok(())
}

/// Runs a tool binary the workspace built and passes its verdict on: exit 0 and 1 as they are,
/// anything else (an error, a signal) as 2.
pub(crate) fn run_tool(command: &mut std::process::Command) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    let status = command
        .status()
        .with_context(|| format!("cannot run {}", command.get_program().to_string_lossy()))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(1) => ExitCode::FAILURE,
        _ => ExitCode::from(2),
    })
}
