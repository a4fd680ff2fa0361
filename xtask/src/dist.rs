//! `cargo xtask dist`: the release `brain-harness`, statically linked (glibc, `+crt-static`),
//! with the bindings compiled in. Prints the binary's path on the last line of stdout.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

use crate::workspace_root;

/// The host's target triple, from `rustc -vV`.
fn host_triple() -> anyhow::Result<String> {
    let output = Command::new("rustc")
        .arg("-vV")
        .output()
        .context("cannot run rustc")?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV names no host")
}

/// Builds it; returns where it is.
pub(crate) fn build() -> anyhow::Result<PathBuf> {
    let triple = host_triple()?;
    if !triple.ends_with("-linux-gnu") {
        bail!("cargo xtask dist builds static binaries for *-linux-gnu hosts; this is {triple}");
    }
    let target_dir = crate::target_dir();
    // `--target` keeps the static flag off build scripts and proc macros, which run on the host.
    let mut rustflags = std::env::var("RUSTFLAGS").unwrap_or_default();
    rustflags.push_str(" -C target-feature=+crt-static");
    let status = crate::cargo()
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "bindings",
            "--bin",
            "brain-harness",
        ])
        .args(["--target", &triple])
        .env("RUSTFLAGS", rustflags.trim())
        .current_dir(workspace_root())
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        bail!("the release build failed");
    }
    Ok(target_dir.join(triple).join("release/brain-harness"))
}

pub(crate) fn run() -> anyhow::Result<ExitCode> {
    let binary = build()?;
    if let Ok(output) = Command::new("file").arg(&binary).output() {
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
    println!("{}", binary.display());
    Ok(ExitCode::SUCCESS)
}
