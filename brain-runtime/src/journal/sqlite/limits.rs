//! Limits in the SQLite file: each charge runs inside the journal's write transaction (SQLite
//! has one writer at a time, across processes: `BEGIN IMMEDIATE`), under a savepoint, so that a
//! refused charge — or a claim the charge refused — leaves nothing behind.

use rusqlite::{Connection, OptionalExtension, params};

use crate::limits::{BucketState, Charge, Limit, Usage, Verdict, decide};

/// The limits' tables (schema version 4).
pub(super) const SCHEMA: &str = "
CREATE TABLE brain_limit_buckets (
    bucket TEXT PRIMARY KEY,
    tat_us INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE brain_limit_slots (
    bucket TEXT NOT NULL,
    holder TEXT NOT NULL,
    owner TEXT NOT NULL,
    until_ms INTEGER NOT NULL,
    PRIMARY KEY (bucket, holder)
) WITHOUT ROWID;
CREATE INDEX brain_limit_slots_by_holder ON brain_limit_slots (holder);
";

/// The store's clock in microseconds, and in milliseconds (the leases').
fn now(c: &Connection) -> rusqlite::Result<(i64, i64)> {
    c.prepare_cached(concat!(
        "SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER), ",
        now!()
    ))?
    .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
}

/// Each bucket's state: a rate's TAT, a quota's slots held by live owners (a dead owner's
/// slots are deleted on the way).
fn states(c: &Connection, charge: &Charge, now_ms: i64) -> rusqlite::Result<Vec<BucketState>> {
    let mut states = Vec::with_capacity(charge.buckets.len());
    for bucket in &charge.buckets {
        let state = match bucket.limit {
            Limit::Rate { .. } => BucketState {
                tat_us: c
                    .prepare_cached("SELECT tat_us FROM brain_limit_buckets WHERE bucket = ?1")?
                    .query_row(params![bucket.name], |row| row.get(0))
                    .optional()?
                    .unwrap_or(0),
                held: 0,
            },
            Limit::Concurrent(_) => {
                c.prepare_cached(
                    "DELETE FROM brain_limit_slots AS s WHERE s.bucket = ?1 AND (s.until_ms <= ?2 \
                     OR NOT EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = s.owner \
                     AND o.expires > ?2))",
                )?
                .execute(params![bucket.name, now_ms])?;
                let held: i64 = c
                    .prepare_cached("SELECT count(*) FROM brain_limit_slots WHERE bucket = ?1")?
                    .query_row(params![bucket.name], |row| row.get(0))?;
                BucketState {
                    tat_us: 0,
                    held: u32::try_from(held).unwrap_or(u32::MAX),
                }
            }
        };
        states.push(state);
    }
    Ok(states)
}

/// The charge, inside the caller's transaction (its savepoint): decided and, when admitted,
/// written.
pub(super) fn take(c: &Connection, charge: &Charge) -> rusqlite::Result<Verdict> {
    let (now_us, now_ms) = now(c)?;
    let states = states(c, charge, now_ms)?;
    let decision = decide(&charge.buckets, &states, now_us);
    if decision.verdict != Verdict::Admitted {
        return Ok(decision.verdict);
    }
    for (bucket, tat) in charge.buckets.iter().zip(&decision.tats) {
        match (bucket.limit, tat) {
            (Limit::Rate { .. }, Some(tat)) => {
                c.prepare_cached(
                    "INSERT INTO brain_limit_buckets (bucket, tat_us) VALUES (?1, ?2) \
                     ON CONFLICT (bucket) DO UPDATE SET tat_us = excluded.tat_us",
                )?
                .execute(params![bucket.name, tat])?;
            }
            (Limit::Concurrent(_), _) => {
                c.prepare_cached(
                    "INSERT INTO brain_limit_slots (bucket, holder, owner, until_ms) \
                     VALUES (?1, ?2, ?3, ?4 + ?5)",
                )?
                .execute(params![
                    bucket.name,
                    charge.holder,
                    charge.owner,
                    now_ms,
                    charge.hold_ms
                ])?;
            }
            _ => {}
        }
    }
    Ok(Verdict::Admitted)
}

/// Runs `step` under a savepoint: kept when it returns `(true, _)`, rolled back otherwise (and
/// on an error).
pub(super) fn savepoint<T>(
    c: &Connection,
    step: impl FnOnce(&Connection) -> rusqlite::Result<(bool, T)>,
) -> rusqlite::Result<T> {
    c.prepare_cached("SAVEPOINT brain_limits")?.execute([])?;
    let outcome = step(c);
    if !matches!(outcome, Ok((true, _))) {
        c.prepare_cached("ROLLBACK TO brain_limits")?.execute([])?;
    }
    c.prepare_cached("RELEASE brain_limits")?.execute([])?;
    outcome.map(|(_, value)| value)
}

/// [`crate::journal::LimitStore::charge`].
pub(super) fn charge(c: &Connection, charge: &Charge) -> rusqlite::Result<Verdict> {
    savepoint(c, |c| {
        let verdict = take(c, charge)?;
        Ok((verdict == Verdict::Admitted, verdict))
    })
}

/// [`crate::journal::LimitStore::release`].
pub(super) fn release(c: &Connection, holder: &str) -> rusqlite::Result<()> {
    c.prepare_cached("DELETE FROM brain_limit_slots WHERE holder = ?1")?
        .execute(params![holder])?;
    Ok(())
}

/// [`crate::journal::LimitStore::usage`].
pub(super) fn usage(c: &Connection, names: &[String]) -> rusqlite::Result<Vec<Usage>> {
    let (now_us, now_ms) = now(c)?;
    let mut usage = Vec::with_capacity(names.len());
    for name in names {
        let tat_us = c
            .prepare_cached("SELECT tat_us FROM brain_limit_buckets WHERE bucket = ?1")?
            .query_row(params![name], |row| row.get(0))
            .optional()?
            .unwrap_or(0);
        let held: i64 = c
            .prepare_cached(
                "SELECT count(*) FROM brain_limit_slots AS s WHERE s.bucket = ?1 \
                 AND s.until_ms > ?2 AND EXISTS \
                 (SELECT 1 FROM brain_owners o WHERE o.owner = s.owner AND o.expires > ?2)",
            )?
            .query_row(params![name, now_ms], |row| row.get(0))?;
        usage.push(Usage {
            bucket: name.clone(),
            state: BucketState {
                tat_us,
                held: u32::try_from(held).unwrap_or(u32::MAX),
            },
            now_us,
        });
    }
    Ok(usage)
}
