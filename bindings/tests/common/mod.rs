//! What the brain-harness tests share: the real binary, run on a config for the test server,
//! and what it printed.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use tests::server::bindings_json;

#[allow(dead_code)] // the tests of several processes on one store
pub(crate) mod state;

/// A config file with one binding per test-server tool.
#[allow(dead_code)] // not every test binary writes the test server's config
pub(crate) fn write_config(dir: &Path, url: &str, patch: impl Fn(&mut Value)) -> String {
    let tools = bindings_json(url, |_, binding| patch(binding));
    let path = dir.join("host.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "tools": tools })).unwrap(),
    )
    .unwrap();
    path.display().to_string()
}

/// Runs the real brain-harness with `args` and only the environment variables in `env` of
/// those it reads (no logs, no export unless a test asks).
#[allow(dead_code)] // not every test binary runs the harness through it
pub(crate) async fn harness(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            // Each process its own journal: these tests reuse call ids across calls.
            .env("BRAIN_STATE_URL", "memory:")
            .args(&args)
            // Only what a test sets: no logs, no export to a developer's collector.
            .env_remove("RUST_LOG")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            .env_remove("OTEL_SERVICE_NAME")
            .env_remove("OTEL_RESOURCE_ATTRIBUTES")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .envs(env)
            .output()
            .expect("brain-harness runs")
    })
    .await
    .unwrap()
}

/// What `output` printed to stderr.
#[allow(dead_code)]
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
