//! P9: the call journal on against off, same calls: the fast test server at 2026-07-28 with
//! SQLite (default durability; `synchronous=FULL` for information) and PostgreSQL (a throwaway
//! cluster started here, durability defaults kept: `fsync` and `synchronous_commit` on), and the
//! Python SDK server (a real server's cost). Beside them, each backend's claim latency and the
//! disk's fsync latency (`pg_test_fsync`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use brain_runtime::Runtime;
use brain_runtime::journal::{Claim, Durability, Journal, Key};

use super::{Driver, Measure, Plan, Target, compare, echo_config};

/// brain at `revision` on `url`, journaling in `journal` (or not).
fn brain(url: &str, revision: &str, journal: Option<Journal>) -> anyhow::Result<Arc<Driver>> {
    let config = echo_config(url, revision, "echo")?;
    let mut builder = Runtime::builder(&config);
    if let Some(journal) = journal {
        builder = builder.journal(journal);
    }
    Ok(Arc::new(Driver::Brain(builder.build()?)))
}

pub(super) async fn journal(
    url: &str,
    plan: &Plan,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let off = brain(url, "2026-07-28", None)?;
    let sqlite = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal)?;
    let sqlite_full = Journal::sqlite(&dir.path().join("full.db"), Durability::Full)?;
    let cluster = tests::postgres::binaries().map(|_| tests::postgres::Cluster::start());
    let postgres = match &cluster {
        Some(cluster) => Some(Journal::postgres(&cluster.url).await?),
        None => None,
    };
    let on_sqlite = brain(url, "2026-07-28", Some(sqlite.clone()))?;
    let on_full = brain(url, "2026-07-28", Some(sqlite_full.clone()))?;
    let on_postgres = match &postgres {
        Some(journal) => Some(brain(url, "2026-07-28", Some(journal.clone()))?),
        None => None,
    };
    for concurrency in [1, 32] {
        let calls = plan.calls(concurrency);
        eprintln!("P9: journal on vs off at concurrency {concurrency}...");
        let (on, without) = compare(&on_sqlite, &off, calls, concurrency, plan.rounds).await?;
        targets.push(Target::ratio(
            "P9",
            format!("journal on (SQLite, synchronous=NORMAL) vs off, 2026-07-28, c={concurrency}"),
            on.median_rate() / without.median_rate(),
            0.8,
        ));
        scenarios.push((
            "brain, journal off (2026-07-28)".into(),
            concurrency,
            without.pooled(),
        ));
        scenarios.push(("brain, journal on: SQLite".into(), concurrency, on.pooled()));
        let (full, without) = compare(&on_full, &off, calls, concurrency, plan.rounds).await?;
        targets.push(Target::info(
            "P9",
            format!("journal on (SQLite, synchronous=FULL) vs off, c={concurrency}"),
            full.median_rate() / without.median_rate(),
        ));
        scenarios.push((
            "brain, journal on: SQLite FULL".into(),
            concurrency,
            full.pooled(),
        ));
        let what = format!("journal on (PostgreSQL) vs off, 2026-07-28, c={concurrency}");
        match &on_postgres {
            Some(on_postgres) => {
                let (on, without) =
                    compare(on_postgres, &off, calls, concurrency, plan.rounds).await?;
                let ratio = on.median_rate() / without.median_rate();
                targets.push(if concurrency == 32 {
                    Target::ratio("P9", what, ratio, 0.5)
                } else {
                    Target::info("P9", what, ratio)
                });
                scenarios.push((
                    "brain, journal on: PostgreSQL".into(),
                    concurrency,
                    on.pooled(),
                ));
            }
            None => targets.push(Target::not_measured(
                "P9",
                what,
                "PostgreSQL's server binaries are not installed",
            )),
        }
    }
    python(plan, &sqlite, postgres.as_ref(), targets).await?;
    claims("SQLite", &sqlite).await?;
    claims("SQLite FULL", &sqlite_full).await?;
    if let Some(postgres) = &postgres {
        claims("PostgreSQL", postgres).await?;
    }
    fsync(dir.path());
    drop(cluster);
    Ok(())
}

