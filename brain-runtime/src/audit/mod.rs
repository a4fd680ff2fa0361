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

/// How many records a runtime's signer lets pass before it signs (also every
/// [`DEFAULT_CHECKPOINT_EVERY`], idle or not, and at a clean shutdown).
pub const DEFAULT_CHECKPOINT_RECORDS: u64 = brain_config::audit::DEFAULT_CHECKPOINT_RECORDS;
/// How long a runtime's signer waits at most between checkpoints.
pub const DEFAULT_CHECKPOINT_EVERY: Duration =
    Duration::from_secs(brain_config::audit::DEFAULT_CHECKPOINT_SECONDS);
/// How long the audit chain keeps records (its own retention, beside the journal's 24 h).
pub const DEFAULT_AUDIT_RETENTION: Duration =
    Duration::from_secs(brain_config::audit::DEFAULT_AUDIT_RETENTION_DAYS * 24 * 3600);

/// A checkpoint's body: every tenant's head, a time and the key that signs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeads {
    /// The checkpoint's id in the store.
    pub id: i64,
    /// When it was signed (the store's clock, milliseconds).
    pub at_ms: i64,
    /// The key that signed it.
    pub key_id: String,
    /// Each tenant's (seq, hash).
    pub heads: BTreeMap<String, (i64, String)>,
    /// The digest of the checkpoint it follows ("" for the first).
    pub previous: String,
}

impl SignedHeads {
    /// The body of a checkpoint, parsed (canonical, this format), or why not.
    fn parse(checkpoint: &Checkpoint) -> Result<SignedHeads, String> {
        let value: Value = serde_json::from_str(&checkpoint.body).map_err(|e| e.to_string())?;
        if canonical(&value) != checkpoint.body {
            return Err("its body is not canonical (RFC 8785)".into());
        }
        let heads = value["heads"]
            .as_object()
            .ok_or("it has no heads")?
            .iter()
            .map(|(tenant, head)| {
                let seq = head["seq"].as_i64().ok_or("a head without a seq")?;
                let hash = head["hash"].as_str().ok_or("a head without a hash")?;
                Ok((tenant.clone(), (seq, hash.to_owned())))
            })
            .collect::<Result<_, &str>>()?;
        Ok(SignedHeads {
            id: checkpoint.id,
            at_ms: value["at"].as_i64().ok_or("it has no time")?,
            key_id: value["key_id"]
                .as_str()
                .ok_or("it has no key id")?
                .to_owned(),
            heads,
            previous: value["previous"].as_str().unwrap_or_default().to_owned(),
        })
    }

    fn body(&self) -> String {
        let heads: serde_json::Map<String, Value> = self
            .heads
            .iter()
            .map(|(tenant, (seq, hash))| (tenant.clone(), json!({"seq": seq, "hash": hash})))
            .collect();
        canonical(&json!({"v": 1, "kind": "checkpoint", "at": self.at_ms,
            "key_id": self.key_id, "heads": heads, "previous": self.previous}))
    }
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
        for (tenant, (seq, hash)) in &heads.heads {
            signed
                .entry(tenant.clone())
                .or_default()
                .entry(*seq)
                .or_insert((hash.clone(), heads.id));
            let reached = reach.entry(tenant.clone()).or_insert((*seq, heads.id));
            if *seq > reached.0 {
                *reached = (*seq, heads.id);
            }
        }
    }
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
        let walked = walk(store, tenant, from, signed.get(tenant).unwrap_or(&empty)).await?;
        verification.records += walked.records;
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
            .map_or(0, |(seq, _)| *seq);
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
        verification.warnings.push(
            "no valid signed checkpoint: nothing proves the records against a rewrite".into(),
        );
    }
    verification.checkpoint = newest;
    Ok(verification)
}

/// What [`sign`] did.
#[derive(Debug, Clone)]
pub enum Signing {
    /// It wrote this checkpoint.
    Signed(SignedHeads),
    /// It refused: these records do not link (or disagree with the last checkpoint it can
    /// verify). Nothing was signed.
    Refused(Vec<Break>),
}

/// Writes a checkpoint of every chain's head, signed by `key`, after it has checked every
/// record since the last checkpoint `key` (or `keys`) can verify — a tail that does not link,
/// or disagrees with that checkpoint, is refused, never signed.
pub async fn sign(
    store: &dyn JournalStore,
    key: &AuditKey,
    keys: &Keyring,
) -> Result<Signing, StoreError> {
    let mut trusted = key.keyring();
    trusted.extend(keys);
    // The newest checkpoint it can verify: newest first, one signature checked each until one
    // holds (not every signature of the table at every checkpoint).
    let stored = store.audit_checkpoints().await?;
    let last = stored.iter().rev().find_map(|checkpoint| {
        let heads = SignedHeads::parse(checkpoint).ok()?;
        (trusted.check(&heads.key_id, &checkpoint.body, &checkpoint.signature) == Signed::Valid)
            .then(|| (checkpoint.clone(), heads))
    });
    let heads = store.audit_heads().await?;
    let mut broken = Vec::new();
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
        let mut expect = BTreeMap::new();
        let from = match &since {
            Some((seq, hash)) => {
                expect.insert(*seq, (hash.clone(), last.as_ref().map_or(0, |(_, h)| h.id)));
                *seq
            }
            None => 1,
        };
        let walked = walk(store, &tenant, from, &expect).await?;
        if let Some(fault) = walked.broken {
            broken.push(fault);
            continue;
        }
        let end = walked.last.map(|(seq, hash, _)| (seq, hash));
        let end = end.or_else(|| since.clone());
        match (end, head) {
            (Some((seq, hash)), Some(head)) if seq == head.seq && hash == head.hash => {
                signed_heads.insert(tenant, (seq, hash));
            }
            (Some((seq, _)), head) => broken.push(Break {
                tenant,
                seq,
                fault: Fault::HeadMismatch {
                    head: head.map_or(0, |h| h.seq),
                },
            }),
            (None, _) => {}
        }
    }
    if !broken.is_empty() {
        return Ok(Signing::Refused(broken));
    }
    let mut body = SignedHeads {
        id: 0,
        at_ms: heads.now_ms,
        key_id: key.id().to_owned(),
        heads: signed_heads,
        previous: last
            .as_ref()
            .map_or_else(String::new, |(c, _)| digest(&c.body)),
    };
    let text = body.body();
    body.id = store.add_audit_checkpoint(&text, &key.sign(&text)).await?;
    Ok(Signing::Signed(body))
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
    match sign(store, key, &settings.keys).await {
        Ok(Signing::Signed(_)) => true,
        Ok(Signing::Refused(broken)) => {
            let named: Vec<String> = broken.iter().map(ToString::to_string).collect();
            tracing::error!(
                name: "audit.refused",
                records = %named.join("; "),
                "brain refused to sign the audit chain: records since the last checkpoint do \
                 not link (run `brain-harness audit verify`)"
            );
            opentelemetry::global::meter(crate::telemetry::METER)
                .u64_counter("brain.audit.refusals")
                .with_description("Checkpoints the signer refused: a chain did not link")
                .build()
                .add(1, &[]);
            false
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
