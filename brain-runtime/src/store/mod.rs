//! The floor every durable feature stands on: the store's capabilities — calls and leases
//! ([`CallStore`]), limits, drift, approvals, the audit chain — each a small trait, and the
//! values they move. Each backend (memory, SQLite, PostgreSQL) implements every capability
//! with the same meaning ([`JournalStore`] is all five); the journal's rules (`ticket.rs`)
//! never look behind them. The rooms (`approvals/`, `audit/`) keep their own SQL; the
//! journal's claim calls their steps in its transaction.
//!
//! Times are milliseconds on the *store's* clock (SQLite's `unixepoch`, PostgreSQL's `now()`,
//! the memory journal's monotonic clock): every comparison of a lease or a deadline happens
//! inside the store, never between two hosts' clocks.

use std::sync::Arc;

pub(crate) mod clock;

use crate::limits::{Charge, Exceeded, Usage, Verdict};

/// A journaled call's key: a call id is unique within its tenant's session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The tenant.
    pub tenant: String,
    /// The agent session.
    pub session: String,
    /// The call id.
    pub call_id: String,
}

/// A claim: the call is about to be sent by `owner`.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The call.
    pub key: Key,
    /// What the call asks (binding, server, tool, pin, canonical arguments), hashed.
    pub digest: String,
    /// The binding's name, for the audit.
    pub binding: String,
    /// The owner sending it (a process's id and epoch, see `Journal`).
    pub owner: String,
    /// The call's timeout: its deadline is the store's now plus this.
    pub timeout_ms: i64,
    /// The call's trace id, when it has one.
    pub trace_id: Option<String>,
    /// For a binding on behalf of users: whom the call is sent for (the audit's `subject` and
    /// `actor`).
    pub upstream: Option<UpstreamIdentity>,
}

/// Whom a call on behalf of a user goes upstream as: what brain asks the authorization server
/// for, not what it issued (an issued token may be opaque, and is never stored here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamIdentity {
    /// The user: the verified `iss|sub`, or the digest of a token brain has not verified
    /// (`SubjectToken::subject`).
    pub subject: String,
    /// The client that exchanges the user's token and acts for them (the binding's
    /// `auth.client_id`).
    pub actor: String,
}

impl UpstreamIdentity {
    /// Whom a call of `binding` goes upstream as, when the binding acts on behalf of users and
    /// the call carries the user's token: the user's subject and the client that acts for them.
    pub(crate) fn of(
        binding: &brain_config::ToolBinding,
        subject: Option<&crate::subject::SubjectToken>,
    ) -> Option<UpstreamIdentity> {
        let auth = binding
            .auth
            .as_ref()
            .filter(|auth| auth.on_behalf_of_users())?;
        Some(UpstreamIdentity {
            subject: subject?.subject().to_owned(),
            actor: auth.client_id.clone().unwrap_or_default(),
        })
    }
}

/// Where a journaled call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Claimed and sent (or about to be): the tool may be running. Never sent again.
    Sent,
    /// The call delivered its `tool.result` (a tool error included).
    Completed,
    /// The call failed after it was sent (its `unknown_outcome` says whether it may have run).
    Failed,
    /// The call failed before anything could have run: a retry may claim it again.
    NotSent,
}

impl EntryState {
    /// The state's name, as the store keeps it and the audit prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Sent => "sent",
            EntryState::Completed => "completed",
            EntryState::Failed => "failed",
            EntryState::NotSent => "not_sent",
        }
    }

    /// The state named `name`.
    pub fn parse(name: &str) -> Option<EntryState> {
        Some(match name {
            "sent" => EntryState::Sent,
            "completed" => EntryState::Completed,
            "failed" => EntryState::Failed,
            "not_sent" => EntryState::NotSent,
            _ => return None,
        })
    }
}

/// How a sent call ended, as it is recorded.
#[derive(Debug, Clone)]
pub struct Record {
    /// `Completed`, `Failed` or `NotSent`.
    pub state: EntryState,
    /// The result's `is_error`.
    pub is_error: bool,
    /// The result's `unknown_outcome`.
    pub unknown_outcome: bool,
    /// The `tool.result` as JSON, unless it was over the journal's cap.
    pub result: Option<String>,
    /// The size of that JSON.
    pub result_bytes: i64,
    /// The SHA-256 of that JSON (`sha256:` and hex), kept or not: what the audit chain holds.
    pub result_digest: String,
}

