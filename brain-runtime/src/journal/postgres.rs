//! The shared journal: one PostgreSQL database for every replica of an agent host.
//!
//! Writes (claims, outcomes, leases) queue to one connection that runs all that are waiting in
//! one transaction, pipelined (group commit: one WAL flush for a batch of claims; a batch of
//! outcomes only is committed with `synchronous_commit` off — only the claim must be durable
//! before the send). Each statement writes its rows in the order of their keys, so two
//! replicas' batches that meet wait for each other rather than deadlock. A batch that fails is
//! retried one statement at a time. Reads go to a few more connections, pipelined. Statements are
//! prepared once per connection. The claim is one conditional
//! `INSERT … ON CONFLICT … DO UPDATE … WHERE` statement: two replicas racing on one key claim
//! it once. Leases and deadlines are judged by the database's `now()`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::{Client, NoTls, Row, Statement};

use crate::limits::{Charge, Usage, Verdict};

use super::store::{Approval, ApprovalFilter, ApprovalRequest, Asked};
use super::store::{
    Claim, Claimed, Done, Drift, Entry, EntryState, Filter, JournalStore, Key, Record, StoreError,
    StoreFuture,
};

mod grants;
mod limits;
#[macro_use]
mod sql;
mod approvals;
mod schema;

use schema::migrate;
use sql::{
    CLAIM, CLAIM_MANY, LIST, LOOKUP, PRUNE_CALLS, PRUNE_OWNERS, RENEW, RENEW_CREATE, SETTLE,
    SETTLE_MANY, describe_error,
};

/// How many connections one process keeps.
const CONNECTIONS: usize = 4;

/// One connection and its prepared statements.
struct Connection {
    client: Client,
    renew_create: Statement,
    renew: Statement,
    claim: Statement,
    claim_many: Statement,
    lookup: Statement,
    settle: Statement,
    settle_many: Statement,
    list: Statement,
    prune_calls: Statement,
    prune_owners: Statement,
}

/// The PostgreSQL journal.
pub(crate) struct Postgres {
    url: String,
    describe: String,
    /// For reads.
    connections: Vec<Mutex<Arc<Connection>>>,
    next: AtomicUsize,
    /// To the writer's connection.
    writes: mpsc::UnboundedSender<Queued>,
    /// The limits' connection.
    limits: limits::Limits,
    /// The approvals' connection.
    approvals: approvals::Approvals,
}

/// A write, as the batch runs it.
enum Write {
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
    },
}

