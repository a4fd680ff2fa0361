//! The suite's server scenarios against `brain-harness serve`: serve (with the pinned bindings of
//! `tests/conformance/serve-host.json`) in front of the official Python SDK server running
//! `tests/interop/conformance_upstream.py`, which has the tools the scenarios call. The suite
//! cannot send a bearer token, so serve listens on loopback with `--anonymous-tenant`.
//!
//! Each run hands the suite `tests/conformance/expected-failures.yaml`, whose `server` list names
//! the scenarios for what serve does not offer (resources, prompts, completions, logging, a user
//! to ask) and the content types brain does not convert, each with its reason.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::workspace::{target_dir, workspace_root};

/// The suite version and the revisions its server scenarios run at.
const PACKAGE: &str = "conformance-0-2";
const REVISIONS: &[&str] = &["2025-06-18", "2025-11-25", "2026-07-28"];
/// 2026-07-28 scenarios outside the suite's active set, run by name.
const DRAFT_SCENARIOS: &[&str] = &["server-stateless", "caching", "http-header-validation"];

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn wait_for(port: u16, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("{what} did not listen on 127.0.0.1:{port}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Runs the server scenarios; returns the runs whose results differ from the baseline.
pub(crate) fn run(dir: &Path, node: &Path, baseline: &Path) -> anyhow::Result<Vec<String>> {
    crate::workspace::cargo_build(&["--quiet", "--bin", "brain-harness"], "brain-harness")?;
    let harness = target_dir().join("debug/brain-harness");
    let interop = workspace_root().join("tests/interop");
    let python = interop.join(".venv/bin/python");
    if !python.exists() {
        bail!(
            "{} is missing: run tests/interop/setup.sh",
            python.display()
        );
    }
    let upstream_port = free_port()?;
    let _upstream = Process(
        Command::new(&python)
            .arg(interop.join("conformance_upstream.py"))
            .arg(upstream_port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start the conformance upstream")?,
    );
    wait_for(upstream_port, "the conformance upstream")?;
    let config = std::fs::read_to_string(dir.join("serve-host.json"))?
        .replace("127.0.0.1:1/", &format!("127.0.0.1:{upstream_port}/"));
    let results = target_dir().join("conformance");
    std::fs::create_dir_all(&results)?;
    let config_path = results.join("serve-host.json");
    std::fs::write(&config_path, config)?;
    let port = free_port()?;
    let _serve = Process(
        Command::new(&harness)
            .arg("--config")
            .arg(&config_path)
            .args(["--state", "memory:", "serve", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--anonymous-tenant", "conformance"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(
                results.join("serve.log"),
            )?))
            .spawn()
            .context("cannot start brain-harness serve")?,
    );
    wait_for(port, "brain-harness serve")?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let suite = dir.join("node_modules").join(PACKAGE).join("dist/index.js");
    let mut failed = Vec::new();
    let mut runs: Vec<(&str, Option<&str>)> = REVISIONS.iter().map(|r| (*r, None)).collect();
    runs.extend(DRAFT_SCENARIOS.iter().map(|s| ("2026-07-28", Some(*s))));
    for (revision, scenario) in runs {
        let what = match scenario {
            Some(scenario) => format!("server scenario {scenario} at {revision}"),
            None => format!("server scenarios at {revision}"),
        };
        println!("\n=== conformance {PACKAGE}, {what}, against brain-harness serve");
        let mut command = Command::new(node);
        command
            .arg(&suite)
            .args(["server", "--url", &url, "--spec-version", revision])
            .arg("--expected-failures")
            .arg(baseline)
            .arg("-o")
            .arg(results.join(format!("serve-{revision}-{}", scenario.unwrap_or("active"))))
            .current_dir(dir);
        if let Some(scenario) = scenario {
            command.args(["--scenario", scenario]);
        }
        if !command.status()?.success() {
            failed.push(what);
        }
    }
    Ok(failed)
}
