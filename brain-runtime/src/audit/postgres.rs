//! The audit chain in PostgreSQL (schema version 8): records appended in the transaction of
//! the journal's write they describe. Each tenant's head is a row locked `FOR UPDATE`, in
//! tenant order, once per transaction, after the calls' rows (every writer locks in that
//! order: no deadlock across replicas); two replicas appending to one tenant take turns, so a
//! chain never forks and never has a gap. A claim lost to `ON CONFLICT` appends nothing.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::record::{Event, PruneBound, genesis, link};
use crate::store::clock::postgres_now as now;
use crate::store::{AuditHead, AuditRecord, Checkpoint};

/// The chain's tables.
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE brain_audit (
    tenant TEXT COLLATE "C" NOT NULL,
    seq INT8 NOT NULL,
    at INT8 NOT NULL,
    record TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
);
CREATE TABLE brain_audit_heads (
    tenant TEXT COLLATE "C" PRIMARY KEY,
    seq INT8 NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE brain_audit_checkpoints (
    id BIGSERIAL PRIMARY KEY,
    body TEXT NOT NULL,
    signature TEXT NOT NULL
);
"#;

/// Makes the heads of `$1` (sorted, distinct tenants) exist, in tenant order.
pub(crate) const MAKE_HEADS: &str = "INSERT INTO brain_audit_heads (tenant, seq, hash) \
     SELECT t, 0, '' FROM unnest($1::text[]) AS t ORDER BY t ON CONFLICT DO NOTHING";
/// Locks the heads of `$1`, in tenant order: each tenant's (seq, hash) and the store's clock.
pub(crate) const LOCK_HEADS: &str = concat!(
    "SELECT tenant, seq, hash, ",
    now!(),
    " FROM brain_audit_heads WHERE tenant = ANY($1) ORDER BY tenant FOR UPDATE"
);
/// The records appended.
pub(crate) const INSERT_RECORDS: &str = "INSERT INTO brain_audit (tenant, seq, at, record, hash) \
     SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::text[])";
/// The heads after them.
pub(crate) const UPDATE_HEADS: &str = "UPDATE brain_audit_heads AS h SET seq = t.seq, \
     hash = t.hash FROM unnest($1::text[], $2::int8[], $3::text[]) AS t (tenant, seq, hash) \
     WHERE h.tenant = t.tenant";

/// The tenants of `events`, sorted and distinct (the order heads are locked in).
pub(crate) fn tenants<'a>(events: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut tenants: Vec<String> = events.into_iter().map(str::to_owned).collect();
    tenants.sort();
    tenants.dedup();
    tenants
}

/// What [`INSERT_RECORDS`] and [`UPDATE_HEADS`] write: the records as columns, and the heads.
#[derive(Default)]
pub(crate) struct Appended {
    pub(crate) tenants: Vec<String>,
    pub(crate) seqs: Vec<i64>,
    pub(crate) ats: Vec<i64>,
    pub(crate) records: Vec<String>,
    pub(crate) hashes: Vec<String>,
    pub(crate) head_tenants: Vec<String>,
    pub(crate) head_seqs: Vec<i64>,
    pub(crate) head_hashes: Vec<String>,
}

/// `events` (each a tenant's) linked after the heads [`LOCK_HEADS`] returned, in order.
pub(crate) fn chain(locked: &[tokio_postgres::Row], events: &[(String, Event)]) -> Appended {
    let now: i64 = locked.first().map_or(0, |row| row.get(3));
    let mut heads: BTreeMap<String, (i64, String)> = locked
        .iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2))))
        .collect();
    let mut appended = Appended::default();
    for (tenant, event) in events {
        let (seq, previous) = heads.entry(tenant.clone()).or_insert((0, String::new()));
        let before = if *seq == 0 {
            genesis(tenant)
        } else {
            previous.clone()
        };
        *seq += 1;
        let record = event.record(tenant, *seq, now);
        *previous = link(&before, &record);
        appended.tenants.push(tenant.clone());
        appended.seqs.push(*seq);
        appended.ats.push(now);
        appended.records.push(record);
        appended.hashes.push(previous.clone());
    }
    for (tenant, (seq, hash)) in heads {
        appended.head_tenants.push(tenant);
        appended.head_seqs.push(seq);
        appended.head_hashes.push(hash);
    }
    appended
}

/// Locks the heads of `events`' tenants and appends them, in the caller's transaction (one
/// statement after another: for the connections that write one thing at a time).
pub(crate) async fn append(
    client: &Client,
    events: &[(String, Event)],
) -> Result<(), tokio_postgres::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let tenants = tenants(events.iter().map(|(t, _)| t.as_str()));
    client.execute(MAKE_HEADS, &[&tenants]).await?;
    let locked = client.query(LOCK_HEADS, &[&tenants]).await?;
    let a = chain(&locked, events);
    client
        .execute(
            INSERT_RECORDS,
            &[&a.tenants, &a.seqs, &a.ats, &a.records, &a.hashes],
        )
        .await?;
    client
        .execute(
            UPDATE_HEADS,
            &[&a.head_tenants, &a.head_seqs, &a.head_hashes],
        )
        .await?;
    Ok(())
}

