//! The embedded journal: one SQLite file (WAL), shared by the processes of one host.
//!
//! One thread owns the writing connection. Requests queue to it; it runs all that are waiting
//! in one `BEGIN IMMEDIATE` transaction and answers each after the commit (group commit: 32
//! concurrent claims cost one commit, not 32). A claim is first tried inline on a connection of
//! its own that never waits for the write lock, so that a call on a quiet journal does not pay
//! the trip to the thread; lookups read inline on a third connection. Other processes on the same file wait for the write lock
//! (`busy_timeout`, 5 s). The clock of every lease and deadline is SQLite's `unixepoch`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use rusqlite::{Connection, OptionalExtension, Row, params};
use tokio::sync::oneshot;

use super::store::{
    Claim, Entry, EntryState, Filter, JournalStore, Key, Record, StoreError, StoreFuture,
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

/// The store's clock, in milliseconds.
macro_rules! now {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

/// The schema version this brain writes.
const SCHEMA_VERSION: i64 = 1;

/// Calls are rows in claim order (a rowid table: a claim appends to the last page, an outcome
/// updates a recent, cached one), found by their key through a unique index.
const SCHEMA: &str = "
CREATE TABLE brain_calls (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    call_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    binding TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    created INTEGER NOT NULL,
    deadline INTEGER NOT NULL,
    finished INTEGER,
    is_error INTEGER,
    unknown_outcome INTEGER,
    result TEXT,
    result_bytes INTEGER,
    trace_id TEXT,
    UNIQUE (tenant, session, call_id)
);
CREATE TABLE brain_owners (
    owner TEXT PRIMARY KEY,
    expires INTEGER NOT NULL
) WITHOUT ROWID;
";

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
            ", c.result_bytes, c.trace_id FROM brain_calls c "
        )
    };
}

type Deliver = Box<dyn FnOnce(Option<&str>) + Send>;
/// A request: run against the open transaction (`None` when none could be begun).
type Run = Box<dyn FnOnce(Option<&Connection>) -> Deliver + Send>;

/// A request, and whether it may wait for the next one to share its commit (an outcome: only
/// the claim must be durable before the send).
struct Job {
    run: Run,
    defer: bool,
}

/// How long a batch of outcomes only waits for a claim to commit with.
const DEFER: std::time::Duration = std::time::Duration::from_millis(2);

/// The SQLite journal.
pub(crate) struct Sqlite {
    describe: String,
    jobs: mpsc::Sender<Job>,
    /// Lookups read here, inline: a WAL reader never waits for a writer, and one indexed read
    /// takes microseconds — less than a trip to the writer's thread.
    reader: std::sync::Mutex<Connection>,
    /// Claims are tried here first, inline, never waiting for the write lock
    /// (`busy_timeout` 0): taken, they go to the writer's thread. Not with
    /// [`Durability::Full`], whose every commit syncs the disk: there the writer's batches
    /// share one sync.
    inline: Option<std::sync::Mutex<Connection>>,
    /// Claims in progress: a claim made while others are goes to the writer, whose batch
    /// commits them together.
    claiming: std::sync::Arc<AtomicUsize>,
}

/// Counts a claim in progress until dropped.
struct Claiming(std::sync::Arc<AtomicUsize>);

impl Drop for Claiming {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Most requests one transaction carries.
const MAX_BATCH: usize = 256;

impl Sqlite {
    /// Opens (creating it, mode 0600, and its directory, mode 0700) the journal at `path`, and
    /// creates or migrates its schema.
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<Sqlite, StoreError> {
        let describe = format!("SQLite {}", path.display());
        let error = |message: String| StoreError {
            store: describe.clone(),
            message,
        };
        create_private(path).map_err(&error)?;
        let connection = Connection::open(path).map_err(|e| error(e.to_string()))?;
        configure(&connection, durability).map_err(|e| error(e.to_string()))?;
        migrate(&connection).map_err(&error)?;
        // What earlier processes left in the WAL (a harness process may exit before its
        // thread's next checkpoint).
        checkpoint(&connection);
        let reader = Connection::open(path).map_err(|e| error(e.to_string()))?;
        reader
            .busy_timeout(std::time::Duration::from_secs(5))
            .and_then(|()| reader.pragma_update(None, "cache_size", -CACHE_KIB))
            .and_then(|()| reader.pragma_update(None, "mmap_size", MMAP_BYTES))
            .and_then(|()| reader.pragma_update(None, "query_only", true))
            .map_err(|e| error(e.to_string()))?;
        let inline = match durability {
            Durability::Normal => {
                let inline = Connection::open(path).map_err(|e| error(e.to_string()))?;
                configure(&inline, durability)
                    .and_then(|()| inline.busy_timeout(std::time::Duration::ZERO))
                    .map_err(|e| error(e.to_string()))?;
                Some(std::sync::Mutex::new(inline))
            }
            Durability::Full => None,
        };
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("brain-journal".into())
            .spawn(move || work(connection, queue))
            .map_err(|e| error(format!("cannot start the journal's thread: {e}")))?;
        Ok(Sqlite {
            describe,
            jobs,
            reader: std::sync::Mutex::new(reader),
            inline,
            claiming: std::sync::Arc::default(),
        })
    }

