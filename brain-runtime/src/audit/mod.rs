//! A tamper-evident record of what ran: each tenant's audit chain beside the journal (appended
//! in the journal's own transactions, see [`crate::journal::audit`]), signed checkpoints of
//! every chain's head, and their verification.
//!
//! - [`verify`] walks the chains and checks every link and checkpoint; it ends in one line, or
//!   names the first broken record of each chain.
//! - [`sign`] writes a checkpoint with an [`AuditKey`], after it has checked every record since
//!   the last checkpoint it can verify: brain never signs a tail it cannot link.
//! - [`export`] writes the records and checkpoints as JSON Lines or OCSF, each with the
//!   record's exact bytes.

mod chain;
mod export;
mod keys;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::journal::audit::canonical;
use crate::journal::store::{Checkpoint, JournalStore, StoreError};

pub use chain::{Break, Fault};
pub use export::{ExportFormat, export};
pub use keys::{AuditKey, KEY_FILE_VAR, KeyError, Keyring};

use chain::walk;
use keys::Signed;
pub(crate) use keys::{key_id, signing_key};

/// How many records a runtime's signer lets pass before it signs (also every
/// [`DEFAULT_CHECKPOINT_EVERY`], idle or not, and at a clean shutdown).
pub const DEFAULT_CHECKPOINT_RECORDS: u64 = brain_config::audit::DEFAULT_CHECKPOINT_RECORDS;
/// How long a runtime's signer waits at most between checkpoints.
pub const DEFAULT_CHECKPOINT_EVERY: Duration =
    Duration::from_secs(brain_config::audit::DEFAULT_CHECKPOINT_SECONDS);
/// How long the audit chain keeps records (its own retention, beside the journal's 24 h).
pub const DEFAULT_AUDIT_RETENTION: Duration =
    Duration::from_secs(brain_config::audit::DEFAULT_AUDIT_RETENTION_DAYS * 24 * 3600);

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
    fn from(&self) -> i64 {
        self.start.as_ref().map_or(self.seq, |start| start.from)
    }
}

impl SignedHeads {
    /// The body of a checkpoint, parsed (canonical, format 1 or 2), or why not.
    fn parse(checkpoint: &Checkpoint) -> Result<SignedHeads, String> {
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
            Some(2) => Some(value["retention_ms"].as_i64().ok_or("it has no retention")?),
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

    fn body(&self) -> String {
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
    fn outlived(&self, now_ms: i64) -> bool {
        self.retention_ms
            .is_some_and(|retention| now_ms.saturating_sub(self.at_ms) > retention)
    }
}

/// The first seq of `from..=through` in `tenant`'s chain that no checkpoint of `valid`
/// older than its retention signed (`None`: the retention explains every one of them gone).
fn unexplained(
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
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The faults of `tenant`'s start, whose first kept record is `first`, against `valid`: the
/// first record a checkpoint signed that is gone and that no retention explains, else (with
/// `proven`: signatures were checked) a pruned start no retention explains.
fn start_faults(
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
    if proven && first > 1 && unexplained(tenant, (first - 1, first - 1), valid, now_ms).is_some()
    {
        return fault(first - 1, Fault::PruneUnexplained);
    }
    None
}

/// The digest a checkpoint's successor names (`previous`): SHA-256 of its body, hex.
fn digest(body: &str) -> String {
    crate::state::hex(&Sha256::digest(body.as_bytes()))
}

/// What [`verify`] checks.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Only this tenant's chain.
    pub tenant: Option<String>,
    /// From this seq on (the record before it trusted as stored).
    pub from: Option<i64>,
    /// The public keys checkpoints must be signed by (empty: signatures are not checked, and
    /// a writer who recomputes the hashes is not caught).
    pub keys: Keyring,
    /// A checkpoint kept elsewhere (as `brain-harness audit head` printed it): the store must
    /// still have it, and every chain must still reach it.
    pub anchor: Option<Checkpoint>,
    /// How often checkpoints are due: the newest older than twice this is warned about.
    pub checkpoint_every: Option<Duration>,
    /// The host config's approvers: each decision in the chains is checked against their keys
    /// (none: decisions are not checked, but a claim whose approval no decision shows is
    /// still named).
    pub approvers: Option<crate::approver::ApproverKeys>,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Default)]
pub struct Verification {
    /// Records checked.
    pub records: u64,
    /// Chains walked.
    pub tenants: usize,
    /// The newest record checked: tenant, seq, time.
    pub newest: Option<(String, i64, i64)>,
    /// Where the chains start: the oldest first record's time (records of calls journaled
    /// before are not in them).
    pub since_ms: Option<i64>,
    /// The newest checkpoint whose signature is valid.
    pub checkpoint: Option<SignedHeads>,
    /// The records after it (the unsigned tail).
    pub unsigned: u64,
    /// Checkpoints whose signature was checked valid.
    pub checkpoints: usize,
    /// What is not wrong but worth saying.
    pub warnings: Vec<String>,
    /// The first fault of each chain, and each checkpoint's.
    pub broken: Vec<Break>,
    /// The calls the chains show claimed and not ended.
    pub open: Vec<OpenCall>,
}

/// A call a chain shows claimed (or resumed) with no outcome after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCall {
    /// Its tenant.
    pub tenant: String,
    /// Its session.
    pub session: String,
    /// Its call id (through serve, the upstream id it derives).
    pub call_id: String,
    /// The claim's record.
    pub seq: i64,
    /// The owner that claimed it.
    pub owner: String,
    /// When.
    pub at_ms: i64,
    /// Whether that owner's lease is live now (`None`: the journal no longer has the call).
    pub owner_live: Option<bool>,
}

