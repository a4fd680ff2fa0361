//! P14: the audit chain on against off — the same `echo` calls at 2026-07-28 through two
//! runtimes, one whose journal appends a record in the claim's transaction and one in the
//! outcome's, the other's chain off — against the Python SDK server at c = 32, on SQLite and on
//! PostgreSQL, each with 1 tenant and with 8; `verify`'s pace over the chains made; and the
//! memory `export` takes over a chain of 1,000,000 records.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use brain_runtime::Runtime;
use brain_runtime::audit::{AuditSettings, ExportFormat, VerifyOptions, export, verify};
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
            targets.push(Target::ratio_of(
                "P14",
                format!("audit on vs off, Python SDK server, {name}, {tenants} tenant(s), c=32"),
                &with,
                &without,
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
        if let Store::Sqlite(dir) = store {
            export_memory(&dir.path().join("on.db"), targets).await?;
        }
    }
    Ok(())
}

/// The records of the chain `export_memory` exports (a smoke run's: 10,000).
fn million() -> i64 {
    crate::harness::scaled(1_000_000) as i64
}
/// The most `export` may add to the process's peak RSS over them.
const EXPORT_MB: f64 = 64.0;

/// `export`'s memory at a million records: one tenant's chain grown to 1,000,000 records (each
/// a copy of a real `finished` record of `audited`'s, its seq, time and call id its own, linked
/// as the journal links them, written straight into a new SQLite journal), exported as JSON
/// Lines into a sink that counts; the process's peak RSS (`VmHWM`, reset through
/// `/proc/self/clear_refs`) above its RSS before.
async fn export_memory(audited: &std::path::Path, targets: &mut Vec<Target>) -> anyhow::Result<()> {
    use brain_runtime::audit::{genesis, link};
    let records = million();
    let what = format!("export, SQLite: peak RSS over {records} records, against +{EXPORT_MB} MB");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("million.db");
    let journal = Journal::sqlite(&path, Durability::Normal)?;
    let template: String = rusqlite::Connection::open(audited)?.query_row(
        "SELECT record FROM brain_audit WHERE record LIKE '%\"kind\":\"finished\"%' LIMIT 1",
        [],
        |row| row.get(0),
    )?;
    // Keys stay in their (sorted) order: the copies are canonical as the original is.
    let mut record: Value = serde_json::from_str(&template)?;
    record["tenant"] = "t0".into();
    let mut connection = rusqlite::Connection::open(&path)?;
    let transaction = connection.transaction()?;
    {
        let mut insert = transaction.prepare(
            "INSERT INTO brain_audit (tenant, seq, at, record, hash) VALUES ('t0', ?1, ?2, ?3, ?4)",
        )?;
        let mut previous = genesis("t0");
        for seq in 1..=records {
            let at = 1_800_000_000_000 + seq;
            record["seq"] = seq.into();
            record["at"] = at.into();
            record["call_id"] = format!("c{seq}").into();
            let text = record.to_string();
            let hash = link(&previous, &text);
            insert.execute(rusqlite::params![seq, at, text, hash])?;
            previous = hash;
        }
    }
    transaction.commit()?;
    let (Some(before), Ok(())) = (
        tests::process::memory_mb("VmRSS:"),
        std::fs::write("/proc/self/clear_refs", "5"),
    ) else {
        targets.push(Target::not_measured("P14", what, "Linux's /proc"));
        return Ok(());
    };
    let started = Instant::now();
    let mut sink = Counted(0);
    let lines = export(
        journal.store(),
        Some("t0"),
        0,
        ExportFormat::Jsonl,
        &mut sink,
    )
    .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let peak = tests::process::memory_mb("VmHWM:").unwrap_or(f64::NAN);
    anyhow::ensure!(
        lines >= records as u64,
        "the export wrote {lines} lines of {records} records"
    );
    let added = (peak - before).max(0.1);
    targets.push(Target::ratio(
        "P14",
        format!(
            "{what}: +{added:.1} MB ({:.0} MB of JSON Lines in {elapsed:.1} s)",
            sink.0 as f64 / 1e6
        ),
        EXPORT_MB / added,
        1.0,
    ));
    Ok(())
}

/// A sink that counts the bytes written to it.
struct Counted(u64);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
