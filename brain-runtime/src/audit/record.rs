//! The audit chain's format: what each record says, its canonical bytes (RFC 8785, JCS) and
//! its link. Each tenant has one chain: record `n` carries the tenant and `seq = n`, and
//! `hash_n = SHA-256(hash_{n-1} ‖ JCS(record_n))` with `hash_0 = SHA-256("brain-audit-v1" ‖
//! tenant)`, hashes as their 32 bytes (stored as lowercase hex). A record holds digests of
//! arguments and results, never their bodies.
//!
//! The stores append a record in the same transaction as the journal's write it describes
//! (`sqlite/audit.rs`, `postgres/audit.rs`); nothing here does I/O.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::store::{Claim, EntryState, Key, Record};

/// The version every record carries (`"v"`).
pub const FORMAT: u64 = 1;

/// A record's kind (its `"kind"`): what the writer writes and every reader (verify, export)
/// matches on, one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A call claimed: about to be sent.
    Claimed,
    /// A call's task resumed by another owner.
    Resumed,
    /// A call ended after it was sent.
    Finished,
    /// A call ended before anything was sent.
    NotSent,
    /// A call recorded as unknown by a retry that found its owner dead.
    TakenOverAsUnknown,
    /// A pending approval recorded for a held call.
    ApprovalAsked,
    /// An approval approved.
    ApprovalApproved,
    /// An approval denied.
    ApprovalDenied,
    /// A server listing a bound tool otherwise than its pin.
    Drift,
    /// A policy denied a call.
    PolicyDenied,
    /// The chain's own retention removed the records through the one it names.
    PrunedThrough,
}

impl Kind {
    const ALL: [Kind; 11] = [
        Kind::Claimed,
        Kind::Resumed,
        Kind::Finished,
        Kind::NotSent,
        Kind::TakenOverAsUnknown,
        Kind::ApprovalAsked,
        Kind::ApprovalApproved,
        Kind::ApprovalDenied,
        Kind::Drift,
        Kind::PolicyDenied,
        Kind::PrunedThrough,
    ];