/// A journaled call, as the store reports it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The call.
    pub key: Key,
    /// The binding it called.
    pub binding: String,
    /// What it asked, hashed.
    pub digest: String,
    /// Where it stands.
    pub state: EntryState,
    /// The owner that claimed it.
    pub owner: String,
    /// Whether that owner's lease is live (on the store's clock, when the entry was read).
    pub owner_live: bool,
    /// The store's clock when the entry was read.
    pub now_ms: i64,
    /// When the call was claimed.
    pub created_ms: i64,
    /// When the call's timeout passes.
    pub deadline_ms: i64,
    /// When the outcome was recorded.
    pub finished_ms: Option<i64>,
    /// The result's `is_error`, once recorded.
    pub is_error: Option<bool>,
    /// The result's `unknown_outcome`, once recorded.
    pub unknown_outcome: Option<bool>,
    /// The recorded `tool.result` as JSON (read only when asked for, see [`Filter::results`]).
    pub result: Option<String>,
    /// The size of the recorded result.
    pub result_bytes: Option<i64>,
    /// The call's trace id.
    pub trace_id: Option<String>,
    /// The MCP task the server created for the call, while it runs: what resuming it needs,
    /// as JSON (the task id and, at 2025-11-25, the session and revision it lives in).
    pub task: Option<String>,
}

/// Which entries [`CallStore::list`] returns, newest first.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this tenant's.
    pub tenant: Option<String>,
    /// Only this session's.
    pub session: Option<String>,
    /// Only this call id.
    pub call_id: Option<String>,
    /// Only entries claimed within this many milliseconds.
    pub within_ms: Option<i64>,
    /// Read the recorded results too.
    pub results: bool,
    /// At most this many (0: no limit).
    pub limit: usize,
}

/// A drift one process saw: a server listing a bound tool otherwise than its pin (recorded
/// once per process and listing; the call path never reads it, see `pins.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The binding.
    pub binding: String,
    /// The pin it was checked against (`sha256:` and hex; empty for an unpinned binding).
    pub pinned: String,
    /// The digest of what the server listed under the tool's name (`sha256:` and hex, over
    /// the RFC 8785 canonical JSON of the entries listed under that name).
    pub listed: String,
    /// The fields that changed, as the server spells them (`(absent)`: not listed;
    /// `(listed twice)`: a duplicate name).
    pub fields: Vec<String>,
    /// Whether the binding's calls are refused under that listing (else only warned about).
    pub refused: bool,
    /// The tenants the binding lists: the audit chains the drift is recorded in (not kept
    /// in the drift table; read back empty).
    pub tenants: Vec<String>,
    /// The process that saw it (`host:pid:random`).
    pub process: String,
    /// When that process first saw it, on the store's clock (milliseconds; ignored when
    /// recorded: the store sets it).
    pub first_seen_ms: i64,
}

pub use crate::state::{StoreError, StoreFuture};

/// What a claim that also charges the limits ([`LimitStore::claim_charged`]) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The call is claimed (as [`CallStore::claim`] returning `true`) and charged.
    Claimed,
    /// The key was there already (or the owner's lease had expired): nothing was claimed or
    /// charged — the journal's rules answer the call.
    Taken,
    /// The key was new but a limit refused the call: nothing was claimed or charged.
    Refused(Vec<Exceeded>),
    /// The key was new but the approval named was not approved, unused and unexpired for this
    /// very call ([`ApprovalStore::claim_approved`]): nothing was claimed, charged or used.
    Unapproved,
}

/// Told the answer of a write made off the caller's path ([`CallStore::record`]).
pub type Done = Box<dyn FnOnce(Result<bool, StoreError>) + Send + Sync>;

/// What a journal backend does. Every statement is atomic on its own; a claim is durable when
/// its future resolves `Ok`. A host may implement it over its own database, keeping the same
/// meaning (the tests of `brain-tests` run against each implementation).
///
/// It is the floor's capabilities together, one small trait each: [`CallStore`], [`LimitStore`],
/// [`DriftStore`], [`ApprovalStore`], [`AuditStore`]; a store that implements them all is one.
pub trait JournalStore: CallStore + LimitStore + DriftStore + ApprovalStore + AuditStore {}

impl<T: CallStore + LimitStore + DriftStore + ApprovalStore + AuditStore> JournalStore for T {}

