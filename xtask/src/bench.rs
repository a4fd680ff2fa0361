//! `cargo xtask bench [--quick]`: builds `brain-bench` and the test server in release mode and
//! runs the benchmark (DESIGN §7, P1–P6); its exit code is the bench's (1 when a target is
//! missed).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::workspace_root;

pub(crate) fn run(quick: bool) -> anyhow::Result<ExitCode> {
    println!("=== cargo build --release -p tests --bin brain-bench --bin brain-test-server");
    let status = crate::cargo()
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "tests",
            "--bin",
            "brain-bench",
            "--bin",
            "brain-test-server",
        ])
        .current_dir(workspace_root())
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        bail!("the release build failed");
    }
    let bench = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("release/brain-bench");
    let mut command = std::process::Command::new(&bench);
    if quick {
        command.arg("--quick");
    }
    let status = command
        .status()
        .with_context(|| format!("cannot run {}", bench.display()))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(1) => ExitCode::FAILURE,
        _ => ExitCode::from(2),
    })
}