/// Journal on against off against the Python SDK server (2025-11-25 sessions), when installed.
async fn python(
    plan: &Plan,
    sqlite: &Journal,
    postgres: Option<&Journal>,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/.venv/bin/python");
    if !python.exists() {
        targets.push(Target::not_measured(
            "P9",
            "journal on vs off, Python SDK server".into(),
            "the Python SDK is not installed (tests/interop/setup.sh)",
        ));
        return Ok(());
    }
    let peer = tests::peers::Peer::python();
    let off = brain(&peer.url, "2025-11-25", None)?;
    let mut backends = vec![("SQLite", sqlite.clone())];
    if let Some(postgres) = postgres {
        backends.push(("PostgreSQL", postgres.clone()));
    }
    for (name, journal) in backends {
        let on = brain(&peer.url, "2025-11-25", Some(journal))?;
        for concurrency in [1, 32] {
            let calls = plan.sdk_calls;
            let (with, without) = compare(&on, &off, calls, concurrency, plan.rounds).await?;
            let what = format!("journal on ({name}) vs off, Python SDK server, c={concurrency}");
            let ratio = with.median_rate() / without.median_rate();
            targets.push(if concurrency == 32 {
                Target::ratio("P9", what, ratio, 0.9)
            } else {
                Target::info("P9", what, ratio)
            });
        }
    }
    Ok(())
}

/// The claim's own latency (the at-most-once point), one at a time and 32 at once.
async fn claims(name: &str, journal: &Journal) -> anyhow::Result<()> {
    let store = journal.store();
    let owner = format!("bench-{}", uuid_like());
    store.renew(&owner, 600_000, true).await?;
    for concurrency in [1usize, 32] {
        let count = if concurrency == 1 { 300 } else { 1600 };
        let mut latencies = Vec::with_capacity(count);
        let started = Instant::now();
        for batch in 0..count / concurrency {
            let claims: Vec<Claim> = (0..concurrency)
                .map(|i| Claim {
                    key: Key {
                        tenant: "bench".into(),
                        session: owner.clone(),
                        call_id: format!("{concurrency}-{batch}-{i}"),
                    },
                    digest: "sha256:bench".into(),
                    binding: "echo".into(),
                    owner: owner.clone(),
                    timeout_ms: 60_000,
                    trace_id: None,
                })
                .collect();
            let timed = claims.iter().map(|claim| async move {
                let started = Instant::now();
                let claimed = store.claim(claim).await;
                (claimed, started.elapsed())
            });
            for (claimed, latency) in futures_util::future::join_all(timed).await {
                anyhow::ensure!(claimed?, "a fresh key was not claimed");
                latencies.push(latency);
            }
        }
        let measure = Measure::new(latencies.len(), started.elapsed(), latencies);
        eprintln!(
            "P9: {name} claim, c={concurrency}: p50 {:.2} ms, p99 {:.2} ms ({:.0} claims/s)",
            ms(measure.p50),
            ms(measure.p99),
            measure.rate
        );
    }
    Ok(())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

/// The disk's fsync latency where the journal's files are, by `pg_test_fsync` (one second per
/// method), when PostgreSQL's binaries are there.
fn fsync(dir: &std::path::Path) {
    let Some(bin) = tests::postgres::binaries() else {
        return;
    };
    let file = dir.join("fsync-test");
    let output = std::process::Command::new(bin.join("pg_test_fsync"))
        .args(["-s", "1", "-f"])
        .arg(&file)
        .output();
    let Ok(output) = output else { return };
    let text = String::from_utf8_lossy(&output.stdout);
    for line in text
        .lines()
        .filter(|l| l.contains("fdatasync") || l.contains("fsync "))
    {
        if let Some(usecs) = line.split_whitespace().rev().nth(1) {
            eprintln!(
                "P9: pg_test_fsync {} ({usecs} usecs/op)",
                line.trim().split("  ").next().unwrap_or("")
            );
        }
    }
}