    /// As written in a record.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Claimed => "claimed",
            Kind::Resumed => "resumed",
            Kind::Finished => "finished",
            Kind::NotSent => "not_sent",
            Kind::TakenOverAsUnknown => "taken_over_as_unknown",
            Kind::ApprovalAsked => "approval_asked",
            Kind::ApprovalApproved => "approval_approved",
            Kind::ApprovalDenied => "approval_denied",
            Kind::Drift => "drift",
            Kind::PolicyDenied => "policy_denied",
            Kind::PrunedThrough => "pruned_through",
        }
    }

    /// The kind of a record read as JSON; `None` for one no brain writes.
    pub(crate) fn of(record: &Value) -> Option<Kind> {
        let kind = record["kind"].as_str()?;
        Kind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// Whether a record of this kind opens a call (claimed, resumed).
    pub(crate) fn opens(self) -> bool {
        matches!(self, Kind::Claimed | Kind::Resumed)
    }

    /// Whether a record of this kind ends a call.
    pub(crate) fn ends(self) -> bool {
        matches!(
            self,
            Kind::Finished | Kind::NotSent | Kind::TakenOverAsUnknown
        )
    }
}

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
    /// An approval decided by an approver: what its statement says, and a key approver's
    /// signature over it.
    ApprovalDecided {
        id: String,
        key: Key,
        approver: String,
        approved: bool,
        digest: String,
        policies: String,
        expires_ms: i64,
        signature: Option<crate::store::DecisionSignature>,
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

/// A record's field value: what the format allows (strings, booleans, integers below 2^53).
#[derive(Clone, Copy)]
enum Field<'a> {
    Text(&'a str),
    Int(i64),
    Bool(bool),
}

impl Event {
    /// The record of a drift seen (in each chain of `drift.tenants`).
    pub(crate) fn drift(drift: &crate::store::Drift) -> Event {
        Event::Drift {
            binding: drift.binding.clone(),
            pinned: drift.pinned.clone(),
            listed: drift.listed.clone(),
            refused: drift.refused,
            process: drift.process.clone(),
        }
    }

    /// The record of an approval's decision, as the store holds it once decided.
    pub(crate) fn decided(approval: &crate::store::Approval) -> Event {
        Event::ApprovalDecided {
            id: approval.id.clone(),
            key: approval.key.clone(),
            approver: approval.decided_by.clone().unwrap_or_default(),
            approved: approval.state == crate::store::ApprovalState::Approved
                || approval.state == crate::store::ApprovalState::Used,
            digest: approval.digest.clone(),
            policies: approval.policies.clone(),
            expires_ms: approval.expires_ms,
            signature: approval.signature.clone(),
        }
    }

    /// The record of a call the policies refused.
    pub(crate) fn denied(denial: &crate::store::Denial) -> Event {
        Event::Denied {
            key: denial.key.clone(),
            binding: denial.binding.clone(),
            principal: denial.principal.clone(),
            digest: denial.digest.clone(),
        }
    }

    /// The record's kind and fields besides `v`, `tenant`, `seq` and `at`.
    fn fields(&self) -> (Kind, Vec<(&'static str, Field<'_>)>) {
        use Field::{Bool, Int, Text};
        match self {
            Event::Claimed { claim, approval } => {
                (Kind::Claimed, claimed(claim, approval.as_deref()))
            }
            Event::Settled {
                key,
                owner,
                record,
                taken_over,
            } => settled(key, owner, record, *taken_over),
            Event::Resumed { key, from, to } => (
                Kind::Resumed,
                vec![
                    ("session", Text(&key.session)),
                    ("call_id", Text(&key.call_id)),
                    ("from", Text(from)),
                    ("owner", Text(to)),
                ],
            ),
            Event::ApprovalAsked {
                id,
                key,
                binding,
                principal,
                digest,
                policies,
            } => (
                Kind::ApprovalAsked,
                vec![
                    ("session", Text(&key.session)),
                    ("call_id", Text(&key.call_id)),
                    ("approval", Text(id)),
                    ("binding", Text(binding)),
                    ("principal", Text(principal)),
                    ("digest", Text(digest)),
                    ("policies", Text(policies)),
                ],
            ),
            Event::ApprovalDecided {
                id,
                key,
                approver,
                approved,
                digest,
                policies,
                expires_ms,
                signature,
            } => {
                let decision = [
                    ("approval", Text(id.as_str())),
                    ("approver", Text(approver)),
                    ("digest", Text(digest)),
                    ("policies", Text(policies)),
                ];
                decided(key, decision, *approved, *expires_ms, signature.as_ref())
            }
            Event::Drift {
                binding,
                pinned,
                listed,
                refused,
                process,
            } => (
                Kind::Drift,
                vec![
                    ("binding", Text(binding)),
                    ("pinned", Text(pinned)),
                    ("listed", Text(listed)),
                    ("refused", Bool(*refused)),
                    ("process", Text(process)),
                ],
            ),
            Event::Denied {
                key,
                binding,
                principal,
                digest,
            } => (
                Kind::PolicyDenied,
                vec![
                    ("session", Text(&key.session)),
                    ("call_id", Text(&key.call_id)),
                    ("binding", Text(binding)),
                    ("principal", Text(principal)),
                    ("digest", Text(digest)),
                ],
            ),
            Event::PrunedThrough { seq, hash } => (
                Kind::PrunedThrough,
                vec![("through_seq", Int(*seq)), ("through_hash", Text(hash))],
            ),
        }
    }

    /// The record's canonical bytes (RFC 8785) at its place: `tenant`'s record `seq`, at
    /// `at_ms` on the store's clock. Written directly: flat, ASCII keys sorted (their UTF-16
    /// order is their byte order), strings escaped as JSON (which RFC 8785 keeps), integers in
    /// decimal.
    pub(crate) fn record(&self, tenant: &str, seq: i64, at_ms: i64) -> String {
        let (kind, mut fields) = self.fields();
        fields.extend([
            ("kind", Field::Text(kind.as_str())),
            ("v", Field::Int(FORMAT as i64)),
            ("tenant", Field::Text(tenant)),
            ("seq", Field::Int(seq)),
            ("at", Field::Int(at_ms)),
        ]);
        fields.sort_unstable_by_key(|(key, _)| *key);
        let mut out = String::with_capacity(64 + 48 * fields.len());
        out.push('{');
        for (i, (key, value)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(key);
            out.push_str("\":");
            match value {
                Field::Text(text) => escape(&mut out, text),
                Field::Int(n) => out.push_str(&n.to_string()),
                Field::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            }
        }
        out.push('}');
        out
    }
}

/// The fields of a call's claim (with the approval it used, if any).
fn claimed<'a>(claim: &'a Claim, approval: Option<&'a str>) -> Vec<(&'static str, Field<'a>)> {
    use Field::Text;
    let mut fields = vec![
        ("session", Text(&claim.key.session)),
        ("call_id", Text(&claim.key.call_id)),
        ("binding", Text(&claim.binding)),
        ("digest", Text(&claim.digest)),
        ("owner", Text(&claim.owner)),
    ];
    if let Some(approval) = approval {
        fields.push(("approval", Text(approval)));
    }
    if let Some(upstream) = &claim.upstream {
        fields.push(("subject", Text(&upstream.subject)));
        fields.push(("actor", Text(&upstream.actor)));
    }
    fields
}

