//! Walking one tenant's chain: every record canonical, in its place, linked to the one before;
//! each hash a valid checkpoint signed at that place matched; a chain that starts after seq 1
//! linked through the `pruned_through` record that names its start. The first fault ends the
//! walk, named by its record.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::audit::record::{FORMAT, Kind, canonical_record, genesis, link};
use crate::store::JournalStore;
use crate::store::{AuditRecord, StoreError};

/// Records read per page.
const PAGE: usize = 10_000;

/// What is wrong at a record (or a checkpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Its bytes do not hash, with the record before, to its stored hash: edited.
    Edited,
    /// Records between two that are there are missing: deleted.
    Deleted {
        /// The first missing seq.
        from: i64,
        /// The last missing seq.
        through: i64,
    },
    /// The record in this place says it is another tenant's, or another place's: moved or
    /// swapped.
    Reordered {
        /// The place it says.
        says: String,
    },
    /// Its bytes are not a canonical record of this format.
    Malformed(String),
    /// The chain disagrees with a valid signed checkpoint at this seq: a record at or before
    /// it (after `after`, the last that matched one) was inserted, edited or deleted and the
    /// hashes after it recomputed.
    NotAsSigned {
        /// The checkpoint.
        checkpoint: i64,
        /// The last seq a checkpoint matched (0: none).
        after: i64,
    },
    /// The chain ends before the seq a valid checkpoint holds: its tail was deleted.
    TailMissing {
        /// The checkpoint.
        checkpoint: i64,
        /// The seq it holds.
        signed: i64,
    },
    /// A valid checkpoint holds this tenant, and the store has no chain for it.
    TenantMissing {
        /// The checkpoint.
        checkpoint: i64,
        /// The seq it holds.
        signed: i64,
    },
    /// The chain starts after seq 1, and no `pruned_through` record names its start.
    StartUnproven,
    /// The store's head disagrees with the chain's last record.
    HeadMismatch {
        /// The head's seq.
        head: i64,
    },
    /// A checkpoint is not signed by a key of the keyring.
    UnknownKey(String),
    /// A checkpoint's signature is not valid.
    BadSignature,
    /// A checkpoint names a previous checkpoint the store does not have: one was deleted or
    /// replaced.
    CheckpointMissing,
    /// The anchored checkpoint is not in the store.
    AnchorMissing,
    /// Records a valid checkpoint signed (from this seq through `through`) are gone, and no
    /// checkpoint older than the retention it states signed them: deleted, not pruned.
    Erased {
        /// The checkpoint that signed them.
        checkpoint: i64,
        /// The last of them.
        through: i64,
    },
    /// The chain starts after a `pruned_through` record naming this seq, and no valid
    /// checkpoint older than the retention it states signed that record: the records before
    /// were deleted, not pruned.
    PruneUnexplained,
    /// Records are kept and no checkpoint verifies: nothing proves them against a rewrite.
    NothingSigned {
        /// How many records.
        records: u64,
    },
    /// A claim used an approval whose decision the chain does not show.
    Undecided {
        /// The approval.
        approval: String,
    },
    /// An approval's decision is not signed by a key of its tenant's approvers (or unsigned
    /// where every approver of the tenant signs).
    DecisionUnsigned {
        /// The approval.
        approval: String,
        /// Why.
        why: String,
    },
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Edited => write!(f, "edited: its bytes do not hash to its stored hash"),
            Fault::Deleted { from, through } if from == through => {
                write!(f, "record {from} before it was deleted")
            }
            Fault::Deleted { from, through } => {
                write!(f, "records {from} to {through} before it were deleted")
            }
            Fault::Reordered { says } => {
                write!(f, "reordered: the record in this place says it is {says}")
            }
            Fault::Malformed(why) => write!(f, "not a record: {why}"),
            Fault::NotAsSigned { checkpoint, after } => write!(
                f,
                "not the hash checkpoint #{checkpoint} signed here: a record after seq {after} \
                 and up to this one was inserted, edited or deleted, and the hashes after it \
                 recomputed"
            ),
            Fault::TailMissing { checkpoint, signed } => write!(
                f,
                "the chain ends here, and checkpoint #{checkpoint} signed it through seq \
                 {signed}: its last records were deleted"
            ),
            Fault::TenantMissing { checkpoint, signed } => write!(
                f,
                "the store has no chain for this tenant, and checkpoint #{checkpoint} signed it \
                 through seq {signed}: the whole chain was deleted"
            ),
            Fault::StartUnproven => write!(
                f,
                "the chain starts here, and no pruned_through record names the records before \
                 it: they were deleted"
            ),
            Fault::HeadMismatch { head } => write!(
                f,
                "the chain ends here, and the store's head says seq {head}: records were deleted \
                 or the head was edited"
            ),
            Fault::UnknownKey(id) => write!(
                f,
                "signed by key {id}, which is not a trusted public key (--public-key, or the \
                 config's audit.public_keys)"
            ),
            Fault::BadSignature => write!(f, "its signature is not valid: forged or edited"),
            Fault::CheckpointMissing => write!(
                f,
                "it names a previous checkpoint the store does not have: a checkpoint was \
                 deleted or replaced"
            ),
            Fault::Erased {
                checkpoint,
                through,
            } => write!(
                f,
                "missing through seq {through}, which checkpoint #{checkpoint} signed, and no \
                 checkpoint older than its retention signed them: records were deleted, not \
                 pruned"
            ),
            Fault::PruneUnexplained => write!(
                f,
                "the chain starts after a pruned_through record naming this seq, and no \
                 checkpoint older than its retention signed it: the records before were \
                 deleted, not pruned"
            ),
            Fault::NothingSigned { records } => write!(
                f,
                "{records} records are kept and no checkpoint verifies: nothing proves them \
                 against a rewrite (`brain-harness audit sign` with the key)"
            ),
            Fault::Undecided { approval } => write!(
                f,
                "a claim used approval {approval}, whose decision the chain does not show: it \
                 was approved in the store, not by an approver"
            ),
            Fault::DecisionUnsigned { approval, why } => {
                write!(
                    f,
                    "the decision of approval {approval} does not stand: {why}"
                )
            }
            Fault::AnchorMissing => write!(
                f,
                "the anchored checkpoint is not in the store: checkpoints were deleted"
            ),
        }
    }
}

