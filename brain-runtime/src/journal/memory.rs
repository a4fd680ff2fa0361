//! The memory journal: one process's calls, gone with it. Bounded in entries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::limits::memory::MemoryLimits;
use crate::limits::{Charge, Usage, Verdict};

use crate::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalState, ApprovalStore, Asked, AuditStore,
    CallStore, DriftStore, LimitStore, new_id,
};
use crate::store::{
    Claim, Claimed, Done, Drift, Entry, EntryState, Filter, Key, Record, StoreError, StoreFuture,
};
use crate::store::{Decision, Granted};

/// How many entries a memory journal holds at most; finished ones are dropped, oldest first,
/// to make room.
pub(crate) const MAX_ENTRIES: usize = 100_000;

/// A journal in this process's memory.
pub(crate) struct Memory {
    /// The wall clock's milliseconds when the journal was made.
    base: i64,
    clock: Instant,
    max_entries: usize,
    state: Mutex<State>,
    /// The limits, in this process's memory as well.
    limits: MemoryLimits,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// Each owner's lease: when it expires.
    owners: HashMap<String, i64>,
    /// The drift recorded, oldest first (at most `MAX_DRIFT`).
    drifts: Vec<Drift>,
    /// The approvals, oldest first (at most `MAX_APPROVALS`).
    approvals: Vec<Approval>,
}

/// How many approvals a memory journal keeps (decided and expired ones go first).
const MAX_APPROVALS: usize = 10_000;

/// How many drift records a memory journal keeps (the oldest go first).
const MAX_DRIFT: usize = 10_000;

impl Memory {
    /// [`CallStore::settle`], at once.
    fn write_outcome(
        &self,
        key: &Key,
        owner: &str,
        record: &Record,
        only_if_expired: bool,
    ) -> bool {
        let now = self.now();
        let mut state = self.state();
        let expired = !state.live(owner, now);
        let Some(entry) = state.entries.get_mut(key) else {
            return false;
        };
        if entry.state != EntryState::Sent || entry.owner != owner || (only_if_expired && !expired)
        {
            return false;
        }
        entry.state = record.state;
        entry.is_error = Some(record.is_error);
        entry.unknown_outcome = Some(record.unknown_outcome);
        entry.result = record.result.clone();
        entry.result_bytes = Some(record.result_bytes);
        entry.finished_ms = Some(now);
        true
    }

    /// A claim, charged first when `charge` is given, using the approval `approval` of a new
    /// key when it is given: all or nothing.
    fn claim_now(
        &self,
        claim: &Claim,
        charge: Option<&Charge>,
        approval: Option<&Granted>,
    ) -> Result<Claimed, StoreError> {
        let now = self.now();
        let mut state = self.state();
        if !state.live(&claim.owner, now) {
            return Ok(Claimed::Taken);
        }
        match state.entries.get(&claim.key) {
            Some(e) if e.state != EntryState::NotSent || e.digest != claim.digest => {
                return Ok(Claimed::Taken);
            }
            Some(_) => {}
            None if state.entries.len() >= self.max_entries => {
                state.make_room(self.max_entries);
                if state.entries.len() >= self.max_entries {
                    return Err(StoreError::Full {
                        store: "memory".into(),
                        message: format!("{} calls are in flight", state.entries.len()),
                    });
                }
            }
            None => {}
        }
        // A call id whose earlier call was never sent is decided again, as a new call is.
        let sent = |key: &Key| {
            state
                .entries
                .get(key)
                .is_some_and(|e| e.state != EntryState::NotSent)
        };
        let used = match approval.filter(|_| !sent(&claim.key)) {
            None => None,
            Some(granted) => {
                let usable = state.approvals.iter().position(|a| {
                    a.id == granted.id
                        && a.expires_ms == granted.expires_ms
                        && a.signature == granted.signature
                        && a.key == claim.key
                        && a.digest == claim.digest
                        && a.state == ApprovalState::Approved
                        && a.expires_ms > now
                });
                match usable {
                    Some(index) => Some(index),
                    None => return Ok(Claimed::Unapproved),
                }
            }
        };
        if let Some(charge) = charge
            && let Verdict::Refused(refusals) = self.limits.charge(charge)
        {
            return Ok(Claimed::Refused(refusals));
        }
        if let Some(index) = used {
            let approval = &mut state.approvals[index];
            approval.state = ApprovalState::Used;
            approval.used_ms = Some(now);
        }
        let entry = Entry {
            key: claim.key.clone(),
            binding: claim.binding.clone(),
            digest: claim.digest.clone(),
            state: EntryState::Sent,
            owner: claim.owner.clone(),
            owner_live: true,
            now_ms: now,
            created_ms: now,
            deadline_ms: now + claim.timeout_ms,
            finished_ms: None,
            is_error: None,
            unknown_outcome: None,
            result: None,
            result_bytes: None,
            trace_id: claim.trace_id.clone(),
            task: None,
        };
        state.entries.insert(claim.key.clone(), entry);
        Ok(Claimed::Claimed)
    }

