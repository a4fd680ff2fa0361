//! The embedded journal: one SQLite file (WAL), shared by the processes of one host.
//!
//! One connection does this process's work on the file, behind a mutex: a connection's page
//! cache stays valid while only it writes, so the hot pages are read once (several connections
//! of one process would each discard their cache after another's commit and read the pages
//! again). Requests wait in one queue. A claim's caller, after one turn of the scheduler (the
//! calls ready on its thread reach their own claims meanwhile), commits everything queued in one
//! `BEGIN IMMEDIATE` transaction when the connection is free (group commit: concurrent claims
//! cost one commit, not one each, and no trip to another thread); one that finds the connection
//! taken leaves its claim to whoever holds it, and one that finds another process holding the
//! file's write lock leaves the batch to the journal's thread, which waits for it
//! (`busy_timeout`, 5 s). Outcomes wait up to 2 ms for a claim to share its commit; the thread
//! commits those that find none, runs the other writes (leases, pruning) and checkpoints.
//! Lookups read inline, on a second connection when the first is taken (a WAL reader never
//! waits for a writer). The file is read with system calls, not a memory map: SQLite drops its
//! map of the file whenever another connection has written, and each unmap is a TLB shootdown
//! across the cores. The clock of every lease and deadline is SQLite's `unixepoch`.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use crate::limits::{Charge, Usage, Verdict};

use crate::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalStore, Asked, AuditStore, CallStore,
    Decision, DriftStore, Granted, LimitStore,
};
use crate::store::{AuditHeads, AuditRecord, Checkpoint, Denial};
use crate::store::{
    Claim, Claimed, Done, Drift, Entry, Filter, Key, Record, StoreError, StoreFuture,
};

/// What SQLite does on commit: which crashes a claim survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=NORMAL` in WAL mode (the default): a commit survives the process's crash;
    /// a machine crash or power loss may lose the last commits (the WAL is synced at
    /// checkpoints), after which a retry of such a call could send it again.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is synced to the disk before it returns; survives a
    /// machine crash, at the cost of one fsync per commit (shared by a group of claims).
    Full,
}

/// The store's clock, in milliseconds ([`crate::store::clock`]).
macro_rules! now {
    () => {
        crate::store::clock::sqlite_now!()
    };
}

/// An entry's columns, in [`entry`]'s order; `$result` is the result's column (or `NULL`).
macro_rules! columns {
    ($result:literal) => {
        concat!(
            "SELECT c.tenant, c.session, c.call_id, c.binding, c.digest, c.state, c.owner, ",
            "EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = c.owner AND o.expires > ",
            now!(),
            "), ",
            now!(),
            ", c.created, c.deadline, c.finished, c.is_error, c.unknown_outcome, ",
            $result,
            ", c.result_bytes, c.trace_id, c.task FROM brain_calls c "
        )
    };
}

mod approvals; // this and the modules below: after the macros, which they use

mod calls;
mod file;
mod grants;
mod limits;
mod schema;

use calls::{Audit, entry, insert_claim, update_outcome};
use file::create_private;
pub use file::default_path;
use schema::migrate;

type Deliver = Box<dyn FnOnce(Option<&str>) + Send>;
/// A request: run against the open transaction (`None` when none could be begun).
type Run = Box<dyn FnOnce(Option<&Connection>) -> Deliver + Send>;

/// A request, and whether it may wait for the next one to share its commit (an outcome: only
/// the claim must be durable before the send).
struct Job {
    run: Run,
    defer: bool,
    queued: Instant,
}

impl Job {
    /// Runs `job` in a transaction; `reply` is told its answer after the commit.
    fn new<T: Send + 'static>(
        job: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        defer: bool,
        reply: impl FnOnce(Result<T, String>) + Send + 'static,
    ) -> Job {
        let run: Run = Box::new(move |connection| {
            let outcome = match connection {
                Some(connection) => job(connection).map_err(|e| e.to_string()),
                None => Err("no transaction".to_owned()),
            };
            Box::new(move |commit: Option<&str>| {
                reply(match commit {
                    Some(error) => outcome.and(Err(format!("the commit failed: {error}"))),
                    None => outcome,
                });
            })
        });
        Job {
            run,
            defer,
            queued: Instant::now(),
        }
    }
}

