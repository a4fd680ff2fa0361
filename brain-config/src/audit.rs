//! `audit` in the host config: whether the journal keeps its audit chain, how long, how often a
//! runtime signs a checkpoint, and the public keys that verification (and the signer, as a
//! starting point) trusts. The config holds public keys only: the signing key is a file named by
//! `BRAIN_AUDIT_KEY_FILE`, never written here nor compiled into a binary.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diagnostic::{Diagnostic, Rule};

/// How long audit records are kept when `retention_days` is not set.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u64 = 400;
/// The longest `retention_days`: ten years.
pub const MAX_AUDIT_RETENTION_DAYS: u64 = 3650;
/// A checkpoint after this many records when `checkpoint_records` is not set.
pub const DEFAULT_CHECKPOINT_RECORDS: u64 = 1000;
/// The most `checkpoint_records` may be.
pub const MAX_CHECKPOINT_RECORDS: u64 = 1_000_000;
/// A checkpoint at least this often (seconds) when `checkpoint_seconds` is not set.
pub const DEFAULT_CHECKPOINT_SECONDS: u64 = 60;
/// The most `checkpoint_seconds` may be: a day.
pub const MAX_CHECKPOINT_SECONDS: u64 = 86_400;
/// The most a public key file may hold.
const MAX_KEY_FILE_BYTES: u64 = 16 * 1024;

/// `audit` in the host config.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Whether the journal's writes append to the audit chain (default true). Every process on
    /// one store must agree: one with it off leaves records out that no one can see missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How long audit records are kept, in days, 1..=3650 (400 when unset). Pruning leaves a
    /// `pruned_through` record that verification starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u64>,
    /// A runtime with a signing key signs a checkpoint after this many records,
    /// 1..=1000000 (1000 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_records: Option<u64>,
    /// ... and at least this often, idle or not, in seconds, 1..=86400 (60 when unset).
    /// `audit verify` warns when the newest checkpoint is older than twice this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_seconds: Option<u64>,
    /// The Ed25519 public keys (SPKI PEM files, as `openssl pkey -pubout` writes them, relative
    /// to the host config's directory) whose checkpoints verification trusts. Never a private
    /// key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_keys: Vec<String>,
    /// The text of each public key file, read when the config was loaded (codegen embeds it,
    /// so a compiled-in config carries its keys). Never written in a host config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub public_key_sources: Vec<PublicKeySource>,
}

/// One public key file, read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeySource {
    /// The file, relative to the host config's directory.
    pub path: String,
    /// Its PEM text.
    pub text: String,
}

impl AuditConfig {
    /// Whether the chain is kept.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// How long records are kept, in days.
    pub fn retention_days(&self) -> u64 {
        self.retention_days.unwrap_or(DEFAULT_AUDIT_RETENTION_DAYS)
    }

    /// A checkpoint after this many records.
    pub fn checkpoint_records(&self) -> u64 {
        self.checkpoint_records
            .unwrap_or(DEFAULT_CHECKPOINT_RECORDS)
    }

    /// A checkpoint at least this often, in seconds.
    pub fn checkpoint_seconds(&self) -> u64 {
        self.checkpoint_seconds
            .unwrap_or(DEFAULT_CHECKPOINT_SECONDS)
    }

    /// The public keys, each with the file it came from.
    pub fn verifying_keys(
        &self,
    ) -> Result<Vec<ed25519_dalek::VerifyingKey>, (String, &'static str)> {
        self.public_key_sources
            .iter()
            .map(|source| public_key(&source.text).map_err(|why| (source.path.clone(), why)))
            .collect()
    }
}

/// The Ed25519 public key in `pem` (SPKI PEM), or why it is not one. A private key is refused
/// by name, and its text is never repeated.
pub fn public_key(pem: &str) -> Result<ed25519_dalek::VerifyingKey, &'static str> {
    use ed25519_dalek::pkcs8::DecodePublicKey;
    if pem.contains("PRIVATE KEY") {
        return Err(
            "this is a private key: name the public key instead (`openssl pkey -in \
                    audit.pem -pubout -out audit.pub`); a host config, and every binary built \
                    from it, holds public keys only",
        );
    }
    ed25519_dalek::VerifyingKey::from_public_key_pem(pem).map_err(|_| {
        "not an Ed25519 public key in PEM (write one with `openssl pkey -in audit.pem -pubout \
         -out audit.pub`)"
    })
}

/// Reads every file `config.public_keys` names into its `public_key_sources`. A path outside
/// the config's directory, or a file that cannot be read, is an error.
pub(crate) fn read_keys(config: &mut AuditConfig, dir: &Path, errors: &mut Vec<Diagnostic>) {
    let mut sources = Vec::new();
    for (index, path) in config.public_keys.iter().enumerate() {
        let pointer = format!("/audit/public_keys/{index}");
        sources.extend(read_key_file(
            path,
            dir,
            &pointer,
            Rule::AuditPublicKey,
            errors,
        ));
    }
    config.public_key_sources = sources;
}

/// Reads the public key file `path` (relative to `dir`, the config's directory), or says at
/// `pointer` why not. A path outside the config's directory, or a file that cannot be read,
/// is an error.
pub(crate) fn read_key_file(
    path: &str,
    dir: &Path,
    pointer: &str,
    rule: Rule,
    errors: &mut Vec<Diagnostic>,
) -> Option<PublicKeySource> {
    let error = |message: String, help: &str| Diagnostic::new(rule, pointer, message, help);
    if Path::new(path).is_absolute() || path.split(['/', '\\']).any(|p| p == "..") {
        errors.push(error(
            format!("{path:?} is not inside the host config's directory"),
            "name the key file relative to the host config's directory, without `..`",
        ));
        return None;
    }
    let full = dir.join(path);
    let text = std::fs::metadata(&full).and_then(|meta| {
        if meta.len() > MAX_KEY_FILE_BYTES {
            Err(std::io::Error::other("larger than 16 KiB"))
        } else {
            std::fs::read_to_string(&full)
        }
    });
    match text {
        Ok(text) => Some(PublicKeySource {
            path: path.to_owned(),
            text,
        }),
        Err(why) => {
            errors.push(error(
                format!("cannot read {}: {why}", full.display()),
                "name a readable SPKI PEM public key file (`openssl pkey -in key.pem -pubout \
                 -out key.pub`), or remove it",
            ));
            None
        }
    }
}