pub(crate) async fn audit_tenants(client: &Client) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT tenant FROM brain_audit_heads WHERE seq > 0 UNION \
             SELECT DISTINCT tenant FROM brain_audit ORDER BY 1",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

pub(crate) async fn records(
    client: &Client,
    tenant: &str,
    from: i64,
    limit: i64,
) -> Result<Vec<AuditRecord>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT tenant, seq, at, record, hash FROM brain_audit WHERE tenant = $1 \
             AND seq >= $2 ORDER BY seq LIMIT $3",
            &[&tenant, &from, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| AuditRecord {
            tenant: r.get(0),
            seq: r.get(1),
            at_ms: r.get(2),
            record: r.get(3),
            hash: r.get(4),
        })
        .collect())
}

pub(crate) async fn heads(client: &Client) -> Result<(Vec<AuditHead>, i64), tokio_postgres::Error> {
    let rows = client
        .query(
            concat!(
                "SELECT tenant, seq, hash, ",
                now!(),
                " FROM brain_audit_heads WHERE seq > 0 ORDER BY tenant"
            ),
            &[],
        )
        .await?;
    let now = match rows.first() {
        Some(row) => row.get(3),
        None => client
            .query_one(concat!("SELECT ", now!()), &[])
            .await?
            .get(0),
    };
    let heads = rows
        .iter()
        .map(|r| AuditHead {
            tenant: r.get(0),
            seq: r.get(1),
            hash: r.get(2),
        })
        .collect();
    Ok((heads, now))
}

pub(crate) async fn checkpoints(client: &Client) -> Result<Vec<Checkpoint>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT id, body, signature FROM brain_audit_checkpoints ORDER BY id",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Checkpoint {
            id: r.get(0),
            body: r.get(1),
            signature: r.get(2),
        })
        .collect())
}

pub(crate) const ADD_CHECKPOINT: &str =
    "INSERT INTO brain_audit_checkpoints (body, signature) VALUES ($1, $2) RETURNING id";

/// Prunes every chain's records older than `retention_ms` (each tenant's newest kept), in the
/// caller's transaction, leaving a `pruned_through` record per tenant pruned.
pub(crate) async fn prune(
    client: &Client,
    retention_ms: i64,
) -> Result<u64, tokio_postgres::Error> {
    let through = client
        .query(
            concat!(
                "SELECT a.tenant, max(a.seq) FROM brain_audit a JOIN brain_audit_heads h ",
                "ON h.tenant = a.tenant WHERE a.at < ",
                now!(),
                " - $1 AND a.seq < h.seq GROUP BY a.tenant ORDER BY a.tenant"
            ),
            &[&retention_ms],
        )
        .await?;
    let signed: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM brain_audit_checkpoints WHERE body::jsonb ->> 'v' = '2')",
            &[],
        )
        .await?
        .get(0);
    let outlived = client
        .query_opt(
            concat!(
                "SELECT id, body FROM brain_audit_checkpoints WHERE body::jsonb ->> 'v' = '2' ",
                "AND (body::jsonb ->> 'at')::int8 + (body::jsonb ->> 'retention_ms')::int8 < ",
                now!(),
                " ORDER BY id DESC LIMIT 1"
            ),
            &[],
        )
        .await?
        .map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1)));
    let bound = PruneBound::of(signed, outlived.as_ref().map(|(id, b)| (*id, b.as_str())));
    let mut deleted = 0;
    // In tenant order, each head locked by its `pruned_through` record (as every writer does).
    for row in through {
        let (tenant, seq): (String, i64) = (row.get(0), row.get(1));
        let Some(seq) = bound.through(&tenant, seq) else {
            continue;
        };
        let hash: Option<String> = client
            .query_opt(
                "SELECT hash FROM brain_audit WHERE tenant = $1 AND seq = $2",
                &[&tenant, &seq],
            )
            .await?
            .map(|r| r.get(0));
        let Some(hash) = hash else {
            continue;
        };
        append(
            client,
            &[(tenant.clone(), Event::PrunedThrough { seq, hash })],
        )
        .await?;
        deleted += client
            .execute(
                "DELETE FROM brain_audit WHERE tenant = $1 AND seq <= $2",
                &[&tenant, &seq],
            )
            .await?;
    }
    if let PruneBound::Through { id, .. } = bound {
        client
            .execute("DELETE FROM brain_audit_checkpoints WHERE id < $1", &[&id])
            .await?;
    }
    Ok(deleted)
}
