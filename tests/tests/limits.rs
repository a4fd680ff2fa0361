//! Limits inside one process, on each store (memory, SQLite, PostgreSQL) and without one: what a
//! call over a limit gets, what a retry, a continuation and another tenant cost, and what an
//! upstream rate limit says. Calls are counted at the server. The same limits across
//! processes: `bindings/tests/limits.rs`.

use std::time::Duration;

use brain_config::HostConfig;
use brain_runtime::journal::{Durability, Journal};
use brain_runtime::{CallRequest, OutcomeKind, Runtime, Scope, ToolResult};
use serde_json::{Value, json};
use tests::client::text;
use tests::server::{Faults, RateLimited, Stats, TestServer, bindings_json};

fn config(url: &str, extra: Value, patch: impl Fn(&str, &mut Value)) -> HostConfig {
    let mut config = json!({ "tools": bindings_json(url, |name, binding| {
        binding["timeout_seconds"] = json!(30);
        binding["tenants"] = json!(["acme", "globex", "acme-2026", "globex-2026"]);
        patch(name, binding);
    }) });
    if let Value::Object(extra) = extra {
        config.as_object_mut().unwrap().extend(extra);
    }
    let text = config.to_string();
    brain_config::parse(text.as_bytes(), "limits.json").unwrap_or_else(|e| panic!("{e}"))
}

async fn call(runtime: &Runtime, tenant: &str, tool: &str, call_id: &str) -> ToolResult {
    let arguments = match tool {
        "echo" => json!({"message": call_id}),
        "weather" => json!({"city": call_id}),
        "slow" => json!({"seconds": 0.5}),
        _ => json!({}),
    };
    let request = CallRequest::new(
        tool,
        Scope {
            tenant_id: tenant.into(),
            session_id: "s".into(),
        },
        arguments,
    )
    .with_call_id(call_id);
    runtime.call(request).result().await
}

fn assert_limited(result: &ToolResult, retry: Option<std::ops::RangeInclusive<u64>>) {
    assert!(result.is_error, "{result:?}");
    assert!(!result.unknown_outcome, "{result:?}");
    assert_eq!(result.kind, Some(OutcomeKind::Limited), "{result:?}");
    assert!(
        text(result).contains("over the limit of"),
        "{}",
        text(result)
    );
    match retry {
        Some(range) => assert!(
            result.retry_after_ms.is_some_and(|ms| range.contains(&ms)),
            "{result:?}"
        ),
        None => assert_eq!(result.retry_after_ms, None, "{result:?}"),
    }
}

/// Where a test's runtime keeps its buckets.
enum Store {
    None,
    Memory,
    Sqlite(tempfile::TempDir),
    Postgres(tests::postgres::Cluster),
}

impl Store {
    async fn runtime(&self, config: &HostConfig) -> Runtime {
        let builder = Runtime::builder(config);
        let journal = match self {
            Store::None => return builder.build().unwrap(),
            Store::Memory => Journal::memory(),
            Store::Sqlite(dir) => {
                Journal::sqlite(&dir.path().join("state.db"), Durability::Normal).unwrap()
            }
            Store::Postgres(cluster) => Journal::postgres(&cluster.url).await.unwrap(),
        };
        builder.journal(journal).build().unwrap()
    }
}