/// The first fault of a chain: the tenant, the record's seq (a checkpoint's id for a
/// checkpoint's fault, with `tenant` empty), what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    /// The tenant ("" for a checkpoint).
    pub tenant: String,
    /// The record's seq (a checkpoint's id).
    pub seq: i64,
    /// What is wrong.
    pub fault: Fault,
}

impl std::fmt::Display for Break {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tenant.is_empty() && self.seq == 0 {
            write!(f, "{}", self.fault)
        } else if self.tenant.is_empty() {
            write!(f, "checkpoint #{}: {}", self.seq, self.fault)
        } else if self.seq == 0 {
            write!(f, "tenant {:?}: {}", self.tenant, self.fault)
        } else {
            write!(
                f,
                "tenant {:?}, record {}: {}",
                self.tenant, self.seq, self.fault
            )
        }
    }
}

/// What a walk found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Walked {
    /// Records checked.
    pub(crate) records: u64,
    /// The first record's seq and time.
    pub(crate) first: Option<(i64, i64)>,
    /// The record that proves where the chain starts (a walk from seq 1): record 1, or the
    /// `pruned_through` record that names the record before the first: its seq and hash.
    pub(crate) start: Option<(i64, String)>,
    /// Approvals whose use or decision does not stand (with `approvers`).
    pub(crate) unapproved: Vec<Break>,
    /// The last record checked: seq, hash, time.
    pub(crate) last: Option<(i64, String, i64)>,
    /// The first fault.
    pub(crate) broken: Option<Break>,
    /// The calls claimed with no outcome after: (session, call id) → (record seq, owner, time).
    pub(crate) open: BTreeMap<(String, String), (i64, String, i64)>,
}

/// Walks `tenant`'s chain from `from` (its predecessor's stored hash trusted when `from` > 1),
/// checking each hash `signed` holds at its seq (hash, checkpoint id); with `approvers`, that
/// each claim's approval was decided in the chain, and each decision signed as its tenant's
/// approvers sign.
pub(crate) async fn walk(
    store: &dyn JournalStore,
    tenant: &str,
    from: i64,
    signed: &BTreeMap<i64, (String, i64)>,
    approvers: Option<&crate::approvals::signed::ApproverKeys>,
) -> Result<Walked, StoreError> {
    let mut walk = Walk {
        tenant,
        from,
        signed,
        approvers,
        walked: Walked::default(),
        previous: None,
        unproven: None,
        started: false,
        matched: 0,
        asked: BTreeSet::new(),
        approved: BTreeSet::new(),
    };
    let mut next = if from > 1 { from - 1 } else { 1 };
    loop {
        let page = store.audit_records(tenant, next, PAGE).await?;
        let full = page.len() == PAGE;
        for record in page {
            next = record.seq + 1;
            if let Err(broken) = walk.record(record) {
                walk.walked.broken = Some(broken);
                return Ok(walk.walked);
            }
        }
        if !full {
            break;
        }
    }
    if let Some(first) = &walk.unproven {
        walk.walked.broken = Some(walk.fault(first.seq, Fault::StartUnproven));
    }
    Ok(walk.walked)
}

