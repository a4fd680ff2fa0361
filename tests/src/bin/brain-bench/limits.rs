//! P11: limits on against off — the same `echo` calls at 2026-07-28 (charged in the claim's
//! transaction) through two runtimes on the SQLite journal, one whose binding has a rate and a
//! quota high enough never to refuse (so every call reaches the store) — against the Python
//! SDK server and the fast test server; and the charge's own p50/p99 on each store.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use brain_runtime::Runtime;
use brain_runtime::journal::{Durability, Journal, JournalStore};
use brain_runtime::limits::{Bucket, Charge, Limit};
use serde_json::{Value, json};

use crate::harness::{Driver, Plan, Target, compare, echo_config, python_peer};

/// Limits no bench call reaches: a million calls a second, 100,000 at once.
fn limits() -> Value {
    json!({"calls": 1_000_000, "per_seconds": 1, "concurrent": 100_000})
}

/// A runtime calling `echo` at `url` (2026-07-28) on its own SQLite journal in `dir`, with
/// `limits` or without.
fn runtime(url: &str, dir: &Path, limited: bool) -> anyhow::Result<Runtime> {
    let mut config: Value = serde_json::to_value(echo_config(url, "2026-07-28", "echo")?)?;
    if limited {
        config["tools"][0]["limits"] = limits();
    }
    let config = brain_config::parse(config.to_string().as_bytes(), "bench.json")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let journal = Journal::sqlite(&dir.join("state.db"), Durability::Normal)?;
    Ok(Runtime::builder(&config).journal(journal).build()?)
}

/// P11's rows.
pub(crate) async fn targets(
    plan: &Plan,
    test_server: &str,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    if let Some(peer) = python_peer("P11", "limits on vs off, Python SDK server", targets) {
        ratios(plan, "Python SDK server", &peer.url, true, targets).await?;
    }
    ratios(plan, "test server", test_server, false, targets).await?;
    charges(targets).await
}

/// On against off at c = 32 and c = 1.
async fn ratios(
    plan: &Plan,
    name: &str,
    upstream: &str,
    gated: bool,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    let (on_dir, off_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let on = Arc::new(Driver::Brain(runtime(upstream, on_dir.path(), true)?));
    let off = Arc::new(Driver::Brain(runtime(upstream, off_dir.path(), false)?));
    for concurrency in [32, 1] {
        eprintln!("P11: limits on vs off, {name}, c={concurrency}...");
        let calls = plan.calls(concurrency);
        let (with, without) = compare(&on, &off, calls, concurrency, plan.rounds).await?;
        let what = format!("limits on vs off, {name}, SQLite, 2026-07-28, c={concurrency}");
        targets.push(if gated && concurrency == 32 {
            Target::ratio_of("P11", what, &with, &without, 0.9)
        } else {
            Target::info("P11", what, with.median_rate() / without.median_rate())
        });
        if concurrency == 1 {
            let added = with.pooled().p50.as_secs_f64() - without.pooled().p50.as_secs_f64();
            targets.push(Target::value(
                "P11",
                format!("p50 limits add, {name}, c=1"),
                added * 1000.0,
                "ms",
            ));
        }
    }
    Ok(())
}

/// The charge alone (a rate and a quota, then the slot given back), one after another, on
/// each store: its p50 and p99.
async fn charges(targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let charges = crate::harness::scaled(2000);
    let dir = tempfile::tempdir()?;
    let mut stores: Vec<(&str, Journal, Option<tests::postgres::Cluster>)> = vec![
        ("memory", Journal::memory(), None),
        (
            "SQLite",
            Journal::sqlite(&dir.path().join("state.db"), Durability::Normal)?,
            None,
        ),
    ];
    if tests::postgres::binaries().is_some() {
        let cluster = tests::postgres::Cluster::start();
        let journal = Journal::postgres(&cluster.url).await?;
        stores.push(("PostgreSQL", journal, Some(cluster)));
    }
    for (name, journal, _cluster) in &stores {
        eprintln!("P11: {charges} charges on {name}...");
        let store: &dyn JournalStore = journal.store();
        let owner = "brain-bench:limits";
        store.renew(owner, 60_000, true).await?;
        let mut latencies = Vec::with_capacity(charges);
        for i in 0..charges {
            let charge = Charge {
                buckets: vec![
                    Bucket {
                        name: "rate:binding/echo/tenant/local".into(),
                        limit: Limit::Rate {
                            calls: 1_000_000,
                            per_ms: 1000,
                        },
                    },
                    Bucket {
                        name: "slots:binding/echo/tenant/local".into(),
                        limit: Limit::Concurrent(100_000),
                    },
                ],
                holder: format!("bench-{i}"),
                owner: owner.into(),
                hold_ms: 60_000,
            };
            let started = Instant::now();
            store.charge(&charge).await?;
            latencies.push(started.elapsed());
            store.release(&charge.holder).await?;
        }
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(charges - 1)];
        for (quantile, value) in [("p50", at(0.5)), ("p99", at(0.99))] {
            targets.push(Target::value(
                "P11",
                format!("a charge (a rate and a quota), {name}, {quantile}"),
                value.as_secs_f64() * 1e6,
                "µs",
            ));
        }
    }
    Ok(())
}
