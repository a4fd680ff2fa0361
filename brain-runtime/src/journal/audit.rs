//! The audit chain's format: what each record says, its canonical bytes (RFC 8785, JCS) and
//! its link. Each tenant has one chain: record `n` carries the tenant and `seq = n`, and
//! `hash_n = SHA-256(hash_{n-1} ‖ JCS(record_n))` with `hash_0 = SHA-256("brain-audit-v1" ‖
//! tenant)`, hashes as their 32 bytes (stored as lowercase hex). A record holds digests of
//! arguments and results, never their bodies.
//!
//! The stores append a record in the same transaction as the journal's write it describes
//! (`sqlite/audit.rs`, `postgres/audit.rs`); nothing here does I/O.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::store::{Claim, EntryState, Key, Record};

/// The version every record carries (`"v"`).
pub const FORMAT: u64 = 1;

/// What a record says happened, before its place in the chain (tenant, seq, time) is known.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// The claim: the call is about to be sent (the journal's `sent`), with the approval it
    /// used, if any.
    Claimed {
        claim: Claim,
        approval: Option<String>,
    },
    /// How a call ended (`finished`, or `not_sent`); `taken_over`: recorded as unknown by a
    /// retry that found its owner dead.
    Settled {
        key: Key,
        owner: String,
        record: Record,
        taken_over: bool,
    },
    /// A call's MCP task handed to another owner, which resumes it.
    Resumed { key: Key, from: String, to: String },
    /// A pending approval recorded for a held call.
    ApprovalAsked {
        id: String,
        key: Key,
        binding: String,
        principal: String,
        digest: String,
        policies: String,
    },
    /// An approval decided by an approver.
    ApprovalDecided {
        id: String,
        key: Key,
        approver: String,
        approved: bool,
    },
    /// A server listing a bound tool otherwise than its pin (in each tenant's chain the
    /// binding lists).
    Drift {
        binding: String,
        pinned: String,
        listed: String,
        refused: bool,
        process: String,
    },
    /// A call the gate's policies refused (appended off the caller's path, best effort).
    Denied {
        key: Key,
        binding: String,
        principal: String,
        digest: String,
    },
    /// The records through `seq` were pruned; `hash` was the hash of record `seq`.
    PrunedThrough { seq: i64, hash: String },
}

