//! `approvals` in the host config: who may approve a call that an `@approval` policy holds for
//! a person, and how long an approval lasts. An approver is known by a credential no caller
//! holds: the SHA-256 of a token the approver presents (`BRAIN_APPROVER_TOKEN`), never the token.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How long an approval lasts when `expires_seconds` is not set: an hour.
pub const DEFAULT_APPROVAL_SECONDS: u64 = 3600;
/// The longest an approval may last: a day, the call journal's default retention.
pub const MAX_APPROVAL_SECONDS: u64 = 24 * 3600;

/// `approvals` in the host config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// Who may approve or deny a call held for approval, and for which tenants.
    pub approvers: Vec<ApproverConfig>,
    /// How long a pending approval, and an approval not yet used, lasts: seconds from the call
    /// that asked for it, 1..=86400 (3600 when unset). No longer than the journal's retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_seconds: Option<u64>,
}

impl ApprovalsConfig {
    /// How long an approval lasts, in seconds.
    pub fn expires_seconds(&self) -> u64 {
        self.expires_seconds.unwrap_or(DEFAULT_APPROVAL_SECONDS)
    }
}

/// One approver: `{"name": "ops", "tenants": ["acme"], "token_sha256": "<64 hex>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproverConfig {
    /// The approver's name, recorded with each decision (`[A-Za-z0-9_.@-]`, 1 to 64).
    pub name: String,
    /// The tenants whose calls the approver may see and decide.
    pub tenants: Vec<String>,
    /// The SHA-256 of the approver's token, 64 lowercase hex digits
    /// (`printf %s "$TOKEN" | sha256sum`). The token itself is never written here.
    pub token_sha256: String,
}

/// Whether `name` is an approver's name brain accepts.
pub fn approver_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.@-".contains(&b))
}

/// Whether `hex` is 64 lowercase hex digits.
pub fn token_sha256_ok(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
