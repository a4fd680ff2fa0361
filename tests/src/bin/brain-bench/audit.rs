//! P14: the audit chain on against off — the same `echo` calls at 2026-07-28 through two
//! runtimes, one whose journal appends a record in the claim's transaction and one in the
//! outcome's, the other's chain off — against the Python SDK server at c = 32, on SQLite and on
//! PostgreSQL, each with 1 tenant and with 8; and `verify`'s pace over the chains made.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use brain_runtime::Runtime;
use brain_runtime::audit::{AuditSettings, VerifyOptions, verify};
use brain_runtime::journal::{Durability, Journal};
use serde_json::Value;

use crate::harness::{Driver, Plan, Target, compare, echo_config, python_peer};

/// The journal of one side: SQLite in its own directory, or the cluster's database.
async fn journal(store: &Store, audited: bool) -> anyhow::Result<Journal> {
    let journal = match store {
        Store::Sqlite(dir) => Journal::sqlite(
            &dir.path().join(if audited { "on.db" } else { "off.db" }),
            Durability::Normal,
        )?,
        Store::Postgres(cluster) => Journal::postgres(&cluster.url).await?,
    };
    Ok(journal.audit(AuditSettings {
        enabled: audited,
        ..AuditSettings::default()
    }))
}

enum Store {
    Sqlite(tempfile::TempDir),
    Postgres(tests::postgres::Cluster),
}

/// A runtime calling `echo` at `url` as `tenants` tenants in turn.
async fn driver(url: &str, journal: Journal, tenants: usize) -> anyhow::Result<Driver> {
    let mut config: Value = serde_json::to_value(echo_config(url, "2026-07-28", "echo")?)?;
    config["tools"][0]["tenants"] = (0..tenants).map(|n| format!("t{n}")).collect();
    let config = brain_config::parse(config.to_string().as_bytes(), "bench.json")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Driver::Tenants {
        runtime: Runtime::builder(&config).journal(journal).build()?,
        tenants,
        next: AtomicUsize::new(0),
    })
}

/// P14's rows.
pub(crate) async fn targets(plan: &Plan, targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let Some(peer) = python_peer("P14", "audit on vs off, Python SDK server", targets) else {
        return Ok(());
    };
    let mut stores = vec![("SQLite", Store::Sqlite(tempfile::tempdir()?))];
    if tests::postgres::binaries().is_some() {
        stores.push((
            "PostgreSQL",
            Store::Postgres(tests::postgres::Cluster::start()),
        ));
    }
    for (name, store) in &stores {
        let audited = journal(store, true).await?;
        for tenants in [1, 8] {
            let on = Arc::new(driver(&peer.url, audited.clone(), tenants).await?);
            let off = Arc::new(driver(&peer.url, journal(store, false).await?, tenants).await?);
            eprintln!("P14: audit on vs off, {name}, {tenants} tenant(s), c=32...");
            let calls = plan.calls(32);
            let (with, without) = compare(&on, &off, calls, 32, plan.rounds).await?;
            targets.push(Target::ratio(
                "P14",
                format!("audit on vs off, Python SDK server, {name}, {tenants} tenant(s), c=32"),
                with.median_rate() / without.median_rate(),
                0.9,
            ));
        }
        // verify over what the audited side appended.
        let started = Instant::now();
        let verified = verify(audited.store(), &VerifyOptions::default()).await?;
        let rate = verified.records as f64 / started.elapsed().as_secs_f64();
        anyhow::ensure!(verified.holds(), "{}", verified.summary());
        targets.push(Target::ratio(
            "P14",
            format!(
                "verify, {name}: {} records at {rate:.0}/s, against 100,000/s",
                verified.records
            ),
            rate / 100_000.0,
            1.0,
        ));
    }
    Ok(())
}
