//! `cargo xtask dist`: the release `brain-harness`, statically linked (glibc, `+crt-static`),
//! with the bindings compiled in. Prints the binary's path on the last line of stdout.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

use crate::workspace::workspace_root;

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
pub(crate) fn build(profile: &str) -> anyhow::Result<PathBuf> {
    Ok(static_build(&["brain-harness"], profile)?.join("brain-harness"))
}

/// The workspace's one release build: `bins`, statically linked, for the host's triple, with
/// the whole workspace's feature set. `cargo xtask dist` and `cargo xtask bench` both build this
/// way, so that they compile each dependency once between them. Returns the directory the
/// binaries are in.
pub(crate) fn release_build(bins: &[&str]) -> anyhow::Result<PathBuf> {
    static_build(bins, "release")
}

/// [`release_build`] in another cargo profile (`static-check`: the same link, unoptimised).
fn static_build(bins: &[&str], profile: &str) -> anyhow::Result<PathBuf> {
    let triple = host_triple()?;
    if !triple.ends_with("-linux-gnu") {
        bail!("the release build links statically for *-linux-gnu hosts; this is {triple}");
    }
    // `--target` keeps the static flag off build scripts and proc macros, which run on the host.
    let mut rustflags = std::env::var("RUSTFLAGS").unwrap_or_default();
    rustflags.push_str(" -C target-feature=+crt-static");
    let mut command = crate::workspace::cargo();
    command.args(["build", "--profile", profile, "--locked", "--workspace"]);
    for bin in bins {
        command.args(["--bin", bin]);
    }
    let status = command
        .args(["--target", &triple])
        .env("RUSTFLAGS", rustflags.trim())
        .current_dir(workspace_root())
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        bail!("the release build failed");
    }
    Ok(crate::workspace::target_dir().join(triple).join(profile))
}

pub(crate) fn run(profile: &str) -> anyhow::Result<ExitCode> {
    let binary = build(profile)?;
    if let Ok(output) = Command::new("file").arg(&binary).output() {
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
    println!("{}", binary.display());
    Ok(ExitCode::SUCCESS)
}
