//! The writer: the writes that wait, in one transaction per turn, pipelined — the calls'
//! rows first, then (when the store audits) their tenants' chain heads, locked in tenant
//! order, and the records appended.

use std::collections::HashSet;

use tokio::sync::mpsc;
use tokio_postgres::Row;

use super::connection::{Connection, connect, plan_once, prepare};
use super::sql::describe_error;
use crate::audit::record::Event;
use crate::store::{Claim, Key, Record};

/// A write, as the batch runs it.
pub(super) enum Write {
    Renew {
        owner: String,
        lease_ms: i64,
        create: bool,
    },
    Claim(Claim),
    Settle {
        key: Key,
        owner: String,
        record: Record,
        only_if_expired: bool,
        /// Recorded by a retry that found the owner dead or overdue (audited so).
        taken_over: bool,
    },
}

/// A write and who is told its rows.
pub(super) struct Queued {
    pub(super) write: Write,
    pub(super) reply: Box<dyn FnOnce(Result<u64, String>) + Send + Sync>,
}

/// Most writes one transaction carries.
const MAX_BATCH: usize = 256;
/// How long a batch of outcomes only waits for a claim to commit with.
const DEFER: std::time::Duration = std::time::Duration::from_millis(2);

impl Write {
    /// The call it writes, unless it is a lease's.
    fn key(&self) -> Option<&Key> {
        match self {
            Write::Claim(claim) => Some(&claim.key),
            Write::Settle { key, .. } => Some(key),
            Write::Renew { .. } => None,
        }
    }

    async fn run(&self, c: &Connection) -> Result<u64, tokio_postgres::Error> {
        match self {
            Write::Renew {
                owner,
                lease_ms,
                create,
            } => {
                let statement = if *create { &c.renew_create } else { &c.renew };
                c.client.execute(statement, &[owner, lease_ms]).await
            }
            Write::Claim(claim) => super::sql::insert_claim(&c.client, &c.claim, claim).await,
            Write::Settle {
                key,
                owner,
                record,
                only_if_expired,
                ..
            } => {
                c.client
                    .execute(
                        &c.settle,
                        &[
                            &key.tenant,
                            &key.session,
                            &key.call_id,
                            &record.state.as_str(),
                            &record.is_error,
                            &record.unknown_outcome,
                            &record.result,
                            &record.result_bytes,
                            owner,
                            only_if_expired,
                        ],
                    )
                    .await
            }
        }
    }
}

/// The writer: each turn, every waiting write in one transaction (a call's write in a
/// transaction of its own at least, when the store audits: its record goes with it).
pub(super) async fn writer(
    url: String,
    first: Connection,
    mut queue: mpsc::UnboundedReceiver<Queued>,
    audit: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let mut connection = Some(first);
    while let Some(queued) = queue.recv().await {
        let mut batch = vec![queued];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(queued) => batch.push(queued),
                Err(_) => break,
            }
        }
        // Outcomes alone wait a little for a claim to share the commit with.
        let deadline = tokio::time::Instant::now() + DEFER;
        while batch.len() < MAX_BATCH
            && batch
                .iter()
                .all(|q| matches!(q.write, Write::Settle { .. }))
        {
            match tokio::time::timeout_at(deadline, queue.recv()).await {
                Ok(Some(queued)) => batch.push(queued),
                _ => break,
            }
        }
        if connection.as_ref().is_none_or(|c| c.client.is_closed()) {
            connection = match connect(&url).await {
                Ok(client) => match plan_once(&client).await {
                    Ok(()) => prepare(client).await.ok(),
                    Err(_) => None,
                },
                Err(_) => None,
            };
        }
        let Some(c) = &connection else {
            for queued in batch {
                (queued.reply)(Err("cannot connect to the database".into()));
            }
            continue;
        };
        let audit = audit.load(std::sync::atomic::Ordering::Relaxed);
        let transaction = |q: &Queued| audit && q.write.key().is_some();
        if (batch.len() > 1 || transaction(&batch[0]))
            && let Some(rows) = together(c, &batch, audit).await
        {
            for (queued, rows) in batch.into_iter().zip(rows) {
                (queued.reply)(Ok(rows));
            }
            continue;
        }
        for queued in batch {
            let rows = if transaction(&queued) {
                together(c, std::slice::from_ref(&queued), true)
                    .await
                    .and_then(|rows| rows.first().copied())
                    .ok_or_else(|| "the write and its audit record failed".to_owned())
            } else {
                queued.write.run(c).await.map_err(|e| describe_error(&e))
            };
            (queued.reply)(rows);
        }
    }
}