/// How long an outcome waits for a claim to share its commit with before the journal's thread
/// commits it.
const DEFER: Duration = Duration::from_millis(2);

/// How long after the last request left to it the thread keeps looking at the queue every
/// [`DEFER`], rather than sleeping until it is woken.
const IDLE: Duration = Duration::from_millis(100);

/// Most requests one transaction carries.
const MAX_BATCH: usize = 256;

/// What this process shares: the connection and the requests waiting for it.
struct Shared {
    /// This process's connection to the file.
    connection: Mutex<Connection>,
    pending: Mutex<Pending>,
    /// Tells the journal's thread that requests wait (or that the journal is dropped).
    wake: Condvar,
}

#[derive(Default)]
struct Pending {
    jobs: VecDeque<Job>,
    stopped: bool,
    /// When a request was last left to the thread.
    pushed: Option<Instant>,
    /// Whether the thread looks at the queue every [`DEFER`] (it has work, or had lately): an
    /// outcome queued then need not wake it.
    polling: bool,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leaves `job` to the thread.
    fn push(&self, job: Job) {
        let mut pending = self.pending();
        let wake = !job.defer || !pending.polling;
        pending.pushed = Some(job.queued);
        pending.jobs.push_back(job);
        drop(pending);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Whether a request that must not wait is queued.
    fn urgent(&self) -> bool {
        self.pending().jobs.iter().any(|job| !job.defer)
    }

    /// Runs what is queued, in batches of one transaction each, until nothing urgent is left.
    /// `wait`: the journal's thread, which waits for the connection and for another process's
    /// write lock; else a caller, which leads only when the connection is free at once and
    /// leaves a batch that finds the file's write lock taken to the thread.
    fn lead(&self, wait: bool) {
        loop {
            let connection = if wait {
                self.connection.lock().unwrap_or_else(|p| p.into_inner())
            } else {
                match self.connection.try_lock() {
                    Ok(connection) => connection,
                    Err(_) => return,
                }
            };
            let batch: Vec<Job> = {
                let mut pending = self.pending();
                let take = pending.jobs.len().min(MAX_BATCH);
                pending.jobs.drain(..take).collect()
            };
            if !batch.is_empty() {
                if !wait {
                    let _ = connection.busy_timeout(Duration::ZERO);
                }
                let began = statement(&connection, "BEGIN IMMEDIATE");
                if !wait {
                    let _ = connection.busy_timeout(BUSY);
                }
                match began {
                    Err(error) if wait => {
                        drop(connection);
                        let error = format!("cannot begin a transaction: {error}");
                        for job in batch {
                            (job.run)(None)(Some(&error));
                        }
                    }
                    // Another process writes: the thread waits for it, with the batch.
                    Err(_) => {
                        drop(connection);
                        let mut pending = self.pending();
                        for job in batch.into_iter().rev() {
                            pending.jobs.push_front(Job {
                                defer: false,
                                ..job
                            });
                        }
                        drop(pending);
                        self.wake.notify_one();
                        return;
                    }
                    Ok(()) => {
                        let delivers: Vec<Deliver> = batch
                            .into_iter()
                            .map(|job| (job.run)(Some(&connection)))
                            .collect();
                        let commit = statement(&connection, "COMMIT").err().map(|e| {
                            let _ = connection.execute_batch("ROLLBACK");
                            e.to_string()
                        });
                        drop(connection);
                        for deliver in delivers {
                            deliver(commit.as_deref());
                        }
                    }
                }
            } else {
                drop(connection);
            }
            // A request queued while the connection was held: its caller found it taken and
            // left the request to whoever held it.
            if !self.urgent() {
                return;
            }
        }
    }
}

/// Wakes the journal's thread when dropped: a request whose caller was to commit it, and will
/// not.
struct Unled<'a>(&'a Shared);

impl Drop for Unled<'_> {
    fn drop(&mut self) {
        self.0.wake.notify_one();
    }
}

/// The SQLite journal.
pub(crate) struct Sqlite {
    describe: String,
    shared: Arc<Shared>,
    /// Lookups read here when the shared connection is taken.
    reader: Mutex<Connection>,
    /// Whether a caller may commit its claim itself: not with [`Durability::Full`], whose
    /// every commit syncs the disk; there the thread commits, and claims queued meanwhile
    /// share its next sync.
    inline: bool,
    /// Whether writes append to the audit chain.
    audit: std::sync::atomic::AtomicBool,
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        self.shared.pending().stopped = true;
        self.shared.wake.notify_one();
    }
}