/// The kind and fields of a call's outcome `record`, settled by `owner` (or, `taken_over`, by
/// the owner that took the call over as unknown).
fn settled<'a>(
    key: &'a Key,
    owner: &'a str,
    record: &'a Record,
    taken_over: bool,
) -> (Kind, Vec<(&'static str, Field<'a>)>) {
    use Field::{Bool, Text};
    let kind = match (taken_over, record.state) {
        (true, _) => Kind::TakenOverAsUnknown,
        (false, EntryState::NotSent) => Kind::NotSent,
        (false, _) => Kind::Finished,
    };
    let fields = vec![
        ("session", Text(&key.session)),
        ("call_id", Text(&key.call_id)),
        ("owner", Text(owner)),
        ("state", Text(record.state.as_str())),
        ("is_error", Bool(record.is_error)),
        ("unknown_outcome", Bool(record.unknown_outcome)),
        ("result_digest", Text(&record.result_digest)),
    ];
    (kind, fields)
}

/// The kind (approved or denied) and fields of an approval's decision on the call `key`: the
/// `decision`'s (approval, approver, digest, policies), its expiry, and the approver's
/// signature, if any.
fn decided<'a>(
    key: &'a Key,
    decision: [(&'static str, Field<'a>); 4],
    approved: bool,
    expires_ms: i64,
    signature: Option<&'a crate::store::DecisionSignature>,
) -> (Kind, Vec<(&'static str, Field<'a>)>) {
    use Field::{Int, Text};
    let kind = if approved {
        Kind::ApprovalApproved
    } else {
        Kind::ApprovalDenied
    };
    let mut fields = vec![
        ("session", Text(&key.session)),
        ("call_id", Text(&key.call_id)),
    ];
    fields.extend(decision);
    fields.push(("expires", Int(expires_ms)));
    if let Some(signed) = signature {
        fields.push(("key_id", Text(&signed.key_id)));
        fields.push(("signature", Text(&signed.signature)));
    }
    (kind, fields)
}

