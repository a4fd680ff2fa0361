//! A key approver's decision is a statement it signs: the approval, its tenant, the call's
//! digest (the binding with its pin, and the canonical arguments), the policy set's digest, the
//! decision and the expiry, as RFC 8785 JSON, signed with Ed25519 after a domain string of its
//! own. The claim rebuilds the statement from the very call it is about to send and checks the
//! signature against the keys of the approvers the host config names for the call's tenant; a
//! writer of the store, without an approver's private key, cannot approve.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use base64::Engine;
use brain_config::HostConfig;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde_json::json;

use crate::keys::{KeyError, key_id, signing_key};
use crate::store::DecisionSignature;

/// The variable naming an approver's private key file (PKCS#8 PEM, as `openssl genpkey
/// -algorithm ed25519` writes it).
pub const APPROVER_KEY_FILE_VAR: &str = "BRAIN_APPROVER_KEY_FILE";

/// What a decision's signature covers before its statement: no checkpoint's or other
/// message's signature is ever one of a decision.
const DOMAIN: &[u8] = b"brain-approval-decision-v1";

/// An approver's private key: signs its decisions. Its secret never appears in Debug output.
pub struct ApproverKey {
    key: SigningKey,
    id: String,
}

impl std::fmt::Debug for ApproverKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApproverKey").field("id", &self.id).finish()
    }
}

impl ApproverKey {
    /// The PKCS#8 PEM private key in `path`.
    pub fn from_pem_file(path: &Path) -> Result<ApproverKey, KeyError> {
        let key = signing_key(path, "approver.pem")?;
        let id = key_id(&key.verifying_key());
        Ok(ApproverKey { key, id })
    }

    /// The key `BRAIN_APPROVER_KEY_FILE` names, when it is set.
    pub fn from_env() -> Result<Option<ApproverKey>, KeyError> {
        match std::env::var_os(APPROVER_KEY_FILE_VAR) {
            Some(path) if !path.is_empty() => {
                ApproverKey::from_pem_file(Path::new(&path)).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Its key id (`ed25519:` and 16 hex digits of its public key's SHA-256).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// Its signature over `statement`.
    pub(crate) fn sign(&self, statement: &Statement<'_>) -> DecisionSignature {
        let signature: Signature = self.key.sign(&message(statement));
        DecisionSignature {
            key_id: self.id.clone(),
            signature: base64::engine::general_purpose::STANDARD.encode(signature.to_bytes()),
        }
    }
}

/// What a key approver signs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Statement<'a> {
    /// The approval's id.
    pub(crate) approval: &'a str,
    /// The call's tenant.
    pub(crate) tenant: &'a str,
    /// The call's digest: its binding (with the pin) and canonical arguments.
    pub(crate) digest: &'a str,
    /// The policy set's digest.
    pub(crate) policies: &'a str,
    /// Approved, or denied.
    pub(crate) approved: bool,
    /// When the approval expires (the store's clock, milliseconds).
    pub(crate) expires_ms: i64,
}

impl Statement<'_> {
    /// Its canonical bytes (RFC 8785).
    pub(crate) fn text(&self) -> String {
        crate::state::canonical(&json!({
            "v": 1,
            "kind": "approval_decision",
            "approval": self.approval,
            "tenant": self.tenant,
            "digest": self.digest,
            "policies": self.policies,
            "decision": if self.approved { "approved" } else { "denied" },
            "expires": self.expires_ms,
        }))
    }
}

fn message(statement: &Statement<'_>) -> Vec<u8> {
    let mut message = DOMAIN.to_vec();
    message.extend_from_slice(statement.text().as_bytes());
    message
}

/// Why a decision cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsigned {
    /// It carries no signature, and every approver of its tenant signs.
    Missing,
    /// Its key is no approver's of the tenant.
    UnknownKey(String),
    /// Its signature is not the key's over this statement: forged, or copied from another.
    Invalid,
}

impl std::fmt::Display for Unsigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsigned::Missing => write!(
                f,
                "the decision is not signed, and every approver of the tenant signs its decisions"
            ),
            Unsigned::UnknownKey(id) => write!(
                f,
                "the decision is signed by key {id}, which is no approver's of the tenant"
            ),
            Unsigned::Invalid => write!(
                f,
                "the decision's signature is not valid for this call: forged, or copied from \
                 another approval"
            ),
        }
    }
}

