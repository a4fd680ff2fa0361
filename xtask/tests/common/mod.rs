//! What the `cargo xtask discover` tests share: the real binary, run, and what it printed.

use std::process::{Command, Output};

use serde_json::{Value, json};

/// Runs the real `cargo xtask` binary with `args` and `env` (and no discovery token variable).
pub(crate) async fn xtask(args: Vec<String>, env: Vec<(&'static str, String)>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(&args)
            .envs(env)
            .env_remove("BRAIN_TEST_DISCOVER_TOKEN")
            .output()
            .expect("xtask runs")
    })
    .await
    .unwrap()
}

/// `list` as owned arguments.
pub(crate) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// What `output` printed to stderr.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What `output` printed to stdout.
pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The bindings `output` printed, as JSON.
pub(crate) fn bindings(output: &Output) -> Vec<Value> {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(output), stderr(output)))
}

/// Writes the printed bindings as a host config and runs `cargo xtask check` on it.
pub(crate) async fn passes_check(printed: &[Value]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    std::fs::write(&path, json!({ "tools": printed }).to_string()).unwrap();
    let output = xtask(args(&["check", "--config", path.to_str().unwrap()]), vec![]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output)
}
