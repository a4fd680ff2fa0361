//! Limits across real `brain-harness` processes on one state store — the default SQLite file,
//! and a throwaway PostgreSQL cluster — counted at the server: a rate that four processes
//! share, a quota six processes meet at once (refusing, then waiting), and a quota whose
//! holder is killed with SIGKILL. The same limits in one process: `tests/tests/limits.rs`.

use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::server::{Faults, Stats, TestServer};

mod common;

use common::state::{State, on_each_state, postgres, result, sqlite, until_running, wait};
use common::write_config;

/// A server, and a config whose `tool` has `limits`.
async fn setup(dir: &std::path::Path, tool: &str, limits: Value) -> (TestServer, String) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir, &server.url, |binding| {
        binding["timeout_seconds"] = json!(60);
        if binding["name"] == json!(tool) {
            binding["limits"] = limits.clone();
        }
    });
    (server, config)
}

fn assert_limited(result: &Value) {
    assert_eq!(result["is_error"], json!(true), "{result}");
    assert_eq!(result["unknown_outcome"], json!(false), "{result}");
    assert_eq!(result["kind"], json!("limited"), "{result}");
}

/// 4 processes × 10 calls against 5 per minute: exactly 5 reach the server; every refusal
/// says when the next token comes (never 0, never more than the window).
async fn a_rate_holds_across_processes(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let limits = json!({"calls": 5, "per_seconds": 60});
    let (server, config) = setup(dir.path(), "echo", limits).await;
    let workers = (0..4).map(|worker| {
        let (state, config) = (&state, config.clone());
        async move {
            let mut results = Vec::new();
            for n in 0..10 {
                let id = format!("rate-{worker}-{n}");
                let child = state.start(&config, &id, "echo", r#"{"message": "hi"}"#);
                results.push(result(&wait(child).await));
            }
            results
        }
    });
    let results: Vec<Value> = futures_util::future::join_all(workers)
        .await
        .into_iter()
        .flatten()
        .collect();
    let admitted = results.iter().filter(|r| r["is_error"] == json!(false));
    assert_eq!(admitted.count(), 5, "{results:#?}");
    for refused in results.iter().filter(|r| r["is_error"] == json!(true)) {
        assert_limited(refused);
        let ms = refused["retry_after_ms"].as_u64().unwrap_or(0);
        assert!((1..=60_000).contains(&ms), "{refused}");
    }
    assert_eq!(
        Stats::get(&server.stats.calls),
        5,
        "five calls reached the server"
    );
    // What `brain-harness limits` shows: the bucket empty.
    let shown = state
        .command()
        .args(["--config", &config, "limits", "--tenant", "local", "--json"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    let bucket: Value = shown
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|b| b["bucket"] == json!("rate:binding/echo/tenant/local"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(bucket["tokens"], json!(0), "{bucket}");
    assert!(
        bucket["next_token_ms"]
            .as_u64()
            .is_some_and(|ms| ms <= 12_000),
        "{bucket}"
    );
}

/// 6 processes at once against `concurrent: 2`: never more than 2 running at the server; the
/// others refused. With `wait_seconds`, all 6 run, still never more than 2 at once.
async fn a_quota_holds_across_processes(state: State) {
    for wait_seconds in [None, Some(30)] {
        let dir = tempfile::tempdir().unwrap();
        let mut limits = json!({"concurrent": 2});
        if let Some(wait) = wait_seconds {
            limits["wait_seconds"] = json!(wait);
        }
        let (server, config) = setup(dir.path(), "slow", limits).await;
        let children: Vec<Child> = (0..6)
            .map(|n| {
                state.start(
                    &config,
                    &format!("quota-{n}-{wait_seconds:?}"),
                    "slow",
                    r#"{"seconds": 1}"#,
                )
            })
            .collect();
        let mut results = Vec::new();
        for child in children {
            results.push(result(&wait(child).await));
        }
        let ran = results
            .iter()
            .filter(|r| r["is_error"] == json!(false))
            .count();
        match wait_seconds {
            None => {
                assert!((2..6).contains(&ran), "{results:#?}");
                for refused in results.iter().filter(|r| r["is_error"] == json!(true)) {
                    assert_limited(refused);
                }
            }
            Some(_) => assert_eq!(ran, 6, "{results:#?}"),
        }
        assert_eq!(Stats::get(&server.stats.calls), ran);
        let peak = Stats::get(&server.stats.peak_running);
        assert!(peak <= 2, "{peak} ran at once");
    }
}

/// A process holding the only slot is killed: a new call is admitted once the dead owner's
/// lease expires (seconds), not at the dead call's timeout (60 s). The killed call itself goes
/// on at the server until it ends: the quota bounds the calls of live owners.
async fn a_killed_holders_slot_returns_with_its_lease(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let limits = json!({"concurrent": 1, "wait_seconds": 30});
    let (server, config) = setup(dir.path(), "slow", limits).await;
    let mut holder = state.start(&config, "held", "slow", r#"{"seconds": 20}"#);
    until_running(&server).await;
    holder.kill().unwrap();
    let _ = holder.wait();
    let started = Instant::now();
    let next = result(&wait(state.start(&config, "next", "slow", r#"{"seconds": 0.1}"#)).await);
    assert_eq!(next["is_error"], json!(false), "{next}");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(10),
        "admitted after {waited:?}"
    );
    assert_eq!(Stats::get(&server.stats.calls), 2);
}

/// One tenant's exhausted bucket leaves another's alone, across processes.
async fn tenants_have_their_own_buckets(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir.path(), &server.url, |binding| {
        binding["tenants"] = json!(["acme", "globex"]);
        binding["limits"] = json!({"calls": 1, "per_seconds": 3600});
    });
    let call = |tenant: &str, id: &str| {
        state.start_as(tenant, &config, id, "echo", r#"{"message": "hi"}"#)
    };
    assert_eq!(
        result(&wait(call("acme", "a1")).await)["is_error"],
        json!(false)
    );
    assert_limited(&result(&wait(call("acme", "a2")).await));
    assert_eq!(
        result(&wait(call("globex", "g1")).await)["is_error"],
        json!(false)
    );
    assert_eq!(Stats::get(&server.stats.calls), 2);
}

on_each_state!(
    a_rate_holds_across_processes,
    a_quota_holds_across_processes,
    a_killed_holders_slot_returns_with_its_lease,
    tenants_have_their_own_buckets,
);
