//! The call journal across real `brain-harness` processes, on SQLite (the default: the XDG
//! state directory, no flag) and on PostgreSQL (a throwaway cluster, `BRAIN_STATE_URL`): a
//! process killed with SIGKILL mid-call, one stopped past its lease, four started at once with
//! one call id. The tool's runs are counted by the server.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::server::{Faults, Stats, TestServer};

mod common;

use common::state::{State, on_each_state, postgres, result, sqlite, until_running, wait};
use common::write_config;

async fn setup(dir: &Path) -> (TestServer, String) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir, &server.url, |binding| {
        binding["timeout_seconds"] = json!(30);
    });
    (server, config)
}

async fn a_retry_after_sigkill_is_unknown_and_sends_nothing(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path()).await;
    let mut killed = state.start(&config, "kill-1", "slow", r#"{"seconds": 3}"#);
    until_running(&server).await;
    killed.kill().unwrap();
    let _ = killed.wait();
    let started = Instant::now();
    let retry = wait(state.start(&config, "kill-1", "slow", r#"{"seconds": 3}"#)).await;
    let waited = started.elapsed();
    let first = result(&retry);
    assert_eq!(retry.status.code(), Some(1));
    assert_eq!(first["is_error"], json!(true), "{first}");
    assert_eq!(first["unknown_outcome"], json!(true), "{first}");
    assert_eq!(first["replayed"], json!(true), "{first}");
    assert!(
        first["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("by a process that stopped"),
        "{first}"
    );
    // The owner's lease (5 s) tells its death, not the binding's 30 s timeout.
    assert!(waited < Duration::from_secs(8), "the retry took {waited:?}");
    // Again, after the lease: the recorded unknown, still nothing sent.
    let again = result(&wait(state.start(&config, "kill-1", "slow", r#"{"seconds": 3}"#)).await);
    assert_eq!(again, first);
    assert_eq!(Stats::get(&server.stats.calls), 1, "the tool ran once");
}

async fn four_processes_with_one_call_id_send_once(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path()).await;
    let children: Vec<Child> = (0..4)
        .map(|_| state.start(&config, "four-1", "slow", r#"{"seconds": 1}"#))
        .collect();
    let mut results = Vec::new();
    for child in children {
        let output = wait(child).await;
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        results.push(result(&output));
    }
    let fresh = results
        .iter()
        .filter(|r| r.get("replayed").is_none())
        .count();
    assert_eq!(fresh, 1, "{results:?}");
    for result in &results {
        assert_eq!(result["content"][0]["text"], json!("slept"), "{result}");
    }
    assert_eq!(Stats::get(&server.stats.calls), 1, "the tool ran once");
}

async fn a_stalled_owner_does_not_overwrite_a_recorded_unknown(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path()).await;
    let stalled = state.start(&config, "stall-1", "slow", r#"{"seconds": 1}"#);
    until_running(&server).await;
    let pid = stalled.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    // Its lease expires (5 s); the retry records the outcome as unknown.
    let retry = result(&wait(state.start(&config, "stall-1", "slow", r#"{"seconds": 1}"#)).await);
    assert_eq!(retry["unknown_outcome"], json!(true), "{retry}");
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    // The stalled owner finishes and prints the tool's real result to its own caller...
    let own = result(&wait(stalled).await);
    assert_eq!(own["is_error"], json!(false), "{own}");
    // ...but what the journal recorded stands.
    let later = result(&wait(state.start(&config, "stall-1", "slow", r#"{"seconds": 1}"#)).await);
    assert_eq!(later, retry);
    assert_eq!(Stats::get(&server.stats.calls), 1);
}

async fn the_audit_lists_calls_without_arguments(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (_server, config) = setup(dir.path()).await;
    let secret_argument = r#"{"message": "an argument the audit never shows"}"#;
    let output = wait(state.start(&config, "audit-1", "echo", secret_argument)).await;
    assert_eq!(output.status.code(), Some(0));
    let list = |args: &[&str]| {
        let output = state.command().arg("journal").args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let listed = list(&["--json", "--call-id", "audit-1"]);
    let entry: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(entry["state"], json!("completed"), "{entry}");
    assert_eq!(entry["tenant"], json!("local"));
    assert_eq!(entry["binding"], json!("echo"));
    assert_eq!(entry["is_error"], json!(false));
    assert!(!listed.contains("never shows"), "{listed}");
    let table = list(&["--since", "1h"]);
    assert!(
        table.contains("audit-1") && !table.contains("never shows"),
        "{table}"
    );
    // Results only when asked for.
    assert!(list(&["--results", "--json"]).contains("never shows"));
}

on_each_state!(
    a_retry_after_sigkill_is_unknown_and_sends_nothing,
    four_processes_with_one_call_id_send_once,
    a_stalled_owner_does_not_overwrite_a_recorded_unknown,
    the_audit_lists_calls_without_arguments,
);
