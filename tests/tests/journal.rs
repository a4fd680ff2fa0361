//! The call journal: the same tests against each backend (memory, SQLite, and PostgreSQL in a
//! throwaway cluster the test starts), on every transport. What a retried call id gets, with
//! the tool's runs counted on the server's side.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brain_config::HostConfig;
use brain_runtime::journal::{Durability, Journal};
use brain_runtime::{CallRequest, Runtime, Scope, ToolResult};
use serde_json::{Value, json};
use tests::client::text;
use tests::server::{Faults, Stats, TestServer, bindings_json};

/// Where a test's journal lives.
enum Backend {
    Memory(Journal),
    Sqlite(tempfile::TempDir),
    Postgres(tests::postgres::Cluster),
    /// A database another part of the test owns.
    Url(String),
}

impl Backend {
    fn memory() -> Backend {
        Backend::Memory(Journal::memory())
    }

    fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres() -> Backend {
        Backend::Postgres(tests::postgres::Cluster::start())
    }

    fn sqlite_path(&self) -> Option<PathBuf> {
        match self {
            Backend::Sqlite(dir) => Some(dir.path().join("state.db")),
            _ => None,
        }
    }

    /// A journal on the backend's store; each call opens another handle on the same store
    /// (another process would), and each runtime built on one is another owner.
    async fn journal(&self) -> Journal {
        match self {
            Backend::Memory(journal) => journal.clone(),
            Backend::Sqlite(_) => {
                Journal::sqlite(&self.sqlite_path().unwrap(), Durability::Normal).unwrap()
            }
            Backend::Postgres(cluster) => Journal::postgres(&cluster.url).await.unwrap(),
            Backend::Url(url) => Journal::postgres(url).await.unwrap(),
        }
    }
}

fn parse(tools: Vec<Value>) -> HostConfig {
    let text = json!({ "tools": tools }).to_string();
    brain_config::parse(text.as_bytes(), "journal.json").unwrap_or_else(|e| panic!("{e}"))
}

/// The test server's tools at `url`, at `revision` when given.
fn mcp_config(url: &str, revision: Option<&str>) -> HostConfig {
    parse(bindings_json(url, |_, binding| {
        binding["timeout_seconds"] = json!(30);
        if let Some(revision) = revision {
            binding["protocol_version"] = json!(revision);
        }
    }))
}

fn request(tool: &str, call_id: &str, arguments: Value) -> CallRequest {
    CallRequest::new(
        tool,
        Scope {
            tenant_id: "local".into(),
            session_id: "session-j".into(),
        },
        arguments,
    )
    .with_call_id(call_id)
}

async fn runtime(config: &HostConfig, backend: &Backend) -> Runtime {
    Runtime::builder(config)
        .journal(backend.journal().await)
        .build()
        .unwrap()
}

async fn call(runtime: &Runtime, tool: &str, call_id: &str, arguments: Value) -> ToolResult {
    runtime
        .call(request(tool, call_id, arguments))
        .result()
        .await
}

