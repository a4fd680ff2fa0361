//! A call's limits through the lifecycle: charged once the journal has decided the call is new
//! — before anything is opened (`admit`), or, where the claim is the journal's first look
//! (2026-07-28, HTTP tools), inside the claim's transaction ([`Ticket::claim`]) — waited for
//! when the binding says `wait_seconds`, and its slots given back when the call ends. A
//! refusal sends nothing and is never journaled; continuations (rounds, OAuth re-POSTs, a
//! task's polling and resume) are never charged again.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::journal::Journaling;
use crate::limits::memory::MemoryLimits;
use brain_config::ToolBinding;

use crate::limits::{Bucket, Charge, Exceeded, Limit, Plan, Verdict};
use crate::outcome::{Fact, Failure};
use crate::telemetry::Instruments;

/// Where a runtime keeps its buckets: the journal's store (shared by every process on it), or,
/// without one, this process's memory.
#[derive(Clone)]
pub(crate) enum Keeper {
    Store(Arc<Journaling>),
    Memory(Arc<MemoryLimits>),
}

/// The limits of one call.
pub(crate) struct CallLimits {
    pub(crate) buckets: Vec<Bucket>,
    /// How long the call may wait for a token or a slot.
    pub(crate) wait: Option<Duration>,
    /// This attempt's holder of slots.
    pub(crate) holder: String,
    /// How long its slots are held at most.
    hold: Duration,
    pub(crate) keeper: Keeper,
    pub(crate) binding: String,
    pub(crate) instruments: Arc<Instruments>,
    /// Whether the call was charged (its slots are to be given back).
    charged: AtomicBool,
}

/// How long past its call's timeout a slot is held at most (a slot whose release was lost stops
/// counting then, even while its owner lives).
const SLOT_GRACE: Duration = Duration::from_secs(10);

/// How long a call's end waits for the store to take its slots back.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// One try at the buckets: admitted (with what it brought), or refused by these.
pub(crate) type Attempt<T> = Result<T, Vec<Exceeded>>;

impl CallLimits {
    /// The limits of a call of `binding` by `tenant` (`None` when nothing limits it).
    pub(crate) fn of(
        plan: &Plan,
        binding: &ToolBinding,
        tenant: &str,
        keeper: &Keeper,
        instruments: &Arc<Instruments>,
    ) -> Option<CallLimits> {
        if plan.is_empty() {
            return None;
        }
        Some(CallLimits {
            buckets: plan.buckets(tenant),
            wait: plan.wait,
            holder: uuid::Uuid::new_v4().to_string(),
            hold: Duration::from_secs(binding.timeout_seconds) + SLOT_GRACE,
            keeper: keeper.clone(),
            binding: binding.name.clone(),
            instruments: Arc::clone(instruments),
            charged: AtomicBool::new(false),
        })
    }

    /// The charge as a store takes it, under `owner`'s lease.
    pub(crate) fn charge(&self, owner: &str) -> Charge {
        Charge {
            buckets: self.buckets.clone(),
            holder: self.holder.clone(),
            owner: owner.to_owned(),
            hold_ms: i64::try_from(self.hold.as_millis()).unwrap_or(i64::MAX),
        }
    }

    /// The call was charged (here, or in its claim).
    pub(crate) fn charged(&self) {
        self.charged.store(true, Ordering::Relaxed);
    }

    /// Charges the call before anything is opened, waiting as the binding allows.
    pub(crate) async fn admit(&self) -> Result<(), Failure> {
        self.waiting(|| async {
            let verdict = match &self.keeper {
                Keeper::Memory(limits) => limits.charge(&self.charge("")),
                Keeper::Store(journaling) => {
                    let store_failed = |error: crate::journal::StoreError| {
                        Failure::new(
                            Fact::StoreFailed,
                            format!(
                                "refused: the limits could not be checked: {error}; nothing was \
                                 sent (brain's limits never fail open)"
                            ),
                        )
                    };
                    let owner = journaling.owner().await.map_err(store_failed)?;
                    journaling
                        .store()
                        .charge(&self.charge(&owner))
                        .await
                        .map_err(store_failed)?
                }
            };
            Ok(match verdict {
                Verdict::Admitted => {
                    self.charged();
                    Ok(())
                }
                Verdict::Refused(refusals) => Err(refusals),
            })
        })
        .await
    }

    /// Tries `attempt` until it is admitted. Refused: at once without `wait_seconds`, or when a
    /// bucket that refused has no token before the wait runs out; else after sleeping until its
    /// next token (a quota: a short, growing pause) and trying again, up to `wait_seconds`.
    pub(crate) async fn waiting<T, F, Fut>(&self, mut attempt: F) -> Result<T, Failure>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Attempt<T>, Failure>>,
    {
        let started = Instant::now();
        let mut pause = Duration::from_millis(10);
        let mut waited = false;
        loop {
            let refusals = match attempt().await? {
                Ok(admitted) => {
                    if waited {
                        self.instruments
                            .limit_waited(&self.binding, started.elapsed(), true);
                    }
                    return Ok(admitted);
                }
                Err(refusals) => refusals,
            };
            let left = self.wait.map_or(Duration::ZERO, |wait| {
                wait.saturating_sub(started.elapsed())
            });
            let too_late = refusals.iter().any(|r| {
                r.retry_after_ms
                    .is_some_and(|ms| Duration::from_millis(ms) > left)
            });
            if left.is_zero() || too_late {
                if waited {
                    self.instruments
                        .limit_waited(&self.binding, started.elapsed(), false);
                }
                self.instruments.limited(&self.binding, &refusals, waited);
                let waited = waited.then(|| started.elapsed());
                return Err(Failure::new(
                    Fact::Limited,
                    crate::limits::describe(&refusals, waited),
                )
                .retry_after(crate::limits::retry_after(&refusals)));
            }
            let next = match crate::limits::retry_after(&refusals) {
                Some(ms) => Duration::from_millis(ms),
                None => pause,
            };
            tokio::time::sleep(next.min(left)).await;
            pause = (pause * 2).min(Duration::from_millis(100));
            waited = true;
        }
    }

    /// After the call, before its result is delivered: gives its slots back (so that the
    /// caller's next call finds them free), waiting at most [`RELEASE_WAIT`] for the store.
    pub(crate) async fn release(&self) {
        if !self.charged.swap(false, Ordering::Relaxed)
            || !self
                .buckets
                .iter()
                .any(|b| matches!(b.limit, Limit::Concurrent(_)))
        {
            return;
        }
        match &self.keeper {
            Keeper::Memory(limits) => limits.release(&self.holder),
            Keeper::Store(journaling) => {
                let released =
                    tokio::time::timeout(RELEASE_WAIT, journaling.store().release(&self.holder))
                        .await;
                if !matches!(released, Ok(Ok(()))) {
                    tracing::warn!(
                        holder = %self.holder,
                        "cannot give the call's slots back; they return when this process's \
                         lease expires, or at the latest at the call's deadline"
                    );
                }
            }
        }
    }
}
