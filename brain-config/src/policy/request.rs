//! The request a call makes of the policies, and their decision.

use std::collections::HashSet;

use cedar_policy::{Entity, EntityUid};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::{NAMESPACE, entity_uid};

/// Who calls, as the policies see it: built only from the authenticated identity, never from
/// arguments, `_meta` or headers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// `Brain::Tenant::"<tenant>"`: the tenant of the session (a static serve token, a Rust host).
    Tenant(String),
    /// `Brain::User::"<issuer>|<subject>"`, in `Brain::Tenant::"<tenant>"`: a user whose access
    /// token serve verified.
    User {
        /// The user's tenant (from the token's tenant claim).
        tenant: String,
        /// The token's `iss`.
        issuer: String,
        /// The token's `sub`.
        subject: String,
    },
}

impl Principal {
    /// The principal's tenant.
    pub fn tenant(&self) -> &str {
        match self {
            Principal::Tenant(tenant) | Principal::User { tenant, .. } => tenant,
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Principal::Tenant(tenant) => write!(f, "{NAMESPACE}::Tenant::{tenant:?}"),
            Principal::User {
                tenant,
                issuer,
                subject,
            } => write!(
                f,
                "{NAMESPACE}::User::{:?} (tenant {tenant:?})",
                format!("{issuer}|{subject}")
            ),
        }
    }
}

/// Which front end a call came through: `context.call.via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `brain-harness call`.
    Call,
    /// `brain-harness serve`.
    Serve,
    /// A Rust host calling the runtime.
    Rust,
}

impl Via {
    /// `"call"`, `"serve"` or `"rust"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Call => "call",
            Via::Serve => "serve",
            Via::Rust => "rust",
        }
    }
}

/// One call, as the policies decide it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyRequest<'a> {
    /// Who calls.
    pub principal: &'a Principal,
    /// The binding's name.
    pub binding: &'a str,
    /// The arguments, already valid for the binding's `input_schema`.
    pub arguments: &'a Value,
    /// Which front end.
    pub via: Via,
    /// The session.
    pub session: &'a str,
    /// `context.call.approval.granted`: whether a person approved this call (always false until
    /// brain has approvals).
    pub granted: bool,
}

/// What the policies decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// A `permit` applies and no `forbid` does.
    Allow,
    /// Refused: no `permit` applies, a `forbid` does, or a policy or the arguments could not be
    /// evaluated (every error denies).
    Deny {
        /// Why, naming the deciding `forbid`s' ids and `@reason`s, or "no policy permits".
        reason: String,
        /// Whether the same call with `granted: true` would be allowed (an `@approval` policy
        /// would permit it).
        approvable: bool,
    },
}

/// The principal's uid, and its entity when it has a parent (a user in a tenant).
pub(super) fn principal_entity(principal: &Principal) -> (EntityUid, Option<Entity>) {
    let uid = entity_uid;
    match principal {
        Principal::Tenant(tenant) => (uid("Tenant", tenant), None),
        Principal::User {
            tenant,
            issuer,
            subject,
        } => {
            let user = uid("User", &format!("{issuer}|{subject}"));
            let entity = Entity::new_no_attrs(user.clone(), HashSet::from([uid("Tenant", tenant)]));
            (user, Some(entity))
        }
    }
}
