//! Where OAuth grants live so that every process and replica shares them: one row per grant
//! (a binding's server and the `auth` fields that identify its client and flow, × tenant for
//! user-delegated tokens) with a **generation** bumped by every write, and a **refresh claim**
//! with a lease. A process whose token expired claims the refresh (a conditional update
//! committed before the token request), spends the refresh token once, and writes the new
//! tokens under the claimed generation only; the others wait for the generation to change and
//! read them. The store never sees a token in the clear when the state is encrypted: it keeps
//! [`GrantWrite::sealed`] as it is given.
//!
//! The journal's stores implement [`TokenStore`] in the same database (SQLite, PostgreSQL);
//! [`MemoryTokenStore`] is one process's. Times of leases are the store's clock (milliseconds);
//! a token's expiry is wall-clock seconds, as its issuer's `expires_in` gave it.

use std::collections::HashMap;
use std::future::ready;
use std::sync::Mutex;
use std::time::Instant;

use crate::state::StoreFuture;

/// Which grant: `grant` identifies the server and the client and flow (a digest the OAuth
/// client computes; not the scopes, so that a step-up does not fork the grant), `tenant` the
/// user (empty for grants without a user: client credentials, JWT bearer, enterprise-managed).
/// The tokens issued on behalf of one user (`token_exchange`) are a kind of their own: their
/// `grant` starts with [`GrantKey::ISSUED`], and the journal's pruning deletes them once they
/// have been expired for its retention (a user's next call exchanges again).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GrantKey {
    /// The grant's identity.
    pub grant: String,
    /// The tenant (empty when the grant has no user).
    pub tenant: String,
}

impl GrantKey {
    /// The prefix of the `grant` of tokens issued on behalf of one user.
    pub const ISSUED: &'static str = "issued:";
}

/// Where a grant stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantState {
    /// It holds tokens (or is about to: a first fetch is claimed).
    Valid,
    /// The authorization server refused its refresh token: a user must log in again. Nobody
    /// refreshes it until then.
    NeedsLogin,
    /// Logged out: a tombstone, so that a refresher finishing later cannot bring it back.
    LoggedOut,
}

impl GrantState {
    /// The state's name, as stores keep it and `brain-harness tokens` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantState::Valid => "valid",
            GrantState::NeedsLogin => "needs_login",
            GrantState::LoggedOut => "logged_out",
        }
    }

    /// The state named `name`.
    pub fn parse(name: &str) -> Option<GrantState> {
        Some(match name {
            "valid" => GrantState::Valid,
            "needs_login" => GrantState::NeedsLogin,
            "logged_out" => GrantState::LoggedOut,
            _ => return None,
        })
    }
}

/// What a write puts in a grant's row.
#[derive(Clone, PartialEq, Eq)]
pub struct GrantWrite {
    /// Where the grant stands after the write.
    pub state: GrantState,
    /// The binding it was obtained for (for the listing).
    pub binding: String,
    /// The binding's server (its `url`).
    pub resource: String,
    /// The scopes granted (requested).
    pub scopes: Vec<String>,
    /// When the access token expires (seconds since the Unix epoch), when known.
    pub expires_at: Option<i64>,
    /// Whether a refresh returned a new refresh token (`None`: not known yet, treated as
    /// rotating).
    pub rotates: Option<bool>,
    /// The tokens, as the OAuth client seals them (encrypted when the state has a key); `None`
    /// for a grant that holds none (needs login, logged out).
    pub sealed: Option<String>,
}

impl std::fmt::Debug for GrantWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantWrite")
            .field("state", &self.state)
            .field("binding", &self.binding)
            .field("resource", &self.resource)
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .field("rotates", &self.rotates)
            .finish_non_exhaustive()
    }
}

/// A grant's row, as a store reports it (its Debug shows no token: [`GrantWrite`]'s leaves
/// `sealed` out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The grant.
    pub key: GrantKey,
    /// Bumped by every write; 0 for a row a first claim created.
    pub generation: i64,
    /// What was last written (`sealed` is `None` in a listing).
    pub written: GrantWrite,
    /// The owner of a live refresh claim, if any.
    pub refresher: Option<String>,
    /// How long that claim has left, in milliseconds of the store's clock.
    pub claim_left_ms: Option<i64>,
}

/// The condition of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Whatever is there (a login, a logout): always written.
    Any,
    /// Only while the row is at this generation (a missing row is generation 0).
    Generation(i64),
    /// Only while the row is at this generation *and* its refresh claim is `owner`'s (new
    /// tokens from a claimed refresh or fetch).
    Claimed {
        /// The generation the claim was made at.
        generation: i64,
        /// The claim's owner.
        owner: String,
    },
}

