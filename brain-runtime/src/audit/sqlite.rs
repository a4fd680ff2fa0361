//! The audit chain in the SQLite file (schema version 7): each record appended in the same
//! transaction as the journal's write it describes (`BEGIN IMMEDIATE` makes every writer of
//! the file wait its turn, so a tenant's chain never forks); a chain's head is its last record
//! (no table of heads to keep: one statement less per record); signed checkpoints; pruning that
//! leaves a `pruned_through` record.

use rusqlite::{Connection, OptionalExtension, params};

use super::record::{Event, PruneBound, genesis, link};
use crate::store::clock::sqlite_now as now;
use crate::store::{AuditHead, AuditRecord, Checkpoint, Denial};

/// The chain's tables: records by (tenant, seq), each tenant's head, the checkpoints.
pub(crate) const SCHEMA: &str = "
CREATE TABLE brain_audit (
    tenant TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    record TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
) WITHOUT ROWID;
CREATE TABLE brain_audit_checkpoints (
    id INTEGER PRIMARY KEY,
    body TEXT NOT NULL,
    signature TEXT NOT NULL
);
";

/// Appends `event` to `tenant`'s chain, in the caller's transaction.
pub(crate) fn append(c: &Connection, tenant: &str, event: &Event) -> rusqlite::Result<()> {
    let head = concat!(
        "SELECT h.seq, h.hash, ",
        now!(),
        " FROM (SELECT 1) LEFT JOIN (SELECT seq, hash FROM brain_audit WHERE tenant = ?1 ",
        "ORDER BY seq DESC LIMIT 1) h"
    );
    let (seq, previous, at): (Option<i64>, Option<String>, i64) = c
        .prepare_cached(head)?
        .query_row(params![tenant], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let seq = seq.unwrap_or(0) + 1;
    let previous = previous.unwrap_or_else(|| genesis(tenant));
    let record = event.record(tenant, seq, at);
    let hash = link(&previous, &record);
    c.prepare_cached(
        "INSERT INTO brain_audit (tenant, seq, at, record, hash) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![tenant, seq, at, record, hash])?;
    Ok(())
}

/// The tenants with a chain, in order.
pub(crate) fn tenants(c: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement =
        c.prepare_cached("SELECT DISTINCT tenant FROM brain_audit ORDER BY tenant")?;
    let rows = statement.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// Up to `limit` of `tenant`'s records from `from` on, in order.
pub(crate) fn records(
    c: &Connection,
    tenant: &str,
    from: i64,
    limit: i64,
) -> rusqlite::Result<Vec<AuditRecord>> {
    let mut statement = c.prepare_cached(
        "SELECT tenant, seq, at, record, hash FROM brain_audit WHERE tenant = ?1 AND seq >= ?2 \
         ORDER BY seq LIMIT ?3",
    )?;
    let rows = statement.query_map(params![tenant, from, limit], |r| {
        Ok(AuditRecord {
            tenant: r.get(0)?,
            seq: r.get(1)?,
            at_ms: r.get(2)?,
            record: r.get(3)?,
            hash: r.get(4)?,
        })
    })?;
    rows.collect()
}

/// Every tenant's head, in tenant order.
pub(crate) fn heads(c: &Connection) -> rusqlite::Result<Vec<AuditHead>> {
    let mut statement = c.prepare_cached(
        "SELECT a.tenant, a.seq, a.hash FROM brain_audit a WHERE a.seq = (SELECT max(seq) \
         FROM brain_audit b WHERE b.tenant = a.tenant) ORDER BY a.tenant",
    )?;
    let rows = statement.query_map([], |r| {
        Ok(AuditHead {
            tenant: r.get(0)?,
            seq: r.get(1)?,
            hash: r.get(2)?,
        })
    })?;
    rows.collect()
}

/// The checkpoints, oldest first.
pub(crate) fn checkpoints(c: &Connection) -> rusqlite::Result<Vec<Checkpoint>> {
    let mut statement =
        c.prepare_cached("SELECT id, body, signature FROM brain_audit_checkpoints ORDER BY id")?;
    let rows = statement.query_map([], |r| {
        Ok(Checkpoint {
            id: r.get(0)?,
            body: r.get(1)?,
            signature: r.get(2)?,
        })
    })?;
    rows.collect()
}

/// Stores a signed checkpoint; returns its id.
pub(crate) fn add_checkpoint(c: &Connection, body: &str, signature: &str) -> rusqlite::Result<i64> {
    c.prepare_cached("INSERT INTO brain_audit_checkpoints (body, signature) VALUES (?1, ?2)")?
        .execute(params![body, signature])?;
    Ok(c.last_insert_rowid())
}

/// Appends a call the policies refused to its tenant's chain.
pub(crate) fn append_denial(c: &Connection, denial: &Denial) -> rusqlite::Result<()> {
    let event = Event::denied(denial);
    append(c, &denial.key.tenant, &event)
}

/// Prunes every chain's records appended more than `retention_ms` ago (each tenant's newest
/// record is kept) and, where checkpoints sign the chains, signed by the newest checkpoint
/// older than the retention it states (which is kept: verification finds the pruned records
/// there), leaving a `pruned_through` record; returns how many it deleted.
pub(crate) fn prune(c: &Connection, retention_ms: i64) -> rusqlite::Result<u64> {
    let through = concat!(
        "SELECT a.tenant, max(a.seq) FROM brain_audit a WHERE a.at < ",
        now!(),
        " - ?1 AND a.seq < (SELECT max(seq) FROM brain_audit b WHERE b.tenant = a.tenant) ",
        "GROUP BY a.tenant"
    );
    let found: Vec<(String, i64)> = {
        let mut statement = c.prepare_cached(through)?;
        let rows = statement.query_map(params![retention_ms], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let signed: bool = c
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM brain_audit_checkpoints WHERE json_extract(body, '$.v') = 2)",
        )?
        .query_row([], |r| r.get(0))?;
    let outlived = concat!(
        "SELECT id, body FROM brain_audit_checkpoints WHERE json_extract(body, '$.v') = 2 AND ",
        "json_extract(body, '$.at') + json_extract(body, '$.retention_ms') < ",
        now!(),
        " ORDER BY id DESC LIMIT 1"
    );
    let outlived: Option<(i64, String)> = c
        .prepare_cached(outlived)?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let bound = PruneBound::of(signed, outlived.as_ref().map(|(id, b)| (*id, b.as_str())));
    let mut deleted = 0;
    for (tenant, seq) in found {
        if let Some(seq) = bound.through(&tenant, seq) {
            deleted += prune_through(c, &tenant, seq)?;
        }
    }
    if let PruneBound::Through { id, .. } = bound {
        c.prepare_cached("DELETE FROM brain_audit_checkpoints WHERE id < ?1")?
            .execute(params![id])?;
    }
    Ok(deleted)
}

/// The store's clock (milliseconds).
pub(crate) fn now(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached(concat!("SELECT ", now!()))?
        .query_row([], |r| r.get(0))
}

/// Deletes the records of `tenant` through `seq`, and appends a `pruned_through` record that
/// names the last one's hash, from which verification starts. Returns how many it deleted.
fn prune_through(c: &Connection, tenant: &str, seq: i64) -> rusqlite::Result<u64> {
    let hash: Option<String> = c
        .prepare_cached("SELECT hash FROM brain_audit WHERE tenant = ?1 AND seq = ?2")?
        .query_row(params![tenant, seq], |r| r.get(0))
        .optional()?;
    let Some(hash) = hash else {
        return Ok(0);
    };
    append(
        c,
        tenant,
        &Event::PrunedThrough {
            seq,
            hash: hash.clone(),
        },
    )?;
    let deleted = c
        .prepare_cached("DELETE FROM brain_audit WHERE tenant = ?1 AND seq <= ?2")?
        .execute(params![tenant, seq])?;
    Ok(deleted as u64)
}
