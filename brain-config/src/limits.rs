//! `limits` and `tenant_limits`: how often, and how many at once, a tool may be called — per
//! tenant or across the fleet. brain enforces them before anything is opened, on the state store
//! every process shares (see the book's "Limits and quotas").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Largest allowed `calls`.
pub const MAX_LIMIT_CALLS: u32 = 1_000_000;
/// Largest allowed `per_seconds` (one day).
pub const MAX_LIMIT_PER_SECONDS: u32 = 86_400;
/// Largest allowed `concurrent`.
pub const MAX_LIMIT_CONCURRENT: u32 = 100_000;

/// A binding's limits: a rate (`calls` per `per_seconds`, a token bucket refilled continuously,
/// so that `3` per `60` admits three calls at once) and a concurrency quota (`concurrent` calls
/// running at once), each optional. A call over a limit is refused before anything is sent, or,
/// with `wait_seconds`, waits for a token or a slot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Calls admitted per `per_seconds` (1 to 1000000); needs `per_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub calls: Option<u32>,
    /// The window of `calls`, in seconds (1 to 86400); needs `calls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86_400))]
    pub per_seconds: Option<u32>,
    /// Calls of this binding running at once (1 to 100000), across every process on the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub concurrent: Option<u32>,
    /// Whose calls share the buckets: `"tenant"` (the default: each tenant its own) or
    /// `"binding"` (one for every tenant together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<LimitScope>,
    /// Instead of refusing at once, wait up to this many seconds for a token or a slot (less
    /// than `timeout_seconds`; the wait counts against the call's timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3599))]
    pub wait_seconds: Option<u32>,
}

/// Whose calls share a binding's limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LimitScope {
    /// Each tenant has its own buckets (the default).
    #[default]
    Tenant,
    /// One set of buckets for the whole fleet, across tenants.
    Binding,
}

impl LimitScope {
    /// `tenant` or `binding`, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitScope::Tenant => "tenant",
            LimitScope::Binding => "binding",
        }
    }
}

/// A tenant's limits, across all of its bindings (`tenant_limits` in the config).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantLimits {
    /// Calls admitted per `per_seconds` (1 to 1000000); needs `per_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub calls: Option<u32>,
    /// The window of `calls`, in seconds (1 to 86400); needs `calls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86_400))]
    pub per_seconds: Option<u32>,
    /// Calls of the tenant running at once (1 to 100000), across every process on the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub concurrent: Option<u32>,
}

impl Limits {
    /// The rate, when both halves are set: (`calls`, `per_seconds`).
    pub fn rate(&self) -> Option<(u32, u32)> {
        Some((self.calls?, self.per_seconds?))
    }

    /// Whose calls share the buckets (default: each tenant its own).
    pub fn scope(&self) -> LimitScope {
        self.per.unwrap_or_default()
    }
}

impl TenantLimits {
    /// The rate, when both halves are set: (`calls`, `per_seconds`).
    pub fn rate(&self) -> Option<(u32, u32)> {
        Some((self.calls?, self.per_seconds?))
    }
}
