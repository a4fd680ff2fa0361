//! Signing checkpoints: [`sign`] checks every chain since the last checkpoint it can verify,
//! and whatever left a chain's start, before it signs; a runtime's signer signs after so many
//! records or so long, and says when it refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::chain::{Break, Fault, walk};
use super::checkpoint::{ChainStart, SignedHead, SignedHeads, digest, now_ms, unexplained};
use super::settings::AuditSettings;
use crate::keys::{AuditKey, Keyring, Signed};
use crate::store::{Checkpoint, JournalStore, StoreError};

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
        .filter(|checkpoint| SignedHeads::parse(checkpoint).is_ok_and(|heads| heads.outlived(now)))
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
    head: Option<&crate::store::AuditHead>,
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