/// `text` as a JSON string, escaped as RFC 8785 does: `"` and `\\`, the short escapes, other
/// control characters as `\\u00xx` (lowercase hex); everything else as it is.
fn escape(out: &mut String, text: &str) {
    out.push('"');
    // Most strings need no escape: copied whole.
    if !text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(text);
        out.push('"');
        return;
    }
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// What RFC 8785 makes of a parsed record: written directly when it is flat (strings, booleans,
/// integers under ASCII keys, whose byte order is their UTF-16 order), else by `serde_jcs`.
/// Verification checks every record's bytes with it.
pub(crate) fn canonical_record(value: &Value) -> String {
    let Some(fields) = value.as_object() else {
        return canonical(value);
    };
    // Sorted here: with serde_json's `preserve_order` a map keeps its input's order.
    let mut fields: Vec<(&String, &Value)> = fields.iter().collect();
    fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = String::with_capacity(512);
    out.push('{');
    for (i, (key, field)) in fields.into_iter().enumerate() {
        if !key.is_ascii() {
            return canonical(value);
        }
        if i > 0 {
            out.push(',');
        }
        escape(&mut out, key);
        out.push(':');
        match field {
            Value::String(text) => escape(&mut out, text),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) if n.is_i64() || n.is_u64() => out.push_str(&n.to_string()),
            _ => return canonical(value),
        }
    }
    out.push('}');
    out
}

pub(crate) use crate::state::canonical;

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
    let digits = hex.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let nibble = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut bytes = [0u8; 32];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(bytes)
}

/// How far pruning may go, from the newest checkpoint (format 2) older than the retention it
/// states (`outlived`: its id and body), and whether the store holds any checkpoint of format
/// 2 (`signed`): every record pruned must have been signed by a checkpoint that outlived its
/// retention, which verification then finds (and so pruning keeps that checkpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PruneBound {
    /// No checkpoint signs the chains: records go by their age alone.
    Unsigned,
    /// Checkpoints sign the chains, and none outlived its retention yet: nothing goes.
    Nothing,
    /// Through each tenant's head in the outlived checkpoint `id` (a tenant it lacks keeps
    /// every record); checkpoints older than it go.
    Through {
        /// The outlived checkpoint.
        id: i64,
        /// Each tenant's head seq in it.
        heads: std::collections::BTreeMap<String, i64>,
    },
}

impl PruneBound {
    pub(crate) fn of(signed: bool, outlived: Option<(i64, &str)>) -> PruneBound {
        let Some((id, body)) = outlived else {
            return if signed {
                PruneBound::Nothing
            } else {
                PruneBound::Unsigned
            };
        };
        let value: Value = serde_json::from_str(body).unwrap_or_default();
        let heads = value["heads"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(tenant, head)| Some((tenant.clone(), head["seq"].as_i64()?)))
            .collect();
        PruneBound::Through { id, heads }
    }

    /// The last seq of `tenant` to prune, when its records through `aged` are old enough.
    pub(crate) fn through(&self, tenant: &str, aged: i64) -> Option<i64> {
        match self {
            PruneBound::Unsigned => Some(aged),
            PruneBound::Nothing => None,
            PruneBound::Through { heads, .. } => heads.get(tenant).map(|seq| aged.min(*seq)),
        }
    }
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

    #[test]
    fn records_are_what_rfc_8785_makes_of_them() {
        let key = Key {
            tenant: "t".into(),
            session: "s\"\\\n\u{1f}\u{7f}/é😀".into(),
            call_id: "c\u{8}\u{c}\t\r".into(),
        };
        let event = Event::Denied {
            key,
            binding: "b".into(),
            principal: "Brain::User::\"iss|sub\"".into(),
            digest: "sha256:00".into(),
        };
        let record = event.record("t\u{0}", 9_007_199_254_740_991, -1);
        let value: Value = serde_json::from_str(&record).unwrap();
        assert_eq!(canonical(&value), record);
        assert_eq!(canonical_record(&value), record);
        assert_eq!(value["session"], "s\"\\\n\u{1f}\u{7f}/é😀");
    }
}
