//! Pins enforced at run time, proven to fire: for every kind of change a server can make to a
//! pinned tool (`tests::drift::Change`), at both eras over HTTP and over stdio (with and without
//! a spare process), the first call verified after the change is refused `pin_drift` and the
//! server counts no `tools/call`; a text-only change warns and the call runs; a change back to
//! the pinned object lets calls through without a restart; a replay of a call completed before
//! the change is answered from the journal; a listing that fails refuses the call.
//!
//! If verification were switched off, or a kind of change not seen, a case here fails: the
//! detector cannot be silently disabled.

#![allow(clippy::print_stderr)] // the listings a zero TTL took, printed for the record

use std::path::Path;
use std::time::Duration;

use brain_runtime::journal::Journal;
use brain_runtime::{CallRequest, OutcomeKind, Runtime, Scope, ToolResult};
use serde_json::{Value, json};
use tests::drift::{Change, DRIFT_FILE_ENV};
use tests::server::{Faults, Stats, TestServer, bindings_json, pin};

/// The listing's lifetime in these tests: a change is seen by the first call after it.
const TTL: Duration = Duration::from_millis(150);

fn scope() -> Scope {
    Scope {
        tenant_id: "local".into(),
        session_id: "pins".into(),
    }
}

async fn call(runtime: &Runtime, call_id: &str, (tool, arguments): (&str, Value)) -> ToolResult {
    runtime
        .call(CallRequest::new(tool, scope(), arguments).with_call_id(call_id))
        .result()
        .await
}

/// The test-server tools (`only` one of them, when given), pinned as discovery pins them,
/// with `patch` applied.
fn pinned_runtime(url: &str, only: Option<&str>, patch: impl Fn(&mut Value)) -> Runtime {
    kept_for(TTL, url, only, patch)
}

/// As [`pinned_runtime`], its listings kept for `ttl`.
fn kept_for(ttl: Duration, url: &str, only: Option<&str>, patch: impl Fn(&mut Value)) -> Runtime {
    let tools: Vec<Value> = bindings_json(url, |name, binding| {
        binding["pin"] = pin(name);
        patch(binding);
    })
    .into_iter()
    .filter(|binding| only.is_none_or(|name| binding["name"] == name))
    .collect();
    let config = brain_config::parse(json!({ "tools": tools }).to_string().as_bytes(), "t.json")
        .unwrap_or_else(|e| panic!("{e}"));
    Runtime::builder(&config)
        .journal(Journal::memory())
        .listing_ttl(ttl)
        .build()
        .unwrap()
}

/// What the call after `change` must end in.
fn assert_verdict(change: Change, result: &ToolResult, what: &str) {
    if change.refuses() {
        assert_eq!(
            result.kind,
            Some(OutcomeKind::PinDrift),
            "{what}: {result:?}"
        );
        assert!(!result.unknown_outcome, "{what}: {result:?}");
        let said = text(result);
        assert!(said.contains(change.field()), "{what}: {said}");
        // Only the fields' names, never the server's new text.
        assert!(!said.contains("Deletes the file"), "{what}: {said}");
    } else {
        assert!(
            !result.is_error,
            "{what}: a text change only warns: {result:?}"
        );
    }
}