/// What a journal backend keeps of calls and their owners' leases.
pub trait CallStore: Send + Sync + 'static {
    /// The store's kind and place, for messages (never a password).
    fn describe(&self) -> &str;

    /// Extends `owner`'s lease to the store's now plus `lease_ms`. With `create`, registers the
    /// owner (or revives it); without, extends only a lease that is still live. Returns whether
    /// the owner's lease is live now.
    fn renew<'a>(&'a self, owner: &'a str, lease_ms: i64, create: bool) -> StoreFuture<'a, bool>;

    /// Records `claim` as [`EntryState::Sent`] when the key is new, or when it is
    /// [`EntryState::NotSent`] with the same digest — only while the claim's owner has a live
    /// lease. Returns whether it did; committed durably before returning `true`.
    fn claim<'a>(&'a self, claim: &'a Claim) -> StoreFuture<'a, bool>;

    /// The entry of `key`, without its result unless it is finished.
    fn lookup<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Option<Entry>>;

    /// Records how the call ended, when it is still [`EntryState::Sent`] by `owner` (and, with
    /// `only_if_expired`, only when that owner's lease has expired). Returns whether it did.
    fn settle<'a>(
        &'a self,
        key: &'a Key,
        owner: &'a str,
        record: &'a Record,
        only_if_expired: bool,
    ) -> StoreFuture<'a, bool>;

    /// Records how a call this process sent ended, as [`settle`](Self::settle) does (without
    /// `only_if_expired`), off the caller's path: nothing waits for it but `done`, told the
    /// answer once the write is committed or failed. The default runs `settle` on a task of
    /// the current tokio runtime; a backend that batches its writes hands this one to its
    /// next batch instead (no task per call).
    fn record(self: Arc<Self>, key: Key, owner: String, record: Record, done: Done) {
        tokio::spawn(async move { done(self.settle(&key, &owner, &record, false).await) });
    }

    /// Records `task` (the MCP task the server created for the call, as JSON) on the entry of
    /// `key` while it is still [`EntryState::Sent`] by `owner`. Returns whether it did;
    /// committed durably before returning `true`. The default records nothing: a retry of a
    /// task call whose owner died is then `unknown_outcome: true`, as for any call.
    fn record_task<'a>(
        &'a self,
        _key: &'a Key,
        _owner: &'a str,
        _task: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(false)))
    }

    /// Hands the entry of `key` over from `from` to `to` (compare-and-swap): only while it is
    /// [`EntryState::Sent`] by `from` with a task recorded, `from`'s lease has expired and
    /// `to`'s is live. Returns whether it did; committed durably before returning `true`. The
    /// default hands nothing over.
    fn take_over<'a>(
        &'a self,
        _key: &'a Key,
        _from: &'a str,
        _to: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(false)))
    }

    /// The entries `filter` selects, newest first.
    fn list<'a>(&'a self, filter: &'a Filter) -> StoreFuture<'a, Vec<Entry>>;

    /// Deletes what ended more than `retention_ms` ago (finished entries, entries of owners
    /// that died, expired owners, drift first seen before, approvals expired before), and the
    /// arguments of every expired approval; a pending, unexpired approval is left alone.
    /// Returns how many entries it deleted.
    fn prune(&self, retention_ms: i64) -> StoreFuture<'_, u64>;
}

/// What a journal backend keeps of the limits' buckets.
pub trait LimitStore: CallStore {
    /// Takes from every bucket of `charge` or from none, in one atomic step judged by the
    /// store's clock (see [`crate::limits::decide`]): a token from each rate, a slot from each
    /// quota, held by `charge.holder` under `charge.owner`'s lease (slots of owners whose lease
    /// expired are not counted). A charge need not be durable: a lost one only under-counts.
    /// The default keeps no limits and refuses to pretend: it fails, so the call is not sent.
    fn charge<'a>(&'a self, _charge: &'a Charge) -> StoreFuture<'a, Verdict> {
        Box::pin(std::future::ready(Err(StoreError::unavailable(
            self.describe(),
            "this store keeps no limits",
        ))))
    }

    /// [`claim`](CallStore::claim) and [`charge`](Self::charge) in one transaction: the charge is
    /// taken only when the claim is new, and a refused charge leaves no claim. Committed
    /// durably before returning [`Claimed::Claimed`]. The default keeps no limits (it fails).
    fn claim_charged<'a>(
        &'a self,
        _claim: &'a Claim,
        _charge: &'a Charge,
    ) -> StoreFuture<'a, Claimed> {
        Box::pin(std::future::ready(Err(StoreError::unavailable(
            self.describe(),
            "this store keeps no limits",
        ))))
    }

    /// Gives back the slots `holder` took (the call ended).
    fn release<'a>(&'a self, _holder: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The buckets `names` as they stand now (those never charged are full and empty).
    fn usage<'a>(&'a self, _names: &'a [String]) -> StoreFuture<'a, Vec<Usage>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
}