impl Sqlite {
    /// Opens (creating it, mode 0600, and its directory, mode 0700) the journal at `path`, and
    /// creates or migrates its schema.
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<Sqlite, StoreError> {
        let describe = format!("SQLite {}", path.display());
        let error = |message: String| StoreError::unavailable(describe.clone(), message);
        create_private(path).map_err(&error)?;
        let open = || -> Result<Connection, StoreError> {
            let connection = Connection::open(path).map_err(|e| error(e.to_string()))?;
            // Switching a new file to WAL takes its lock without SQLite's busy handler: several
            // processes opening it at once retry here (within `BUSY`).
            let started = Instant::now();
            loop {
                match configure(&connection, durability) {
                    Err(rusqlite::Error::SqliteFailure(failure, _))
                        if failure.code == rusqlite::ErrorCode::DatabaseBusy
                            && started.elapsed() < BUSY =>
                    {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    configured => break configured.map_err(|e| error(e.to_string()))?,
                }
            }
            Ok(connection)
        };
        let connection = open()?;
        migrate(&connection).map_err(|failed| failed.into_error(&describe))?;
        // What earlier processes left in the WAL (a harness process may exit before its
        // thread's next checkpoint).
        checkpoint(&connection);
        let reader = open()?;
        reader
            .pragma_update(None, "query_only", true)
            .map_err(|e| error(e.to_string()))?;
        // Checkpoints run on a connection of their own: they sync the files, and the shared
        // one stays free meanwhile.
        let checkpoints = open()?;
        let shared = Arc::new(Shared {
            connection: Mutex::new(connection),
            pending: Mutex::default(),
            wake: Condvar::new(),
        });
        let thread = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("brain-journal".into())
            .spawn(move || work(&thread, &checkpoints))
            .map_err(|e| error(format!("cannot start the journal's thread: {e}")))?;
        Ok(Sqlite {
            describe,
            shared,
            reader: Mutex::new(reader),
            inline: durability == Durability::Normal,
            audit: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Whether writes append to the audit chain now.
    fn audits(&self) -> bool {
        self.audit.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reads inline: on the shared connection when it is free (its page cache is warm), else
    /// on the reader's (a WAL reader never waits for a writer).
    fn read<T>(&self, read: impl Fn(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let read = match self.shared.connection.try_lock() {
            Ok(connection) => {
                let read = read(&connection);
                drop(connection);
                // A claim queued while this read held the connection was left to it.
                if self.shared.urgent() {
                    self.shared.lead(false);
                }
                read
            }
            Err(_) => read(&self.reader.lock().unwrap_or_else(|p| p.into_inner())),
        };
        read.map_err(|e| StoreError::unavailable(&*self.describe, e.to_string()))
    }

    /// Runs `job` in the next transaction, on the journal's thread; resolves after its commit.
    fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        self.queue(job, false, false)
    }

    /// Queues `job` for the next transaction and resolves after its commit. `defer`: it may
    /// wait up to [`DEFER`] to share a claim's commit; `lead`: the caller runs the queue itself
    /// when the connection is free (else whoever holds it does, or the thread).
    fn queue<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        defer: bool,
        lead: bool,
    ) -> StoreFuture<'_, T> {
        let (reply, answer) = oneshot::channel::<Result<T, String>>();
        let job = Job::new(job, defer, move |outcome| {
            let _ = reply.send(outcome);
        });
        if lead {
            self.shared.pending().jobs.push_back(job);
        } else {
            self.shared.push(job);
        }
        Box::pin(async move {
            if lead {
                // Dropped before it leads (the call cancelled), the request is the thread's.
                let unled = Unled(&self.shared);
                // The calls ready on this thread run first, up to their own claims, which
                // join this commit (group commit without a trip to another thread); alone,
                // this costs one turn of the scheduler.
                tokio::task::yield_now().await;
                std::mem::forget(unled);
                self.shared.lead(false);
            }
            match answer.await {
                Ok(outcome) => {
                    outcome.map_err(|message| StoreError::unavailable(&*self.describe, message))
                }
                Err(_) => Err(StoreError::unavailable(
                    &*self.describe,
                    "the journal's thread has stopped",
                )),
            }
        })
    }
}

/// Each connection's page cache: the journal's hot rows are the newest, and the OS caches the
/// file; SQLite's default (2 MB) would grow a host's memory for nothing.
const CACHE_KIB: i64 = 512;
/// How long a write waits for another process's write lock.
const BUSY: Duration = Duration::from_secs(5);

fn configure(connection: &Connection, durability: Durability) -> rusqlite::Result<()> {
    connection.busy_timeout(BUSY)?;
    connection.pragma_update(None, "cache_size", -CACHE_KIB)?;
    // Checkpoints (which sync the files) run on the journal's thread, off the calls' path.
    connection.pragma_update(None, "wal_autocheckpoint", 0)?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    let synchronous = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    connection.pragma_update(None, "synchronous", synchronous)?;
    Ok(())
}

/// The journal's thread: commits what callers left queued — at once what must not wait, an
/// outcome once it has waited [`DEFER`] for a claim to share the commit with — and, between
/// turns, checkpoints on a connection of its own.
fn work(shared: &Shared, checkpoints: &Connection) {
    let mut checkpointed = Instant::now();
    let mut pending = shared.pending();
    loop {
        if checkpointed.elapsed() >= CHECKPOINT_EVERY {
            drop(pending);
            checkpoint(checkpoints);
            checkpointed = Instant::now();
            pending = shared.pending();
        }
        if pending.stopped && pending.jobs.is_empty() {
            return;
        }
        let due = pending
            .jobs
            .iter()
            .map(|job| {
                if job.defer {
                    job.queued + DEFER
                } else {
                    job.queued
                }
            })
            .min();
        let now = Instant::now();
        let until = match due {
            Some(due) if due <= now => {
                drop(pending);
                shared.lead(true);
                pending = shared.pending();
                continue;
            }
            Some(due) => due,
            None if pending.pushed.is_some_and(|at| now - at < IDLE) => now + DEFER,
            None => checkpointed + CHECKPOINT_EVERY,
        };
        let left = until.saturating_duration_since(now).min(CHECKPOINT_EVERY);
        pending.polling = left <= DEFER;
        pending = shared
            .wake
            .wait_timeout(pending, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// Runs a statement without parameters, prepared once per connection.
fn statement(connection: &Connection, sql: &str) -> rusqlite::Result<()> {
    connection.prepare_cached(sql)?.execute([]).map(drop)
}

/// How often the journal's thread copies the WAL back into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// A passive checkpoint: copies what no reader still needs, waits for no one.
fn checkpoint(connection: &Connection) {
    if let Err(error) = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::debug!(%error, "the journal's checkpoint failed");
    }
}

impl CallStore for Sqlite {
    fn describe(&self) -> &str {
        &self.describe
    }

    fn renew<'a>(&'a self, owner: &'a str, lease_ms: i64, create: bool) -> StoreFuture<'a, bool> {
        let owner = owner.to_owned();
        self.run(move |c| {
            let sql = if create {
                concat!(
                    "INSERT INTO brain_owners (owner, expires) VALUES (?1, ",
                    now!(),
                    " + ?2) ON CONFLICT (owner) DO UPDATE SET expires = excluded.expires"
                )
            } else {
                concat!(
                    "UPDATE brain_owners SET expires = ",
                    now!(),
                    " + ?2 WHERE owner = ?1 AND expires > ",
                    now!()
                )
            };
            Ok(c.prepare_cached(sql)?.execute(params![owner, lease_ms])? > 0)
        })
    }

    fn claim<'a>(&'a self, claim: &'a Claim) -> StoreFuture<'a, bool> {
        // Committed by this caller when the connection is free (with what else is queued:
        // other claims, outcomes waiting to share a commit); else by whoever holds it, in
        // its next batch. A caller never waits for the connection or another process's lock.
        let claim = claim.clone();
        let audit = Audit::on(self.audits());
        self.queue(move |c| insert_claim(c, &claim, audit), false, self.inline)
    }

    fn lookup<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Option<Entry>> {
        let sql = concat!(
            columns!("c.result"),
            "WHERE c.tenant = ?1 AND c.session = ?2 AND c.call_id = ?3"
        );
        let read = |connection: &Connection| {
            connection.prepare_cached(sql).and_then(|mut statement| {
                statement
                    .query_row(params![key.tenant, key.session, key.call_id], entry)
                    .optional()
            })
        };
        let read = self.read(read);
        Box::pin(std::future::ready(read))
    }

    fn settle<'a>(
        &'a self,
        key: &'a Key,
        owner: &'a str,
        record: &'a Record,
        only_if_expired: bool,
    ) -> StoreFuture<'a, bool> {
        let (key, owner, record) = (key.clone(), owner.to_owned(), record.clone());
        let audit = self.audits();
        self.queue(
            move |c| update_outcome(c, &key, &owner, &record, only_if_expired, true, audit),
            true,
            false,
        )
    }

    fn record(self: Arc<Self>, key: Key, owner: String, record: Record, done: Done) {
        let store = self.describe.clone();
        let audit = self.audits();
        self.shared.push(Job::new(
            move |c| update_outcome(c, &key, &owner, &record, false, false, audit),
            true,
            move |outcome| done(outcome.map_err(|message| StoreError::unavailable(store, message))),
        ));
    }

    fn record_task<'a>(
        &'a self,
        key: &'a Key,
        owner: &'a str,
        task: &'a str,
    ) -> StoreFuture<'a, bool> {
        let (key, owner, task) = (key.clone(), owner.to_owned(), task.to_owned());
        self.queue(
            move |c| schema::record_task(c, &key, &owner, &task),
            false,
            false,
        )
    }

    fn take_over<'a>(&'a self, key: &'a Key, from: &'a str, to: &'a str) -> StoreFuture<'a, bool> {
        let (key, from, to) = (key.clone(), from.to_owned(), to.to_owned());
        let audit = self.audits();
        self.queue(
            move |c| schema::take_over(c, &key, &from, &to, audit),
            false,
            false,
        )
    }

    fn list<'a>(&'a self, filter: &'a Filter) -> StoreFuture<'a, Vec<Entry>> {
        let filter = filter.clone();
        self.run(move |c| {
            let sql = concat!(
                columns!("CASE WHEN ?6 THEN c.result END"),
                "WHERE (?1 IS NULL OR c.tenant = ?1) AND (?2 IS NULL OR c.session = ?2) ",
                "AND (?3 IS NULL OR c.call_id = ?3) AND (?4 IS NULL OR c.created >= ",
                now!(),
                " - ?4) ORDER BY c.id DESC LIMIT ?5"
            );
            let limit = if filter.limit == 0 {
                -1
            } else {
                filter.limit as i64
            };
            let mut statement = c.prepare_cached(sql)?;
            let rows = statement.query_map(
                params![
                    filter.tenant,
                    filter.session,
                    filter.call_id,
                    filter.within_ms,
                    limit,
                    filter.results
                ],
                entry,
            )?;
            rows.collect()
        })
    }

    fn prune(&self, retention_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |c| {
            schema::prune_drift(c, retention_ms)?;
            schema::prune_issued(c, retention_ms)?;
            crate::approvals::sqlite::prune(c, retention_ms)?;
            let calls = concat!(
                "DELETE FROM brain_calls AS c WHERE coalesce(c.finished, c.created) < ",
                now!(),
                " - ?1 AND NOT (c.state = 'sent' AND ",
                "EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = c.owner AND o.expires > ",
                now!(),
                "))"
            );
            let owners = concat!("DELETE FROM brain_owners WHERE expires < ", now!(), " - ?1");
            let deleted = c.prepare_cached(calls)?.execute(params![retention_ms])?;
            c.prepare_cached(owners)?.execute(params![retention_ms])?;
            Ok(deleted as u64)
        })
    }
}

