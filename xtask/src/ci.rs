//! `cargo xtask ci`: the one command CI runs.

use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::workspace::workspace_root;

/// fmt check, clippy `-D warnings`, codegen `--check`, the interop peers installed,
/// PostgreSQL's server binaries, psql, sqlite3 and valgrind installed when missing, the
/// conformance suite, the performance gate, a short soak, the examples, a smoke run of the bench,
/// the doc tests and the tests (nextest
/// when installed), all `--locked`; stops at the first failure.
pub(crate) fn run() -> anyhow::Result<ExitCode> {
    crate::workspace::CI.store(true, std::sync::atomic::Ordering::Relaxed);
    let ran = steps();
    // Each step's time, whether CI passed or not: where a cold run spends its budget.
    let steps = std::mem::take(&mut *STEPS.lock().unwrap_or_else(|p| p.into_inner()));
    let mut ends = steps
        .iter()
        .skip(1)
        .map(|(_, started)| *started)
        .collect::<Vec<_>>();
    ends.push(Instant::now());
    println!("\nci: time per step (seconds)");
    for ((what, started), ended) in steps.iter().zip(ends) {
        println!("{:>7.1}  {what}", (ended - *started).as_secs_f64());
    }
    if let Some((_, first)) = steps.first() {
        println!("{:>7.1}  in all", first.elapsed().as_secs_f64());
    }
    ran
}

/// When each step started, in order.
static STEPS: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());

fn steps() -> anyhow::Result<ExitCode> {
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--locked",
        "--",
        "-D",
        "warnings",
    ])?;
    step("cargo xtask codegen --check");
    if crate::codegen::run(true, None)? != ExitCode::SUCCESS {
        bail!("generated files are stale");
    }
    step("tests/interop/setup.sh (the third-party MCP peers)");
    let status = Command::new(workspace_root().join("tests/interop/setup.sh"))
        .status()
        .context("cannot run tests/interop/setup.sh")?;
    if !status.success() {
        bail!("tests/interop/setup.sh failed ({status})");
    }
    step("PostgreSQL's server binaries (the journal's tests start throwaway clusters)");
    postgres()?;
    step("the stores' own clients (the tests tamper with the store as an attacker would)");
    program("sqlite3", "sqlite3")?;
    program("psql", "postgresql-client")?;
    step("cargo xtask conformance (the official MCP client conformance suite)");
    let conformance = crate::conformance::ConformanceArgs::default();
    if crate::conformance::run(&conformance)? != ExitCode::SUCCESS {
        bail!("the conformance suite found unexpected results");
    }
    step("valgrind (the performance gate counts instructions with callgrind)");
    program("valgrind", "valgrind")?;
    step("cargo xtask gate (instructions and counts per call against tests/perf-gate.json)");
    if crate::gate::run(false)? != ExitCode::SUCCESS {
        bail!(
            "the performance gate found a regression (an intended one: `cargo xtask gate \
             --rebaseline`, and commit tests/perf-gate.json)"
        );
    }
    step("cargo xtask soak --calls 5000 (random faults through one runtime)");
    let soak = crate::soak::SoakArgs {
        calls: 5000,
        concurrency: 64,
        fault_rate: 0.1,
    };
    if crate::soak::run(&soak)? != ExitCode::SUCCESS {
        bail!("the soak found violations");
    }
    step("cargo xtask examples (the example crates, run against the test server)");
    if crate::examples::run()? != ExitCode::SUCCESS {
        bail!("an example failed");
    }
    step("cargo xtask bench --smoke --require-sdks (every bench row runs once, tiny counts)");
    let smoke = crate::bench::BenchArgs {
        smoke: true,
        require_sdks: true,
        ..Default::default()
    };
    if crate::bench::run(&smoke)? != ExitCode::SUCCESS {
        bail!("a bench row failed to run (its `error:` row above says why)");
    }
    // Doc tests first, so that the summary of all the other tests is what CI reads last.
    cargo(&["test", "--workspace", "--locked", "--doc"])?;
    if has_nextest() {
        cargo(&[
            "nextest",
            "run",
            "--workspace",
            "--locked",
            "--no-fail-fast",
        ])?;
    } else {
        cargo(&[
            "test",
            "--workspace",
            "--locked",
            "--no-fail-fast",
            "--all-targets",
        ])?;
    }
    println!("ci: all checks passed");
    Ok(ExitCode::SUCCESS)
}

/// Whether `/usr/lib/postgresql/*/bin/initdb` is there.
fn has_postgres() -> bool {
    std::fs::read_dir("/usr/lib/postgresql")
        .map(|versions| {
            versions
                .filter_map(Result::ok)
                .any(|version| version.path().join("bin/initdb").exists())
        })
        .unwrap_or(false)
}

/// Installs Debian's `postgresql` package when its server binaries are missing, and says so.
fn postgres() -> anyhow::Result<()> {
    if has_postgres() {
        println!("present");
        return Ok(());
    }
    apt_install("postgresql")?;
    if !has_postgres() {
        bail!("the postgresql package installed no /usr/lib/postgresql/*/bin/initdb");
    }
    Ok(())
}

/// Installs Debian's `package` when `program --version` does not run, and says so.
fn program(program: &str, package: &str) -> anyhow::Result<()> {
    let present = || {
        Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    if present() {
        println!("{program}: present");
        return Ok(());
    }
    apt_install(package)?;
    if !present() {
        bail!("the {package} package installed no working `{program}`");
    }
    Ok(())
}

/// Installs one of Debian's packages (apt-get, through sudo when not root), and says so.
fn apt_install(package: &str) -> anyhow::Result<()> {
    println!("missing: installing the `{package}` package (apt-get)");
    let root = std::fs::read_to_string("/proc/self/status")
        .map(|status| status.lines().any(|l| l.starts_with("Uid:\t0\t")))
        .unwrap_or(false);
    let apt = |args: &[&str]| -> anyhow::Result<()> {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        let status = command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .context("cannot run apt-get")?;
        if !status.success() {
            bail!("apt-get {} failed ({status})", args.join(" "));
        }
        Ok(())
    };
    apt(&["update", "-qq"])?;
    apt(&["install", "-y", "-qq", "--no-install-recommends", package])?;
    Ok(())
}

fn step(what: &str) {
    println!("\n=== {what}");
    STEPS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((what.to_owned(), Instant::now()));
}

fn cargo(args: &[&str]) -> anyhow::Result<()> {
    step(&format!("cargo {}", args.join(" ")));
    let status = crate::workspace::cargo()
        .args(args)
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("cannot run cargo {}", args[0]))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

fn has_nextest() -> bool {
    crate::workspace::cargo()
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|output| output.status.success())
}