/// The batch in one transaction, sent in one flight (`BEGIN`, the statements, `COMMIT`,
/// pipelined: one round trip and one WAL flush): the leases in order, then every claim in one
/// statement, then every outcome in one (a claim queued before an outcome of the same call —
/// one cancelled while it was claimed — is written first). A key a batch claims or settles twice
/// is written by its first request; the later ones change nothing, as they would one after
/// another. `None` when a statement failed (then PostgreSQL turns the `COMMIT` into a rollback,
/// and nothing of the batch was written).
///
/// When the store audits (`audit`), the flight ends with the heads of the calls' tenants made
/// and locked (after the calls' rows, in tenant order) instead of the `COMMIT`; a second flight
/// appends the records of what was written, updates the heads and commits.
async fn together(c: &Connection, batch: &[Queued], audit: bool) -> Option<Vec<u64>> {
    use futures_util::FutureExt;
    use futures_util::future::BoxFuture;
    /// What a statement of the flight wrote: (the request's place in the batch, its rows).
    type Written = Vec<(usize, u64)>;
    let durable = batch
        .iter()
        .any(|queued| !matches!(queued.write, Write::Settle { .. }));
    let begin = if durable {
        "BEGIN"
    } else {
        "BEGIN; SET LOCAL synchronous_commit TO OFF"
    };
    let keys = batch.iter().filter_map(|q| q.write.key());
    let tenants = crate::audit::postgres::tenants(keys.map(|k| k.tenant.as_str()));
    let audited = audit && !tenants.is_empty();
    let tenants: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&tenants];
    let locked: std::sync::Mutex<Vec<Row>> = std::sync::Mutex::default();
    let mut flight: Vec<BoxFuture<'_, Result<Written, tokio_postgres::Error>>> = Vec::new();
    flight.push(Box::pin(
        c.client
            .batch_execute(begin)
            .map(|r| r.map(|()| Vec::new())),
    ));
    let (mut claims, mut claimed) = (Many::default(), HashSet::new());
    let (mut settles, mut settled) = (Many::default(), HashSet::new());
    for (index, queued) in batch.iter().enumerate() {
        match &queued.write {
            Write::Renew { .. } => flight.push(Box::pin(
                queued
                    .write
                    .run(c)
                    .map(move |r| r.map(|rows| vec![(index, rows)])),
            )),
            Write::Claim(claim) if claimed.insert(&claim.key) => {
                claims.push(index, &queued.write);
            }
            Write::Settle { key, .. } if settled.insert(key) => {
                settles.push(index, &queued.write);
            }
            // The same key again: changes nothing after the first.
            Write::Claim(_) | Write::Settle { .. } => {}
        }
    }
    if !claims.is_empty() {
        flight.push(Box::pin(claims.sorted().claim(c)));
    }
    if !settles.is_empty() {
        flight.push(Box::pin(settles.sorted().settle(c)));
    }
    if audited {
        flight.push(Box::pin(
            c.client
                .execute(&c.make_heads, &tenants)
                .map(|r| r.map(|_| Vec::new())),
        ));
        flight.push(Box::pin(c.client.query(&c.lock_heads, &tenants).map(|r| {
            r.map(|rows| {
                *locked.lock().unwrap_or_else(|p| p.into_inner()) = rows;
                Vec::new()
            })
        })));
    } else {
        flight.push(Box::pin(
            c.client
                .batch_execute("COMMIT")
                .map(|r| r.map(|()| Vec::new())),
        ));
    }
    let answers = futures_util::future::join_all(flight).await;
    let mut rows = vec![0u64; batch.len()];
    let mut failed = false;
    for answer in answers {
        match answer {
            Ok(written) => {
                for (index, written) in written {
                    rows[index] = written;
                }
            }
            Err(_) => failed = true,
        }
    }
    if failed {
        if audited {
            let _ = c.client.batch_execute("ROLLBACK").await;
        }
        return None;
    }
    if audited {
        let locked = locked.into_inner().unwrap_or_else(|p| p.into_inner());
        if !chained(c, batch, &rows, &locked).await {
            return None;
        }
    }
    Some(rows)
}

/// The audit records of what `batch` wrote (`rows` per request) appended to the chains whose
/// heads are `locked`, their heads moved, and the transaction committed, in one flight;
/// false (rolled back) when any of them fails.
async fn chained(c: &Connection, batch: &[Queued], rows: &[u64], locked: &[Row]) -> bool {
    let events = written(batch, rows);
    let a = crate::audit::postgres::chain(locked, &events);
    let records: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&a.tenants, &a.seqs, &a.ats, &a.records, &a.hashes];
    let heads: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
        [&a.head_tenants, &a.head_seqs, &a.head_hashes];
    let insert = c.client.execute(&c.insert_records, &records);
    let update = c.client.execute(&c.update_heads, &heads);
    let commit = c.client.batch_execute("COMMIT");
    let (inserted, updated, committed) = futures_util::join!(insert, update, commit);
    if inserted.is_err() || updated.is_err() || committed.is_err() {
        let _ = c.client.batch_execute("ROLLBACK").await;
        return false;
    }
    true
}