impl LimitStore for Sqlite {
    fn charge<'a>(&'a self, charge: &'a Charge) -> StoreFuture<'a, Verdict> {
        let charge = charge.clone();
        self.queue(move |c| limits::charge(c, &charge), false, self.inline)
    }

    fn claim_charged<'a>(
        &'a self,
        claim: &'a Claim,
        charge: &'a Charge,
    ) -> StoreFuture<'a, Claimed> {
        let (claim, charge) = (claim.clone(), charge.clone());
        let audit = self.audits();
        // The claim, then (when it is new) the charge, under one savepoint: both or neither.
        let job = move |c: &Connection| {
            limits::savepoint(c, |c| {
                if !insert_claim(c, &claim, Audit::on(audit))? {
                    return Ok((false, Claimed::Taken));
                }
                Ok(match limits::take(c, &charge)? {
                    Verdict::Admitted => (true, Claimed::Claimed),
                    Verdict::Refused(refusals) => (false, Claimed::Refused(refusals)),
                })
            })
        };
        self.queue(job, false, self.inline)
    }

    fn release<'a>(&'a self, holder: &'a str) -> StoreFuture<'a, ()> {
        let holder = holder.to_owned();
        self.queue(move |c| limits::release(c, &holder), false, self.inline)
    }

    fn usage<'a>(&'a self, names: &'a [String]) -> StoreFuture<'a, Vec<Usage>> {
        let read = self.read(|c| limits::usage(c, names));
        Box::pin(std::future::ready(read))
    }
}