/// A rate: the bucket's calls at once, then refusals with the time to the next token; a
/// retried call id replays without a token; another tenant has its own bucket; and
/// `per: "binding"` shares one across tenants. At both eras (the charge after admit, and in the
/// claim's transaction).
async fn rates_refuse_with_the_next_token_and_retries_cost_nothing(store: Store) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    for revision in ["2025-11-25", "2026-07-28"] {
        let config = config(&server.url, json!({}), |name, binding| {
            binding["protocol_version"] = json!(revision);
            match name {
                "echo" => binding["limits"] = json!({"calls": 2, "per_seconds": 60}),
                "weather" => {
                    binding["limits"] = json!({"calls": 1, "per_seconds": 3600, "per": "binding"})
                }
                _ => {}
            }
        });
        let runtime = store.runtime(&config).await;
        let before = Stats::get(&server.stats.calls);
        let id = |n: &str| format!("{revision}-{n}");
        // The store keeps the buckets between runtimes: each era its own tenants.
        let (acme, globex) = match revision {
            "2025-11-25" => ("acme", "globex"),
            _ => ("acme-2026", "globex-2026"),
        };
        assert!(!call(&runtime, acme, "echo", &id("a1")).await.is_error);
        assert!(!call(&runtime, acme, "echo", &id("a2")).await.is_error);
        let refused = call(&runtime, acme, "echo", &id("a3")).await;
        // 2 per 60 s: a token every 30 s.
        assert_limited(&refused, Some(29_000..=30_000));
        // A retry of a call that ran replays, with no token to spare (without a journal there
        // is no replay: it is a new call, refused).
        let replayed = call(&runtime, acme, "echo", &id("a1")).await;
        if matches!(store, Store::None) {
            assert_limited(&replayed, Some(29_000..=30_000));
        } else {
            assert!(replayed.replayed && !replayed.is_error, "{replayed:?}");
        }
        // The refused call id was never journaled: a retry is refused again, not replayed.
        let again = call(&runtime, acme, "echo", &id("a3")).await;
        assert!(!again.replayed, "{again:?}");
        assert_limited(&again, Some(29_000..=30_000));
        // globex has its own bucket.
        assert!(!call(&runtime, globex, "echo", &id("g1")).await.is_error);
        // One bucket for the whole binding (which a store keeps between the runtimes: taken
        // by the first era's call).
        let shared = !matches!(store, Store::Sqlite(_) | Store::Postgres(_));
        let first = call(&runtime, acme, "weather", &id("s1")).await;
        if revision == "2025-11-25" || shared {
            assert!(!first.is_error, "{first:?}");
        } else {
            assert_limited(&first, Some(3_000_000..=3_600_000));
        }
        assert_limited(
            &call(&runtime, globex, "weather", &id("s2")).await,
            Some(3_000_000..=3_600_000),
        );
        let weather = usize::from(!first.is_error);
        assert_eq!(
            Stats::get(&server.stats.calls) - before,
            3 + weather,
            "{revision}: two of acme's, one of globex's, the first weather"
        );
    }
}

/// A quota: a call over `concurrent` is refused at once (no time is known); with
/// `wait_seconds` it waits for the slot; a slot comes back when its call ends.
async fn quotas_refuse_or_wait_and_slots_come_back(store: Store) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = config(&server.url, json!({}), |name, binding| match name {
        "slow" => binding["limits"] = json!({"concurrent": 1}),
        "echo" => binding["limits"] = json!({"concurrent": 1, "wait_seconds": 5}),
        _ => {}
    });
    let runtime = store.runtime(&config).await;
    let first = runtime.call(
        CallRequest::new(
            "slow",
            Scope {
                tenant_id: "acme".into(),
                session_id: "s".into(),
            },
            json!({"seconds": 1}),
        )
        .with_call_id("q1"),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_limited(&call(&runtime, "acme", "slow", "q2").await, None);
    assert!(!first.result().await.is_error);
    // Given back: the next call runs.
    assert!(!call(&runtime, "acme", "slow", "q3").await.is_error);
    // Waiting: three calls at once through one slot, each in turn.
    let started = std::time::Instant::now();
    let calls = (0..3).map(|n| {
        let runtime = runtime.clone();
        async move { call(&runtime, "acme", "echo", &format!("w{n}")).await }
    });
    for result in futures_util::future::join_all(calls).await {
        assert!(!result.is_error, "{result:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(Stats::get(&server.stats.calls), 5);
}

/// `tenant_limits` span the tenant's bindings; another tenant is untouched.
async fn tenant_limits_span_the_tenants_bindings(store: Store) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = config(
        &server.url,
        json!({"tenant_limits": {"acme": {"calls": 2, "per_seconds": 60}}}),
        |_, _| {},
    );
    let runtime = store.runtime(&config).await;
    assert!(!call(&runtime, "acme", "echo", "t1").await.is_error);
    assert!(!call(&runtime, "acme", "weather", "t2").await.is_error);
    let refused = call(&runtime, "acme", "echo", "t3").await;
    assert_limited(&refused, Some(29_000..=30_000));
    assert!(text(&refused).contains("tenant/acme"), "{}", text(&refused));
    assert!(!call(&runtime, "globex", "echo", "t4").await.is_error);
    assert_eq!(Stats::get(&server.stats.calls), 3);
}

/// Continuations are not charged: a 2026-07-28 call that needs two more rounds, through a
/// binding that admits one call an hour, completes.
async fn continuations_are_not_charged_again(store: Store) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = config(&server.url, json!({}), |name, binding| {
        if name == "input_required" {
            binding["protocol_version"] = json!("2026-07-28");
            binding["limits"] = json!({"calls": 1, "per_seconds": 3600});
        }
    });
    let runtime = store.runtime(&config).await;
    let request = CallRequest::new(
        "input_required",
        Scope {
            tenant_id: "acme".into(),
            session_id: "s".into(),
        },
        json!({"rounds": 2}),
    );
    let result = runtime.call(request.clone()).result().await;
    assert!(!result.is_error, "{result:?}");
    assert!(
        text(&result).contains("completed after 2 rounds"),
        "{}",
        text(&result)
    );
    // The one token went to that call.
    assert_limited(
        &runtime.call(request).result().await,
        Some(3_599_000..=3_600_000),
    );
}

