//! A checkpoint's body (format 2): every chain's head and start, the time, the retention the
//! chains are kept for, the key and the checkpoint before; and what explains records gone from a
//! chain's start — a checkpoint that signed them and outlived the retention it states, on the
//! verifier's own clock.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::chain::{Break, Fault};
use crate::audit::record::canonical;
use crate::store::Checkpoint;

/// A checkpoint's body: every tenant's head and start, a time, the retention the chains are
/// kept for, and the key that signs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeads {
    /// The checkpoint's id in the store.
    pub id: i64,
    /// When it was signed (the store's clock, milliseconds).
    pub at_ms: i64,
    /// The key that signed it.
    pub key_id: String,
    /// Each tenant's chain as signed.
    pub heads: BTreeMap<String, SignedHead>,
    /// The digest of the checkpoint it follows ("" for the first).
    pub previous: String,
    /// How long the signer's chains keep records (milliseconds): once the checkpoint is older
    /// than this, the records it signed may have been pruned. `None`: a checkpoint of format 1,
    /// which explains no missing record.
    pub retention_ms: Option<i64>,
}

/// One chain in a checkpoint: its head, and (format 2) where it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHead {
    /// The last record's seq.
    pub seq: i64,
    /// Its hash.
    pub hash: String,
    /// Where the chain started (`None`: format 1, which signed the head alone).
    pub start: Option<ChainStart>,
}

/// Where a chain started when a checkpoint signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainStart {
    /// The record that proves the start: record 1, or the `pruned_through` record that names
    /// the record before `from`.
    pub seq: i64,
    /// Its hash.
    pub hash: String,
    /// The first record the checkpoint signed.
    pub from: i64,
}

impl SignedHead {
    /// The first record it signed (format 1: the head alone).
    pub(super) fn from(&self) -> i64 {
        self.start.as_ref().map_or(self.seq, |start| start.from)
    }
}

impl SignedHeads {
    /// The body of a checkpoint, parsed (canonical, format 1 or 2), or why not.
    pub(super) fn parse(checkpoint: &Checkpoint) -> Result<SignedHeads, String> {
        let value: Value = serde_json::from_str(&checkpoint.body).map_err(|e| e.to_string())?;
        if canonical(&value) != checkpoint.body {
            return Err("its body is not canonical (RFC 8785)".into());
        }
        let version = value["v"].as_u64();
        if !matches!(version, Some(1 | 2)) || value["kind"] != "checkpoint" {
            return Err(format!("format {} is not 1 or 2", value["v"]));
        }
        let heads = value["heads"]
            .as_object()
            .ok_or("it has no heads")?
            .iter()
            .map(|(tenant, head)| {
                let seq = head["seq"].as_i64().ok_or("a head without a seq")?;
                let hash = head["hash"].as_str().ok_or("a head without a hash")?;
                let start = match version {
                    Some(2) => {
                        let start = &head["start"];
                        Some(ChainStart {
                            seq: start["seq"].as_i64().ok_or("a head without a start")?,
                            hash: start["hash"]
                                .as_str()
                                .ok_or("a start without a hash")?
                                .to_owned(),
                            from: start["from"].as_i64().ok_or("a start without a from")?,
                        })
                    }
                    _ => None,
                };
                let head = SignedHead {
                    seq,
                    hash: hash.to_owned(),
                    start,
                };
                Ok((tenant.clone(), head))
            })
            .collect::<Result<_, &str>>()?;
        let retention_ms = match version {
            Some(2) => Some(
                value["retention_ms"]
                    .as_i64()
                    .ok_or("it has no retention")?,
            ),
            _ => None,
        };
        Ok(SignedHeads {
            id: checkpoint.id,
            at_ms: value["at"].as_i64().ok_or("it has no time")?,
            key_id: value["key_id"]
                .as_str()
                .ok_or("it has no key id")?
                .to_owned(),
            heads,
            previous: value["previous"].as_str().unwrap_or_default().to_owned(),
            retention_ms,
        })
    }

    pub(super) fn body(&self) -> String {
        let heads: serde_json::Map<String, Value> = self
            .heads
            .iter()
            .map(|(tenant, head)| {
                let mut value = json!({"seq": head.seq, "hash": head.hash});
                if let Some(start) = &head.start {
                    value["start"] =
                        json!({"seq": start.seq, "hash": start.hash, "from": start.from});
                }
                (tenant.clone(), value)
            })
            .collect();
        match self.retention_ms {
            Some(retention_ms) => canonical(&json!({"v": 2, "kind": "checkpoint",
                "at": self.at_ms, "key_id": self.key_id, "heads": heads,
                "previous": self.previous, "retention_ms": retention_ms})),
            None => canonical(&json!({"v": 1, "kind": "checkpoint", "at": self.at_ms,
                "key_id": self.key_id, "heads": heads, "previous": self.previous})),
        }
    }

    /// Whether it is older than the retention it states on the verifier's clock `now_ms`:
    /// the records it signed may have been pruned since.
    pub(super) fn outlived(&self, now_ms: i64) -> bool {
        self.retention_ms
            .is_some_and(|retention| now_ms.saturating_sub(self.at_ms) > retention)
    }
}

/// The first seq of `from..=through` in `tenant`'s chain that no checkpoint of `valid`
/// older than its retention signed (`None`: the retention explains every one of them gone).
pub(super) fn unexplained(
    tenant: &str,
    (from, through): (i64, i64),
    valid: &[SignedHeads],
    now_ms: i64,
) -> Option<i64> {
    let mut signed: Vec<(i64, i64)> = valid
        .iter()
        .filter(|checkpoint| checkpoint.outlived(now_ms))
        .filter_map(|checkpoint| checkpoint.heads.get(tenant))
        .filter(|head| head.start.is_some())
        .map(|head| (head.from(), head.seq))
        .collect();
    signed.sort_unstable();
    let mut next = from;
    for (first, last) in signed {
        if next > through || first > next {
            break;
        }
        next = next.max(last + 1);
    }
    (next <= through).then_some(next)
}

/// The verifier's own clock (milliseconds): whether a checkpoint outlived its retention is
/// never decided from the store's rows.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The faults of `tenant`'s start, whose first kept record is `first`, against `valid`: the
/// first record a checkpoint signed that is gone and that no retention explains, else (with
/// `proven`: signatures were checked) a pruned start no retention explains.
pub(super) fn start_faults(
    tenant: &str,
    first: i64,
    valid: &[SignedHeads],
    now_ms: i64,
    proven: bool,
) -> Option<Break> {
    let fault = |seq: i64, fault: Fault| {
        Some(Break {
            tenant: tenant.to_owned(),
            seq,
            fault,
        })
    };
    for checkpoint in valid {
        let Some(head) = checkpoint.heads.get(tenant) else {
            continue;
        };
        if head.start.is_none() || first <= head.from() {
            continue;
        }
        let through = head.seq.min(first - 1);
        if let Some(seq) = unexplained(tenant, (head.from(), through), valid, now_ms) {
            let checkpoint = checkpoint.id;
            return fault(
                seq,
                Fault::Erased {
                    checkpoint,
                    through,
                },
            );
        }
    }
    if proven && first > 1 && unexplained(tenant, (first - 1, first - 1), valid, now_ms).is_some() {
        return fault(first - 1, Fault::PruneUnexplained);
    }
    None
}

/// The digest a checkpoint's successor names (`previous`): SHA-256 of its body, hex.
pub(super) fn digest(body: &str) -> String {
    crate::state::hex(&Sha256::digest(body.as_bytes()))
}
