//! The call journal: at most once across retries, process crashes and replicas.
//!
//! Every call is recorded under its key (tenant, session, call id) with a digest of what it
//! asks (never the arguments), a state and an owner with a lease:
//!
//! - *admit* (before anything is opened) looks the key up: a recorded outcome is replayed
//!   (`"replayed": true`), a call running elsewhere with a live lease is waited for, a call
//!   whose owner died is `unknown_outcome: true`, another digest is refused;
//! - the *send point* claims the call (`sent`, committed before the first byte of `tools/call`
//!   leaves): the at-most-once point;
//! - after the call, its outcome is recorded off the caller's path (`completed`, `failed`, or
//!   `not_sent` when nothing could have run, which a retry may claim again).
//!
//! Leases belong to owners (a process, with an epoch), renewed by one heartbeat per process,
//! and judged by the store's clock. Backends: memory (one process), SQLite (one host), and
//! PostgreSQL (several hosts), behind [`JournalStore`].

pub(crate) mod denial;
mod memory;
mod owner;
mod postgres;
mod sqlite;
mod ticket;

pub use crate::state::rfc3339;
pub use crate::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalState, Asked, Decision, DecisionSignature,
    Granted, MAX_APPROVAL_ARGUMENTS,
};
pub use crate::store::{
    ApprovalStore, AuditStore, CallStore, Claim, Claimed, Done, Drift, DriftStore, Entry,
    EntryState, Filter, JournalStore, Key, LimitStore, Record, StoreError, StoreFuture,
};
pub use crate::store::{AuditHead, AuditHeads, AuditRecord, Checkpoint, Denial, UpstreamIdentity};
pub(crate) use owner::Journaling;
pub use owner::{DEFAULT_LEASE, DEFAULT_RESULT_CAP, DEFAULT_RETENTION, Journal};
pub use sqlite::{Durability, default_path};
pub(crate) use ticket::{Admitted, Claiming, Hold, TaskRecord, Ticket, digest, identity};
