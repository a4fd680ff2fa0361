//! Limits in this process's memory: a runtime without a state store (and the memory journal)
//! applies the same rules ([`super::decide`]) to buckets only this process sees.
//!
//! Not `governor`: its limiters check one bucket at a time on their own clock, and a call must
//! take from every bucket that applies or from none; the rule is the one the stores apply,
//! over a map.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::{BucketState, Charge, Usage, Verdict, decide};

/// Buckets and slots in this process's memory.
#[derive(Debug)]
pub(crate) struct MemoryLimits {
    clock: Instant,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Each rate bucket's TAT.
    tats: HashMap<String, i64>,
    /// Each quota's slots held.
    held: HashMap<String, u32>,
    /// Each holder's quotas.
    holders: HashMap<String, Vec<String>>,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            clock: Instant::now(),
            state: Mutex::default(),
        }
    }
}

impl MemoryLimits {
    /// Microseconds since the limits were made (the clock never goes back). Starts past any
    /// window, so that every bucket starts full.
    fn now_us(&self) -> i64 {
        i64::try_from(self.clock.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes from every bucket of `charge`, or from none.
    pub(crate) fn charge(&self, charge: &Charge) -> Verdict {
        let now = self.now_us();
        let mut state = self.state();
        let states: Vec<BucketState> = charge
            .buckets
            .iter()
            .map(|bucket| BucketState {
                tat_us: state
                    .tats
                    .get(&bucket.name)
                    .copied()
                    .unwrap_or(i64::MIN / 2),
                held: state.held.get(&bucket.name).copied().unwrap_or(0),
            })
            .collect();
        let decision = decide(&charge.buckets, &states, now);
        if decision.verdict == Verdict::Admitted {
            let mut quotas = Vec::new();
            for (bucket, tat) in charge.buckets.iter().zip(&decision.tats) {
                match (bucket.limit, tat) {
                    (super::Limit::Rate { .. }, Some(tat)) => {
                        state.tats.insert(bucket.name.clone(), *tat);
                    }
                    (super::Limit::Concurrent(_), _) => {
                        *state.held.entry(bucket.name.clone()).or_default() += 1;
                        quotas.push(bucket.name.clone());
                    }
                    _ => {}
                }
            }
            if !quotas.is_empty() {
                state.holders.insert(charge.holder.clone(), quotas);
            }
        }
        decision.verdict
    }

    /// Gives back the slots `holder` took.
    pub(crate) fn release(&self, holder: &str) {
        let mut state = self.state();
        for quota in state.holders.remove(holder).unwrap_or_default() {
            if let Some(held) = state.held.get_mut(&quota) {
                *held = held.saturating_sub(1);
            }
        }
    }

    /// The buckets `names` as they stand.
    pub(crate) fn usage(&self, names: &[String]) -> Vec<Usage> {
        let now_us = self.now_us();
        let state = self.state();
        names
            .iter()
            .map(|name| Usage {
                bucket: name.clone(),
                state: BucketState {
                    tat_us: state.tats.get(name).copied().unwrap_or(0),
                    held: state.held.get(name).copied().unwrap_or(0),
                },
                now_us,
            })
            .collect()
    }
}