    /// [`ApprovalStore::ask_approval`], at once.
    fn ask_now(&self, request: &ApprovalRequest) -> Result<Asked, StoreError> {
        let now = self.now();
        let mut state = self.state();
        if state
            .entries
            .get(&request.key)
            .is_some_and(|e| e.state != EntryState::NotSent)
        {
            return Ok(Asked::Journaled);
        }
        let found = state.approvals.iter().rev().find(|a| {
            a.key == request.key
                && a.digest == request.digest
                && a.principal == request.principal
                && a.policies == request.policies
                && a.state != ApprovalState::Used
                && a.expires_ms > now
        });
        if let Some(approval) = found {
            return Ok(match approval.state {
                ApprovalState::Approved => Asked::Approved(Granted {
                    id: approval.id.clone(),
                    by: approval.decided_by.clone().unwrap_or_default(),
                    expires_ms: approval.expires_ms,
                    signature: approval.signature.clone(),
                }),
                ApprovalState::Denied => Asked::Denied {
                    id: approval.id.clone(),
                    by: approval.decided_by.clone().unwrap_or_default(),
                },
                _ => Asked::Pending(approval.id.clone()),
            });
        }
        if state.approvals.len() >= MAX_APPROVALS {
            // Decided and expired approvals go first; pending ones are never dropped.
            state
                .approvals
                .retain(|a| a.state == ApprovalState::Pending && a.expires_ms > now);
            if state.approvals.len() >= MAX_APPROVALS {
                return Err(StoreError::Full {
                    store: "memory".into(),
                    message: format!("{} approvals are pending", state.approvals.len()),
                });
            }
        }
        let id = new_id();
        state.approvals.push(Approval {
            id: id.clone(),
            key: request.key.clone(),
            binding: request.binding.clone(),
            principal: request.principal.clone(),
            digest: request.digest.clone(),
            policies: request.policies.clone(),
            arguments: Some(request.arguments.clone()),
            reason: request.reason.clone(),
            state: ApprovalState::Pending,
            created_ms: now,
            expires_ms: now + request.expires_ms,
            decided_by: None,
            decided_ms: None,
            used_ms: None,
            signature: None,
            now_ms: now,
        });
        Ok(Asked::Pending(id))
    }

    pub(crate) fn new(max_entries: usize) -> Memory {
        let base = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as i64);
        Memory {
            base,
            clock: Instant::now(),
            max_entries,
            state: Mutex::new(State::default()),
            limits: MemoryLimits::default(),
        }
    }

    /// The store's clock: the wall clock's milliseconds when the journal was made, advanced by
    /// the monotonic clock (never backwards).
    fn now(&self) -> i64 {
        self.base + self.clock.elapsed().as_millis() as i64
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn live(&self, owner: &str, now: i64) -> bool {
        self.owners.get(owner).is_some_and(|expires| *expires > now)
    }

    fn entry(&self, entry: &Entry, now: i64, results: bool) -> Entry {
        Entry {
            owner_live: self.live(&entry.owner, now),
            now_ms: now,
            result: entry.result.clone().filter(|_| results),
            ..entry.clone()
        }
    }

    /// Drops finished entries, oldest first, until a tenth of `max` is free.
    fn make_room(&mut self, max: usize) {
        let mut finished: Vec<(i64, Key)> = self
            .entries
            .values()
            .filter(|e| e.state != EntryState::Sent)
            .map(|e| (e.finished_ms.unwrap_or(e.created_ms), e.key.clone()))
            .collect();
        finished.sort();
        let excess = (self.entries.len() + max / 10).saturating_sub(max);
        for (_, key) in finished.into_iter().take(excess.max(1)) {
            self.entries.remove(&key);
        }
    }
}

/// An approval as read at `now`: its arguments only while it is pending and unexpired.
fn shown(approval: &Approval, now: i64) -> Approval {
    let open = approval.state == ApprovalState::Pending && approval.expires_ms > now;
    Approval {
        arguments: approval.arguments.clone().filter(|_| open),
        now_ms: now,
        ..approval.clone()
    }
}