impl DriftStore for Sqlite {
    fn record_drift<'a>(&'a self, drift: &'a Drift) -> StoreFuture<'a, bool> {
        let drift = drift.clone();
        let audit = self.audits();
        self.run(move |c| schema::record_drift(c, &drift, audit))
    }

    fn drifts(&self, limit: usize) -> StoreFuture<'_, Vec<Drift>> {
        let limit = if limit == 0 { -1 } else { limit as i64 };
        Box::pin(std::future::ready(self.read(|c| schema::drifts(c, limit))))
    }
}

impl ApprovalStore for Sqlite {
    fn ask_approval<'a>(&'a self, request: &'a ApprovalRequest) -> StoreFuture<'a, Asked> {
        let request = request.clone();
        let audit = self.audits();
        self.run(move |c| approvals::ask(c, &request, audit))
    }

    fn claim_approved<'a>(
        &'a self,
        claim: &'a Claim,
        charge: Option<&'a Charge>,
        approval: &'a Granted,
    ) -> StoreFuture<'a, Claimed> {
        let (claim, charge, granted) = (claim.clone(), charge.cloned(), approval.clone());
        let audit = self.audits();
        let job =
            move |c: &Connection| approvals::claim(c, &claim, charge.as_ref(), &granted, audit);
        self.queue(job, false, self.inline)
    }

    fn approvals<'a>(&'a self, filter: &'a ApprovalFilter) -> StoreFuture<'a, Vec<Approval>> {
        let listed = self.read(|c| crate::approvals::sqlite::list(c, filter));
        Box::pin(std::future::ready(listed))
    }

    fn decide_approval<'a>(&'a self, decision: &'a Decision) -> StoreFuture<'a, Option<Approval>> {
        let decision = decision.clone();
        let audit = self.audits();
        self.run(move |c| approvals::decide(c, &decision, audit))
    }
}