/// What a journal backend keeps of drift seen at run time.
pub trait DriftStore: CallStore {
    /// Records `drift` unless that process recorded the same binding and listing before (its
    /// first sighting stays). Returns whether it did. The default records nothing.
    fn record_drift<'a>(&'a self, _drift: &'a Drift) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(false)))
    }

    /// The drift recorded, newest first (at most `limit`; 0: no limit). The default has none.
    fn drifts(&self, _limit: usize) -> StoreFuture<'_, Vec<Drift>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
}

/// What a journal backend keeps of approvals a person gives for one call.
pub trait ApprovalStore: CallStore {
    /// For a call held for approval, in one transaction: [`Asked::Journaled`] when the call's
    /// key is in the journal; else the newest unexpired approval of this very call (key,
    /// digest, principal and policy set), approved and unused, denied, or pending; else a new
    /// pending approval, recorded with the request's arguments. The default keeps no
    /// approvals and refuses to pretend: it fails, so the call is not sent.
    fn ask_approval<'a>(&'a self, _request: &'a ApprovalRequest) -> StoreFuture<'a, Asked> {
        Box::pin(std::future::ready(Err(StoreError::unavailable(
            self.describe(),
            "this store keeps no approvals",
        ))))
    }

    /// [`claim`](CallStore::claim) (with `charge`, [`claim_charged`](LimitStore::claim_charged)) of a call
    /// held for approval, in one transaction: for a key the journal does not have as sent, the
    /// approval `approval` — approved, unused and unexpired, of this very call (key and
    /// digest), its expiry and signature still those checked — is marked used first, else
    /// nothing is claimed ([`Claimed::Unapproved`]); a key the journal has as sent is claimed
    /// as [`claim`](CallStore::claim) does, the approval untouched. A claim that does not commit
    /// leaves the approval unused. The default keeps no approvals.
    fn claim_approved<'a>(
        &'a self,
        _claim: &'a Claim,
        _charge: Option<&'a Charge>,
        _approval: &'a Granted,
    ) -> StoreFuture<'a, Claimed> {
        Box::pin(std::future::ready(Err(StoreError::unavailable(
            self.describe(),
            "this store keeps no approvals",
        ))))
    }

    /// The approvals `filter` selects, newest first. The default has none.
    fn approvals<'a>(&'a self, _filter: &'a ApprovalFilter) -> StoreFuture<'a, Vec<Approval>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// Records `decision` on its pending, unexpired approval of one of its tenants (still of
    /// its digest, policies and expiry), with its signature, and deletes the arguments.
    /// Returns the approval as decided, or `None` when no such approval is pending. The
    /// default keeps no approvals.
    fn decide_approval<'a>(&'a self, _decision: &'a Decision) -> StoreFuture<'a, Option<Approval>> {
        Box::pin(std::future::ready(Err(StoreError::unavailable(
            self.describe(),
            "this store keeps no approvals",
        ))))
    }
}

/// What a journal backend keeps of the audit chain and its checkpoints.
pub trait AuditStore: CallStore {
    /// Whether the store appends to the audit chain (on by default where it keeps one): off
    /// only when every process on the store has it off, or the chains have gaps.
    fn set_audit(&self, _on: bool) {}

    /// The tenants that have an audit chain, in order. The default keeps none.
    fn audit_tenants(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// Up to `limit` records of `tenant`'s chain from `from` on, in order. The default has none.
    fn audit_records<'a>(
        &'a self,
        _tenant: &'a str,
        _from: i64,
        _limit: usize,
    ) -> StoreFuture<'a, Vec<AuditRecord>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// Every tenant's head as the store keeps it, and the store's clock. The default has none.
    fn audit_heads(&self) -> StoreFuture<'_, AuditHeads> {
        Box::pin(std::future::ready(Ok(AuditHeads::default())))
    }

    /// The signed checkpoints, oldest first. The default has none.
    fn audit_checkpoints(&self) -> StoreFuture<'_, Vec<Checkpoint>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// Stores a signed checkpoint; returns its id. The default keeps no chain: it fails.
    fn add_audit_checkpoint<'a>(
        &'a self,
        _body: &'a str,
        _signature: &'a str,
    ) -> StoreFuture<'a, i64> {
        Box::pin(std::future::ready(Err(StoreError::unavailable(
            self.describe(),
            "this store keeps no audit chain",
        ))))
    }

    /// Appends a record of a call the gate's policies refused to `key.tenant`'s chain, off the
    /// caller's path, when the store audits; `dropped` is called if it could not. The default
    /// keeps no chain.
    fn audit_denial(&self, _denial: Denial, _dropped: Box<dyn FnOnce() + Send>) {}

    /// Prunes each chain's records older than `retention_ms`, leaving a `pruned_through`
    /// record; returns how many it deleted. The default keeps no chain.
    fn prune_audit(&self, _retention_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(std::future::ready(Ok(0)))
    }
}

