//! A tamper-evident record of what ran: each tenant's audit chain beside the journal (appended
//! in the journal's own transactions, see [`crate::audit::record`]), signed checkpoints of
//! every chain's head, and their verification.
//!
//! - [`verify`] walks the chains and checks every link and checkpoint; it ends in one line, or
//!   names the first broken record of each chain.
//! - [`sign`] writes a checkpoint with an [`AuditKey`], after it has checked every record since
//!   the last checkpoint it can verify: brain never signs a tail it cannot link.
//! - [`export`] writes the records and checkpoints as JSON Lines or OCSF, each with the
//!   record's exact bytes.

mod chain;
mod checkpoint;
mod export;
pub(crate) mod postgres;
pub(crate) mod record;
mod settings;
mod sign;
pub(crate) mod sqlite;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::store::{Checkpoint, JournalStore, StoreError};

pub use crate::keys::{AuditKey, KEY_FILE_VAR, KeyError, Keyring};
pub use chain::{Break, Fault};
pub use export::{ExportFormat, export};
pub use record::{FORMAT, genesis, link};

use crate::keys::Signed;
use chain::{Walked, walk};
use checkpoint::{digest, now_ms, start_faults};

pub use checkpoint::{ChainStart, SignedHead, SignedHeads};
pub use settings::{
    AuditSettings, DEFAULT_AUDIT_RETENTION, DEFAULT_CHECKPOINT_EVERY, DEFAULT_CHECKPOINT_RECORDS,
};
pub use sign::{Signing, sign};
pub(crate) use sign::{checkpoint, signer};

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
    pub approvers: Option<crate::approvals::signed::ApproverKeys>,
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
    let valid = checkpoints(store, options, &mut verification).await?;
    verification.checkpoints = valid.len();
    let newest = valid
        .iter()
        .max_by_key(|(_, heads)| (heads.at_ms, heads.id))
        .map(|(_, heads)| heads.clone());
    let (signed, reach) = signed_seqs(&valid);
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
    let against = Against {
        options,
        from: options.from.unwrap_or(1),
        signed,
        reach,
        valid_heads,
        newest,
        stored_heads,
        now,
    };
    for tenant in &tenants {
        chain(store, tenant, &against, &mut verification).await?;
    }
    overall(&against, heads.now_ms, &mut verification);
    verification.checkpoint = against.newest;
    Ok(verification)
}

/// Each seq a valid checkpoint signed, per tenant: (hash, checkpoint id).
type SignedSeqs = BTreeMap<String, BTreeMap<i64, (String, i64)>>;

/// What each chain is checked against: the options, the valid checkpoints and what they sign,
/// the store's heads and this clock.
struct Against<'a> {
    options: &'a VerifyOptions,
    /// The seq the walks start from.
    from: i64,
    /// Each seq a valid checkpoint signed, per tenant.
    signed: SignedSeqs,
    /// The highest seq a valid checkpoint signed, per tenant: (seq, checkpoint id).
    reach: BTreeMap<String, (i64, i64)>,
    /// The valid checkpoints' heads.
    valid_heads: Vec<SignedHeads>,
    /// The newest valid checkpoint.
    newest: Option<SignedHeads>,
    /// The store's head seq of each chain.
    stored_heads: BTreeMap<&'a str, i64>,
    /// Now, in Unix milliseconds.
    now: i64,
}

/// The store's checkpoints (and `options.anchor`) checked: the valid ones, in order; their
/// faults, and a warning when no key checks their signatures, go to `verification`.
async fn checkpoints(
    store: &dyn JournalStore,
    options: &VerifyOptions,
    verification: &mut Verification,
) -> Result<Vec<(Checkpoint, SignedHeads)>, StoreError> {
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
    Ok(valid)
}