impl AuditStore for Sqlite {
    fn set_audit(&self, on: bool) {
        self.audit.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    fn audit_tenants(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(std::future::ready(self.read(crate::audit::sqlite::tenants)))
    }

    fn audit_records<'a>(
        &'a self,
        tenant: &'a str,
        from: i64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<AuditRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let read = self.read(|c| crate::audit::sqlite::records(c, tenant, from, limit));
        Box::pin(std::future::ready(read))
    }

    fn audit_heads(&self) -> StoreFuture<'_, AuditHeads> {
        let read = self.read(|c| {
            Ok(AuditHeads {
                heads: crate::audit::sqlite::heads(c)?,
                now_ms: crate::audit::sqlite::now(c)?,
            })
        });
        Box::pin(std::future::ready(read))
    }

    fn audit_checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>> {
        Box::pin(std::future::ready(
            self.read(crate::audit::sqlite::checkpoints),
        ))
    }

    fn add_audit_checkpoint<'a>(
        &'a self,
        body: &'a str,
        signature: &'a str,
    ) -> StoreFuture<'a, i64> {
        let (body, signature) = (body.to_owned(), signature.to_owned());
        self.run(move |c| crate::audit::sqlite::add_checkpoint(c, &body, &signature))
    }

    fn audit_denial(&self, denial: Denial, dropped: Box<dyn FnOnce() + Send>) {
        if self.audits() {
            let append = move |c: &Connection| crate::audit::sqlite::append_denial(c, &denial);
            let done = move |appended: Result<(), String>| {
                if appended.is_err() {
                    dropped();
                }
            };
            self.shared.push(Job::new(append, true, done));
        }
    }

    fn prune_audit(&self, retention_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |c| crate::audit::sqlite::prune(c, retention_ms))
    }
}