macro_rules! each_store {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn without_a_store() {
                    super::$name(super::Store::None).await
                }

                #[tokio::test]
                async fn memory() {
                    super::$name(super::Store::Memory).await
                }

                #[tokio::test]
                async fn sqlite() {
                    super::$name(super::Store::Sqlite(tempfile::tempdir().unwrap())).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name(super::Store::Postgres(tests::postgres::Cluster::start())).await
                }
            }
        )*
    };
}

each_store!(
    rates_refuse_with_the_next_token_and_retries_cost_nothing,
    quotas_refuse_or_wait_and_slots_come_back,
    tenant_limits_span_the_tenants_bindings,
    continuations_are_not_charged_again,
);

/// A store that cannot be reached refuses the call: limits never fail open, nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_store_refuses_and_sends_nothing() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let mut cluster = tests::postgres::Cluster::start();
    let config = config(&server.url, json!({}), |name, binding| {
        if name == "echo" {
            binding["protocol_version"] = json!("2026-07-28");
            binding["limits"] = json!({"calls": 100, "per_seconds": 60});
        }
    });
    let runtime = Store::runtime(&Store::None, &config).await;
    drop(runtime);
    let journal = Journal::postgres(&cluster.url).await.unwrap();
    let runtime = Runtime::builder(&config).journal(journal).build().unwrap();
    assert!(!call(&runtime, "acme", "echo", "up").await.is_error);
    cluster.stop();
    let refused = call(&runtime, "acme", "echo", "down").await;
    assert!(refused.is_error && !refused.unknown_outcome, "{refused:?}");
    assert_eq!(
        refused.kind,
        Some(OutcomeKind::StoreUnavailable),
        "{refused:?}"
    );
    assert!(
        text(&refused).contains("nothing was sent"),
        "{}",
        text(&refused)
    );
    assert_eq!(Stats::get(&server.stats.calls), 1);
}

/// An upstream rate limit after `tools/call` was sent is an unknown outcome (the seed's rule),
/// and says when to try again: `data.retryAfterMs` first, then `Retry-After` (seconds or a
/// date), at most the binding's timeout.
#[tokio::test]
async fn upstream_rate_limits_are_unknown_with_retry_after() {
    for (limited, expect, revision) in [
        (RateLimited::Seconds(7), 7_000..=7_000, "2025-11-25"),
        (RateLimited::Seconds(7), 7_000..=7_000, "2026-07-28"),
        (RateLimited::Seconds(100), 30_000..=30_000, "2025-11-25"),
        (RateLimited::Date(20), 18_000..=20_000, "2025-11-25"),
        (RateLimited::Rpc(1_500), 1_500..=1_500, "2025-11-25"),
        (RateLimited::Rpc(1_500), 1_500..=1_500, "2026-07-28"),
    ] {
        let server = TestServer::start(Faults {
            rate_limited: Some(limited),
            ..Faults::default()
        })
        .await
        .unwrap();
        let config = config(&server.url, json!({}), |_, binding| {
            binding["protocol_version"] = json!(revision);
        });
        let runtime = Runtime::new(&config).unwrap();
        let result = call(&runtime, "acme", "echo", "up-1").await;
        assert!(
            result.is_error && result.unknown_outcome,
            "{limited:?}: {result:?}"
        );
        assert_eq!(result.kind, Some(OutcomeKind::UnknownOutcome));
        assert!(
            result.retry_after_ms.is_some_and(|ms| expect.contains(&ms)),
            "{limited:?} at {revision}: {result:?}"
        );
        assert_eq!(Stats::get(&server.stats.calls), 1);
    }
}
