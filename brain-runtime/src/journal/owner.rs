//! A journal's handle (where it is kept, for how long) and, once a runtime runs on it, this
//! process's owner: its id and epoch, and the heartbeat that renews its lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::sqlite::Durability;
use super::{memory, postgres, sqlite};
use crate::auth::{MemoryTokenStore, TokenStore};
use crate::store::{Entry, Filter, JournalStore, StoreError};

/// How long an owner's lease lasts without a heartbeat: a retry learns that a crashed
/// process's call has an unknown outcome at most this long after the crash.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5);
/// How long finished entries are kept.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The largest result kept for replay (its JSON); a larger one keeps only the outcome.
pub const DEFAULT_RESULT_CAP: usize = 1 << 20;
/// How often the journal prunes what its retention let go.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// A call journal: where it is kept and how long. Give it to
/// [`RuntimeBuilder::journal`](crate::RuntimeBuilder::journal).
#[derive(Clone)]
pub struct Journal {
    store: Arc<dyn JournalStore>,
    /// The OAuth grants, in the same store.
    grants: Arc<dyn TokenStore>,
    lease: Duration,
    retention: Duration,
    pub(super) result_cap: usize,
    /// The audit chain's settings.
    pub(crate) audit: crate::audit::AuditSettings,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("store", &self.store.describe())
            .field("lease", &self.lease)
            .field("retention", &self.retention)
            .finish()
    }
}

impl Journal {
    /// A journal over `store`, with OAuth grants in this process's memory (give a shared
    /// store with [`Journal::with_grants`]).
    pub fn new(store: Arc<dyn JournalStore>) -> Journal {
        Journal {
            store,
            grants: Arc::new(MemoryTokenStore::default()),
            lease: DEFAULT_LEASE,
            retention: DEFAULT_RETENTION,
            result_cap: DEFAULT_RESULT_CAP,
            audit: crate::audit::AuditSettings::default(),
        }
    }

    /// How the store keeps its audit chain (on by default, where the store keeps one: SQLite
    /// and PostgreSQL), and, with a key, how often a runtime on it signs checkpoints.
    pub fn audit(mut self, settings: crate::audit::AuditSettings) -> Journal {
        self.store.set_audit(settings.enabled);
        self.audit = settings;
        self
    }

    /// [`audit`](Journal::audit) with a host config's `audit` section: on or off, retention and
    /// checkpoint intervals as it says, its public keys trusted besides those already given;
    /// the signing key given before stays. `RuntimeBuilder::build` applies its config's.
    pub fn audit_config(
        self,
        config: &brain_config::audit::AuditConfig,
    ) -> Result<Journal, crate::audit::KeyError> {
        let mut settings = crate::audit::AuditSettings::from_config(Some(config), None)?;
        settings.key = self.audit.key.clone();
        settings.keys.extend(&self.audit.keys);
        Ok(self.audit(settings))
    }

    /// The audit chain's settings.
    pub fn audit_settings(&self) -> &crate::audit::AuditSettings {
        &self.audit
    }

    /// A journal in this process's memory (at most 100,000 entries; finished ones make room):
    /// retries within the process, nothing across processes.
    pub fn memory() -> Journal {
        let mut journal = Journal::new(Arc::new(memory::Memory::new(memory::MAX_ENTRIES)));
        // Nothing to prove in one process's memory: it keeps no chain.
        journal.audit.enabled = false;
        journal
    }

    /// The SQLite journal at `path` (created mode 0600, WAL), shared by the processes of one
    /// host.
    pub fn sqlite(path: &std::path::Path, durability: Durability) -> Result<Journal, StoreError> {
        let store = Arc::new(sqlite::Sqlite::open(path, durability)?);
        Ok(Journal::new(store.clone()).with_grants(store))
    }

    /// The PostgreSQL journal at `url` (`postgres://user@host:port/db`), shared by several
    /// hosts; its schema is created or migrated here. Must run inside a tokio runtime, which
    /// then drives its connections.
    pub async fn postgres(url: &str) -> Result<Journal, StoreError> {
        let store = Arc::new(postgres::Postgres::connect(url).await?);
        Ok(Journal::new(store.clone()).with_grants(store))
    }