/// A [`walk`] under way: what it checks against, what it found so far, and where it is.
struct Walk<'a> {
    tenant: &'a str,
    from: i64,
    signed: &'a BTreeMap<i64, (String, i64)>,
    approvers: Option<&'a crate::approvals::signed::ApproverKeys>,
    walked: Walked,
    /// The record before (seq, hash), once known.
    previous: Option<(i64, String)>,
    /// A chain that starts after seq 1 keeps its first record until the pruned_through record
    /// that names its start proves its link.
    unproven: Option<AuditRecord>,
    /// Whether the walk has read its first record.
    started: bool,
    /// The last seq whose hash a checkpoint signed and the chain matched.
    matched: i64,
    /// Approvals asked in the chain.
    asked: BTreeSet<String>,
    /// Approvals decided approved in the chain.
    approved: BTreeSet<String>,
}

impl Walk<'_> {
    /// The break of this chain at `seq`.
    fn fault(&self, seq: i64, fault: Fault) -> Break {
        Break {
            tenant: self.tenant.to_owned(),
            seq,
            fault,
        }
    }

    /// Checks the chain's next `record`: its link to the record before, its hash against a
    /// checkpoint's, the calls it opens or ends, its approval; the chain's first break, if any.
    fn record(&mut self, record: AuditRecord) -> Result<(), Break> {
        if !self.started {
            self.started = true;
            if self.from > 1 && record.seq == self.from - 1 {
                self.previous = Some((record.seq, record.hash));
                return Ok(());
            }
            if record.seq == 1 {
                self.previous = Some((0, genesis(self.tenant)));
                self.walked.start = Some((1, record.hash.clone()));
            } else if self.from <= 1 {
                self.unproven = Some(record.clone());
            }
        }
        self.walked.first.get_or_insert((record.seq, record.at_ms));
        if let Some((seq, _)) = &self.previous
            && record.seq != seq + 1
        {
            let deleted = Fault::Deleted {
                from: seq + 1,
                through: record.seq - 1,
            };
            return Err(self.fault(record.seq, deleted));
        }
        let previous = self.previous.as_ref().map(|(_, hash)| &**hash);
        let value = check(self.tenant, &record, previous)?;
        self.calls(&record, &value);
        let pruned = self.from > 1 || self.walked.start.as_ref().is_none_or(|(seq, _)| *seq != 1);
        let unapproved = approval(
            self.tenant,
            record.seq,
            &value,
            self.approvers,
            pruned,
            (&mut self.asked, &mut self.approved),
        );
        self.walked.unapproved.extend(unapproved);
        self.prove_start(&record, &value)?;
        self.as_signed(&record)?;
        self.walked.records += 1;
        self.walked.last = Some((record.seq, record.hash.clone(), record.at_ms));
        self.previous = Some((record.seq, record.hash));
        Ok(())
    }

    /// The calls `record` (read as `value`) opens (claimed, resumed) or ends.
    fn calls(&mut self, record: &AuditRecord, value: &Value) {
        let text = |field: &str| value[field].as_str().unwrap_or_default().to_owned();
        let call = (text("session"), text("call_id"));
        match Kind::of(value) {
            Some(kind) if kind.opens() => {
                self.walked
                    .open
                    .insert(call, (record.seq, text("owner"), record.at_ms));
            }
            Some(kind) if kind.ends() => {
                self.walked.open.remove(&call);
            }
            _ => {}
        }
    }

    /// Where `record` (read as `value`) is the pruned_through record that names the record
    /// before the unproven first one, proves the first record's link: the chain starts there.
    fn prove_start(&mut self, record: &AuditRecord, value: &Value) -> Result<(), Break> {
        if let Some(first) = &self.unproven
            && Kind::of(value) == Some(Kind::PrunedThrough)
            && let (Some(seq), Some(hash)) = (
                value["through_seq"].as_i64(),
                value["through_hash"].as_str(),
            )
            && seq == first.seq - 1
        {
            if link(hash, &first.record) != first.hash {
                return Err(self.fault(first.seq, Fault::Edited));
            }
            self.walked.start = Some((record.seq, record.hash.clone()));
            self.unproven = None;
        }
        Ok(())
    }

    /// Checks `record`'s hash against the one a checkpoint signed at its seq, if any.
    fn as_signed(&mut self, record: &AuditRecord) -> Result<(), Break> {
        if let Some((hash, checkpoint)) = self.signed.get(&record.seq) {
            if *hash != record.hash {
                let checkpoint = *checkpoint;
                return Err(self.fault(
                    record.seq,
                    Fault::NotAsSigned {
                        checkpoint,
                        after: self.matched,
                    },
                ));
            }
            self.matched = record.seq;
        }
        Ok(())
    }
}

