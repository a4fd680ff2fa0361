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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::Row;

use crate::limits::{Charge, Usage, Verdict};

use crate::audit::record::Event;
use crate::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalStore, Asked, AuditStore, CallStore,
    Decision, DriftStore, Granted, LimitStore,
};
use crate::store::{AuditHeads, AuditRecord, Checkpoint, Denial};
use crate::store::{
    Claim, Claimed, Done, Drift, Entry, EntryState, Filter, Key, Record, StoreError, StoreFuture,
};

mod grants;
mod limits;
#[macro_use]
mod sql;
mod approvals;

mod batch;
mod connection;
mod schema;

use batch::{Queued, Write, writer};
use connection::{Connection, connect, plan_once, prepare};
use schema::migrate;
use sql::describe_error;

/// How many connections one process keeps.
const CONNECTIONS: usize = 4;

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
    /// Whether writes append to the audit chain.
    audit: Arc<AtomicBool>,
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
        let audit = Arc::new(AtomicBool::new(true));
        tokio::spawn(writer(url.to_owned(), first, queue, Arc::clone(&audit)));
        Ok(Postgres {
            limits: limits::Limits::new(url, &describe, Arc::clone(&audit)),
            approvals: approvals::Approvals::new(url, &describe, Arc::clone(&audit)),
            audit,
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

    /// Whether writes append to the audit chain now.
    fn audits(&self) -> bool {
        self.audit.load(Ordering::Relaxed)
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

impl CallStore for Postgres {
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
            taken_over: true,
        };
        Box::pin(async move { Ok(self.write(write).await? > 0) })
    }

    fn record(self: Arc<Self>, key: Key, owner: String, record: Record, done: Done) {
        let write = Write::Settle {
            key,
            owner,
            record,
            only_if_expired: false,
            taken_over: false,
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
            if !self.audits() {
                return self.execute(sql::TAKE_OVER, &params).await;
            }
            let (key, from, to) = (key.clone(), from.to_owned(), to.to_owned());
            self.approvals
                .transaction(move |client| {
                    Box::pin(async move {
                        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                            [&key.tenant, &key.session, &key.call_id, &from, &to];
                        if client.execute(sql::TAKE_OVER, &params).await? == 0 {
                            return Ok((false, false));
                        }
                        let event = Event::Resumed {
                            key: key.clone(),
                            from: from.clone(),
                            to: to.clone(),
                        };
                        crate::audit::postgres::append(client, &[(key.tenant.clone(), event)])
                            .await?;
                        Ok((true, true))
                    })
                })
                .await
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

    fn prune(&self, retention_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let c = self.connection().await?;
            c.client
                .execute(schema::PRUNE_DRIFT, &[&retention_ms])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            c.client
                .execute(sql::GRANT_PRUNE_ISSUED, &[&retention_ms])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            c.client
                .execute(crate::approvals::postgres::FORGET, &[])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            c.client
                .execute(crate::approvals::postgres::PRUNE, &[&retention_ms])
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

impl LimitStore for Postgres {
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
}

impl DriftStore for Postgres {
    fn record_drift<'a>(&'a self, drift: &'a Drift) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let (drift, audit) = (drift.clone(), self.audits());
            self.approvals
                .transaction(move |client| {
                    Box::pin(async move {
                        let recorded = schema::record_drift(client, &drift).await?;
                        if recorded && audit {
                            let event = Event::drift(&drift);
                            let events: Vec<(String, Event)> = (drift.tenants.iter())
                                .map(|t| (t.clone(), event.clone()))
                                .collect();
                            crate::audit::postgres::append(client, &events).await?;
                        }
                        Ok((true, recorded))
                    })
                })
                .await
        })
    }

    fn drifts(&self, limit: usize) -> StoreFuture<'_, Vec<Drift>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let drifts = schema::drifts(&c.client, limit).await;
            drifts.map_err(|e| self.error(describe_error(&e)))
        })
    }
}

impl ApprovalStore for Postgres {
    fn ask_approval<'a>(&'a self, request: &'a ApprovalRequest) -> StoreFuture<'a, Asked> {
        Box::pin(self.approvals.ask(request))
    }

    fn claim_approved<'a>(
        &'a self,
        claim: &'a Claim,
        charge: Option<&'a Charge>,
        approval: &'a Granted,
    ) -> StoreFuture<'a, Claimed> {
        match charge {
            None => Box::pin(self.approvals.claim(claim, approval)),
            Some(charge) => Box::pin(self.limits.charge(
                Some(claim.clone()),
                charge.clone(),
                Some(approval.clone()),
            )),
        }
    }

    fn approvals<'a>(&'a self, filter: &'a ApprovalFilter) -> StoreFuture<'a, Vec<Approval>> {
        Box::pin(self.approvals.list(filter))
    }

    fn decide_approval<'a>(&'a self, decision: &'a Decision) -> StoreFuture<'a, Option<Approval>> {
        Box::pin(self.approvals.decide(decision))
    }
}

impl AuditStore for Postgres {
    fn set_audit(&self, on: bool) {
        self.audit.store(on, Ordering::Relaxed);
    }

    fn audit_tenants(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let tenants = crate::audit::postgres::audit_tenants(&c.client).await;
            tenants.map_err(|e| self.error(describe_error(&e)))
        })
    }

    fn audit_records<'a>(
        &'a self,
        tenant: &'a str,
        from: i64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<AuditRecord>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let records = crate::audit::postgres::records(&c.client, tenant, from, limit).await;
            records.map_err(|e| self.error(describe_error(&e)))
        })
    }

    fn audit_heads(&self) -> StoreFuture<'_, AuditHeads> {
        Box::pin(async move {
            let c = self.connection().await?;
            let (heads, now_ms) = crate::audit::postgres::heads(&c.client)
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            Ok(AuditHeads { heads, now_ms })
        })
    }

    fn audit_checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let checkpoints = crate::audit::postgres::checkpoints(&c.client).await;
            checkpoints.map_err(|e| self.error(describe_error(&e)))
        })
    }

    fn add_audit_checkpoint<'a>(
        &'a self,
        body: &'a str,
        signature: &'a str,
    ) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let c = self.connection().await?;
            let row = c
                .client
                .query_one(crate::audit::postgres::ADD_CHECKPOINT, &[&body, &signature])
                .await
                .map_err(|e| self.error(describe_error(&e)))?;
            Ok(row.get(0))
        })
    }

    fn audit_denial(&self, denial: Denial, dropped: Box<dyn FnOnce() + Send>) {
        if !self.audits() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return dropped();
        };
        let _entered = handle.enter();
        let appended = self.approvals.transaction(move |client| {
            Box::pin(async move {
                let event = Event::denied(&denial);
                crate::audit::postgres::append(client, &[(denial.key.tenant.clone(), event)])
                    .await?;
                Ok((true, ()))
            })
        });
        // Off the caller's path: the transaction runs on a task of its own.
        let task = async move {
            if appended.await.is_err() {
                dropped();
            }
        };
        drop(handle.spawn(task));
    }

    fn prune_audit(&self, retention_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            self.approvals
                .transaction(move |client| {
                    Box::pin(async move {
                        Ok((
                            true,
                            crate::audit::postgres::prune(client, retention_ms).await?,
                        ))
                    })
                })
                .await
        })
    }
}