    /// The journal a state URL names: `sqlite:PATH` (`?synchronous=full` for
    /// [`Durability::Full`]), `postgres://…` (or `postgresql://…`), or `memory:`.
    pub async fn open(url: &str) -> Result<Journal, StoreError> {
        let error = |message: String| StoreError::InvalidUrl { message };
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(error(
                    "`sqlite:` needs a path, e.g. sqlite:/var/lib/brain/state.db".into(),
                ));
            }
            let durability = match query {
                "" | "synchronous=normal" => Durability::Normal,
                "synchronous=full" => Durability::Full,
                other => {
                    return Err(error(format!(
                        "unknown SQLite option {other:?}: the one option is synchronous=full"
                    )));
                }
            };
            return Journal::sqlite(std::path::Path::new(path), durability);
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Journal::postgres(url).await;
        }
        if url == "memory:" {
            return Ok(Journal::memory());
        }
        Err(error(
            "a state URL is `sqlite:PATH`, `postgres://user@host:port/database` or `memory:`"
                .into(),
        ))
    }

    /// Keeps finished entries this long (default 24 hours): a retry after that is a new call.
    pub fn retention(mut self, retention: Duration) -> Journal {
        self.retention = retention;
        self
    }

    /// How long an owner's lease lasts without a heartbeat (default 5 s; at least 1 s).
    pub fn lease(mut self, lease: Duration) -> Journal {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// The largest result (its JSON bytes) kept for replay (default 1 MiB).
    pub fn result_cap(mut self, bytes: usize) -> Journal {
        self.result_cap = bytes;
        self
    }

    /// Keeps OAuth grants in `grants` (a host's own store, beside its own journal store).
    pub fn with_grants(mut self, grants: Arc<dyn TokenStore>) -> Journal {
        self.grants = grants;
        self
    }

    /// The OAuth grants' store: the same SQLite file or PostgreSQL database as the journal's
    /// calls (this process's memory for [`Journal::memory`]).
    pub fn grants(&self) -> Arc<dyn TokenStore> {
        Arc::clone(&self.grants)
    }

    /// The store itself (to measure it, or to read it the way the journal does).
    pub fn store(&self) -> &dyn JournalStore {
        &*self.store
    }

    /// The store's kind and place.
    pub fn describe(&self) -> &str {
        self.store.describe()
    }

    /// The entries `filter` selects, newest first (the audit).
    pub async fn list(&self, filter: &Filter) -> Result<Vec<Entry>, StoreError> {
        self.store.list(filter).await
    }

    /// The drift the runtimes on this store recorded, newest first (at most `limit`; 0: all):
    /// each process's first sighting of a server listing a bound tool otherwise than its pin
    /// (`brain-harness drift`).
    pub async fn drifts(&self, limit: usize) -> Result<Vec<crate::store::Drift>, StoreError> {
        self.store.drifts(limit).await
    }

    /// The buckets `names` as the store has them now (`brain-harness limits`).
    pub async fn usage(&self, names: &[String]) -> Result<Vec<crate::limits::Usage>, StoreError> {
        self.store.usage(names).await
    }

    /// Whether the store answers a read now: on a reader (SQLite) or a pool connection
    /// (PostgreSQL), never behind the journal's writer queue (for a readiness probe).
    pub async fn probe(&self) -> Result<(), StoreError> {
        self.store.usage(&[]).await.map(drop)
    }

    /// Deletes what ended before the retention, and audit records older than the audit's
    /// own retention; returns how many journal entries went. When audit records went and the
    /// journal has a key, a checkpoint is signed at once, so that the `pruned_through` records
    /// the pruning left are signed too.
    pub async fn prune(&self) -> Result<u64, StoreError> {
        let pruned = self.store.prune(millis(self.retention)).await?;
        if self.store.prune_audit(millis(self.audit.retention)).await? > 0 {
            crate::audit::checkpoint(&*self.store, &self.audit).await;
        }
        Ok(pruned)
    }

    /// The journal a runtime runs on: this process's owner and its heartbeat.
    pub(crate) fn start(self) -> Arc<Journaling> {
        let base = crate::state::process_name();
        Arc::new(Journaling {
            owner: Mutex::new(Arc::from(format!("{base}#1"))),
            base,
            epoch: Mutex::new(1),
            started: tokio::sync::OnceCell::new(),
            journal: self,
        })
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A runtime's journal: its owner (this process, at an epoch) and the owner's heartbeat.
pub(crate) struct Journaling {
    pub(super) journal: Journal,
    /// `host:pid:random`.
    base: String,
    epoch: Mutex<u64>,
    owner: Mutex<Arc<str>>,
    /// Set once the owner is registered and its heartbeat runs.
    started: tokio::sync::OnceCell<()>,
}

impl Journaling {
    pub(crate) fn store(&self) -> &dyn JournalStore {
        &*self.journal.store
    }

    /// Records each drift this process sees in the journal's store, off the call path (the
    /// call path never reads it back), tracked with the cleanups: `wait_for_cleanup` waits for
    /// the write.
    pub(crate) fn drift_sink(
        &self,
        cleanups: &tokio_util::task::TaskTracker,
    ) -> Arc<dyn Fn(crate::store::Drift) + Send + Sync> {
        let cleanups = cleanups.clone();
        let store = self.shared_store();
        let process = self.process().to_owned();
        Arc::new(move |mut drift: crate::store::Drift| {
            drift.process.clone_from(&process);
            let store = Arc::clone(&store);
            let recorded = async move {
                if let Err(error) = store.record_drift(&drift).await {
                    tracing::warn!(
                        binding = %drift.binding,
                        error = %error,
                        "cannot record the tool's drift in the journal's store"
                    );
                }
            };
            match tokio::runtime::Handle::try_current() {
                Ok(_) => drop(cleanups.spawn(recorded)),
                Err(_) => tracing::warn!("no tokio runtime to record the tool's drift on"),
            }
        })
    }

    /// A clean shutdown's checkpoint, when the journal has a key and this process used it.
    pub(crate) async fn checkpoint(&self) {
        if self.started.initialized() {
            crate::audit::checkpoint(self.store(), &self.journal.audit).await;
        }
    }

    /// How long the journal keeps what ended, in milliseconds.
    pub(crate) fn retention_ms(&self) -> i64 {
        millis(self.journal.retention)
    }

    /// This process's name (`host:pid:random`), its owners' base.
    pub(crate) fn process(&self) -> &str {
        &self.base
    }

    /// The store, for a write that outlives the caller ([`CallStore::record`]).
    pub(crate) fn shared_store(&self) -> Arc<dyn JournalStore> {
        Arc::clone(&self.journal.store)
    }

    fn lease_ms(&self) -> i64 {
        millis(self.journal.lease)
    }

    fn current(&self) -> Arc<str> {
        Arc::clone(&self.owner.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// This process's owner, registered (and its heartbeat started) on first use.
    pub(crate) async fn owner(self: &Arc<Self>) -> Result<Arc<str>, StoreError> {
        self.started
            .get_or_try_init(|| async {
                self.store()
                    .renew(&self.current(), self.lease_ms(), true)
                    .await?;
                tokio::spawn(heartbeat(Arc::downgrade(self)));
                if self.journal.audit.enabled && self.journal.audit.key.is_some() {
                    let store = Arc::downgrade(&self.journal.store);
                    tokio::spawn(crate::audit::signer(store, self.journal.audit.clone()));
                }
                Ok::<(), StoreError>(())
            })
            .await?;
        Ok(self.current())
    }

    /// After `expired`'s lease was found expired (the process stalled): a new epoch, so that
    /// what the old one claimed stays judged as a dead owner's.
    pub(super) async fn revive(&self, expired: &str) -> Result<(), StoreError> {
        let next = {
            let mut owner = self.owner.lock().unwrap_or_else(|p| p.into_inner());
            if &**owner == expired {
                let mut epoch = self.epoch.lock().unwrap_or_else(|p| p.into_inner());
                *epoch += 1;
                *owner = Arc::from(format!("{}#{epoch}", self.base));
                tracing::warn!(
                    owner = %expired,
                    "the journal's lease of this process had expired; calls it had sent \
                     report an unknown outcome on retry"
                );
            }
            Arc::clone(&owner)
        };
        self.store().renew(&next, self.lease_ms(), true).await?;
        Ok(())
    }
}

/// Renews the owner's lease five times per lease, and prunes every ten minutes, while the
/// runtime lives.
async fn heartbeat(journaling: std::sync::Weak<Journaling>) {
    let Some(period) = journaling.upgrade().map(|j| j.journal.lease / 5) else {
        return;
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut last_prune: Option<tokio::time::Instant> = None;
    loop {
        tick.tick().await;
        let Some(journaling) = journaling.upgrade() else {
            return;
        };
        let owner = journaling.current();
        match journaling
            .store()
            .renew(&owner, journaling.lease_ms(), false)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                if let Err(error) = journaling.revive(&owner).await {
                    tracing::warn!(%error, "cannot renew the journal's lease");
                }
            }
            Err(error) => tracing::warn!(%error, "cannot renew the journal's lease"),
        }
        if last_prune.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            last_prune = Some(tokio::time::Instant::now());
            match journaling.journal.prune().await {
                Ok(0) => {}
                Ok(pruned) => tracing::debug!(pruned, "pruned the call journal"),
                Err(error) => tracing::warn!(%error, "cannot prune the call journal"),
            }
        }
    }
}
