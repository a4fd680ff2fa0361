//! The audit's Ed25519 keys: the signing key a process reads from `BRAIN_AUDIT_KEY_FILE` (a
//! PKCS#8 PEM file, as `openssl genpkey -algorithm ed25519` writes it; never stored in the
//! store), and the public keys verification trusts, by key id (never read from the store).

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// The variable naming the signing key's file.
pub const KEY_FILE_VAR: &str = "BRAIN_AUDIT_KEY_FILE";

/// What a checkpoint's signature covers before its body.
const DOMAIN: &[u8] = b"brain-audit-head-v1";

/// A key that cannot be read or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key's file cannot be read: check the path and its permissions.
    #[error("{path}: {message}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why it cannot be read.
        message: String,
    },
    /// The file is not a key of the kind wanted (an Ed25519 key in PEM, private or public as
    /// the place asks): make one with the command the message gives.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, and how to fix it.
        message: String,
    },
}

/// The key id of a public key: `ed25519:` and the first 16 hex digits of the SHA-256 of its
/// 32 bytes.
pub(crate) fn key_id(key: &VerifyingKey) -> String {
    let digest = Sha256::digest(key.as_bytes());
    format!("ed25519:{}", &crate::state::hex(&digest)[..16])
}

/// The Ed25519 PKCS#8 PEM private key in `path` (`example`: the file name the error's
/// `openssl` command line makes). Its text is never repeated in an error.
pub(crate) fn signing_key(path: &Path, example: &str) -> Result<SigningKey, KeyError> {
    let path = path.display().to_string();
    let pem = std::fs::read_to_string(&path).map_err(|e| KeyError::Unreadable {
        path: path.clone(),
        message: e.to_string(),
    })?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|_| KeyError::Invalid {
        path,
        message: format!(
            "not an Ed25519 private key in PKCS#8 PEM (make one with `openssl genpkey \
             -algorithm ed25519 -out {example}`)"
        ),
    })
}

/// The key that signs checkpoints. Its secret never appears in Debug output.
pub struct AuditKey {
    key: SigningKey,
    id: String,
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditKey").field("id", &self.id).finish()
    }
}

impl AuditKey {
    /// The PKCS#8 PEM private key in `path`.
    pub fn from_pem_file(path: &Path) -> Result<AuditKey, KeyError> {
        let key = signing_key(path, "audit.pem")?;
        let id = key_id(&key.verifying_key());
        Ok(AuditKey { key, id })
    }

    /// The key named by `BRAIN_AUDIT_KEY_FILE`, when it is set.
    pub fn from_env() -> Result<Option<AuditKey>, KeyError> {
        match std::env::var_os(KEY_FILE_VAR) {
            Some(path) if !path.is_empty() => AuditKey::from_pem_file(Path::new(&path)).map(Some),
            _ => Ok(None),
        }
    }

    /// Its key id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its public key, in SPKI PEM (as `openssl pkey -pubout` writes it).
    pub fn public_pem(&self) -> String {
        self.key
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap_or_default()
    }

    /// The signature of a checkpoint's `body`, base64.
    pub(crate) fn sign(&self, body: &str) -> String {
        let mut message = DOMAIN.to_vec();
        message.extend_from_slice(body.as_bytes());
        let signature: Signature = self.key.sign(&message);
        base64::engine::general_purpose::STANDARD.encode(signature.to_bytes())
    }

    /// Its public key alone.
    pub(crate) fn keyring(&self) -> Keyring {
        let mut keyring = Keyring::default();
        keyring.insert(self.key.verifying_key());
        keyring
    }
}

/// The public keys verification trusts, by key id.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    keys: BTreeMap<String, VerifyingKey>,
}

/// What a checkpoint's signature is worth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Signed {
    /// Valid, by a key of the keyring.
    Valid,
    /// By a key id the keyring does not have.
    UnknownKey,
    /// Not a valid signature of the body by the key it names.
    Invalid,
}

impl Keyring {
    /// The SPKI PEM public keys in `paths` (as `openssl pkey -pubout` writes them).
    pub fn from_pem_files(paths: &[impl AsRef<Path>]) -> Result<Keyring, KeyError> {
        let mut keyring = Keyring::default();
        for path in paths {
            let path = path.as_ref().display().to_string();
            let pem = std::fs::read_to_string(&path).map_err(|e| KeyError::Unreadable {
                path: path.clone(),
                message: e.to_string(),
            })?;
            let key = brain_config::audit::public_key(&pem).map_err(|why| KeyError::Invalid {
                path,
                message: why.into(),
            })?;
            keyring.insert(key);
        }
        Ok(keyring)
    }

    /// The public keys of a host config's `audit.public_keys` (read when it was loaded).
    pub fn from_config(config: &brain_config::audit::AuditConfig) -> Result<Keyring, KeyError> {
        let mut keyring = Keyring::default();
        for key in config
            .verifying_keys()
            .map_err(|(path, why)| KeyError::Invalid {
                path,
                message: why.into(),
            })?
        {
            keyring.insert(key);
        }
        Ok(keyring)
    }

    fn insert(&mut self, key: VerifyingKey) {
        self.keys.insert(key_id(&key), key);
    }

    /// Adds every key of `other`.
    pub fn extend(&mut self, other: &Keyring) {
        self.keys
            .extend(other.keys.iter().map(|(id, key)| (id.clone(), *key)));
    }

    /// Whether it has no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key ids it trusts.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Whether `signature` (base64) signs `body` by the key `id`.
    pub(crate) fn check(&self, id: &str, body: &str, signature: &str) -> Signed {
        let Some(key) = self.keys.get(id) else {
            return Signed::UnknownKey;
        };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(signature) else {
            return Signed::Invalid;
        };
        let Ok(signature) = Signature::from_slice(&bytes) else {
            return Signed::Invalid;
        };
        let mut message = DOMAIN.to_vec();
        message.extend_from_slice(body.as_bytes());
        match key.verify_strict(&message, &signature) {
            Ok(()) => Signed::Valid,
            Err(_) => Signed::Invalid,
        }
    }
}
