//! `approvals` in the host config: who may approve a call that an `@approval` policy holds for
//! a person, and how long an approval lasts. An approver is known by a credential no caller
//! holds: an Ed25519 public key whose private key signs each decision
//! (`BRAIN_APPROVER_KEY_FILE`), or the SHA-256 of a token the approver presents
//! (`BRAIN_APPROVER_TOKEN`), never the token. A store writer can forge a token approver's
//! decision, never a key approver's.

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

/// One approver: `{"name": "ops", "tenants": ["acme"], "public_key": "keys/ops.pub"}` (its
/// decisions signed), or `{..., "token_sha256": "<64 hex>"}`: one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproverConfig {
    /// The approver's name, recorded with each decision (`[A-Za-z0-9_.@-]`, 1 to 64).
    pub name: String,
    /// The tenants whose calls the approver may see and decide.
    pub tenants: Vec<String>,
    /// The SHA-256 of the approver's token, 64 lowercase hex digits
    /// (`printf %s "$TOKEN" | sha256sum`). The token itself is never written here. A writer of
    /// the journal's store can forge such an approver's decision: prefer `public_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<String>,
    /// The approver's Ed25519 public key (an SPKI PEM file, as `openssl pkey -pubout` writes
    /// it, relative to the host config's directory): each decision is a statement signed with
    /// its private key (`BRAIN_APPROVER_KEY_FILE`), checked by the claim that uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// The text of `public_key`'s file, read when the config was loaded (codegen embeds it).
    /// Never written in a host config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub public_key_source: Option<crate::audit::PublicKeySource>,
}

impl ApproverConfig {
    /// The approver's public key, when it signs its decisions (read at load), or why it is
    /// not usable.
    pub fn verifying_key(&self) -> Option<Result<ed25519_dalek::VerifyingKey, &'static str>> {
        self.public_key_source
            .as_ref()
            .map(|source| crate::audit::public_key(&source.text))
    }
}

/// Reads the file each approver's `public_key` names into its `public_key_source`.
pub(crate) fn read_keys(
    config: &mut ApprovalsConfig,
    dir: &std::path::Path,
    errors: &mut Vec<crate::diagnostic::Diagnostic>,
) {
    for (index, approver) in config.approvers.iter_mut().enumerate() {
        approver.public_key_source = approver.public_key.as_ref().and_then(|path| {
            let pointer = format!("/approvals/approvers/{index}/public_key");
            crate::audit::read_key_file(
                path,
                dir,
                &pointer,
                crate::diagnostic::Rule::ApproverInvalid,
                errors,
            )
        });
    }
}

/// What `cargo xtask check` warns about the approvers: each token approver, whose decisions a
/// writer of the journal's store can forge.
pub fn warnings(config: &ApprovalsConfig) -> Vec<String> {
    config
        .approvers
        .iter()
        .filter(|approver| approver.token_sha256.is_some())
        .map(|approver| {
            format!(
                "approver {:?} is known by a token: a writer of the journal's store can forge its \
                 decisions (set a pending approval to approved); give it a `public_key` so that \
                 each decision is signed and checked before it is used",
                approver.name
            )
        })
        .collect()
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