/// A write and who is told its rows.
struct Queued {
    write: Write,
    reply: Box<dyn FnOnce(Result<u64, String>) + Send + Sync>,
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
            Write::Claim(claim) => sql::insert_claim(&c.client, &c.claim, claim).await,
            Write::Settle {
                key,
                owner,
                record,
                only_if_expired,
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

/// The writer: each turn, every waiting write in one transaction.
async fn writer(url: String, first: Connection, mut queue: mpsc::UnboundedReceiver<Queued>) {
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
        if batch.len() > 1
            && let Some(rows) = together(c, &batch).await
        {
            for (queued, rows) in batch.into_iter().zip(rows) {
                (queued.reply)(Ok(rows));
            }
            continue;
        }
        for queued in batch {
            let rows = queued.write.run(c).await.map_err(|e| describe_error(&e));
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
async fn together(c: &Connection, batch: &[Queued]) -> Option<Vec<u64>> {
    use futures_util::FutureExt;
    use futures_util::future::BoxFuture;
    use std::collections::HashSet;
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
    flight.push(Box::pin(
        c.client
            .batch_execute("COMMIT")
            .map(|r| r.map(|()| Vec::new())),
    ));
    let answers = futures_util::future::join_all(flight).await;
    let mut rows = vec![0u64; batch.len()];
    for answer in answers {
        for (index, written) in answer.ok()? {
            rows[index] = written;
        }
    }
    Some(rows)
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
        let returned: std::collections::HashSet<Key> = rows
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

impl Postgres {
    /// Connects to `url` (`postgres://…`), and creates or migrates the schema (once, however
    /// many processes start at once: under an advisory lock).
    pub(crate) async fn connect(url: &str) -> Result<Postgres, StoreError> {
        let describe = format!("PostgreSQL {}", redact(url));
        let error = |message: String| StoreError::unavailable(describe.clone(), message);
        let first = connect(url).await.map_err(&error)?;
        migrate(&first)
            .await
            .map_err(|failed| failed.into_error(&describe))?;
        // The others at once: a harness process connects for every call.
        let others = futures_util::future::try_join_all(
            (0..CONNECTIONS).map(|_| async { prepare(connect(url).await?).await }),
        )
        .await
        .map_err(&error)?;
        let mut connections = vec![Mutex::new(Arc::new(prepare(first).await.map_err(&error)?))];
        let mut others = others.into_iter();
        let first = others.next().ok_or_else(|| error("no connection".into()))?;
        plan_once(&first.client).await.map_err(&error)?;
        connections.extend(others.map(|c| Mutex::new(Arc::new(c))));
        let (writes, queue) = mpsc::unbounded_channel();
        tokio::spawn(writer(url.to_owned(), first, queue));
        Ok(Postgres {
            limits: limits::Limits::new(url, &describe),
            approvals: approvals::Approvals::new(url, &describe),
            url: url.to_owned(),
            describe,
            connections,
            next: AtomicUsize::new(0),
            writes,
        })
    }

    fn error(&self, error: impl std::fmt::Display) -> StoreError {
        StoreError::unavailable(&*self.describe, error.to_string())
    }

    /// Queues `write` to the writer; resolves after its commit with its rows.
    async fn write(&self, write: Write) -> Result<u64, StoreError> {
        let (reply, answer) = oneshot::channel();
        let reply = Box::new(move |rows| {
            let _ = reply.send(rows);
        });
        self.writes
            .send(Queued { write, reply })
            .map_err(|_| self.error("the journal's writer has stopped"))?;
        match answer.await {
            Ok(rows) => rows.map_err(|e| self.error(e)),
            Err(_) => Err(self.error("the journal's writer has stopped")),
        }
    }

    /// Runs one rare statement (an MCP task's) on a connection, committed on its own: whether
    /// it changed a row.
    async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<bool, StoreError> {
        let c = self.connection().await?;
        let changed = c
            .client
            .execute(sql, params)
            .await
            .map_err(|e| self.error(describe_error(&e)))?;
        Ok(changed > 0)
    }

    /// A connection, round robin; one that closed (the database restarted) is replaced.
    async fn connection(&self) -> Result<Arc<Connection>, StoreError> {
        let slot = &self.connections[self.next.fetch_add(1, Ordering::Relaxed) % CONNECTIONS];
        let mut connection = slot.lock().await;
        if connection.client.is_closed() {
            let client = connect(&self.url).await.map_err(|e| self.error(e))?;
            *connection = Arc::new(prepare(client).await.map_err(|e| self.error(e))?);
        }
        Ok(Arc::clone(&connection))
    }
}

/// `url` without its password.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(parsed) => parsed.to_string(),
        Err(_) => "(an unparsable URL)".to_owned(),
    }
}

async fn connect(url: &str) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("cannot connect: {}", describe_error(&e)))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(error = %describe_error(&error), "the journal's database connection ended");
        }
    });
    Ok(client)
}

/// The writer's session plans each statement once (a generic plan, kept), as a loop over the
/// batch's keys looking each up by its index: every statement it runs writes rows by key, so
/// a scan of a whole table or a join to it is never right — yet a generic plan made while the
/// table was empty would hash-join, and planning each batch anew (a custom plan) cost a
/// quarter of the writer's time.
async fn plan_once(client: &Client) -> Result<(), String> {
    client
        .batch_execute(
            "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; \
             SET enable_hashjoin = off; SET enable_mergejoin = off",
        )
        .await
        .map_err(|e| describe_error(&e))
}