fn text(result: &ToolResult) -> String {
    serde_json::to_value(&result.content).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_over_http_is_refused_before_the_send_at_both_eras() {
    for revision in ["2025-11-25", "2026-07-28"] {
        for &change in Change::ALL {
            let what = format!("{} at {revision}", change.as_str());
            let server = TestServer::start(Faults {
                // Three tools a page: `routed`, the last tool, is on the last page.
                page_size: Some(3),
                ..Faults::default()
            })
            .await
            .unwrap();
            let runtime = pinned_runtime(&server.url, None, |binding| {
                binding["protocol_version"] = json!(revision);
            });
            let target = change.target();
            let before = call(&runtime, "before", target.clone()).await;
            assert!(!before.is_error, "{what}: {before:?}");
            let calls = Stats::get(&server.stats.calls);

            *server.stats.drift.lock().unwrap() = Some(change);
            tokio::time::sleep(TTL * 2).await;
            let after = call(&runtime, "after", target.clone()).await;
            assert_verdict(change, &after, &what);
            let sent = usize::from(!change.refuses());
            assert_eq!(Stats::get(&server.stats.calls), calls + sent, "{what}");
            // Refused again while the change stands (the listing is kept, not re-taken).
            if change.refuses() {
                let again = call(&runtime, "again", target.clone()).await;
                assert_eq!(again.kind, Some(OutcomeKind::PinDrift), "{what}");
            }

            // A replay of the call completed before the change: from the journal.
            let replay = call(&runtime, "before", target.clone()).await;
            assert!(replay.replayed, "{what}: {replay:?}");
            assert_eq!(Stats::get(&server.stats.calls), calls + sent, "{what}");

            // The change undone: calls go through again, without a restart.
            *server.stats.drift.lock().unwrap() = None;
            tokio::time::sleep(TTL * 2).await;
            let back = call(&runtime, "back", target).await;
            assert!(!back.is_error, "{what}: {back:?}");
            assert_eq!(Stats::get(&server.stats.calls), calls + sent + 1, "{what}");
        }
    }
}

/// Numbers compare by value, as in JSON Schema: the server lists `huge`'s `minimum` as `0.0`
/// where the binding has `0` (pinned, and without a pin) and the calls run, counted at the
/// server; `1`, or the string `"0"`, for `0` is a change: refused `pin_drift`, not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_written_otherwise_runs_and_a_number_changed_refuses() {
    for pinned in [true, false] {
        let server = TestServer::start(Faults::default()).await.unwrap();
        let runtime = pinned_runtime(&server.url, Some("huge"), |binding| {
            if !pinned {
                binding.as_object_mut().unwrap().remove("pin");
            }
        });
        let mut sent = 0;
        for (n, &change) in [
            Change::Renumbered,
            Change::Raised,
            Change::Quoted,
            Change::Renumbered,
        ]
        .iter()
        .enumerate()
        {
            let what = format!("{} (pinned: {pinned})", change.as_str());
            *server.stats.drift.lock().unwrap() = Some(change);
            tokio::time::sleep(TTL * 2).await;
            let result = call(&runtime, &format!("n{n}"), change.target()).await;
            assert_verdict(change, &result, &what);
            sent += usize::from(!change.refuses());
            assert_eq!(Stats::get(&server.stats.calls), sent, "{what}: {result:?}");
        }
        assert_eq!(sent, 2);
    }
}

/// A listing kept for no time (`ttlMs: 0`): every call is verified by a listing sent after it
/// arrived — a change is refused by the very next call — and calls that wait together share
/// one: 32 concurrent calls are not 32 listings, one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_zero_ttl_each_call_is_verified_by_a_listing_younger_than_itself() {
    for revision in ["2025-11-25", "2026-07-28"] {
        let server = TestServer::start(Faults::default()).await.unwrap();
        let runtime = kept_for(Duration::ZERO, &server.url, Some("echo"), |binding| {
            binding["protocol_version"] = json!(revision);
        });
        let echo = || ("echo", json!({"message": "hi"}));
        assert!(!call(&runtime, "1", echo()).await.is_error, "{revision}");
        *server.stats.drift.lock().unwrap() = Some(Change::Required);
        let refused = call(&runtime, "2", echo()).await;
        assert_eq!(
            refused.kind,
            Some(OutcomeKind::PinDrift),
            "{revision}: {refused:?}"
        );
        assert_eq!(Stats::get(&server.stats.calls), 1, "{revision}");
        *server.stats.drift.lock().unwrap() = None;
        assert!(!call(&runtime, "3", echo()).await.is_error, "{revision}");

        let lists = Stats::get(&server.stats.lists);
        let calls = (0..32).map(|n| {
            let runtime = runtime.clone();
            tokio::spawn(async move { call(&runtime, &format!("c{n}"), echo()).await })
        });
        for result in futures_util::future::join_all(calls).await {
            let result = result.unwrap();
            assert!(!result.is_error, "{revision}: {result:?}");
        }
        let listed = Stats::get(&server.stats.lists) - lists;
        assert_eq!(Stats::get(&server.stats.calls), 34, "{revision}");
        // Each waiter takes the listing sent after it arrived: far fewer than one per call.
        assert!(
            (1..=16).contains(&listed),
            "{revision}: {listed} listings for 32 calls"
        );
        eprintln!("{revision}: 32 concurrent calls under a zero TTL took {listed} listings");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_drift_refuse_refuses_a_text_change_and_a_failed_listing_refuses_the_call() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let runtime = pinned_runtime(&server.url, None, |binding| {
        binding["on_drift"] = json!("refuse");
    });
    let target = Change::Described.target();
    assert!(!call(&runtime, "1", target.clone()).await.is_error);
    *server.stats.drift.lock().unwrap() = Some(Change::Described);
    tokio::time::sleep(TTL * 2).await;
    let refused = call(&runtime, "2", target.clone()).await;
    assert_eq!(refused.kind, Some(OutcomeKind::PinDrift), "{refused:?}");
    assert!(text(&refused).contains("description"), "{refused:?}");
    assert_eq!(Stats::get(&server.stats.calls), 1);

    // tools/list fails: no verified listing, nothing sent.
    *server.stats.drift.lock().unwrap() = Some(Change::Unlisted);
    tokio::time::sleep(TTL * 2).await;
    let unlisted = call(&runtime, "3", target).await;
    assert_eq!(unlisted.kind, Some(OutcomeKind::NotSent), "{unlisted:?}");
    assert!(!unlisted.unknown_outcome);
    assert!(text(&unlisted).contains("tools/list"), "{unlisted:?}");
    assert_eq!(Stats::get(&server.stats.calls), 1);
}