impl std::fmt::Display for OpenCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tenant {:?}, call {:?} in session {:?} (record {}): claimed at {} by {}, no outcome \
             recorded; {}",
            self.tenant,
            self.call_id,
            self.session,
            self.seq,
            crate::state::rfc3339(self.at_ms),
            self.owner,
            match self.owner_live {
                Some(true) => "it is running",
                Some(false) => {
                    "its owner's lease expired: a retry records it taken over as unknown"
                }
                None => "the journal no longer has it",
            }
        )
    }
}

impl Verification {
    /// Whether nothing is broken.
    pub fn holds(&self) -> bool {
        self.broken.is_empty()
    }

    /// The one line it ends in.
    pub fn summary(&self) -> String {
        if let Some(first) = self.broken.first() {
            return format!(
                "audit broken: {first}{}",
                match self.broken.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                }
            );
        }
        let through = match &self.newest {
            Some((tenant, seq, at)) => format!(
                ", through {tenant:?} seq {seq} at {}",
                crate::state::rfc3339(*at)
            ),
            None => String::new(),
        };
        let checkpoint = match &self.checkpoint {
            Some(c) => format!(
                "; checkpoint #{} ({}, {}, {}), {} records after it unsigned",
                c.id,
                c.key_id,
                crate::state::rfc3339(c.at_ms),
                &digest(&c.body())[..16],
                self.unsigned
            ),
            None => "; no signed checkpoint".to_owned(),
        };
        format!(
            "verified {} records in {} chains{through}{checkpoint}",
            self.records, self.tenants
        )
    }
}

/// The checkpoints of `store` and their faults: the valid ones (by `keys`) in order.
fn checked(
    stored: &[Checkpoint],
    keys: &Keyring,
    broken: &mut Vec<Break>,
) -> Vec<(Checkpoint, SignedHeads)> {
    let mut valid = Vec::new();
    let mut known: BTreeSet<String> = BTreeSet::new();
    for checkpoint in stored {
        let fault = |fault| Break {
            tenant: String::new(),
            seq: checkpoint.id,
            fault,
        };
        let heads = match SignedHeads::parse(checkpoint) {
            Ok(heads) => heads,
            Err(why) => {
                broken.push(fault(Fault::Malformed(why)));
                continue;
            }
        };
        if !keys.is_empty() {
            match keys.check(&heads.key_id, &checkpoint.body, &checkpoint.signature) {
                Signed::Valid => {}
                Signed::UnknownKey => {
                    broken.push(fault(Fault::UnknownKey(heads.key_id.clone())));
                    continue;
                }
                Signed::Invalid => {
                    broken.push(fault(Fault::BadSignature));
                    continue;
                }
            }
        }
        // The oldest kept may follow one pruned with the records it covered.
        if !valid.is_empty() && !heads.previous.is_empty() && !known.contains(&heads.previous) {
            broken.push(fault(Fault::CheckpointMissing));
        }
        known.insert(digest(&checkpoint.body));
        valid.push((checkpoint.clone(), heads));
    }
    valid
}

