//! `cargo xtask dist`: a statically linked `brain-harness` (as `file` reports it), with the
//! bindings compiled in, that still resolves `localhost`. Built in the `static-check` profile:
//! the release build's target, flags and link, without its optimisation, which cost a cold CI
//! run about 590 s for nothing this test checks.

use std::process::Command;

use serde_json::json;
use tests::server::{Faults, TestServer};

#[tokio::test(flavor = "multi_thread")]
async fn static_release_harness() {
    let output = tokio::task::spawn_blocking(|| {
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["dist", "--profile", "static-check"])
            .output()
            .expect("xtask runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let binary = stdout.lines().last().unwrap().to_owned();
    let file = Command::new("file").arg(&binary).output().unwrap();
    let file = String::from_utf8_lossy(&file.stdout).into_owned();
    assert!(
        file.contains("statically linked") || file.contains("static-pie linked"),
        "{file}"
    );

    // Compiled-in bindings, no config file.
    let tools = Command::new(&binary).arg("tools").output().unwrap();
    assert!(String::from_utf8_lossy(&tools.stdout).starts_with("echo "));

    // A call through `localhost`.
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let url = server.url.replace("127.0.0.1", "localhost");
    std::fs::write(
        &config,
        json!({"tools": [{"name": "echo", "description": "Echo a message back.", "url": url,
            "mcp_tool": "echo", "input_schema": {"type": "object",
                "properties": {"message": {"type": "string"}}, "required": ["message"]},
            "tenants": ["local"]}]})
        .to_string(),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();
    // The static harness's embedded journal (SQLite, compiled in), in the test's directory.
    let state = dir.path().join("state");
    let call = tokio::task::spawn_blocking(move || {
        Command::new(&binary)
            .env("XDG_STATE_HOME", &state)
            .env_remove("BRAIN_STATE_URL")
            .args(["--config", &config, "call", "--tenant", "local", "echo"])
            .arg(r#"{"message": "static hello"}"#)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&call.stdout);
    assert_eq!(
        call.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&call.stderr)
    );
    assert!(out.contains("static hello"), "{out}");
    assert!(dir.path().join("state/brain/state.db").exists());
}