fn ready<'a, T: Send + 'a>(value: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl CallStore for Memory {
    fn describe(&self) -> &str {
        "memory"
    }

    fn renew<'a>(&'a self, owner: &'a str, lease_ms: i64, create: bool) -> StoreFuture<'a, bool> {
        let now = self.now();
        let mut state = self.state();
        let live = create || state.live(owner, now);
        if live {
            state.owners.insert(owner.to_owned(), now + lease_ms);
        }
        ready(Ok(live))
    }

    fn claim<'a>(&'a self, claim: &'a Claim) -> StoreFuture<'a, bool> {
        ready(
            self.claim_now(claim, None, None)
                .map(|c| c == Claimed::Claimed),
        )
    }

    fn lookup<'a>(&'a self, key: &'a Key) -> StoreFuture<'a, Option<Entry>> {
        let now = self.now();
        let state = self.state();
        let entry = state.entries.get(key).map(|e| state.entry(e, now, true));
        ready(Ok(entry))
    }

    fn settle<'a>(
        &'a self,
        key: &'a Key,
        owner: &'a str,
        record: &'a Record,
        only_if_expired: bool,
    ) -> StoreFuture<'a, bool> {
        ready(Ok(self.write_outcome(key, owner, record, only_if_expired)))
    }

    fn record(self: Arc<Self>, key: Key, owner: String, record: Record, done: Done) {
        // Written at once: nothing waits.
        done(Ok(self.write_outcome(&key, &owner, &record, false)));
    }

    fn record_task<'a>(
        &'a self,
        key: &'a Key,
        owner: &'a str,
        task: &'a str,
    ) -> StoreFuture<'a, bool> {
        let mut state = self.state();
        let entry = state
            .entries
            .get_mut(key)
            .filter(|e| e.state == EntryState::Sent && e.owner == owner);
        ready(Ok(entry.map(|e| e.task = Some(task.to_owned())).is_some()))
    }

    fn take_over<'a>(&'a self, key: &'a Key, from: &'a str, to: &'a str) -> StoreFuture<'a, bool> {
        let now = self.now();
        let mut state = self.state();
        if state.live(from, now) || !state.live(to, now) {
            return ready(Ok(false));
        }
        let entry = state
            .entries
            .get_mut(key)
            .filter(|e| e.state == EntryState::Sent && e.owner == from && e.task.is_some());
        ready(Ok(entry.map(|e| e.owner = to.to_owned()).is_some()))
    }

    fn list<'a>(&'a self, filter: &'a Filter) -> StoreFuture<'a, Vec<Entry>> {
        let now = self.now();
        let state = self.state();
        let mut entries: Vec<Entry> = state
            .entries
            .values()
            .filter(|e| filter.tenant.as_ref().is_none_or(|t| *t == e.key.tenant))
            .filter(|e| filter.session.as_ref().is_none_or(|s| *s == e.key.session))
            .filter(|e| filter.call_id.as_ref().is_none_or(|c| *c == e.key.call_id))
            .filter(|e| filter.within_ms.is_none_or(|w| e.created_ms >= now - w))
            .map(|e| state.entry(e, now, filter.results))
            .collect();
        entries.sort_by(|a, b| (b.created_ms, &b.key).cmp(&(a.created_ms, &a.key)));
        if filter.limit > 0 {
            entries.truncate(filter.limit);
        }
        ready(Ok(entries))
    }

    fn prune(&self, retention_ms: i64) -> StoreFuture<'_, u64> {
        let now = self.now();
        let mut state = self.state();
        let before = now - retention_ms;
        let owners = state.owners.clone();
        let live = |owner: &str| owners.get(owner).is_some_and(|e| *e > now);
        let count = state.entries.len();
        state.entries.retain(|_, e| {
            let ended = e.finished_ms.unwrap_or(e.created_ms);
            ended >= before || (e.state == EntryState::Sent && live(&e.owner))
        });
        state.owners.retain(|_, expires| *expires >= before);
        state.drifts.retain(|d| d.first_seen_ms >= before);
        state.approvals.retain(|a| a.expires_ms >= before);
        for approval in &mut state.approvals {
            if approval.expires_ms <= now {
                approval.arguments = None;
            }
        }
        ready(Ok((count - state.entries.len()) as u64))
    }
}

impl LimitStore for Memory {
    fn charge<'a>(&'a self, charge: &'a Charge) -> StoreFuture<'a, Verdict> {
        ready(Ok(self.limits.charge(charge)))
    }

    fn claim_charged<'a>(
        &'a self,
        claim: &'a Claim,
        charge: &'a Charge,
    ) -> StoreFuture<'a, Claimed> {
        ready(self.claim_now(claim, Some(charge), None))
    }

    fn release<'a>(&'a self, holder: &'a str) -> StoreFuture<'a, ()> {
        self.limits.release(holder);
        ready(Ok(()))
    }

    fn usage<'a>(&'a self, names: &'a [String]) -> StoreFuture<'a, Vec<Usage>> {
        ready(Ok(self.limits.usage(names)))
    }
}