/// Walks every chain of `store` (or `options.tenant`'s) and checks every link and checkpoint.
pub async fn verify(
    store: &dyn JournalStore,
    options: &VerifyOptions,
) -> Result<Verification, StoreError> {
    let mut verification = Verification::default();
    let stored = store.audit_checkpoints().await?;
    let mut valid = checked(&stored, &options.keys, &mut verification.broken);
    if options.keys.is_empty() {
        verification.warnings.push(
            "no public key given: checkpoints were read but their signatures not checked, so \
             the chains show corruption but not a writer who recomputed the hashes (give \
             --public-key, or name it in the config's audit.public_keys)"
                .into(),
        );
    }
    if let Some(anchor) = &options.anchor {
        let anchored = checked(
            std::slice::from_ref(anchor),
            &options.keys,
            &mut verification.broken,
        );
        if !stored.iter().any(|c| c.body == anchor.body) {
            verification.broken.push(Break {
                tenant: String::new(),
                seq: anchor.id,
                fault: Fault::AnchorMissing,
            });
        }
        valid.extend(anchored);
    }
    verification.checkpoints = valid.len();
    let newest = valid
        .iter()
        .max_by_key(|(_, heads)| (heads.at_ms, heads.id))
        .map(|(_, heads)| heads.clone());
    // Each seq a valid checkpoint signed, per tenant: (hash, checkpoint id).
    let mut signed: BTreeMap<String, BTreeMap<i64, (String, i64)>> = BTreeMap::new();
    let mut reach: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (_, heads) in &valid {
        for (tenant, head) in &heads.heads {
            let signed = signed.entry(tenant.clone()).or_default();
            signed
                .entry(head.seq)
                .or_insert((head.hash.clone(), heads.id));
            if let Some(start) = &head.start {
                signed
                    .entry(start.seq)
                    .or_insert((start.hash.clone(), heads.id));
            }
            let reached = reach.entry(tenant.clone()).or_insert((head.seq, heads.id));
            if head.seq > reached.0 {
                *reached = (head.seq, heads.id);
            }
        }
    }
    let valid_heads: Vec<SignedHeads> = valid.iter().map(|(_, heads)| heads.clone()).collect();
    let now = now_ms();
    let heads = store.audit_heads().await?;
    let stored_heads: BTreeMap<&str, i64> = heads
        .heads
        .iter()
        .map(|h| (h.tenant.as_str(), h.seq))
        .collect();
    let mut tenants: BTreeSet<String> = store.audit_tenants().await?.into_iter().collect();
    tenants.extend(reach.keys().cloned());
    if let Some(only) = &options.tenant {
        tenants.retain(|t| t == only);
    }
    let from = options.from.unwrap_or(1);
    let empty = BTreeMap::new();
    for tenant in &tenants {
        verification.tenants += 1;
        let signed_here = signed.get(tenant).unwrap_or(&empty);
        let approvers = options.approvers.as_ref();
        let walked = walk(store, tenant, from, signed_here, approvers).await?;
        verification.records += walked.records;
        verification.broken.extend(walked.unapproved.iter().cloned());
        // Only a chain that holds says which calls are open.
        let open = if walked.broken.is_none() {
            walked.open.iter()
        } else {
            Default::default()
        };
        for ((session, call_id), (seq, owner, at_ms)) in open {
            let key = crate::journal::store::Key {
                tenant: tenant.clone(),
                session: session.clone(),
                call_id: call_id.clone(),
            };
            let owner_live = store.lookup(&key).await?.map(|entry| entry.owner_live);
            verification.open.push(OpenCall {
                tenant: tenant.clone(),
                session: session.clone(),
                call_id: call_id.clone(),
                seq: *seq,
                owner: owner.clone(),
                at_ms: *at_ms,
                owner_live,
            });
        }
        if let Some((_, at)) = walked.first {
            verification.since_ms = Some(verification.since_ms.map_or(at, |s| s.min(at)));
        }
        if let Some(broken) = walked.broken {
            verification.broken.push(broken);
            continue;
        }
        // A chain shorter at its start than a checkpoint signed it: pruned by its retention
        // (as signed checkpoints and this clock say), or records were deleted.
        if let (Some((first, _)), true) = (walked.first, from <= 1) {
            let proven = !options.keys.is_empty();
            if let Some(broken) = start_faults(tenant, first, &valid_heads, now, proven) {
                verification.broken.push(broken);
                continue;
            }
        }
        if !options.keys.is_empty()
            && newest.is_some()
            && walked.records > 0
            && !reach.contains_key(tenant)
        {
            verification.warnings.push(format!(
                "tenant {tenant:?} is in no signed checkpoint: its {} records are unsigned",
                walked.records
            ));
        }
        let last = walked.last.as_ref().map_or(0, |(seq, _, _)| *seq);
        if let Some((seq, _, at)) = &walked.last
            && verification
                .newest
                .as_ref()
                .is_none_or(|(_, _, newest)| at > newest)
        {
            verification.newest = Some((tenant.clone(), *seq, *at));
        }
        if let Some(&(signed_seq, checkpoint)) = reach.get(tenant)
            && signed_seq > last
        {
            let fault = if walked.last.is_none() && from <= 1 {
                Fault::TenantMissing {
                    checkpoint,
                    signed: signed_seq,
                }
            } else {
                Fault::TailMissing {
                    checkpoint,
                    signed: signed_seq,
                }
            };
            verification.broken.push(Break {
                tenant: tenant.clone(),
                seq: last,
                fault,
            });
            continue;
        }
        if let Some(&head) = stored_heads.get(tenant.as_str())
            && head != last
            && walked.last.is_some()
        {
            verification.broken.push(Break {
                tenant: tenant.clone(),
                seq: last,
                fault: Fault::HeadMismatch { head },
            });
            continue;
        }
        let covered = newest
            .as_ref()
            .and_then(|n| n.heads.get(tenant))
            .map_or(0, |head| head.seq);
        verification.unsigned += u64::try_from(last - covered.max(from - 1)).unwrap_or(0);
    }
    if let (Some(newest), Some(every)) = (&newest, options.checkpoint_every) {
        let age = heads.now_ms - newest.at_ms;
        if age > 2 * i64::try_from(every.as_millis()).unwrap_or(i64::MAX / 4) {
            verification.warnings.push(format!(
                "the newest checkpoint is {} s old, more than twice the interval ({} s): is a \
                 signer running (BRAIN_AUDIT_KEY_FILE)?",
                age / 1000,
                every.as_secs()
            ));
        }
    }
    if !options.keys.is_empty() && newest.is_none() && verification.records > 0 {
        verification.broken.push(Break {
            tenant: String::new(),
            seq: 0,
            fault: Fault::NothingSigned {
                records: verification.records,
            },
        });
    }
    verification.checkpoint = newest;
    Ok(verification)
}

