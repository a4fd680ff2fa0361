//! brain-harness as a user runs it: the real binary against the test server on loopback.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use tests::server::{Faults, TestServer, bindings_json};

/// A config file with one binding per test-server tool.
fn write_config(dir: &Path, url: &str, patch: impl Fn(&mut Value)) -> String {
    let tools = bindings_json(url, |_, binding| patch(binding));
    let path = dir.join("host.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "tools": tools })).unwrap(),
    )
    .unwrap();
    path.display().to_string()
}

async fn harness(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args(&args)
            .envs(env)
            .output()
            .expect("brain-harness runs")
    })
    .await
    .unwrap()
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn lists_the_compiled_in_bindings() {
    let output = harness(&["tools"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.starts_with("echo "), "{out}");
    assert!(out.contains("\nlong_task "), "{out}");
}

#[tokio::test]
async fn a_call_prints_json_lines_and_exits_0() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "local",
            "--call-id",
            "c1",
            "progress",
            r#"{"steps": 3}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = lines(&output);
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(
        events[0],
        json!({"type": "tool.progress", "call_id": "c1", "progress": 1.0, "total": 3.0, "message": "step 1/3"})
    );
    assert_eq!(
        events[3],
        json!({"type": "tool.result", "call_id": "c1", "is_error": false, "unknown_outcome": false,
               "content": [{"type": "text", "text": "done 3 steps"}]})
    );
}

#[tokio::test]
async fn arguments_from_stdin() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args([
                "--config", &config, "call", "--tenant", "local", "echo", "-",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(br#"{"message": "from stdin"}"#)
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(lines(&output)[0]["content"][0]["text"], json!("from stdin"));
}

#[tokio::test]
async fn error_results_exit_1() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let output = harness(
        &["--config", &config, "call", "--tenant", "local", "audio"],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    let result = &lines(&output)[0];
    assert_eq!(
        (
            result["is_error"].clone(),
            result["unknown_outcome"].clone()
        ),
        (json!(true), json!(true))
    );

    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "intruder",
            "echo",
            r#"{"message": "x"}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(lines(&output)[0]["unknown_outcome"], json!(false));
    assert_eq!(tests::server::Stats::get(&server.stats.calls), 1);
}

#[tokio::test]
async fn usage_and_config_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"tools": [{"name": "x"}]}"#).unwrap();
    let output = harness(&["--config", bad.to_str().unwrap(), "tools"], &[]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("error[missing-field]: "),
        "{}",
        stderr(&output)
    );

    let output = harness(&["call", "echo"], &[]).await;
    assert_eq!(output.status.code(), Some(2), "--tenant is required");

    let output = harness(&["call", "--tenant", "local", "echo", "not json"], &[]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("the arguments are not JSON"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn missing_token_variables_are_named_never_their_values() {
    let server = TestServer::start(Faults {
        require_token: Some("tok-123".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |binding| {
        binding["token_env"] = json!("BRAIN_HARNESS_TEST_TOKEN");
    });
    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "local",
            "echo",
            r#"{"message": "x"}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("BRAIN_HARNESS_TEST_TOKEN"),
        "{}",
        stderr(&output)
    );

    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "local",
            "echo",
            r#"{"message": "x"}"#,
        ],
        &[("BRAIN_HARNESS_TEST_TOKEN", "tok-123")],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(&output)
    );
    assert!(!all.contains("tok-123"));
}