/// How a transport's runs are counted on the server's side.
enum Counter<'a> {
    Mcp(&'a TestServer),
    Tool(&'a TestServer),
    Stdio(&'a Path),
}

impl Counter<'_> {
    fn runs(&self) -> usize {
        match self {
            Counter::Mcp(server) => Stats::get(&server.stats.calls),
            Counter::Tool(server) => Stats::get(&server.tools.requests),
            Counter::Stdio(stats) => tests::stdio::count(stats, "tools/call"),
        }
    }
}

/// Retries one call id on one transport: the tool runs once, the retries are replayed (the
/// same result, `replayed: true`), and the same id with other arguments is refused.
async fn retries_on(runtime: &Runtime, tool: &str, counter: Counter<'_>, what: &str) {
    let id = format!("retry-{what}");
    let id = id.as_str();
    let first = call(runtime, tool, id, json!({"message": "once"})).await;
    assert!(!first.is_error, "{what}: {first:?}");
    assert!(!first.replayed, "{what}: {first:?}");
    for _ in 0..2 {
        let mut again = call(runtime, tool, id, json!({"message": "once"})).await;
        assert!(again.replayed, "{what}: {again:?}");
        again.replayed = false;
        assert_eq!(again, first, "{what}");
    }
    let other = call(runtime, tool, id, json!({"message": "other"})).await;
    assert!(
        other.is_error && !other.unknown_outcome,
        "{what}: {other:?}"
    );
    assert!(
        text(&other).contains("was used for another call"),
        "{what}: {other:?}"
    );
    runtime.wait_for_cleanup().await;
    assert_eq!(counter.runs(), 1, "{what}: the tool ran once");
}

async fn retry_after_success_is_replayed_on_every_transport(backend: Backend) {
    for revision in ["2025-11-25", "2026-07-28", "2025-06-18"] {
        let server = TestServer::start(Faults::default()).await.unwrap();
        let runtime = runtime(&mcp_config(&server.url, Some(revision)), &backend).await;
        retries_on(&runtime, "echo", Counter::Mcp(&server), revision).await;
        drop(runtime);
        // The journal's entries outlive the runtime: a new one (a restarted host) replays.
        let restarted = self::runtime(&mcp_config(&server.url, Some(revision)), &backend).await;
        let id = format!("retry-{revision}");
        let again = call(&restarted, "echo", &id, json!({"message": "once"})).await;
        assert!(again.replayed && !again.is_error, "{revision}: {again:?}");
        assert_eq!(Stats::get(&server.stats.calls), 1, "{revision}");
    }
    // stdio: a process per call, counted in a stats file.
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    let command = json!([
        tests::process::test_server_binary().display().to_string(),
        "--stdio",
        "--stats-file",
        stats.display().to_string()
    ]);
    let stdio = parse(bindings_json("http://unused.invalid/mcp", |_, binding| {
        binding.as_object_mut().unwrap().remove("url");
        binding["command"] = command.clone();
        binding["timeout_seconds"] = json!(20);
        binding["sandbox"] = json!({"write": [dir.path()]});
    }));
    let runtime = runtime(&stdio, &backend).await;
    retries_on(&runtime, "echo", Counter::Stdio(&stats), "stdio").await;
    // An HTTP tool (which also sends `Idempotency-Key`).
    let server = TestServer::start(Faults::default()).await.unwrap();
    let tools_url = server.url.trim_end_matches("/mcp").to_owned() + "/tools/echo";
    let http = parse(vec![json!({
        "name": "http_echo", "description": "An HTTP tool.", "url": tools_url,
        "input_schema": {"type": "object"}, "tenants": ["local"], "timeout_seconds": 10
    })]);
    let runtime = self::runtime(&http, &backend).await;
    retries_on(&runtime, "http_echo", Counter::Tool(&server), "http tool").await;
}

async fn a_call_that_was_not_sent_is_sent_by_its_retry(backend: Backend) {
    let server = TestServer::start(Faults {
        require_token: Some("right-token".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let config = parse(bindings_json(&server.url, |_, binding| {
        binding["token_env"] = json!("TOKEN");
    }));
    let with_token = |token: &'static str| {
        Runtime::builder(&config).env(move |var| (var == "TOKEN").then(|| token.to_owned()))
    };
    let wrong = with_token("wrong-token")
        .journal(backend.journal().await)
        .build()
        .unwrap();
    let refused = call(&wrong, "echo", "not-sent-1", json!({"message": "m"})).await;
    assert!(refused.is_error && !refused.unknown_outcome, "{refused:?}");
    wrong.wait_for_cleanup().await;
    assert_eq!(Stats::get(&server.stats.calls), 0);
    let right = with_token("right-token")
        .journal(backend.journal().await)
        .build()
        .unwrap();
    let sent = call(&right, "echo", "not-sent-1", json!({"message": "m"})).await;
    assert!(!sent.is_error && !sent.replayed, "{sent:?}");
    let replayed = call(&right, "echo", "not-sent-1", json!({"message": "m"})).await;
    assert!(replayed.replayed, "{replayed:?}");
    right.wait_for_cleanup().await;
    assert_eq!(Stats::get(&server.stats.calls), 1);
}

async fn racing_callers_send_once(backend: Backend) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    // At 2025-11-25 the journal answers at admit, before a session is opened; at 2026-07-28
    // (nothing to open) the claim answers.
    for (round, revision) in [None, Some("2026-07-28")].into_iter().enumerate() {
        let config = mcp_config(&server.url, revision);
        // Two runtimes (two owners, as two processes would be), 32 tasks each, one call id.
        let runtimes = [
            runtime(&config, &backend).await,
            runtime(&config, &backend).await,
        ];
        let mut calls = Vec::new();
        for i in 0..64 {
            let runtime = runtimes[i % 2].clone();
            let id = format!("race-{round}");
            calls.push(tokio::spawn(async move {
                call(&runtime, "slow", &id, json!({"seconds": 0.5})).await
            }));
        }
        let mut fresh = 0;
        for handle in calls {
            let result = handle.await.unwrap();
            assert!(!result.is_error, "{revision:?}: {result:?}");
            assert_eq!(text(&result), "slept", "{result:?}");
            fresh += usize::from(!result.replayed);
        }
        assert_eq!(
            fresh, 1,
            "{revision:?}: one caller sent it; every other got it replayed"
        );
        for runtime in &runtimes {
            runtime.wait_for_cleanup().await;
        }
        assert_eq!(Stats::get(&server.stats.calls), round + 1, "{revision:?}");
    }
}

async fn a_long_call_of_a_live_owner_is_waited_for(backend: Backend) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    for (round, revision) in [None, Some("2026-07-28")].into_iter().enumerate() {
        let config = mcp_config(&server.url, revision);
        let lease = Duration::from_secs(1);
        let owner = Runtime::builder(&config)
            .journal(backend.journal().await.lease(lease))
            .build()
            .unwrap();
        let retrier = Runtime::builder(&config)
            .journal(backend.journal().await.lease(lease))
            .build()
            .unwrap();
        let id = format!("long-{round}");
        let running = owner.call(request("slow", &id, json!({"seconds": 3.5})));
        let running = tokio::spawn(running.result());
        tokio::time::sleep(Duration::from_millis(500)).await;
        let retried = call(&retrier, "slow", &id, json!({"seconds": 3.5})).await;
        let first = running.await.unwrap();
        assert!(
            !first.is_error && !first.replayed,
            "{revision:?}: {first:?}"
        );
        assert!(
            retried.replayed && !retried.is_error,
            "{revision:?}: the retry waited for the live owner (3.5 s, 3 leases): {retried:?}"
        );
        assert_eq!(text(&retried), text(&first));
        assert_eq!(Stats::get(&server.stats.calls), round + 1, "{revision:?}");
    }
}

async fn a_database_gone_mid_call_changes_nothing(backend: Backend) {
    let Backend::Postgres(mut cluster) = backend else {
        unreachable!("PostgreSQL only")
    };
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = mcp_config(&server.url, None);
    let journal = Journal::postgres(&cluster.url).await.unwrap();
    let runtime = Runtime::builder(&config).journal(journal).build().unwrap();
    let running = tokio::spawn(
        runtime
            .call(request("slow", "gone-1", json!({"seconds": 1})))
            .result(),
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    cluster.stop();
    let result = running.await.unwrap();
    assert!(!result.is_error && !result.unknown_outcome, "{result:?}");
    // With the database gone, a new call is refused before anything is sent.
    let refused = call(&runtime, "echo", "gone-2", json!({"message": "m"})).await;
    assert!(refused.is_error && !refused.unknown_outcome, "{refused:?}");
    assert!(
        text(&refused).contains("call journal (PostgreSQL"),
        "{refused:?}"
    );
    runtime.wait_for_cleanup().await;
    assert_eq!(Stats::get(&server.stats.calls), 1);
}

async fn a_locked_sqlite_file_refuses_the_call(backend: Backend) {
    let path = backend.sqlite_path().unwrap();
    let server = TestServer::start(Faults::default()).await.unwrap();
    let runtime = runtime(&mcp_config(&server.url, None), &backend).await;
    // Another process holds the write lock longer than brain waits for it (5 s).
    let holder = std::thread::spawn(move || {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection.execute_batch("BEGIN EXCLUSIVE").unwrap();
        std::thread::sleep(Duration::from_secs(7));
        connection.execute_batch("ROLLBACK").unwrap();
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = call(&runtime, "echo", "locked-1", json!({"message": "m"})).await;
    assert!(refused.is_error && !refused.unknown_outcome, "{refused:?}");
    assert!(
        text(&refused).contains("call journal (SQLite"),
        "{refused:?}"
    );
    assert!(text(&refused).contains("nothing was sent"), "{refused:?}");
    holder.join().unwrap();
    runtime.wait_for_cleanup().await;
    assert_eq!(Stats::get(&server.stats.calls), 0);
}

/// The first schema brain's PostgreSQL journal made (version 1), as a database made then holds
/// it.
const SCHEMA_1: &str = "
CREATE TABLE brain_schema (version INT4 NOT NULL);
INSERT INTO brain_schema (version) VALUES (1);
CREATE TABLE brain_calls (
    tenant TEXT NOT NULL, session TEXT NOT NULL, call_id TEXT NOT NULL, digest TEXT NOT NULL,
    binding TEXT NOT NULL, state TEXT NOT NULL, owner TEXT NOT NULL, created INT8 NOT NULL,
    deadline INT8 NOT NULL, finished INT8, is_error BOOLEAN, unknown_outcome BOOLEAN,
    result TEXT, result_bytes INT8, trace_id TEXT, PRIMARY KEY (tenant, session, call_id)
);
CREATE INDEX brain_calls_created ON brain_calls (created);
CREATE TABLE brain_owners (owner TEXT PRIMARY KEY, expires INT8 NOT NULL);
INSERT INTO brain_calls (tenant, session, call_id, digest, binding, state, owner, created,
    deadline, finished, is_error, unknown_outcome, result, result_bytes)
VALUES ('local', 'session-j', 'kept-1', 'sha256:another-call', 'echo', 'completed', 'gone',
    1, 2, 3, false, false, NULL, 10);
";

async fn a_journal_of_the_first_schema_is_migrated(backend: Backend) {
    let Backend::Postgres(cluster) = backend else {
        unreachable!("PostgreSQL only")
    };
    let (client, connection) = tokio_postgres::connect(&cluster.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client.batch_execute(SCHEMA_1).await.unwrap();
    let server = TestServer::start(Faults::default()).await.unwrap();
    let runtime = runtime(&mcp_config(&server.url, None), &backend_of(&cluster)).await;
    // The row written under the first schema is still the journal's.
    let kept = call(&runtime, "echo", "kept-1", json!({"message": "m"})).await;
    assert!(kept.is_error && !kept.unknown_outcome, "{kept:?}");
    assert!(
        text(&kept).contains("was used for another call"),
        "{kept:?}"
    );
    // New calls are journaled under the new schema.
    let first = call(&runtime, "echo", "new-1", json!({"message": "m"})).await;
    let again = call(&runtime, "echo", "new-1", json!({"message": "m"})).await;
    assert!(!first.is_error && again.replayed, "{first:?} {again:?}");
    runtime.wait_for_cleanup().await;
    assert_eq!(Stats::get(&server.stats.calls), 1);
    let version: i32 = client
        .query_one("SELECT max(version) FROM brain_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 9);
    client
        .batch_execute(
            "SELECT task FROM brain_calls; SELECT tat_us FROM brain_limit_buckets; \
             SELECT until_ms FROM brain_limit_slots; SELECT first_seen FROM brain_drift; \
             SELECT used, signature FROM brain_approvals; SELECT record FROM brain_audit",
        )
        .await
        .unwrap();
    let grants: Option<String> = client
        .query_one("SELECT to_regclass('brain_grants')::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        grants.as_deref(),
        Some("brain_grants"),
        "the grants' table is made"
    );
    let index: Option<String> = client
        .query_one("SELECT to_regclass('brain_calls_created')::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(index, None, "the index on created is dropped");
    let collations: Vec<String> = client
        .query(
            "SELECT table_name || '.' || column_name FROM information_schema.columns \
             WHERE table_name IN ('brain_calls', 'brain_owners') AND collation_name = 'C' \
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        collations,
        [
            "brain_calls.call_id",
            "brain_calls.session",
            "brain_calls.tenant",
            "brain_owners.owner"
        ],
        "keys compare bytewise"
    );
}

/// The store's two statements of MCP tasks: a task is recorded only by the call's owner, and
/// a call is taken over only while it runs a task, from an owner whose lease expired, by a
/// live one, and once.
async fn a_task_is_taken_over_only_from_an_owner_that_stopped(backend: Backend) {
    use brain_runtime::journal::{Claim, EntryState, Key, Record};
    let journal = backend.journal().await;
    let store = journal.store();
    let key = |call_id: &str| Key {
        tenant: "local".into(),
        session: "session-t".into(),
        call_id: call_id.into(),
    };
    let claim = |call_id: &str| Claim {
        key: key(call_id),
        digest: "sha256:d".into(),
        binding: "research".into(),
        owner: "stopping".into(),
        timeout_ms: 60_000,
        trace_id: None,
        upstream: None,
    };
    let task = r#"{"task_id":"t-1","session":"s-1","revision":"2025-11-25"}"#;
    assert!(store.renew("stopping", 500, true).await.unwrap());
    assert!(store.renew("retry", 60_000, true).await.unwrap());
    assert!(store.claim(&claim("task-1")).await.unwrap());
    assert!(store.claim(&claim("plain-1")).await.unwrap());
    // Only the owner records a task.
    assert!(
        !store
            .record_task(&key("task-1"), "retry", task)
            .await
            .unwrap()
    );
    assert!(
        store
            .record_task(&key("task-1"), "stopping", task)
            .await
            .unwrap()
    );
    // Not while the owner's lease is live.
    assert!(
        !store
            .take_over(&key("task-1"), "stopping", "retry")
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Not by an owner without a live lease, not a call without a task.
    assert!(
        !store
            .take_over(&key("task-1"), "stopping", "unknown")
            .await
            .unwrap()
    );
    assert!(
        !store
            .take_over(&key("plain-1"), "stopping", "retry")
            .await
            .unwrap()
    );
    assert!(
        store
            .take_over(&key("task-1"), "stopping", "retry")
            .await
            .unwrap()
    );
    // Once: another retry finds it taken.
    assert!(store.renew("second", 60_000, true).await.unwrap());
    assert!(
        !store
            .take_over(&key("task-1"), "stopping", "second")
            .await
            .unwrap()
    );
    let entry = store.lookup(&key("task-1")).await.unwrap().unwrap();
    assert_eq!(
        (entry.state, entry.owner.as_str(), entry.task.as_deref()),
        (EntryState::Sent, "retry", Some(task))
    );
    // The stopped owner's outcome is no longer recorded; the new owner's is.
    let done = Record {
        state: EntryState::Completed,
        is_error: false,
        unknown_outcome: false,
        result: None,
        result_bytes: 0,
        result_digest: String::new(),
    };
    assert!(
        !store
            .settle(&key("task-1"), "stopping", &done, false)
            .await
            .unwrap()
    );
    assert!(
        store
            .settle(&key("task-1"), "retry", &done, false)
            .await
            .unwrap()
    );
    // A finished call is not taken over.
    assert!(
        !store
            .take_over(&key("task-1"), "retry", "second")
            .await
            .unwrap()
    );
}

/// Another handle on `cluster`'s database (the migration test made the database itself).
fn backend_of(cluster: &tests::postgres::Cluster) -> Backend {
    Backend::Url(cluster.url.clone())
}

macro_rules! tests {
    ($backend:ident: $($name:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::$backend()).await
                }
            )*
        }
    };
}

tests!(memory:
    a_task_is_taken_over_only_from_an_owner_that_stopped,
    retry_after_success_is_replayed_on_every_transport,
    a_call_that_was_not_sent_is_sent_by_its_retry,
    racing_callers_send_once,
    a_long_call_of_a_live_owner_is_waited_for,
);
tests!(sqlite:
    a_task_is_taken_over_only_from_an_owner_that_stopped,
    retry_after_success_is_replayed_on_every_transport,
    a_call_that_was_not_sent_is_sent_by_its_retry,
    racing_callers_send_once,
    a_long_call_of_a_live_owner_is_waited_for,
    a_locked_sqlite_file_refuses_the_call,
);
tests!(postgres:
    a_task_is_taken_over_only_from_an_owner_that_stopped,
    retry_after_success_is_replayed_on_every_transport,
    a_call_that_was_not_sent_is_sent_by_its_retry,
    racing_callers_send_once,
    a_long_call_of_a_live_owner_is_waited_for,
    a_database_gone_mid_call_changes_nothing,
    a_journal_of_the_first_schema_is_migrated,
);