/// One record of an audit chain, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The tenant whose chain it is in.
    pub tenant: String,
    /// Its place in that chain (from 1).
    pub seq: i64,
    /// When it was appended (the store's clock, milliseconds).
    pub at_ms: i64,
    /// Its canonical bytes (RFC 8785 JSON), exactly as hashed.
    pub record: String,
    /// `SHA-256(previous hash ‖ record)`, hex.
    pub hash: String,
}

/// A tenant's chain head: its newest record's seq and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditHead {
    /// The tenant.
    pub tenant: String,
    /// The newest record's seq.
    pub seq: i64,
    /// Its hash.
    pub hash: String,
}

/// Every chain's head, and the store's clock when they were read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditHeads {
    /// The heads, in tenant order.
    pub heads: Vec<AuditHead>,
    /// The store's clock (milliseconds).
    pub now_ms: i64,
}

/// A signed checkpoint, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Its place among the checkpoints.
    pub id: i64,
    /// Its canonical bytes (RFC 8785 JSON): every tenant's head, a time and a key id.
    pub body: String,
    /// The Ed25519 signature over `"brain-audit-head-v1" ‖ body`, base64.
    pub signature: String,
}

/// A call the gate's policies refused, for the audit chain.
#[derive(Debug, Clone)]
pub struct Denial {
    /// The call.
    pub key: Key,
    /// The binding.
    pub binding: String,
    /// The policy principal.
    pub principal: String,
    /// The call's digest.
    pub digest: String,
}

// Approvals a person gives for one call: bound to the call's key, its digest (the binding's
// identity with its pin, and the canonical arguments), the policy principal and the policy
// set's digest, with an expiry. A pending approval keeps the call's canonical arguments for
// the approver to read, until it is decided or expires; an approved one is used by exactly one
// claim, in the claim's own transaction.

/// The most canonical arguments a pending approval keeps for its approver (64 KiB): a call
/// whose arguments are larger cannot be shown, so it is never held for approval (refused).
pub const MAX_APPROVAL_ARGUMENTS: usize = 64 * 1024;

/// What a call held for approval asks the store for ([`super::ApprovalStore::ask_approval`]).
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The call.
    pub key: Key,
    /// The binding it calls.
    pub binding: String,
    /// The policy principal that asked (`Brain::Tenant::"acme"`, `Brain::User::"iss|sub"`).
    pub principal: String,
    /// The call's journal digest (as its claim records it).
    pub digest: String,
    /// The digest of the policy set that held it.
    pub policies: String,
    /// The call's canonical arguments (RFC 8785), at most [`MAX_APPROVAL_ARGUMENTS`].
    pub arguments: String,
    /// Why the policies held it (the policies that denied it without an approval).
    pub reason: String,
    /// How long a new approval lasts, from the store's now.
    pub expires_ms: i64,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    /// Waiting for an approver.
    Pending,
    /// Approved, not yet used by a claim.
    Approved,
    /// Denied by an approver.
    Denied,
    /// Approved and used by the call's claim: it cannot be used again.
    Used,
}

impl ApprovalState {
    /// The state's name, as the store keeps it.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Used => "used",
        }
    }

    /// The state named `name`.
    pub fn parse(name: &str) -> Option<ApprovalState> {
        Some(match name {
            "pending" => ApprovalState::Pending,
            "approved" => ApprovalState::Approved,
            "denied" => ApprovalState::Denied,
            "used" => ApprovalState::Used,
            _ => return None,
        })
    }
}