/// What the `valid` checkpoints sign: each seq per tenant (hash, checkpoint id), and the
/// highest seq per tenant (seq, checkpoint id).
fn signed_seqs(valid: &[(Checkpoint, SignedHeads)]) -> (SignedSeqs, BTreeMap<String, (i64, i64)>) {
    let mut signed: SignedSeqs = BTreeMap::new();
    let mut reach: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (_, heads) in valid {
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
    (signed, reach)
}

/// Checks `tenant`'s chain: walks it, names its open calls (when it holds), then checks its
/// start and its end ([`chain_end`]); what it finds goes to `verification`.
async fn chain(
    store: &dyn JournalStore,
    tenant: &str,
    against: &Against<'_>,
    verification: &mut Verification,
) -> Result<(), StoreError> {
    verification.tenants += 1;
    let empty = BTreeMap::new();
    let signed_here = against.signed.get(tenant).unwrap_or(&empty);
    let approvers = against.options.approvers.as_ref();
    let walked = walk(store, tenant, against.from, signed_here, approvers).await?;
    verification.records += walked.records;
    verification
        .broken
        .extend(walked.unapproved.iter().cloned());
    // Only a chain that holds says which calls are open.
    if walked.broken.is_none() {
        open_calls(store, tenant, &walked.open, verification).await?;
    }
    if let Some((_, at)) = walked.first {
        verification.since_ms = Some(verification.since_ms.map_or(at, |s| s.min(at)));
    }
    if let Some(broken) = walked.broken {
        verification.broken.push(broken);
        return Ok(());
    }
    // A chain shorter at its start than a checkpoint signed it: pruned by its retention
    // (as signed checkpoints and this clock say), or records were deleted.
    if let (Some((first, _)), true) = (walked.first, against.from <= 1) {
        let proven = !against.options.keys.is_empty();
        if let Some(broken) = start_faults(tenant, first, &against.valid_heads, against.now, proven)
        {
            verification.broken.push(broken);
            return Ok(());
        }
    }
    chain_end(tenant, &walked, against, verification);
    Ok(())
}

/// The calls `tenant`'s chain shows claimed with no outcome after (`open`), each with whether
/// the journal says its owner is live, added to `verification`.
async fn open_calls(
    store: &dyn JournalStore,
    tenant: &str,
    open: &BTreeMap<(String, String), (i64, String, i64)>,
    verification: &mut Verification,
) -> Result<(), StoreError> {
    for ((session, call_id), (seq, owner, at_ms)) in open {
        let key = crate::store::Key {
            tenant: tenant.to_owned(),
            session: session.clone(),
            call_id: call_id.clone(),
        };
        let owner_live = store.lookup(&key).await?.map(|entry| entry.owner_live);
        verification.open.push(OpenCall {
            tenant: tenant.to_owned(),
            session: session.clone(),
            call_id: call_id.clone(),
            seq: *seq,
            owner: owner.clone(),
            at_ms: *at_ms,
            owner_live,
        });
    }
    Ok(())
}

/// Checks the end of `tenant`'s chain, which `walked` holds from its start: whether a checkpoint
/// signed it (a warning if none did), its newest record, a tail (or the whole chain) missing
/// that a checkpoint signed, a head the store names that it does not end at; then counts its
/// records after the newest checkpoint as unsigned.
fn chain_end(
    tenant: &str,
    walked: &Walked,
    against: &Against<'_>,
    verification: &mut Verification,
) {
    let from = against.from;
    if !against.options.keys.is_empty()
        && against.newest.is_some()
        && walked.records > 0
        && !against.reach.contains_key(tenant)
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
        verification.newest = Some((tenant.to_owned(), *seq, *at));
    }
    if let Some(&(signed_seq, checkpoint)) = against.reach.get(tenant)
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
            tenant: tenant.to_owned(),
            seq: last,
            fault,
        });
        return;
    }
    if let Some(&head) = against.stored_heads.get(tenant)
        && head != last
        && walked.last.is_some()
    {
        verification.broken.push(Break {
            tenant: tenant.to_owned(),
            seq: last,
            fault: Fault::HeadMismatch { head },
        });
        return;
    }
    let covered = against
        .newest
        .as_ref()
        .and_then(|n| n.heads.get(tenant))
        .map_or(0, |head| head.seq);
    verification.unsigned += u64::try_from(last - covered.max(from - 1)).unwrap_or(0);
}

/// The checks over all chains, after each was walked: a newest checkpoint older than twice
/// the interval (by the store's clock, `store_now_ms`), and records with no checkpoint
/// signed when keys are given.
fn overall(against: &Against<'_>, store_now_ms: i64, verification: &mut Verification) {
    if let (Some(newest), Some(every)) = (&against.newest, against.options.checkpoint_every) {
        let age = store_now_ms - newest.at_ms;
        if age > 2 * i64::try_from(every.as_millis()).unwrap_or(i64::MAX / 4) {
            verification.warnings.push(format!(
                "the newest checkpoint is {} s old, more than twice the interval ({} s): is a \
                 signer running (BRAIN_AUDIT_KEY_FILE)?",
                age / 1000,
                every.as_secs()
            ));
        }
    }
    if !against.options.keys.is_empty() && against.newest.is_none() && verification.records > 0 {
        verification.broken.push(Break {
            tenant: String::new(),
            seq: 0,
            fault: Fault::NothingSigned {
                records: verification.records,
            },
        });
    }
}
