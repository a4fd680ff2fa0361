//! How a journal keeps its audit chain: on or off, its retention, and (with a key) how often a
//! runtime on it signs checkpoints.

use std::time::Duration;

use crate::keys::{AuditKey, KeyError, Keyring};

/// How many records a runtime's signer lets pass before it signs (also every
/// [`DEFAULT_CHECKPOINT_EVERY`], idle or not, and at a clean shutdown).
pub const DEFAULT_CHECKPOINT_RECORDS: u64 = brain_config::audit::DEFAULT_CHECKPOINT_RECORDS;
/// How long a runtime's signer waits at most between checkpoints.
pub const DEFAULT_CHECKPOINT_EVERY: Duration =
    Duration::from_secs(brain_config::audit::DEFAULT_CHECKPOINT_SECONDS);
/// How long the audit chain keeps records (its own retention, beside the journal's 24 h).
pub const DEFAULT_AUDIT_RETENTION: Duration =
    Duration::from_secs(brain_config::audit::DEFAULT_AUDIT_RETENTION_DAYS * 24 * 3600);

/// How a journal keeps its audit chain: on or off, its retention, and (with a key) how often
/// a runtime on it signs checkpoints.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    /// Whether writes append to the chain (default on). Every process on one store must agree:
    /// a process with it off leaves gaps no one can see.
    pub enabled: bool,
    /// How long records are kept (default [`DEFAULT_AUDIT_RETENTION`]); pruning leaves a
    /// `pruned_through` record.
    pub retention: Duration,
    /// The key that signs checkpoints (`BRAIN_AUDIT_KEY_FILE`; none: nothing is signed).
    pub key: Option<std::sync::Arc<AuditKey>>,
    /// Other keys whose checkpoints the signer trusts as a starting point (other replicas').
    pub keys: Keyring,
    /// A checkpoint after this many records (default [`DEFAULT_CHECKPOINT_RECORDS`]).
    pub checkpoint_records: u64,
    /// A checkpoint at least this often, idle or not (default [`DEFAULT_CHECKPOINT_EVERY`]).
    pub checkpoint_every: Duration,
}

impl AuditSettings {
    /// The settings a host config's `audit` section gives (the defaults without one), with
    /// `key` to sign checkpoints (from [`AuditKey::from_env`]; none: nothing is signed). The
    /// config's public keys are the keys the signer trusts besides its own.
    pub fn from_config(
        config: Option<&brain_config::audit::AuditConfig>,
        key: Option<AuditKey>,
    ) -> Result<AuditSettings, KeyError> {
        let defaults = brain_config::audit::AuditConfig::default();
        let config = config.unwrap_or(&defaults);
        Ok(AuditSettings {
            enabled: config.enabled(),
            retention: Duration::from_secs(config.retention_days().saturating_mul(24 * 3600)),
            key: key.map(std::sync::Arc::new),
            keys: Keyring::from_config(config)?,
            checkpoint_records: config.checkpoint_records(),
            checkpoint_every: Duration::from_secs(config.checkpoint_seconds()),
        })
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            enabled: true,
            retention: DEFAULT_AUDIT_RETENTION,
            key: None,
            keys: Keyring::default(),
            checkpoint_records: DEFAULT_CHECKPOINT_RECORDS,
            checkpoint_every: DEFAULT_CHECKPOINT_EVERY,
        }
    }
}