/// An approval, as the store reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Its id (`apr_` and 32 hex digits).
    pub id: String,
    /// The call it is for.
    pub key: Key,
    /// The binding the call calls.
    pub binding: String,
    /// The policy principal that asked.
    pub principal: String,
    /// The call's journal digest.
    pub digest: String,
    /// The policy set's digest.
    pub policies: String,
    /// The call's canonical arguments while the approval is pending and unexpired.
    pub arguments: Option<String>,
    /// Why the policies held the call.
    pub reason: String,
    /// Where it stands.
    pub state: ApprovalState,
    /// When it was asked for (the store's clock, milliseconds).
    pub created_ms: i64,
    /// When it expires.
    pub expires_ms: i64,
    /// The approver that decided it.
    pub decided_by: Option<String>,
    /// When it was decided.
    pub decided_ms: Option<i64>,
    /// When the call's claim used it.
    pub used_ms: Option<i64>,
    /// A key approver's signature over its decision (none: a token approver's, or pending).
    pub signature: Option<DecisionSignature>,
    /// The store's clock when it was read.
    pub now_ms: i64,
}

/// A key approver's Ed25519 signature over its decision's statement
/// ([`crate::approvals::signed`]): the key's id and the signature, base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionSignature {
    /// The signing key's id (`ed25519:` and 16 hex digits).
    pub key_id: String,
    /// The signature, base64.
    pub signature: String,
}

impl DecisionSignature {
    /// A decision's signature from its two stored columns (both, or none).
    pub(crate) fn from_columns(
        key_id: Option<String>,
        signature: Option<String>,
    ) -> Option<DecisionSignature> {
        Some(DecisionSignature {
            key_id: key_id?,
            signature: signature?,
        })
    }
}

/// A decision an approver records: the row is decided only while it still says what the
/// approver saw (digest, policies, expiry) and is pending.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The approval.
    pub id: String,
    /// The approver's tenants: an approval of another is never decided.
    pub tenants: Vec<String>,
    /// The approver's name.
    pub approver: String,
    /// Approved, or denied.
    pub approved: bool,
    /// The call's digest the approver saw.
    pub digest: String,
    /// The policy set's digest the approver saw.
    pub policies: String,
    /// The expiry the approver saw.
    pub expires_ms: i64,
    /// A key approver's signature over the statement of all of the above.
    pub signature: Option<DecisionSignature>,
}

/// An approved, unused approval of the very call, as the claim uses it: it must still be the
/// one whose decision was checked (same expiry and signature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    /// The approval.
    pub id: String,
    /// Who approved it.
    pub by: String,
    /// When it expires.
    pub expires_ms: i64,
    /// The decision's signature (none: a token approver's).
    pub signature: Option<DecisionSignature>,
}

impl Approval {
    /// Whether it expired (when it was read).
    pub fn expired(&self) -> bool {
        self.expires_ms <= self.now_ms && self.state != ApprovalState::Used
    }
}

/// What the store made of a call held for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The journal has seen the call's key: it is answered as any journaled call (an approval
    /// is never consulted again, nor asked for).
    Journaled,
    /// An approval of this very call is approved and unused: the claim may use it, once its
    /// decision is checked.
    Approved(Granted),
    /// An approver denied this very call (by name).
    Denied {
        /// The approval.
        id: String,
        /// Who denied it.
        by: String,
    },
    /// The call waits for an approver: this approval (asked for now, or before).
    Pending(String),
}

impl Asked {
    /// What an unexpired, unused approval of the very call (`id`, its stored `state`, who
    /// decided it, its expiry and signature) means for the call.
    pub(crate) fn of(
        id: String,
        state: &str,
        by: Option<String>,
        expires_ms: i64,
        signature: Option<DecisionSignature>,
    ) -> Asked {
        match ApprovalState::parse(state) {
            Some(ApprovalState::Approved) => Asked::Approved(Granted {
                id,
                by: by.unwrap_or_default(),
                expires_ms,
                signature,
            }),
            Some(ApprovalState::Denied) => Asked::Denied {
                id,
                by: by.unwrap_or_default(),
            },
            _ => Asked::Pending(id),
        }
    }
}

/// Which approvals [`super::ApprovalStore::approvals`] returns, newest first.
#[derive(Debug, Clone, Default)]
pub struct ApprovalFilter {
    /// Only these tenants' (an approver's tenants). Empty: none.
    pub tenants: Vec<String>,
    /// Only this approval.
    pub id: Option<String>,
    /// Only pending, unexpired approvals.
    pub pending: bool,
    /// At most this many (0: no limit).
    pub limit: usize,
}

/// A new approval's id: `apr_` and 128 random bits in hex.
pub(crate) fn new_id() -> String {
    format!("apr_{}", uuid::Uuid::new_v4().simple())
}
