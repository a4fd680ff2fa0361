//! Limits: rates and concurrency quotas from the host config (`limits` on a binding,
//! `tenant_limits`), checked after the journal decided a call is new and before anything is
//! opened — one atomic step on the state store every process shares, judged by the store's
//! clock, so that they hold across processes and replicas.
//!
//! - A *rate* is a token bucket of capacity `calls`, refilled continuously at `calls` per
//!   `per_seconds`, kept as GCRA's one number per bucket: its theoretical arrival time (TAT).
//!   `3` per `60` s admits three calls at once, then one every 20 s.
//! - A *concurrency quota* counts slots: one per call admitted, held under the journal owner's
//!   lease until the call ends. A process that dies stops holding its slots when its lease
//!   expires (seconds), not at its calls' timeouts; its upstream calls may still run at their
//!   servers until their own timeouts.
//!
//! A call passes every bucket that applies, or takes from none of them ([`decide`]). A refusal
//! is never journaled. Without a store, the same rules run in this process's memory
//! ([`memory::MemoryLimits`]).

pub(crate) mod memory;

use std::time::Duration;

use brain_config::{HostConfig, LimitScope, ToolBinding};

/// One bucket a call takes from: its name in the store and its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's name: what is limited and whose (`rate:binding/NAME/tenant/T`,
    /// `slots:tenant/T`, ...).
    pub name: String,
    /// The limit.
    pub limit: Limit,
}

/// What a bucket limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most `calls` per `per_ms` milliseconds, `calls` of them at once.
    Rate {
        /// The bucket's capacity and refill per window.
        calls: u32,
        /// The window, in milliseconds.
        per_ms: i64,
    },
    /// At most this many calls running at once.
    Concurrent(u32),
}

impl Limit {
    /// GCRA's emission interval and tolerance, in microseconds: one token every `interval`,
    /// `calls` tokens at most.
    fn gcra(calls: u32, per_ms: i64) -> (i64, i64) {
        let interval = (per_ms.saturating_mul(1000) / i64::from(calls.max(1))).max(1);
        (interval, interval.saturating_mul(i64::from(calls)))
    }
}

/// What one call asks of the limits: every bucket that applies, and who holds the slots it
/// takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The buckets, sorted by name (the order rows are locked in).
    pub buckets: Vec<Bucket>,
    /// The call's holder of slots: unique to this attempt of the call.
    pub holder: String,
    /// The owner whose lease holds the slots (the journal's owner of this process).
    pub owner: String,
    /// How long the slots are held at most, in milliseconds (the call's timeout and a
    /// grace): a slot whose release was lost stops counting then, even while its owner lives.
    pub hold_ms: i64,
}

/// A bucket's state as the store keeps it, read under the lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketState {
    /// A rate's theoretical arrival time, microseconds on the store's clock (0: full).
    pub tat_us: i64,
    /// A quota's slots held by live owners, within their `hold_ms`.
    pub held: u32,
}

/// A bucket that refused a call: which, its limit, and when it has room again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// The bucket that refused.
    pub bucket: String,
    /// Its limit.
    pub limit: Limit,
    /// When its next token comes (a rate); `None` for a quota (when a slot frees is not known).
    pub retry_after_ms: Option<u64>,
}

/// The answer of a charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every bucket had room: a token taken from each rate, a slot from each quota.
    Admitted,
    /// At least one bucket had none; nothing was taken from any.
    Refused(Vec<Exceeded>),
}

/// What a store writes after [`decide`]: each rate bucket's new TAT (in the charge's order),
/// when the call was admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// For each bucket of the charge: the rate's new TAT to write (admitted calls only).
    pub tats: Vec<Option<i64>>,
}

/// The rule every store applies under its lock: `states[i]` is `buckets[i]`'s, `now_us` the
/// store's clock. Admitted only when every bucket has room; then each rate's TAT moves on by
/// one interval (from now, when the bucket had refilled past full).
pub fn decide(buckets: &[Bucket], states: &[BucketState], now_us: i64) -> Decision {
    let mut refusals = Vec::new();
    let mut tats = Vec::with_capacity(buckets.len());
    for (bucket, state) in buckets.iter().zip(states) {
        match bucket.limit {
            Limit::Rate { calls, per_ms } => {
                let (interval, tolerance) = Limit::gcra(calls, per_ms);
                let next = state.tat_us.max(now_us).saturating_add(interval);
                if next - now_us <= tolerance {
                    tats.push(Some(next));
                } else {
                    let wait_us = next - tolerance - now_us;
                    refusals.push(Exceeded {
                        bucket: bucket.name.clone(),
                        limit: bucket.limit,
                        retry_after_ms: Some(ceil_ms(wait_us).max(1)),
                    });
                    tats.push(None);
                }
            }
            Limit::Concurrent(slots) => {
                if state.held >= slots {
                    refusals.push(Exceeded {
                        bucket: bucket.name.clone(),
                        limit: bucket.limit,
                        retry_after_ms: None,
                    });
                }
                tats.push(None);
            }
        }
    }
    if refusals.is_empty() {
        Decision {
            verdict: Verdict::Admitted,
            tats,
        }
    } else {
        Decision {
            verdict: Verdict::Refused(refusals),
            tats: vec![None; buckets.len()],
        }
    }
}