/// A runtime over the stdio test server's tools, each process reading its change from `file`.
fn stdio_runtime(stats: &Path, file: &Path, prewarm: u64, tool: &str) -> Runtime {
    let command = json!([
        tests::process::test_server_binary().display().to_string(),
        "--stdio",
        "--stats-file",
        stats.display().to_string()
    ]);
    let mut env = serde_json::Map::new();
    env.insert(DRIFT_FILE_ENV.into(), json!(file.display().to_string()));
    pinned_runtime("http://unused.invalid/mcp", Some(tool), |binding| {
        let object = binding.as_object_mut().unwrap();
        object.remove("url");
        object.insert("command".into(), command.clone());
        object.insert("env".into(), Value::Object(env.clone()));
        object.insert("protocol_version".into(), json!("2025-11-25"));
        // The stats written, the change read, under the default sandbox.
        let dirs = [stats.parent().unwrap(), file.parent().unwrap()];
        object.insert("sandbox".into(), json!({"write": dirs}));
        if prewarm > 0 {
            object.insert("prewarm".into(), json!(prewarm));
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_over_stdio_is_refused_on_the_next_process_with_and_without_a_spare() {
    for prewarm in [0, 1] {
        for &change in Change::ALL {
            let what = format!("{} with prewarm {prewarm}", change.as_str());
            let dir = tempfile::tempdir().unwrap();
            let (stats, file) = (dir.path().join("stats"), dir.path().join("drift"));
            let target = change.target();
            let runtime = stdio_runtime(&stats, &file, prewarm, target.0);
            let calls = || tests::stdio::count(&stats, "tools/call");
            let before = call(&runtime, "before", target.clone()).await;
            assert!(!before.is_error, "{what}: {before:?}");
            assert_eq!(calls(), 1, "{what}");
            if prewarm > 0 {
                // The spare that replaces the one used is listed before the change.
                runtime.wait_for_cleanup().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }

            std::fs::write(&file, change.as_str()).unwrap();
            if prewarm > 0 {
                // The spare started before the change was verified then: it serves one more
                // call; the spare started after it is the first to see the change.
                let stale = call(&runtime, "stale", target.clone()).await;
                assert!(!stale.is_error, "{what}: {stale:?}");
                runtime.wait_for_cleanup().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let sent_before = calls();
            let after = call(&runtime, "after", target.clone()).await;
            assert_verdict(change, &after, &what);
            assert_eq!(
                calls(),
                sent_before + usize::from(!change.refuses()),
                "{what}"
            );
            let replay = call(&runtime, "before", target.clone()).await;
            assert!(replay.replayed, "{what}: {replay:?}");

            std::fs::remove_file(&file).unwrap();
            if prewarm > 0 {
                runtime.wait_for_cleanup().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                // The spare listed while the change stood is refused (or warned) once more.
                let _ = call(&runtime, "drain", target.clone()).await;
                runtime.wait_for_cleanup().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let back = call(&runtime, "back", target).await;
            assert!(!back.is_error, "{what}: {back:?}");
            runtime.wait_for_cleanup().await;
        }
    }
}
