//! Approvals: a person's decision on a call a policy holds. This room holds what an approval
//! is signed as ([`signed`]); the store's approvals are the floor's
//! [`ApprovalStore`](crate::store::ApprovalStore), the approver's side is
//! `approver.rs`.

pub(crate) mod postgres;
pub(crate) mod signed;
pub(crate) mod sqlite;