/// The public keys of the host config's key approvers, by the tenants they decide for, and
/// the tenants a token approver decides for (whose decisions carry no signature).
#[derive(Debug, Clone, Default)]
pub struct ApproverKeys {
    keys: HashMap<String, Vec<(String, VerifyingKey)>>,
    tokens: HashSet<String>,
}

impl ApproverKeys {
    /// The approvers of `config` (their keys read when it was loaded).
    pub fn from_config(config: &HostConfig) -> ApproverKeys {
        let mut keys = ApproverKeys::default();
        let approvers = config.approvals.iter().flat_map(|a| a.approvers.iter());
        for approver in approvers {
            for tenant in &approver.tenants {
                if approver.token_sha256.is_some() {
                    keys.tokens.insert(tenant.clone());
                }
                if let Some(Ok(key)) = approver.verifying_key() {
                    let id = key_id(&key);
                    keys.keys.entry(tenant.clone()).or_default().push((id, key));
                }
            }
        }
        keys
    }

    /// Whether the host config names any approver.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.tokens.is_empty()
    }

    /// Whether a decision over `statement` with `signature` (none: a token approver's) stands:
    /// signed by the key of an approver of the statement's tenant, or unsigned where a token
    /// approver decides for the tenant.
    pub(crate) fn check(
        &self,
        statement: &Statement<'_>,
        signature: Option<&DecisionSignature>,
    ) -> Result<(), Unsigned> {
        let Some(signed) = signature else {
            return if self.tokens.contains(statement.tenant) {
                Ok(())
            } else {
                Err(Unsigned::Missing)
            };
        };
        let key = self
            .keys
            .get(statement.tenant)
            .and_then(|keys| keys.iter().find(|(id, _)| *id == signed.key_id))
            .map(|(_, key)| key)
            .ok_or_else(|| Unsigned::UnknownKey(signed.key_id.clone()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&signed.signature)
            .map_err(|_| Unsigned::Invalid)?;
        let signature = Signature::from_slice(&bytes).map_err(|_| Unsigned::Invalid)?;
        key.verify_strict(&message(statement), &signature)
            .map_err(|_| Unsigned::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement<'a>(approval: &'a str, digest: &'a str) -> Statement<'a> {
        Statement {
            approval,
            tenant: "acme",
            digest,
            policies: "sha256:p",
            approved: true,
            expires_ms: 1_000,
        }
    }

    #[test]
    fn a_signature_holds_for_its_own_statement_only() {
        let key = ApproverKey {
            key: SigningKey::from_bytes(&[7; 32]),
            id: String::new(),
        };
        let key = ApproverKey {
            id: key_id(&key.verifying_key()),
            ..key
        };
        let mut keys = ApproverKeys::default();
        keys.keys
            .insert("acme".into(), vec![(key.id.clone(), key.verifying_key())]);
        let signed = key.sign(&statement("apr_1", "sha256:a"));
        assert_eq!(
            keys.check(&statement("apr_1", "sha256:a"), Some(&signed)),
            Ok(())
        );
        // Another approval's, another call's, another tenant's, another decision's: never.
        assert_eq!(
            keys.check(&statement("apr_2", "sha256:a"), Some(&signed)),
            Err(Unsigned::Invalid)
        );
        assert_eq!(
            keys.check(&statement("apr_1", "sha256:b"), Some(&signed)),
            Err(Unsigned::Invalid)
        );
        let other_tenant = Statement {
            tenant: "globex",
            ..statement("apr_1", "sha256:a")
        };
        assert!(matches!(
            keys.check(&other_tenant, Some(&signed)),
            Err(Unsigned::UnknownKey(_))
        ));
        let denied = Statement {
            approved: false,
            ..statement("apr_1", "sha256:a")
        };
        assert_eq!(keys.check(&denied, Some(&signed)), Err(Unsigned::Invalid));
        assert_eq!(
            keys.check(&statement("apr_1", "sha256:a"), None),
            Err(Unsigned::Missing)
        );
        keys.tokens.insert("acme".into());
        assert_eq!(keys.check(&statement("apr_1", "sha256:a"), None), Ok(()));
        assert!(!format!("{key:?}").contains("key:"));
    }
}