/// How many tokens a rate bucket has now, and when its next one comes (for
/// `brain-harness limits`).
pub fn tokens(limit: Limit, state: BucketState, now_us: i64) -> (u32, Option<u64>) {
    let Limit::Rate { calls, per_ms } = limit else {
        return (0, None);
    };
    let (interval, tolerance) = Limit::gcra(calls, per_ms);
    let used = (state.tat_us - now_us).max(0);
    let left = ((tolerance - used) / interval).clamp(0, i64::from(calls));
    let next = (left < i64::from(calls)).then(|| {
        let until = used - (tolerance - (left + 1) * interval);
        ceil_ms(until)
    });
    (u32::try_from(left).unwrap_or(0), next)
}

/// Microseconds to whole milliseconds, rounded up (0 for none).
fn ceil_ms(us: i64) -> u64 {
    u64::try_from(us.max(0)).unwrap_or(0).div_ceil(1000)
}

/// A bucket's state as `brain-harness limits` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The bucket.
    pub bucket: String,
    /// Its state, as the store has it now.
    pub state: BucketState,
    /// The store's clock, microseconds.
    pub now_us: i64,
}

/// A binding's buckets, made once from the config: each with a `{tenant}` to fill per call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    templates: Vec<(Template, Limit)>,
    /// The `tenant_limits` of the tenants that may call the binding.
    tenant_limits: std::collections::BTreeMap<String, brain_config::TenantLimits>,
    /// How long a call may wait for a token or a slot (`wait_seconds`).
    pub(crate) wait: Option<Duration>,
}

#[derive(Debug, Clone)]
enum Template {
    /// The same for every tenant.
    Fixed(String),
    /// A prefix the tenant's name completes.
    PerTenant(String),
}

impl Plan {
    /// The buckets of `binding` (its `limits`) and of its tenants (`tenant_limits`).
    pub(crate) fn of(binding: &ToolBinding, config: &HostConfig) -> Plan {
        let mut templates = Vec::new();
        if let Some(limits) = &binding.limits {
            let whose = |kind: &str| match limits.scope() {
                LimitScope::Tenant => {
                    Template::PerTenant(format!("{kind}:binding/{}/tenant/", binding.name))
                }
                LimitScope::Binding => Template::Fixed(format!("{kind}:binding/{}", binding.name)),
            };
            if let Some((calls, per_seconds)) = limits.rate() {
                let per_ms = i64::from(per_seconds) * 1000;
                templates.push((whose("rate"), Limit::Rate { calls, per_ms }));
            }
            if let Some(slots) = limits.concurrent {
                templates.push((whose("slots"), Limit::Concurrent(slots)));
            }
        }
        let tenant_limits = config
            .tenant_limits
            .iter()
            .flatten()
            .filter(|(tenant, _)| binding.tenants.contains(tenant))
            .map(|(tenant, limits)| (tenant.clone(), limits.clone()))
            .collect();
        Plan {
            templates,
            tenant_limits,
            wait: binding
                .limits
                .as_ref()
                .and_then(|l| l.wait_seconds)
                .map(|s| Duration::from_secs(u64::from(s))),
        }
    }

    /// Whether the binding's calls are limited at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.tenant_limits.is_empty()
    }

    /// The buckets of a call by `tenant`, sorted by name.
    pub(crate) fn buckets(&self, tenant: &str) -> Vec<Bucket> {
        let mut buckets = Vec::with_capacity(self.templates.len() + 2);
        for (template, limit) in &self.templates {
            let name = match template {
                Template::Fixed(name) => name.clone(),
                Template::PerTenant(prefix) => format!("{prefix}{tenant}"),
            };
            buckets.push(Bucket {
                name,
                limit: *limit,
            });
        }
        // The tenant's own limits, across its bindings, when it has any.
        if let Some(limits) = self.tenant_limits.get(tenant) {
            if let Some((calls, per_seconds)) = limits.rate() {
                buckets.push(Bucket {
                    name: format!("rate:tenant/{tenant}"),
                    limit: Limit::Rate {
                        calls,
                        per_ms: i64::from(per_seconds) * 1000,
                    },
                });
            }
            if let Some(slots) = limits.concurrent {
                buckets.push(Bucket {
                    name: format!("slots:tenant/{tenant}"),
                    limit: Limit::Concurrent(slots),
                });
            }
        }
        buckets.sort_by(|a, b| a.name.cmp(&b.name));
        buckets
    }
}