/// The audit records of a batch's writes that wrote a row: claims first (in the order the
/// statement wrote them), then outcomes.
fn written(batch: &[Queued], rows: &[u64]) -> Vec<(String, Event)> {
    let mut claims = Vec::new();
    let mut settles = Vec::new();
    for (queued, rows) in batch.iter().zip(rows) {
        if *rows == 0 {
            continue;
        }
        match &queued.write {
            Write::Claim(claim) => claims.push((
                claim.key.tenant.clone(),
                Event::Claimed {
                    claim: claim.clone(),
                    approval: None,
                },
            )),
            Write::Settle {
                key,
                owner,
                record,
                taken_over,
                ..
            } => settles.push((
                key.tenant.clone(),
                Event::Settled {
                    key: key.clone(),
                    owner: owner.clone(),
                    record: record.clone(),
                    taken_over: *taken_over,
                },
            )),
            Write::Renew { .. } => {}
        }
    }
    claims.sort_by(|a, b| key_of(&a.1).cmp(&key_of(&b.1)));
    settles.sort_by(|a, b| key_of(&a.1).cmp(&key_of(&b.1)));
    claims.extend(settles);
    claims
}

fn key_of(event: &Event) -> Option<&Key> {
    match event {
        Event::Claimed { claim, .. } => Some(&claim.key),
        Event::Settled { key, .. } => Some(key),
        _ => None,
    }
}

/// Claims or outcomes of one batch, as the columns of one statement's arrays.
#[derive(Default)]
struct Many<'a> {
    indexes: Vec<usize>,
    writes: Vec<&'a Write>,
}

impl<'a> Many<'a> {
    fn push(&mut self, index: usize, write: &'a Write) {
        self.indexes.push(index);
        self.writes.push(write);
    }

    fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// In the order of their keys: every transaction locks rows in one order, so two that
    /// meet (two replicas' batches) wait for each other rather than deadlock.
    fn sorted(mut self) -> Self {
        let mut pairs: Vec<(usize, &'a Write)> =
            self.indexes.drain(..).zip(self.writes.drain(..)).collect();
        pairs.sort_by(|a, b| a.1.key().cmp(&b.1.key()));
        (self.indexes, self.writes) = pairs.into_iter().unzip();
        self
    }

    /// Which of the requests' keys the statement returned.
    fn written(&self, rows: &[Row]) -> Vec<(usize, u64)> {
        let returned: HashSet<Key> = rows
            .iter()
            .map(|row| Key {
                tenant: row.get(0),
                session: row.get(1),
                call_id: row.get(2),
            })
            .collect();
        self.indexes
            .iter()
            .zip(&self.writes)
            .map(|(index, write)| {
                let found = write.key().is_some_and(|key| returned.contains(key));
                (*index, u64::from(found))
            })
            .collect()
    }

    async fn claim(self, c: &Connection) -> Result<Vec<(usize, u64)>, tokio_postgres::Error> {
        let claims: Vec<&Claim> = self
            .writes
            .iter()
            .filter_map(|write| match write {
                Write::Claim(claim) => Some(claim),
                _ => None,
            })
            .collect();
        let column = |f: fn(&Claim) -> &str| claims.iter().map(|c| f(c)).collect::<Vec<&str>>();
        let timeouts: Vec<i64> = claims.iter().map(|c| c.timeout_ms).collect();
        let traces: Vec<Option<&str>> = claims.iter().map(|c| c.trace_id.as_deref()).collect();
        let rows = c
            .client
            .query(
                &c.claim_many,
                &[
                    &column(|c| &c.key.tenant),
                    &column(|c| &c.key.session),
                    &column(|c| &c.key.call_id),
                    &column(|c| &c.digest),
                    &column(|c| &c.binding),
                    &column(|c| &c.owner),
                    &timeouts,
                    &traces,
                ],
            )
            .await?;
        Ok(self.written(&rows))
    }

    async fn settle(self, c: &Connection) -> Result<Vec<(usize, u64)>, tokio_postgres::Error> {
        let settles: Vec<(&Key, &str, &Record, bool)> = self
            .writes
            .iter()
            .filter_map(|write| match write {
                Write::Settle {
                    key,
                    owner,
                    record,
                    only_if_expired,
                    ..
                } => Some((key, owner.as_str(), record, *only_if_expired)),
                _ => None,
            })
            .collect();
        let tenants: Vec<&str> = settles.iter().map(|s| s.0.tenant.as_str()).collect();
        let sessions: Vec<&str> = settles.iter().map(|s| s.0.session.as_str()).collect();
        let call_ids: Vec<&str> = settles.iter().map(|s| s.0.call_id.as_str()).collect();
        let states: Vec<&str> = settles.iter().map(|s| s.2.state.as_str()).collect();
        let is_error: Vec<bool> = settles.iter().map(|s| s.2.is_error).collect();
        let unknown: Vec<bool> = settles.iter().map(|s| s.2.unknown_outcome).collect();
        let results: Vec<Option<&str>> = settles.iter().map(|s| s.2.result.as_deref()).collect();
        let bytes: Vec<i64> = settles.iter().map(|s| s.2.result_bytes).collect();
        let owners: Vec<&str> = settles.iter().map(|s| s.1).collect();
        let expired: Vec<bool> = settles.iter().map(|s| s.3).collect();
        let rows = c
            .client
            .query(
                &c.settle_many,
                &[
                    &tenants, &sessions, &call_ids, &states, &is_error, &unknown, &results, &bytes,
                    &owners, &expired,
                ],
            )
            .await?;
        Ok(self.written(&rows))
    }
}