/// What [`sign`] did: the checkpoint it wrote, if any, and the chains it refused to sign.
#[derive(Debug, Clone, Default)]
pub struct Signing {
    /// The checkpoint written: every chain the signer could verify at its head, and each
    /// refused chain at the head the last checkpoint signed. `None`: nothing was signed.
    pub signed: Option<SignedHeads>,
    /// The chains refused, each by its first fault: records since the last checkpoint that do
    /// not link, or disagree with it, or a start that moved without the retention explaining
    /// it. A refused chain's records are never signed.
    pub refused: Vec<Break>,
}

/// Writes a checkpoint of every chain's head and start, signed by `key`, stating `retention`
/// (how long the chains keep records), after it has checked every record since the last
/// checkpoint `key` (or `keys`) can verify. A chain whose tail does not link, or disagrees
/// with that checkpoint, or whose start moved (or is a `pruned_through`) without a checkpoint
/// older than its retention having signed what is gone, is refused, never signed: the others
/// are signed, the refused one kept at the head last signed.
pub async fn sign(
    store: &dyn JournalStore,
    key: &AuditKey,
    keys: &Keyring,
    retention: Duration,
) -> Result<Signing, StoreError> {
    let mut trusted = key.keyring();
    trusted.extend(keys);
    let valid = |checkpoint: &Checkpoint| {
        let heads = SignedHeads::parse(checkpoint).ok()?;
        (trusted.check(&heads.key_id, &checkpoint.body, &checkpoint.signature) == Signed::Valid)
            .then_some(heads)
    };
    // The newest checkpoint it can verify: newest first, one signature checked each until one
    // holds (not every signature of the table at every checkpoint).
    let stored = store.audit_checkpoints().await?;
    let last = stored
        .iter()
        .rev()
        .find_map(|checkpoint| valid(checkpoint).map(|heads| (checkpoint.clone(), heads)));
    // Those older than their retention: what explains records gone from a chain's start.
    let now = now_ms();
    let outlived: Vec<SignedHeads> = stored
        .iter()
        .filter(|checkpoint| {
            SignedHeads::parse(checkpoint).is_ok_and(|heads| heads.outlived(now))
        })
        .filter_map(valid)
        .collect();
    let heads = store.audit_heads().await?;
    let mut refused = Vec::new();
    let mut signed_heads = BTreeMap::new();
    let tenants: BTreeSet<String> = heads
        .heads
        .iter()
        .map(|h| h.tenant.clone())
        .chain(last.iter().flat_map(|(_, h)| h.heads.keys().cloned()))
        .collect();
    for tenant in tenants {
        let since = last
            .as_ref()
            .and_then(|(_, h)| h.heads.get(&tenant))
            .cloned();
        let head = heads.heads.iter().find(|h| h.tenant == tenant);
        let signed_by = last.as_ref().map_or(0, |(_, l)| l.id);
        let since = since.as_ref().map(|since| (since, signed_by));
        match chain_head(store, &tenant, since, head, &outlived, now).await? {
            Ok(signed) => {
                signed_heads.insert(tenant, signed);
            }
            Err(fault) => {
                // Kept at the head last signed: the next signer still compares with it.
                if let Some((since, _)) = since {
                    signed_heads.insert(tenant, since.clone());
                }
                refused.push(fault);
            }
        }
    }
    let changed = last.as_ref().is_none_or(|(_, l)| l.heads != signed_heads);
    if signed_heads.is_empty() || (!refused.is_empty() && !changed) {
        return Ok(Signing {
            signed: None,
            refused,
        });
    }
    let mut body = SignedHeads {
        id: 0,
        at_ms: heads.now_ms,
        key_id: key.id().to_owned(),
        heads: signed_heads,
        previous: last
            .as_ref()
            .map_or_else(String::new, |(c, _)| digest(&c.body)),
        retention_ms: Some(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX)),
    };
    let text = body.body();
    body.id = store.add_audit_checkpoint(&text, &key.sign(&text)).await?;
    Ok(Signing {
        signed: Some(body),
        refused,
    })
}