/// Every bucket of `config` (only `tenant`'s, when given), each once, sorted by name: what
/// `brain-harness limits` shows.
pub fn buckets(config: &HostConfig, tenant: Option<&str>) -> Vec<Bucket> {
    let mut all: Vec<Bucket> = Vec::new();
    for binding in &config.tools {
        let plan = Plan::of(binding, config);
        for allowed in binding
            .tenants
            .iter()
            .filter(|t| tenant.is_none_or(|only| only == t.as_str()))
        {
            all.extend(plan.buckets(allowed));
        }
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all.dedup_by(|a, b| a.name == b.name);
    all
}

/// A refusal in words: which limit, and when to try again.
pub(crate) fn describe(refusals: &[Exceeded], waited: Option<Duration>) -> String {
    let each: Vec<String> = refusals
        .iter()
        .map(|refusal| {
            let what = match refusal.limit {
                Limit::Rate { calls, per_ms } => {
                    format!("{calls} calls per {}s", per_ms / 1000)
                }
                Limit::Concurrent(slots) => format!("{slots} running at once"),
            };
            let name = refusal
                .bucket
                .split_once(':')
                .map_or(refusal.bucket.as_str(), |(_, name)| name);
            match refusal.retry_after_ms {
                Some(ms) => format!("{name} ({what}; next token in {:.1}s)", ms as f64 / 1000.0),
                None => format!("{name} ({what}; all in use)"),
            }
        })
        .collect();
    let waited = match waited {
        Some(waited) => format!(" after waiting {:.1}s", waited.as_secs_f64()),
        None => String::new(),
    };
    format!(
        "refused: over the limit of {}{waited}; nothing was sent, and the call may be made again \
         later (with the same call id)",
        each.join(", ")
    )
}

/// The longest a refused call's retry time can be for the refusals: the latest next token.
pub(crate) fn retry_after(refusals: &[Exceeded]) -> Option<u64> {
    if refusals.iter().any(|r| r.retry_after_ms.is_none()) {
        return None;
    }
    refusals.iter().filter_map(|r| r.retry_after_ms).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(calls: u32, per_s: i64) -> Bucket {
        Bucket {
            name: "rate:b".into(),
            limit: Limit::Rate {
                calls,
                per_ms: per_s * 1000,
            },
        }
    }

    #[test]
    fn three_per_minute_admits_three_at_once_then_one_every_twenty_seconds() {
        let bucket = [rate(3, 60)];
        let mut state = BucketState::default();
        let now = 1_000_000_000;
        for _ in 0..3 {
            let d = decide(&bucket, &[state], now);
            assert_eq!(d.verdict, Verdict::Admitted);
            state.tat_us = d.tats[0].unwrap();
        }
        let d = decide(&bucket, &[state], now);
        let Verdict::Refused(refusals) = d.verdict else {
            panic!("a fourth call at once is refused")
        };
        assert_eq!(refusals[0].retry_after_ms, Some(20_000));
        assert_eq!(tokens(bucket[0].limit, state, now), (0, Some(20_000)));
        // 20 s later: one token.
        let later = now + 20_000_000;
        assert_eq!(decide(&bucket, &[state], later).verdict, Verdict::Admitted);
        assert_eq!(tokens(bucket[0].limit, state, later), (1, Some(20_000)));
        assert_eq!(tokens(bucket[0].limit, state, now + 60_000_000), (3, None));
    }

    #[test]
    fn all_or_nothing_across_buckets() {
        let buckets = [
            rate(5, 60),
            Bucket {
                name: "slots:b".into(),
                limit: Limit::Concurrent(2),
            },
        ];
        let states = [BucketState::default(), BucketState { tat_us: 0, held: 2 }];
        let d = decide(&buckets, &states, 5_000_000);
        assert!(
            matches!(&d.verdict, Verdict::Refused(r) if r.len() == 1 && r[0].retry_after_ms.is_none())
        );
        assert_eq!(d.tats, vec![None, None], "nothing is taken from the rate");
    }
}