/// Keeps OAuth grants for every process that shares the store. Every method is atomic on its
/// own. A host's own store implements the same meaning (the tests of `brain-tests` run against
/// each implementation).
pub trait TokenStore: Send + Sync + 'static {
    /// The store's kind and place, for messages (never a password).
    fn describe(&self) -> &str;

    /// Whether other hosts read this store (a database): tokens are then stored only sealed
    /// under `BRAIN_STATE_KEY`, and a runtime without the key refuses to start. A store that
    /// only this host's user reads (memory; a SQLite file, mode 0600) says `false`.
    fn shared(&self) -> bool {
        true
    }

    /// The grant's row, if any (with its tokens).
    fn load<'a>(&'a self, key: &'a GrantKey) -> StoreFuture<'a, Option<Grant>>;

    /// Writes `write` when `expected` holds, bumping the generation and dropping any refresh
    /// claim; returns the new generation, or `None` when the condition did not hold.
    fn write<'a>(
        &'a self,
        key: &'a GrantKey,
        expected: &'a Expected,
        write: &'a GrantWrite,
    ) -> StoreFuture<'a, Option<i64>>;

    /// Claims the grant's refresh (or first fetch) for `owner` for `lease_ms`: only while the
    /// row is at `generation` (a missing row, 0, is created empty) and no other owner's claim
    /// is live. Returns whether `owner` holds the claim now. Committed before it returns.
    fn claim<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
        lease_ms: i64,
    ) -> StoreFuture<'a, bool>;

    /// Gives up `owner`'s claim at `generation` (its token request failed without an answer
    /// that changes the grant), so that the next process need not wait for the lease.
    fn release<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
    ) -> StoreFuture<'a, ()>;

    /// Every grant, without its tokens, ordered by key.
    fn list(&self) -> StoreFuture<'_, Vec<Grant>>;
}

/// Grants in this process's memory: shared by its runtimes, gone with it.
pub struct MemoryTokenStore {
    clock: Instant,
    rows: Mutex<HashMap<GrantKey, Row>>,
}

impl Default for MemoryTokenStore {
    fn default() -> Self {
        MemoryTokenStore {
            clock: Instant::now(),
            rows: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for MemoryTokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTokenStore").finish_non_exhaustive()
    }
}

struct Row {
    generation: i64,
    written: GrantWrite,
    claim: Option<(String, i64)>,
}

impl MemoryTokenStore {
    fn now(&self) -> i64 {
        i64::try_from(self.clock.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<GrantKey, Row>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn grant(key: &GrantKey, row: &Row, now: i64, sealed: bool) -> Grant {
        let live = row.claim.as_ref().filter(|(_, until)| *until > now);
        let mut written = row.written.clone();
        if !sealed {
            written.sealed = None;
        }
        Grant {
            key: key.clone(),
            generation: row.generation,
            written,
            refresher: live.map(|(owner, _)| owner.clone()),
            claim_left_ms: live.map(|(_, until)| until - now),
        }
    }
}

/// The empty row a first claim creates.
fn empty_write() -> GrantWrite {
    GrantWrite {
        state: GrantState::Valid,
        binding: String::new(),
        resource: String::new(),
        scopes: Vec::new(),
        expires_at: None,
        rotates: None,
        sealed: None,
    }
}

impl TokenStore for MemoryTokenStore {
    fn describe(&self) -> &str {
        "memory"
    }

    fn shared(&self) -> bool {
        false
    }

    fn load<'a>(&'a self, key: &'a GrantKey) -> StoreFuture<'a, Option<Grant>> {
        let now = self.now();
        let grant = self
            .rows()
            .get(key)
            .map(|row| Self::grant(key, row, now, true));
        Box::pin(ready(Ok(grant)))
    }

    fn write<'a>(
        &'a self,
        key: &'a GrantKey,
        expected: &'a Expected,
        write: &'a GrantWrite,
    ) -> StoreFuture<'a, Option<i64>> {
        let now = self.now();
        let mut rows = self.rows();
        let current = rows.get(key);
        let generation = current.map_or(0, |row| row.generation);
        let holds = match expected {
            Expected::Any => true,
            Expected::Generation(at) => *at == generation,
            Expected::Claimed {
                generation: at,
                owner,
            } => {
                *at == generation
                    && current
                        .and_then(|row| row.claim.as_ref())
                        .is_some_and(|(holder, until)| holder == owner && *until > now)
            }
        };
        let written = holds.then(|| {
            rows.insert(
                key.clone(),
                Row {
                    generation: generation + 1,
                    written: write.clone(),
                    claim: None,
                },
            );
            generation + 1
        });
        Box::pin(ready(Ok(written)))
    }

    fn claim<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
        lease_ms: i64,
    ) -> StoreFuture<'a, bool> {
        let now = self.now();
        let mut rows = self.rows();
        if generation == 0 && !rows.contains_key(key) {
            rows.insert(
                key.clone(),
                Row {
                    generation: 0,
                    written: empty_write(),
                    claim: None,
                },
            );
        }
        let claimed = match rows.get_mut(key) {
            Some(row) if row.generation == generation => {
                let free = row
                    .claim
                    .as_ref()
                    .is_none_or(|(holder, until)| holder == owner || *until <= now);
                if free {
                    row.claim = Some((owner.to_owned(), now + lease_ms));
                }
                free
            }
            _ => false,
        };
        Box::pin(ready(Ok(claimed)))
    }

    fn release<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
    ) -> StoreFuture<'a, ()> {
        if let Some(row) = self.rows().get_mut(key)
            && row.generation == generation
            && row
                .claim
                .as_ref()
                .is_some_and(|(holder, _)| holder == owner)
        {
            row.claim = None;
        }
        Box::pin(ready(Ok(())))
    }

    fn list(&self) -> StoreFuture<'_, Vec<Grant>> {
        let now = self.now();
        let rows = self.rows();
        let mut grants: Vec<Grant> = rows
            .iter()
            .map(|(key, row)| Self::grant(key, row, now, false))
            .collect();
        grants.sort_by(|a, b| a.key.cmp(&b.key));
        Box::pin(ready(Ok(grants)))
    }
}