    /// Runs `job` in the next transaction; resolves after its commit.
    fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        self.queue(job, false)
    }

    /// [`Sqlite::run`], for `defer`: a job that may wait up to [`DEFER`] to share the next
    /// claim's commit.
    fn queue<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        defer: bool,
    ) -> StoreFuture<'_, T> {
        let (reply, answer) = oneshot::channel::<Result<T, String>>();
        let run: Run = Box::new(move |connection| {
            let outcome = match connection {
                Some(connection) => job(connection).map_err(|e| e.to_string()),
                None => Err("no transaction".to_owned()),
            };
            Box::new(move |commit: Option<&str>| {
                let outcome = match commit {
                    Some(error) => outcome.and(Err(format!("the commit failed: {error}"))),
                    None => outcome,
                };
                let _ = reply.send(outcome);
            })
        });
        let sent = self.jobs.send(Job { run, defer });
        Box::pin(async move {
            let error = |message: String| StoreError {
                store: self.describe.clone(),
                message,
            };
            sent.map_err(|_| error("the journal's thread has stopped".into()))?;
            match answer.await {
                Ok(outcome) => outcome.map_err(error),
                Err(_) => Err(error("the journal's thread has stopped".into())),
            }
        })
    }
}

/// Creates `path` (mode 0600) and its directory (0700) when they are missing; refuses a file
/// others may read.
fn create_private(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mode = file.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} may be read by other users (mode {:o}); it holds call results: `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        ));
    }
    Ok(())
}

/// Each connection's page cache: the journal's hot rows are the newest, and the operating
/// system caches the file; SQLite's default (2 MB) would grow a host's memory for nothing.
const CACHE_KIB: i64 = 512;
/// How much of the file is read through a memory mapping.
const MMAP_BYTES: i64 = 256 << 20;

fn configure(connection: &Connection, durability: Durability) -> rusqlite::Result<()> {
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    connection.pragma_update(None, "cache_size", -CACHE_KIB)?;
    // Checkpoints (which sync the files) run on the journal's thread, off the calls' path.
    connection.pragma_update(None, "wal_autocheckpoint", 0)?;
    // Pages are read through a mapping of the file, not a system call each.
    connection.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    let synchronous = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    connection.pragma_update(None, "synchronous", synchronous)?;
    Ok(())
}

/// Creates the schema, or checks its version, inside one write transaction: several processes
/// starting at once create it once.
fn migrate(connection: &Connection) -> Result<(), String> {
    let step = || -> rusqlite::Result<Result<(), String>> {
        connection.execute_batch("BEGIN IMMEDIATE")?;
        let version: i64 = connection.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let checked = match version {
            0 => {
                connection.execute_batch(SCHEMA)?;
                connection.pragma_update(None, "user_version", SCHEMA_VERSION)?;
                Ok(())
            }
            SCHEMA_VERSION => Ok(()),
            newer => Err(format!(
                "the journal's schema is version {newer}, newer than this brain's \
                 ({SCHEMA_VERSION}): use a newer brain-harness, or another state file"
            )),
        };
        connection.execute_batch("COMMIT")?;
        Ok(checked)
    };
    match step() {
        Ok(checked) => checked,
        Err(error) => {
            let _ = connection.execute_batch("ROLLBACK");
            Err(format!("cannot create the journal's schema: {error}"))
        }
    }
}

/// The journal's thread: each turn, every waiting request in one transaction; outcomes alone
/// wait a little for a claim to share the commit with.
fn work(connection: Connection, queue: mpsc::Receiver<Job>) {
    let mut checkpointed = std::time::Instant::now();
    loop {
        if checkpointed.elapsed() >= CHECKPOINT_EVERY {
            checkpoint(&connection);
            checkpointed = std::time::Instant::now();
        }
        let first = match queue.recv_timeout(CHECKPOINT_EVERY) {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let deadline = std::time::Instant::now() + DEFER;
        while batch.len() < MAX_BATCH && batch.iter().all(|job| job.defer) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match queue.recv_timeout(left) {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let batch: Vec<Run> = batch.into_iter().map(|job| job.run).collect();
        let began = connection.execute_batch("BEGIN IMMEDIATE");
        if let Err(error) = began {
            let error = format!("cannot begin a transaction: {error}");
            for job in batch {
                job(None)(Some(&error));
            }
            continue;
        }
        let delivers: Vec<Deliver> = batch
            .into_iter()
            .map(|job| job(Some(&connection)))
            .collect();
        let commit = connection.execute_batch("COMMIT").err().map(|e| {
            let _ = connection.execute_batch("ROLLBACK");
            e.to_string()
        });
        for deliver in delivers {
            deliver(commit.as_deref());
        }
    }
}

/// The claim's statement: `sent` for a new key, or for one recorded `not_sent` with the same
/// digest, while the owner's lease is live.
fn insert_claim(c: &Connection, claim: &Claim) -> rusqlite::Result<bool> {
    let sql = concat!(
        "INSERT INTO brain_calls (tenant, session, call_id, digest, binding, state, owner, ",
        "created, deadline, trace_id) SELECT ?1, ?2, ?3, ?4, ?5, 'sent', ?6, ",
        now!(),
        ", ",
        now!(),
        " + ?7, ?8 WHERE EXISTS (SELECT 1 FROM brain_owners WHERE owner = ?6 AND expires > ",
        now!(),
        ") ON CONFLICT (tenant, session, call_id) DO UPDATE SET state = 'sent', ",
        "owner = excluded.owner, created = excluded.created, deadline = excluded.deadline, ",
        "trace_id = excluded.trace_id, finished = NULL, is_error = NULL, ",
        "unknown_outcome = NULL, result = NULL, result_bytes = NULL ",
        "WHERE brain_calls.state = 'not_sent' AND brain_calls.digest = excluded.digest"
    );
    let changed = c.prepare_cached(sql)?.execute(params![
        claim.key.tenant,
        claim.key.session,
        claim.key.call_id,
        claim.digest,
        claim.binding,
        claim.owner,
        claim.timeout_ms,
        claim.trace_id,
    ])?;
    Ok(changed > 0)
}

/// How often the journal's thread copies the WAL back into the database file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// A passive checkpoint: copies what no reader still needs, waits for no one.
fn checkpoint(connection: &Connection) {
    if let Err(error) = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::debug!(%error, "the journal's checkpoint failed");
    }
}

fn entry(row: &Row<'_>) -> rusqlite::Result<Entry> {
    let state: String = row.get(5)?;
    Ok(Entry {
        key: Key {
            tenant: row.get(0)?,
            session: row.get(1)?,
            call_id: row.get(2)?,
        },
        binding: row.get(3)?,
        digest: row.get(4)?,
        state: EntryState::parse(&state).unwrap_or(EntryState::Sent),
        owner: row.get(6)?,
        owner_live: row.get(7)?,
        now_ms: row.get(8)?,
        created_ms: row.get(9)?,
        deadline_ms: row.get(10)?,
        finished_ms: row.get(11)?,
        is_error: row.get(12)?,
        unknown_outcome: row.get(13)?,
        result: row.get(14)?,
        result_bytes: row.get(15)?,
        trace_id: row.get(16)?,
    })
}

impl JournalStore for Sqlite {
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
        // Inline when the file's write lock is free at once (one short transaction on this
        // thread, no trip to the writer's); else, and under load, through the writer, whose
        // batches share one commit.
        let alone = self.claiming.fetch_add(1, Ordering::AcqRel) == 0;
        let claiming = Claiming(std::sync::Arc::clone(&self.claiming));
        if alone && let Some(Ok(inline)) = self.inline.as_ref().map(std::sync::Mutex::try_lock) {
            // One statement: its own transaction, committed when it returns.
            let attempt = insert_claim(&inline, claim);
            // Busy (another connection writes), or failed: nothing was committed.
            if let Ok(claimed) = attempt {
                return Box::pin(std::future::ready(Ok(claimed)));
            }
        }
        let claim = claim.clone();
        let queued = self.run(move |c| insert_claim(c, &claim));
        Box::pin(async move {
            let _claiming = claiming;
            queued.await
        })
    }

    fn lookup<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Option<Entry>> {
        let sql = concat!(
            columns!("c.result"),
            "WHERE c.tenant = ?1 AND c.session = ?2 AND c.call_id = ?3"
        );
        let read = {
            let reader = self.reader.lock().unwrap_or_else(|p| p.into_inner());
            reader.prepare_cached(sql).and_then(|mut statement| {
                statement
                    .query_row(params![key.tenant, key.session, key.call_id], entry)
                    .optional()
            })
        };
        let read = read.map_err(|e| StoreError {
            store: self.describe.clone(),
            message: e.to_string(),
        });
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
        self.queue(
            move |c| {
            let sql = concat!(
                "UPDATE brain_calls AS c SET state = ?4, is_error = ?5, unknown_outcome = ?6, ",
                "result = ?7, result_bytes = ?8, finished = ",
                now!(),
                " WHERE c.tenant = ?1 AND c.session = ?2 AND c.call_id = ?3 AND c.state = 'sent' ",
                "AND c.owner = ?9 AND (?10 = 0 OR NOT ",
                "EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = c.owner AND o.expires > ",
                now!(),
                "))"
            );
            let changed = c.prepare_cached(sql)?.execute(params![
                key.tenant,
                key.session,
                key.call_id,
                record.state.as_str(),
                record.is_error,
                record.unknown_outcome,
                record.result,
                record.result_bytes,
                owner,
                only_if_expired,
            ])?;
            Ok(changed > 0)
            },
            true,
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

/// Where `brain-harness` keeps its state by default: `$XDG_STATE_HOME/brain/state.db`, else
/// `~/.local/state/brain/state.db`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".local/state"))
        })?;
    Some(base.join("brain/state.db"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_state_file_is_private_and_a_readable_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("brain-sqlite-{}", std::process::id()));
        let path = dir.join("state/brain/state.db");
        super::create_private(&path).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = super::create_private(&path).unwrap_err();
        assert!(refused.contains("chmod 600"), "{refused}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