/// Prepares every statement, pipelined (one round trip, not one each: a harness process
/// connects for every call).
async fn prepare(client: Client) -> Result<Connection, String> {
    let prepare = |sql: &'static str| client.prepare(sql);
    let prepared = futures_util::future::try_join_all([
        prepare(RENEW_CREATE),
        prepare(RENEW),
        prepare(CLAIM),
        prepare(CLAIM_MANY),
        prepare(LOOKUP),
        prepare(SETTLE),
        prepare(SETTLE_MANY),
        prepare(LIST),
        prepare(PRUNE_CALLS),
        prepare(PRUNE_OWNERS),
    ])
    .await
    .map_err(|e| format!("cannot prepare a statement: {}", describe_error(&e)))?;
    let mut prepared = prepared.into_iter();
    let mut next = || prepared.next().expect("one statement each");
    Ok(Connection {
        renew_create: next(),
        renew: next(),
        claim: next(),
        claim_many: next(),
        lookup: next(),
        settle: next(),
        settle_many: next(),
        list: next(),
        prune_calls: next(),
        prune_owners: next(),
        client,
    })
}

fn entry(row: &Row) -> Entry {
    let state: String = row.get(5);
    Entry {
        key: Key {
            tenant: row.get(0),
            session: row.get(1),
            call_id: row.get(2),
        },
        binding: row.get(3),
        digest: row.get(4),
        state: EntryState::parse(&state).unwrap_or(EntryState::Sent),
        owner: row.get(6),
        owner_live: row.get(7),
        now_ms: row.get(8),
        created_ms: row.get(9),
        deadline_ms: row.get(10),
        finished_ms: row.get(11),
        is_error: row.get(12),
        unknown_outcome: row.get(13),
        result: row.get(14),
        result_bytes: row.get(15),
        trace_id: row.get(16),
        task: row.get(17),
    }
}

impl JournalStore for Postgres {
    fn describe(&self) -> &str {
        &self.describe
    }

    fn renew<'a>(&'a self, owner: &'a str, lease_ms: i64, create: bool) -> StoreFuture<'a, bool> {
        let write = Write::Renew {
            owner: owner.to_owned(),
            lease_ms,
            create,
        };
        Box::pin(async move { Ok(self.write(write).await? > 0) })
    }

    fn claim<'a>(&'a self, claim: &'a Claim) -> StoreFuture<'a, bool> {
        let write = Write::Claim(claim.clone());
        Box::pin(async move { Ok(self.write(write).await? > 0) })
    }

