//! `cargo xtask examples`: builds the example crates (`examples/`) and runs each against the test
//! server on loopback (`127.0.0.1:8931`, where their host configs point); fails when one fails.

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};

use anyhow::Context;

use crate::workspace::{cargo_build, target_dir};

/// The example crates, each a binary of the same name, in the order they run.
const EXAMPLES: &[&str] = &["library-host", "typed-host", "agent-loop", "serve-host"];

/// Variables an example's run sets.
type Env = &'static [(&'static str, &'static str)];

/// Each run: the example, its arguments (agent-loop once per model API format it shows) and
/// its environment (serve-host's client token).
const RUNS: &[(&str, &[&str], Env)] = &[
    ("library-host", &[], &[]),
    ("typed-host", &[], &[]),
    ("agent-loop", &["openai"], &[]),
    ("agent-loop", &["anthropic"], &[]),
    (
        "serve-host",
        &[],
        &[(
            "SERVE_HOST_TOKEN",
            "5e7e0c1d2b3a49586f7a8b9cadbecfd0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70",
        )],
    ),
];

/// The port the examples' host configs name.
const PORT: &str = "8931";

pub(crate) fn run() -> anyhow::Result<ExitCode> {
    let mut bins = vec!["--quiet", "--bin", "brain-test-server"];
    for example in EXAMPLES {
        bins.extend(["--bin", example]);
    }
    cargo_build(&bins, "the examples and brain-test-server")?;
    let mut server = Command::new(target_dir().join("debug/brain-test-server"))
        .args(["--port", PORT])
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start brain-test-server")?;
    // It prints its URL once it listens.
    let mut url = String::new();
    let ready = server
        .stdout
        .take()
        .map(|out| BufReader::new(out).read_line(&mut url));
    let mut failed = Vec::new();
    if !matches!(ready, Some(Ok(n)) if n > 0) {
        let _ = server.kill();
        anyhow::bail!("brain-test-server did not start on port {PORT} (is the port taken?)");
    }
    println!("test server: {}", url.trim());
    for (example, args, env) in RUNS {
        println!("\n--- {example} {}", args.join(" "));
        let status = Command::new(target_dir().join("debug").join(example))
            .args(*args)
            .envs(env.iter().copied())
            .status()
            .with_context(|| format!("cannot run {example}"))?;
        if !status.success() {
            failed.push(format!("{example} ({status})"));
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    if failed.is_empty() {
        println!("\nexamples: {} runs, all passed", RUNS.len());
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("error: examples failed: {}", failed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}