/// What the signer signs of `tenant`'s chain: its head (the store's `head`) and start, once
/// every record since `since` (as the last checkpoint, with its id, signed it) links and
/// agrees with it, and whatever left its start is explained by a checkpoint of `outlived`;
/// else the first fault.
async fn chain_head(
    store: &dyn JournalStore,
    tenant: &str,
    since: Option<(&SignedHead, i64)>,
    head: Option<&crate::journal::store::AuditHead>,
    outlived: &[SignedHeads],
    now: i64,
) -> Result<Result<SignedHead, Break>, StoreError> {
    let fault = |seq: i64, fault: Fault| {
        Ok(Err(Break {
            tenant: tenant.to_owned(),
            seq,
            fault,
        }))
    };
    let (since, checkpoint) = match since {
        Some((since, id)) => (Some(since), id),
        None => (None, 0),
    };
    let first = store.audit_records(tenant, 1, 1).await?.into_iter().next();
    let Some(first) = first else {
        return match since {
            Some(since) => fault(
                0,
                Fault::TenantMissing {
                    checkpoint,
                    signed: since.seq,
                },
            ),
            None => fault(0, Fault::HeadMismatch { head: 0 }),
        };
    };
    // From the last checkpoint's head when the start is where it signed it; else the whole
    // chain, which proves its start.
    let kept = since.and_then(|since| {
        let start = since.start.as_ref()?;
        (start.from == first.seq && first.seq < since.seq).then(|| (since.seq, start.clone()))
    });
    let mut expect = BTreeMap::new();
    if let (Some(since), Some(_)) = (since, &kept) {
        expect.insert(since.seq, (since.hash.clone(), checkpoint));
    }
    let from = kept.as_ref().map_or(1, |(seq, _)| *seq);
    let walked = walk(store, tenant, from, &expect, None).await?;
    if let Some(broken) = walked.broken {
        return Ok(Err(broken));
    }
    let start = match kept {
        Some((_, start)) => start,
        None => match walked.start {
            Some((seq, hash)) => ChainStart {
                seq,
                hash,
                from: first.seq,
            },
            None => return fault(first.seq, Fault::StartUnproven),
        },
    };
    // Records the last checkpoint signed and that are gone: only its retention removes them;
    // a pruned start only where a checkpoint older than its retention signed what went.
    if let Some(since) = since
        && first.seq > since.from()
        && since.start.is_some()
    {
        let through = since.seq.min(first.seq - 1);
        if let Some(seq) = unexplained(tenant, (since.from(), through), outlived, now) {
            return fault(
                seq,
                Fault::Erased {
                    checkpoint,
                    through,
                },
            );
        }
    }
    if first.seq > 1 && unexplained(tenant, (first.seq - 1, first.seq - 1), outlived, now).is_some()
    {
        return fault(first.seq - 1, Fault::PruneUnexplained);
    }
    let end = walked
        .last
        .map(|(seq, hash, _)| (seq, hash))
        .or_else(|| since.map(|s| (s.seq, s.hash.clone())));
    match (end, head) {
        (Some((seq, hash)), Some(head)) if seq == head.seq && hash == head.hash => {
            Ok(Ok(SignedHead {
                seq,
                hash,
                start: Some(start),
            }))
        }
        (end, head) => fault(
            end.map_or(0, |(seq, _)| seq),
            Fault::HeadMismatch {
                head: head.map_or(0, |h| h.seq),
            },
        ),
    }
}

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