/// What an approval's record says, checked: a claim's approval decided approved before it in
/// the chain (unless the chain was pruned and its asking is not in it either); a decision
/// signed as the tenant's approvers sign. Returns the fault, if any.
fn approval(
    tenant: &str,
    seq: i64,
    value: &Value,
    approvers: Option<&crate::approvals::signed::ApproverKeys>,
    pruned: bool,
    (asked, approved): (&mut BTreeSet<String>, &mut BTreeSet<String>),
) -> Option<Break> {
    let text = |field: &str| value[field].as_str().unwrap_or_default();
    let id = text("approval");
    let fault = |fault| {
        Some(Break {
            tenant: tenant.to_owned(),
            seq,
            fault,
        })
    };
    match Kind::of(value) {
        Some(Kind::ApprovalAsked) => {
            asked.insert(id.to_owned());
        }
        Some(kind @ (Kind::ApprovalApproved | Kind::ApprovalDenied)) => {
            let signature = match (value["key_id"].as_str(), value["signature"].as_str()) {
                (Some(key_id), Some(signature)) => Some(crate::store::DecisionSignature {
                    key_id: key_id.to_owned(),
                    signature: signature.to_owned(),
                }),
                _ => None,
            };
            let statement = crate::approvals::signed::Statement {
                approval: id,
                tenant,
                digest: text("digest"),
                policies: text("policies"),
                approved: kind == Kind::ApprovalApproved,
                expires_ms: value["expires"].as_i64().unwrap_or_default(),
            };
            // A decision recorded before decisions carried their statement: nothing to check.
            let old = value.get("digest").is_none();
            if let (Some(approvers), false) = (approvers, old)
                && let Err(why) = approvers.check(&statement, signature.as_ref())
            {
                return fault(Fault::DecisionUnsigned {
                    approval: id.to_owned(),
                    why: why.to_string(),
                });
            }
            if kind == Kind::ApprovalApproved {
                approved.insert(id.to_owned());
            }
        }
        Some(Kind::Claimed)
            if !id.is_empty() && !approved.contains(id) && (asked.contains(id) || !pruned) =>
        {
            return fault(Fault::Undecided {
                approval: id.to_owned(),
            });
        }
        _ => {}
    }
    None
}

/// `record` parsed, or its first fault in its place after a record whose hash is `previous`
/// (not known: its link is not checked here).
fn check(tenant: &str, record: &AuditRecord, previous: Option<&str>) -> Result<Value, Break> {
    let fault = |fault: Fault| {
        Err(Break {
            tenant: tenant.to_owned(),
            seq: record.seq,
            fault,
        })
    };
    let value: Value = match serde_json::from_str(&record.record) {
        Ok(value) => value,
        Err(error) => return fault(Fault::Malformed(error.to_string())),
    };
    if canonical_record(&value) != record.record {
        return fault(Fault::Malformed(
            "its bytes are not canonical (RFC 8785)".into(),
        ));
    }
    if value["v"].as_u64() != Some(FORMAT) {
        return fault(Fault::Malformed(format!(
            "format {} is not {FORMAT}",
            value["v"]
        )));
    }
    let (says_tenant, says_seq) = (value["tenant"].as_str(), value["seq"].as_i64());
    if says_tenant != Some(tenant) || says_seq != Some(record.seq) {
        return fault(Fault::Reordered {
            says: format!(
                "tenant {:?}'s record {}",
                says_tenant.unwrap_or(""),
                says_seq.unwrap_or(0)
            ),
        });
    }
    if value["at"].as_i64() != Some(record.at_ms) {
        return fault(Fault::Edited);
    }
    match previous {
        Some(hash) if link(hash, &record.record) != record.hash => fault(Fault::Edited),
        _ => Ok(value),
    }
}