impl Event {
    /// The record's fields besides `v`, `tenant`, `seq` and `at`.
    fn fields(&self) -> Map<String, Value> {
        let key = |key: &Key| {
            json!({"session": key.session, "call_id": key.call_id})
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        let (kind, mut fields) = match self {
            Event::Claimed { claim, approval } => {
                let mut fields = key(&claim.key);
                fields.insert("binding".into(), claim.binding.clone().into());
                fields.insert("digest".into(), claim.digest.clone().into());
                fields.insert("owner".into(), claim.owner.clone().into());
                if let Some(approval) = approval {
                    fields.insert("approval".into(), approval.clone().into());
                }
                ("claimed", fields)
            }
            Event::Settled {
                key: k,
                owner,
                record,
                taken_over,
            } => {
                let mut fields = key(k);
                fields.insert("owner".into(), owner.clone().into());
                fields.insert("state".into(), record.state.as_str().into());
                fields.insert("is_error".into(), record.is_error.into());
                fields.insert("unknown_outcome".into(), record.unknown_outcome.into());
                fields.insert("result_digest".into(), record.result_digest.clone().into());
                let kind = match (taken_over, record.state) {
                    (true, _) => "taken_over_as_unknown",
                    (false, EntryState::NotSent) => "not_sent",
                    (false, _) => "finished",
                };
                (kind, fields)
            }
            Event::Resumed { key: k, from, to } => {
                let mut fields = key(k);
                fields.insert("from".into(), from.clone().into());
                fields.insert("owner".into(), to.clone().into());
                ("resumed", fields)
            }
            Event::ApprovalAsked {
                id,
                key: k,
                binding,
                principal,
                digest,
                policies,
            } => {
                let mut fields = key(k);
                fields.insert("approval".into(), id.clone().into());
                fields.insert("binding".into(), binding.clone().into());
                fields.insert("principal".into(), principal.clone().into());
                fields.insert("digest".into(), digest.clone().into());
                fields.insert("policies".into(), policies.clone().into());
                ("approval_asked", fields)
            }
            Event::ApprovalDecided {
                id,
                key: k,
                approver,
                approved,
            } => {
                let mut fields = key(k);
                fields.insert("approval".into(), id.clone().into());
                fields.insert("approver".into(), approver.clone().into());
                let kind = if *approved {
                    "approval_approved"
                } else {
                    "approval_denied"
                };
                (kind, fields)
            }
            Event::Drift {
                binding,
                pinned,
                listed,
                refused,
                process,
            } => {
                let mut fields = Map::new();
                fields.insert("binding".into(), binding.clone().into());
                fields.insert("pinned".into(), pinned.clone().into());
                fields.insert("listed".into(), listed.clone().into());
                fields.insert("refused".into(), (*refused).into());
                fields.insert("process".into(), process.clone().into());
                ("drift", fields)
            }
            Event::Denied {
                key: k,
                binding,
                principal,
                digest,
            } => {
                let mut fields = key(k);
                fields.insert("binding".into(), binding.clone().into());
                fields.insert("principal".into(), principal.clone().into());
                fields.insert("digest".into(), digest.clone().into());
                ("policy_denied", fields)
            }
            Event::PrunedThrough { seq, hash } => {
                let mut fields = Map::new();
                fields.insert("through_seq".into(), (*seq).into());
                fields.insert("through_hash".into(), hash.clone().into());
                ("pruned_through", fields)
            }
        };
        fields.insert("kind".into(), kind.into());
        fields
    }

    /// The record's canonical bytes at its place: `tenant`'s record `seq`, at `at_ms` on the
    /// store's clock.
    pub(crate) fn record(&self, tenant: &str, seq: i64, at_ms: i64) -> String {
        let mut fields = self.fields();
        fields.insert("v".into(), FORMAT.into());
        fields.insert("tenant".into(), tenant.into());
        fields.insert("seq".into(), seq.into());
        fields.insert("at".into(), at_ms.into());
        canonical(&Value::Object(fields))
    }
}

/// RFC 8785 canonical JSON.
pub(crate) fn canonical(value: &Value) -> String {
    serde_jcs::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// `hash_0` of `tenant`'s chain: SHA-256("brain-audit-v1" ‖ tenant), as hex.
pub fn genesis(tenant: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"brain-audit-v1");
    hash.update(tenant.as_bytes());
    crate::state::hex(&hash.finalize())
}

/// The hash of a record whose predecessor's hash is `previous` (hex): SHA-256 of its 32 bytes
/// and the record's bytes, as hex. A `previous` that is not 64 hex digits links to nothing
/// (its bytes are hashed as they are, and no honest chain matches).
pub fn link(previous: &str, record: &str) -> String {
    let mut hash = Sha256::new();
    match decode(previous) {
        Some(bytes) => hash.update(bytes),
        None => hash.update(previous.as_bytes()),
    }
    hash.update(record.as_bytes());
    crate::state::hex(&hash.finalize())
}

/// 64 lowercase hex digits as 32 bytes.
pub(crate) fn decode(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let pair = hex.get(2 * i..2 * i + 2)?;
        if pair.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(bytes)
}

/// The digest of a result's JSON, as a record holds it (`sha256:` and hex).
pub(crate) fn result_digest(json: &str) -> String {
    format!(
        "sha256:{}",
        crate::state::hex(&Sha256::digest(json.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_canonical_and_its_link_depends_on_every_byte() {
        let event = Event::PrunedThrough {
            seq: 7,
            hash: "ab".repeat(32),
        };
        let record = event.record("acme", 8, 1_733_450_000_000);
        assert_eq!(
            record,
            format!(
                "{{\"at\":1733450000000,\"kind\":\"pruned_through\",\"seq\":8,\"tenant\":\"acme\",\
                 \"through_hash\":\"{}\",\"through_seq\":7,\"v\":1}}",
                "ab".repeat(32)
            )
        );
        let zero = genesis("acme");
        assert_ne!(zero, genesis("acmf"));
        let one = link(&zero, &record);
        assert_eq!(one.len(), 64);
        assert_ne!(one, link(&zero, &record.replace("acme", "acmf")));
        assert_ne!(one, link(&genesis("acmf"), &record));
        assert_eq!(decode(&one).map(|b| crate::state::hex(&b)), Some(one));
        assert_eq!(decode(&"AB".repeat(32)), None);
    }
}