/// Signs a checkpoint with `settings`' key, and says so when it refuses (an event
/// `audit.refused` naming the records, and the metric `brain.audit.refusals`). Returns whether
/// it signed.
pub(crate) async fn checkpoint(store: &dyn JournalStore, settings: &AuditSettings) -> bool {
    let (true, Some(key)) = (settings.enabled, &settings.key) else {
        return false;
    };
    match sign(store, key, &settings.keys, settings.retention).await {
        Ok(Signing { signed, refused }) if refused.is_empty() => signed.is_some(),
        Ok(Signing { signed, refused }) => {
            let named: Vec<String> = refused.iter().map(ToString::to_string).collect();
            tracing::error!(
                name: "audit.refused",
                records = %named.join("; "),
                "brain refused to sign these audit chains: records since the last checkpoint do \
                 not link, or the chain's start moved without its retention (run \
                 `brain-harness audit verify`)"
            );
            opentelemetry::global::meter(crate::telemetry::METER)
                .u64_counter("brain.audit.refusals")
                .with_description("Chains the signer refused: they did not link, or lost records")
                .build()
                .add(1, &[]);
            signed.is_some()
        }
        Err(error) => {
            tracing::warn!(%error, "cannot sign an audit checkpoint");
            false
        }
    }
}

/// A runtime's signer: a checkpoint after `checkpoint_records` records or every
/// `checkpoint_every`, whichever comes first, while the journal lives.
pub(crate) async fn signer(store: std::sync::Weak<dyn JournalStore>, settings: AuditSettings) {
    let poll = settings.checkpoint_every.min(Duration::from_secs(1));
    let mut tick = tokio::time::interval(poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Not at once: a process that ends soon signs at its clean shutdown.
    tick.tick().await;
    let (mut signed_total, mut signed_at) = (None::<i64>, tokio::time::Instant::now());
    loop {
        tick.tick().await;
        let Some(store) = store.upgrade() else {
            return;
        };
        let Ok(heads) = store.audit_heads().await else {
            continue;
        };
        let total: i64 = heads.heads.iter().map(|h| h.seq).sum();
        let due = signed_at.elapsed() >= settings.checkpoint_every
            || signed_total.is_none_or(|signed| {
                u64::try_from(total - signed).unwrap_or(0) >= settings.checkpoint_records
            });
        if due && checkpoint(&*store, &settings).await {
            (signed_total, signed_at) = (Some(total), tokio::time::Instant::now());
        }
    }
}