    fn lookup<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Option<Entry>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let row = c
                .client
                .query_opt(&c.lookup, &[&key.tenant, &key.session, &key.call_id])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            Ok(row.as_ref().map(entry))
        })
    }

    fn settle<'a>(
        &'a self,
        key: &'a Key,
        owner: &'a str,
        record: &'a Record,
        only_if_expired: bool,
    ) -> StoreFuture<'a, bool> {
        let write = Write::Settle {
            key: key.clone(),
            owner: owner.to_owned(),
            record: record.clone(),
            only_if_expired,
        };
        Box::pin(async move { Ok(self.write(write).await? > 0) })
    }

    fn record(self: Arc<Self>, key: Key, owner: String, record: Record, done: Done) {
        let write = Write::Settle {
            key,
            owner,
            record,
            only_if_expired: false,
        };
        let store = self.describe.clone();
        let reply = Box::new(move |rows: Result<u64, String>| {
            done(
                rows.map(|rows| rows > 0)
                    .map_err(|message| StoreError::unavailable(store, message)),
            );
        });
        if let Err(unsent) = self.writes.send(Queued { write, reply }) {
            (unsent.0.reply)(Err("the journal's writer has stopped".into()));
        }
    }

    fn record_task<'a>(
        &'a self,
        key: &'a Key,
        owner: &'a str,
        task: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                [&key.tenant, &key.session, &key.call_id, &owner, &task];
            self.execute(sql::RECORD_TASK, &params).await
        })
    }

    fn take_over<'a>(&'a self, key: &'a Key, from: &'a str, to: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                [&key.tenant, &key.session, &key.call_id, &from, &to];
            self.execute(sql::TAKE_OVER, &params).await
        })
    }

    fn charge<'a>(&'a self, charge: &'a Charge) -> StoreFuture<'a, Verdict> {
        Box::pin(self.limits.verdict(charge))
    }

    fn claim_charged<'a>(
        &'a self,
        claim: &'a Claim,
        charge: &'a Charge,
    ) -> StoreFuture<'a, Claimed> {
        Box::pin(
            self.limits
                .charge(Some(claim.clone()), charge.clone(), None),
        )
    }

    fn ask_approval<'a>(&'a self, request: &'a ApprovalRequest) -> StoreFuture<'a, Asked> {
        Box::pin(self.approvals.ask(request))
    }

    fn claim_approved<'a>(
        &'a self,
        claim: &'a Claim,
        charge: Option<&'a Charge>,
        approval: &'a str,
    ) -> StoreFuture<'a, Claimed> {
        match charge {
            None => Box::pin(self.approvals.claim(claim, approval)),
            Some(charge) => Box::pin(self.limits.charge(
                Some(claim.clone()),
                charge.clone(),
                Some(approval.to_owned()),
            )),
        }
    }

    fn approvals<'a>(&'a self, filter: &'a ApprovalFilter) -> StoreFuture<'a, Vec<Approval>> {
        Box::pin(self.approvals.list(filter))
    }

    fn decide_approval<'a>(
        &'a self,
        id: &'a str,
        tenants: &'a [String],
        approver: &'a str,
        approve: bool,
    ) -> StoreFuture<'a, Option<Approval>> {
        Box::pin(self.approvals.decide(id, tenants, approver, approve))
    }

    fn release<'a>(&'a self, holder: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&holder];
            self.execute(limits::RELEASE, &params).await.map(drop)
        })
    }

    fn usage<'a>(&'a self, names: &'a [String]) -> StoreFuture<'a, Vec<Usage>> {
        Box::pin(async move {
            let c = self.connection().await?;
            limits::usage(&c.client, names)
                .await
                .map_err(|e| self.error(describe_error(&e)))
        })
    }

    fn list<'a>(&'a self, filter: &'a Filter) -> StoreFuture<'a, Vec<Entry>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let limit = (filter.limit > 0).then_some(filter.limit as i64);
            let rows = c
                .client
                .query(
                    &c.list,
                    &[
                        &filter.tenant,
                        &filter.session,
                        &filter.call_id,
                        &filter.within_ms,
                        &limit,
                        &filter.results,
                    ],
                )
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            Ok(rows.iter().map(entry).collect())
        })
    }

    fn record_drift<'a>(&'a self, drift: &'a Drift) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let c = self.connection().await?;
            let recorded = schema::record_drift(&c.client, drift).await;
            recorded.map_err(|e| self.error(describe_error(&e)))
        })
    }

    fn drifts(&self, limit: usize) -> StoreFuture<'_, Vec<Drift>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let drifts = schema::drifts(&c.client, limit).await;
            drifts.map_err(|e| self.error(describe_error(&e)))
        })
    }

    fn prune(&self, retention_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let c = self.connection().await?;
            c.client
                .execute(schema::PRUNE_DRIFT, &[&retention_ms])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            c.client
                .execute(approvals::FORGET, &[])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            c.client
                .execute(approvals::PRUNE, &[&retention_ms])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            let deleted = c
                .client
                .execute(&c.prune_calls, &[&retention_ms])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            c.client
                .execute(&c.prune_owners, &[&retention_ms])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            c.client
                .execute(limits::PRUNE_SLOTS, &[])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            Ok(deleted)
        })
    }
}