impl DriftStore for Memory {
    fn record_drift<'a>(&'a self, drift: &'a Drift) -> StoreFuture<'a, bool> {
        let now = self.now();
        let mut state = self.state();
        let seen = state.drifts.iter().any(|d| {
            (&d.binding, &d.listed, &d.process) == (&drift.binding, &drift.listed, &drift.process)
        });
        if !seen {
            if state.drifts.len() >= MAX_DRIFT {
                state.drifts.remove(0);
            }
            let mut drift = drift.clone();
            drift.first_seen_ms = now;
            state.drifts.push(drift);
        }
        ready(Ok(!seen))
    }

    fn drifts(&self, limit: usize) -> StoreFuture<'_, Vec<Drift>> {
        let state = self.state();
        let limit = if limit == 0 { usize::MAX } else { limit };
        ready(Ok(state.drifts.iter().rev().take(limit).cloned().collect()))
    }
}

impl ApprovalStore for Memory {
    fn ask_approval<'a>(&'a self, request: &'a ApprovalRequest) -> StoreFuture<'a, Asked> {
        ready(self.ask_now(request))
    }

    fn claim_approved<'a>(
        &'a self,
        claim: &'a Claim,
        charge: Option<&'a Charge>,
        approval: &'a Granted,
    ) -> StoreFuture<'a, Claimed> {
        ready(self.claim_now(claim, charge, Some(approval)))
    }

    fn approvals<'a>(&'a self, filter: &'a ApprovalFilter) -> StoreFuture<'a, Vec<Approval>> {
        let now = self.now();
        let state = self.state();
        let mut found: Vec<Approval> = state
            .approvals
            .iter()
            .rev()
            .filter(|a| filter.tenants.contains(&a.key.tenant))
            .filter(|a| filter.id.as_ref().is_none_or(|id| *id == a.id))
            .filter(|a| {
                !filter.pending || (a.state == ApprovalState::Pending && a.expires_ms > now)
            })
            .map(|a| shown(a, now))
            .collect();
        if filter.limit > 0 {
            found.truncate(filter.limit);
        }
        ready(Ok(found))
    }

    fn decide_approval<'a>(&'a self, decision: &'a Decision) -> StoreFuture<'a, Option<Approval>> {
        let now = self.now();
        let mut state = self.state();
        let decided = state
            .approvals
            .iter_mut()
            .find(|a| {
                a.id == decision.id
                    && decision.tenants.contains(&a.key.tenant)
                    && a.state == ApprovalState::Pending
                    && a.expires_ms > now
                    && a.expires_ms == decision.expires_ms
                    && a.digest == decision.digest
                    && a.policies == decision.policies
            })
            .map(|a| {
                a.state = if decision.approved {
                    ApprovalState::Approved
                } else {
                    ApprovalState::Denied
                };
                a.signature = decision.signature.clone();
                a.decided_by = Some(decision.approver.clone());
                a.decided_ms = Some(now);
                a.arguments = None;
                shown(a, now)
            });
        ready(Ok(decided))
    }
}

impl AuditStore for Memory {}

#[cfg(test)]
mod tests {
    use super::{CallStore, Claim, Key, Memory, Record};
    use crate::journal::EntryState;

    fn claim(owner: &str, id: usize) -> Claim {
        Claim {
            key: Key {
                tenant: "t".into(),
                session: "s".into(),
                call_id: id.to_string(),
            },
            digest: "d".into(),
            binding: "b".into(),
            owner: owner.into(),
            timeout_ms: 60_000,
            trace_id: None,
            upstream: None,
        }
    }

    #[tokio::test]
    async fn a_full_memory_journal_drops_finished_entries_then_refuses() {
        let memory = Memory::new(10);
        assert!(memory.renew("o", 60_000, true).await.unwrap());
        for id in 0..10 {
            assert!(memory.claim(&claim("o", id)).await.unwrap());
        }
        // All ten in flight: no room.
        let refused = memory.claim(&claim("o", 10)).await.unwrap_err();
        assert!(
            matches!(refused, super::StoreError::Full { .. }),
            "{refused}"
        );
        assert_eq!(
            refused.to_string(),
            "the call journal (memory) is full: 10 calls are in flight"
        );
        let done = Record {
            state: EntryState::Completed,
            is_error: false,
            unknown_outcome: false,
            result: None,
            result_bytes: 0,
            result_digest: String::new(),
        };
        for id in 0..3 {
            let key = claim("o", id).key;
            assert!(memory.settle(&key, "o", &done, false).await.unwrap());
        }
        // Finished ones make room, oldest first.
        assert!(memory.claim(&claim("o", 10)).await.unwrap());
        assert!(memory.lookup(&claim("o", 0).key).await.unwrap().is_none());
        assert!(memory.lookup(&claim("o", 9).key).await.unwrap().is_some());
    }
}
