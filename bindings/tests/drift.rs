//! Drift across real `brain-harness` processes on one state store (the default SQLite file, and
//! a throwaway PostgreSQL cluster): after the server changes a pinned tool, each process
//! detects the change on its own listing and refuses the call (the server counts none), records
//! what it saw, and `brain-harness drift` lists one record per process; `--live` lists the
//! server now. The same detector in one process, for every kind of change: `tests/tests/pins.rs`.

use std::process::Output;

use serde_json::{Value, json};
use tests::drift::Change;
use tests::server::{Faults, Stats, TestServer, pin};

mod common;

use common::state::{State, on_each_state, postgres, result, sqlite, wait};
use common::write_config;

/// `brain-harness drift` with `flags`, on `state`.
async fn drift(state: &State, config: &str, flags: &[&str]) -> (Output, Vec<Value>) {
    let mut command = state.command();
    command
        .args(["--config", config, "drift", "--json"])
        .args(flags);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (output, lines)
}

async fn each_process_records_the_drift_it_refuses(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir.path(), &server.url, |binding| {
        binding["pin"] = pin(binding["name"].as_str().unwrap());
    });
    let echo = r#"{"message": "hi"}"#;
    let before = result(&wait(state.start(&config, "before", "echo", echo)).await);
    assert_eq!(before["is_error"], json!(false), "{before}");
    let (output, recorded) = drift(&state, &config, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(recorded.is_empty(), "{recorded:?}");

    *server.stats.drift.lock().unwrap() = Some(Change::Required);
    let processes = (0..3).map(|n| {
        let child = state.start(&config, &format!("after-{n}"), "echo", echo);
        async move { result(&wait(child).await) }
    });
    for refused in futures_util::future::join_all(processes).await {
        assert_eq!(refused["kind"], json!("pin_drift"), "{refused}");
        assert_eq!(refused["unknown_outcome"], json!(false), "{refused}");
    }
    assert_eq!(
        Stats::get(&server.stats.calls),
        1,
        "nothing sent after the change"
    );

    // One record per process, each its own sighting of the same listing.
    let (output, recorded) = drift(&state, &config, &[]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(recorded.len(), 3, "{recorded:#?}");
    let processes: std::collections::BTreeSet<&str> = recorded
        .iter()
        .map(|r| r["process"].as_str().unwrap())
        .collect();
    assert_eq!(processes.len(), 3, "{recorded:#?}");
    for record in &recorded {
        assert_eq!(record["binding"], json!("echo"), "{record}");
        assert_eq!(record["fields"], json!(["inputSchema"]), "{record}");
        assert_eq!(record["refused"], json!(true), "{record}");
        assert_eq!(record["current_pin"], json!(true), "{record}");
        assert_eq!(record["listed"], recorded[0]["listed"], "{record}");
        assert_eq!(record["pinned"], pin("echo")["digest"], "{record}");
    }

    // The server now: `echo` differs, every other binding matches.
    let (output, live) = drift(&state, &config, &["--live"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let live: Vec<&Value> = live.iter().filter(|l| l["live"] == json!(true)).collect();
    let drifted: Vec<&&Value> = live.iter().filter(|l| l["fields"] != json!([])).collect();
    assert_eq!(drifted.len(), 1, "{live:#?}");
    assert_eq!(drifted[0]["binding"], json!("echo"));
    assert_eq!(drifted[0]["refused"], json!(true));

    // Undone on the server: the live check passes; the records stay (history).
    *server.stats.drift.lock().unwrap() = None;
    let (output, _) = drift(&state, &config, &["--live"]).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let again = result(&wait(state.start(&config, "again", "echo", echo)).await);
    assert_eq!(again["is_error"], json!(false), "{again}");
    assert_eq!(Stats::get(&server.stats.calls), 2);
}

on_each_state!(each_process_records_the_drift_it_refuses);
