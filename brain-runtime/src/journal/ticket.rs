//! One call's journal entry, through the lifecycle: looked up at *admit* (when the transport
//! opens something; else the claim meets what is there), claimed at the send point, settled
//! after the call. The rules of what a retry gets live here, the same for every
//! backend.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use brain_config::ToolBinding;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::owner::Journaling;
use crate::event::ToolResult;
use crate::limits::Charge;
use crate::outcome::{Fact, Failure};
use crate::state::hex;
use crate::store::{ApprovalRequest, Asked};
use crate::store::{Claim, Claimed, Entry, EntryState, Key, Record, StoreError, UpstreamIdentity};
use crate::tool::Tool;

/// How long past a running call's recorded deadline a retry waits for its outcome before it
/// reports the outcome as unknown.
const GRACE_MS: i64 = 5_000;
/// The longest pause between two looks at a call running elsewhere.
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// What the journal made of a call, as the span's `brain.journal.state` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JournalState {
    /// Claimed here, sent here.
    New,
    /// Answered with the recorded result.
    Replayed,
    /// Waited for while another owner ran it, then answered with its result.
    InProgressElsewhere,
    /// Sent before by an owner that stopped: the outcome is unknown.
    UnknownAfterCrash,
    /// The call id was used for another call.
    Conflict,
    /// Sent before by an owner that stopped while the call's MCP task ran: taken over here,
    /// and the task followed to its result.
    Resumed,
}

impl JournalState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JournalState::New => "new",
            JournalState::Replayed => "replayed",
            JournalState::InProgressElsewhere => "in_progress_elsewhere",
            JournalState::UnknownAfterCrash => "unknown_after_crash",
            JournalState::Conflict => "conflict",
            JournalState::Resumed => "resumed",
        }
    }
}

/// What resuming a call's MCP task needs, as the journal records it (JSON) once the server
/// created the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TaskRecord {
    /// The server's task id.
    pub(crate) task_id: String,
    /// The session the task lives in (2025-11-25 over HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) session: Option<String>,
    /// The revision the call was made at.
    pub(crate) revision: String,
    /// The task lives in a stdio server's process, which ends with the process that started
    /// it: nothing to resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) stdio: bool,
}

/// A call whose task this process took over.
#[derive(Debug)]
pub(crate) struct Resume {
    /// The task.
    pub(crate) task: TaskRecord,
    /// What is left of the call's timeout, counted from its original claim.
    pub(crate) remaining: Duration,
}

/// What the journal made of a call at *admit*.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// A new call (or one never sent): it goes on to open and send.
    Go,
    /// The journal's answer: nothing is opened or sent.
    Answer(ToolResult),
    /// The call's owner stopped while its MCP task ran: this process took the call over and
    /// follows the recorded task (nothing is sent again).
    Resume(Resume),
}

/// What the claim made of a call.
#[derive(Debug)]
pub(crate) enum Claiming {
    /// Claimed here (and charged, when it had limits): it is sent next.
    Claimed,
    /// The journal's answer: another caller claimed it first.
    Answer(ToolResult),
    /// A limit refused it: nothing was claimed, charged or sent.
    Refused(Vec<crate::limits::Exceeded>),
}

/// A call the policies hold for a person's approval (the gate's pass A denied it, pass B would
/// permit it): what its approval is asked with.
#[derive(Debug, Clone)]
pub(crate) struct Hold {
    /// The policy principal, as Cedar writes it.
    pub(crate) principal: String,
    /// The policy set's digest.
    pub(crate) policies: String,
    /// The canonical arguments, for the approver to read.
    pub(crate) arguments: String,
    /// Why the policies hold it.
    pub(crate) reason: String,
    /// How long a new approval lasts.
    pub(crate) expires_ms: i64,
    /// The approvers' keys: an approval is used only when its decision is signed by one of
    /// its tenant's (or unsigned where a token approver decides).
    pub(crate) approvers: Arc<crate::approvals::signed::ApproverKeys>,
}

/// A call's entry in the journal.
pub(crate) struct Ticket {
    journaling: Arc<Journaling>,
    key: Key,
    digest: String,
    binding: String,
    timeout_ms: i64,
    trace_id: Option<String>,
    /// For a binding on behalf of users: whom it is sent for.
    upstream: Option<UpstreamIdentity>,
    /// The owner it was claimed under, once claimed here.
    claimed: Mutex<Option<Arc<str>>>,
    state: Mutex<Option<JournalState>>,
    /// Waiting while another caller runs the call.
    waiting: AtomicBool,
    /// Held for a person's approval.
    hold: Option<Hold>,
    /// The approval of this very call the claim uses (a held call's, once found approved and
    /// its decision checked).
    approval: Mutex<Option<crate::store::Granted>>,
}

impl Ticket {
    pub(crate) fn new(
        journaling: &Arc<Journaling>,
        key: Key,
        tool: &Tool,
        arguments: &Value,
        trace_id: Option<String>,
        upstream: Option<UpstreamIdentity>,
    ) -> Ticket {
        let binding = &tool.binding;
        let subject = upstream.as_ref().map(|upstream| upstream.subject.as_str());
        Ticket {
            journaling: Arc::clone(journaling),
            key,
            digest: digest(&tool.identity, arguments, subject),
            binding: binding.name.clone(),
            timeout_ms: i64::try_from(binding.timeout_seconds.saturating_mul(1000))
                .unwrap_or(i64::MAX),
            trace_id,
            upstream,
            claimed: Mutex::new(None),
            state: Mutex::new(None),
            waiting: AtomicBool::new(false),
            hold: None,
            approval: Mutex::new(None),
        }
    }

    /// The same ticket, for a call the policies hold for a person's approval.
    pub(crate) fn held(mut self, hold: Option<Hold>) -> Ticket {
        self.hold = hold;
        self
    }

    /// Whether the policies hold the call for a person's approval.
    pub(crate) fn is_held(&self) -> bool {
        self.hold.is_some()
    }

    /// For a held call the journal found new (after admit): its approval, approved and
    /// unused, which the claim then uses; else the call is refused — `approval_required` with
    /// the pending approval (recorded now, or before), or denied by an approver. Nothing is
    /// sent or journaled. A call whose key the journal has is claimed as any other.
    pub(crate) async fn approve(&self) -> Result<(), Failure> {
        let Some(hold) = &self.hold else {
            return Ok(());
        };
        let request = ApprovalRequest {
            key: self.key.clone(),
            binding: self.binding.clone(),
            principal: hold.principal.clone(),
            digest: self.digest.clone(),
            policies: hold.policies.clone(),
            arguments: hold.arguments.clone(),
            reason: hold.reason.clone(),
            expires_ms: hold.expires_ms,
        };
        let store = self.journaling.store();
        match store
            .ask_approval(&request)
            .await
            .map_err(|e| self.failed(e))?
        {
            Asked::Journaled => Ok(()),
            Asked::Approved(granted) => {
                // The statement rebuilt from this very call, never from the store's bytes.
                let statement = crate::approvals::signed::Statement {
                    approval: &granted.id,
                    tenant: &self.key.tenant,
                    digest: &self.digest,
                    policies: &hold.policies,
                    approved: true,
                    expires_ms: granted.expires_ms,
                };
                if let Err(why) = hold.approvers.check(&statement, granted.signature.as_ref()) {
                    tracing::error!(
                        name: "approval.refused",
                        approval = %granted.id,
                        reason = %why,
                        "an approval's decision was not used: {why}"
                    );
                    return Err(Failure::new(
                        Fact::ApprovalRequired,
                        format!(
                            "{}; approval {} is marked approved, and {why}: it was not used, \
                             and nothing was sent (was the store written to?)",
                            hold.reason, granted.id
                        ),
                    )
                    .approval(granted.id));
                }
                *self.approval.lock().unwrap_or_else(|p| p.into_inner()) = Some(granted);
                Ok(())
            }
            Asked::Denied { id, by } => Err(Failure::new(
                Fact::PolicyDenied,
                format!(
                    "{}; approver {by:?} denied this call (approval {id}); nothing was sent",
                    hold.reason
                ),
            )),
            Asked::Pending(id) => Err(Failure::new(
                Fact::ApprovalRequired,
                format!(
                    "held for a person's approval: {}. Nothing was sent. Once an approver \
                     approves {id} (`brain-harness approvals approve {id}`), call again with \
                     the same call id and arguments",
                    hold.reason
                ),
            )
            .approval(id)),
        }
    }

    /// What the journal made of the call so far.
    pub(crate) fn state(&self) -> Option<JournalState> {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the call is waiting while another caller runs it: an interruption now leaves
    /// the outcome unknown.
    pub(crate) fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed)
    }

    fn set(&self, state: JournalState) {
        self.waiting.store(false, Ordering::Relaxed);
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
    }

    fn failed(&self, error: StoreError) -> Failure {
        Failure::new(
            Fact::StoreFailed,
            format!(
                "refused: {error}; nothing was sent (brain never sends a call it could not record)"
            ),
        )
    }

    /// The admit step: [`Admitted::Go`] when the call goes on (a new key, or one whose earlier
    /// call was never sent); else the journal's answer, or the recorded task of a call whose
    /// owner stopped, taken over. Waits while the call runs elsewhere.
    pub(crate) async fn admit(&self) -> Result<Admitted, Failure> {
        let store = self.journaling.store();
        match store.lookup(&self.key).await.map_err(|e| self.failed(e))? {
            None => Ok(Admitted::Go),
            Some(entry) => self.resolve(entry, true).await,
        }
    }

    /// Records the MCP task the server created for the call claimed here, before its first
    /// poll: a retry after this process stops resumes it. A task that cannot be recorded is
    /// still followed (a retry would then report the outcome as unknown).
    pub(crate) async fn task_created(&self, task: &TaskRecord) {
        let Some(owner) = self.owner() else {
            return;
        };
        let json = match serde_json::to_string(task) {
            Ok(json) => json,
            Err(_) => return,
        };
        let store = self.journaling.store();
        match store.record_task(&self.key, &owner, &json).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                call_id = %self.key.call_id,
                task_id = %task.task_id,
                "the journal did not record the call's task ({}); a retry after this process \
                 stops reports the outcome as unknown",
                store.describe()
            ),
            Err(error) => tracing::warn!(
                call_id = %self.key.call_id,
                task_id = %task.task_id,
                %error,
                "cannot record the call's task; a retry after this process stops reports the \
                 outcome as unknown"
            ),
        }
    }

    /// Whether this process still owns the call it claimed (or took over): `false` once a
    /// retry took its task over after this process's lease had expired. An unanswered lookup
    /// counts as owned.
    pub(crate) async fn still_owned(&self) -> bool {
        let Some(owner) = self.owner() else {
            return true;
        };
        match self.journaling.store().lookup(&self.key).await {
            Ok(Some(entry)) => entry.state != EntryState::Sent || *entry.owner == *owner,
            _ => true,
        }
    }

    fn owner(&self) -> Option<Arc<str>> {
        self.claimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Takes the call of `entry` (whose owner's lease expired while its task `task` ran) over
    /// for this process: `None` when another retry took it first, or its owner came back.
    async fn take_over(&self, entry: &Entry, task: TaskRecord) -> Result<Option<Resume>, Failure> {
        let unknown = |error: StoreError| {
            Failure::broken(format!(
                "call id {:?} ran as MCP task {} under a process that stopped, and cannot be \
                 taken over: {error}; the tool may have run",
                self.key.call_id, task.task_id
            ))
        };
        let owner = self.journaling.owner().await.map_err(unknown)?;
        *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&owner));
        let store = self.journaling.store();
        if store
            .take_over(&self.key, &entry.owner, &owner)
            .await
            .map_err(unknown)?
        {
            self.set(JournalState::Resumed);
            let left = u64::try_from(entry.deadline_ms - entry.now_ms).unwrap_or(0);
            tracing::debug!(
                call_id = %self.key.call_id,
                task_id = %task.task_id,
                from = %entry.owner,
                "the call's task was taken over"
            );
            return Ok(Some(Resume {
                task,
                remaining: Duration::from_millis(left),
            }));
        }
        *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(None)
    }

    /// The claim, at the send point: [`Claiming::Claimed`] when the call is now claimed by this
    /// process (and durably recorded as sent); else the journal's answer (another caller
    /// claimed it first). With `charge` (the call's limits, built for an owner), the claim
    /// also charges them, in its transaction: only a new claim is charged, and a refused
    /// charge leaves no claim ([`Claiming::Refused`]).
    pub(crate) async fn claim(
        &self,
        charge: Option<&(dyn Fn(&str) -> Charge + Sync)>,
    ) -> Result<Claiming, Failure> {
        let store = self.journaling.store();
        for _ in 0..4 {
            let owner = self.journaling.owner().await.map_err(|e| self.failed(e))?;
            let claim = Claim {
                key: self.key.clone(),
                digest: self.digest.clone(),
                binding: self.binding.clone(),
                owner: owner.to_string(),
                timeout_ms: self.timeout_ms,
                trace_id: self.trace_id.clone(),
                upstream: self.upstream.clone(),
            };
            // Owned before the claim is awaited: a claim that commits while the call is
            // cancelled (or whose answer is lost) is still settled after the call — as not
            // sent, since nothing was.
            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&owner));
            let claimed = match (charge, self.hold.is_some()) {
                (None, false) => store.claim(&claim).await.map_err(|e| self.failed(e))?,
                (charge, held) => {
                    let charge = charge.map(|charge| charge(&owner));
                    let approval = self
                        .approval
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone();
                    let claimed = match (&charge, held) {
                        (Some(charge), false) => store.claim_charged(&claim, charge).await,
                        (charge, _) => {
                            // A held call with no checked approval (the journal had its key as
                            // sent): only the journal's answer can come of it.
                            let none = crate::store::Granted {
                                id: String::new(),
                                by: String::new(),
                                expires_ms: 0,
                                signature: None,
                            };
                            let approval = approval.as_ref().unwrap_or(&none);
                            store
                                .claim_approved(&claim, charge.as_ref(), approval)
                                .await
                        }
                    };
                    match claimed.map_err(|e| self.failed(e))? {
                        Claimed::Claimed => true,
                        Claimed::Taken => false,
                        Claimed::Refused(refusals) => {
                            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = None;
                            return Ok(Claiming::Refused(refusals));
                        }
                        Claimed::Unapproved => {
                            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = None;
                            return Err(Failure::new(
                                Fact::ApprovalRequired,
                                "held for a person's approval, and this call's approval was \
                                 not usable when it was claimed (it expired, or was never \
                                 approved); nothing was sent. Call again with the same call id \
                                 and arguments to ask for a new one",
                            ));
                        }
                    }
                }
            };
            if claimed {
                self.set(JournalState::New);
                return Ok(Claiming::Claimed);
            }
            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = None;
            match store.lookup(&self.key).await.map_err(|e| self.failed(e))? {
                Some(entry) => match self.resolve(entry, false).await? {
                    Admitted::Answer(answer) => return Ok(Claiming::Answer(answer)),
                    _ => continue,
                },
                // Nothing there, yet no claim: this process's lease had expired.
                None => self
                    .journaling
                    .revive(&owner)
                    .await
                    .map_err(|e| self.failed(e))?,
            }
        }
        Err(self.failed(StoreError::unavailable(
            store.describe(),
            "the call could not be claimed after 4 attempts",
        )))
    }

    /// An entry exists for the key: answer from it, wait while its owner runs it, go on when
    /// it was never sent, or (`resume`) take over the task of a call whose owner stopped.
    async fn resolve(&self, mut entry: Entry, resume: bool) -> Result<Admitted, Failure> {
        let store = self.journaling.store();
        let mut pause = Duration::from_millis(5);
        let mut waited = false;
        loop {
            if entry.digest != self.digest {
                self.set(JournalState::Conflict);
                return Err(Failure::new(
                    Fact::JournalConflict,
                    format!(
                        "refused: call id {:?} was used for another call in session {:?} of \
                         tenant {:?} (binding {:?} or its arguments differ); nothing was sent. \
                         A new call needs a new call id",
                        self.key.call_id, self.key.session, self.key.tenant, entry.binding
                    ),
                ));
            }
            match entry.state {
                EntryState::NotSent => {
                    self.waiting.store(false, Ordering::Relaxed);
                    return Ok(Admitted::Go);
                }
                EntryState::Completed | EntryState::Failed => {
                    self.set(if waited {
                        JournalState::InProgressElsewhere
                    } else {
                        JournalState::Replayed
                    });
                    return Ok(Admitted::Answer(self.replay(&entry)));
                }
                EntryState::Sent
                    if !entry.owner_live || entry.now_ms > entry.deadline_ms + GRACE_MS =>
                {
                    let crashed = !entry.owner_live;
                    let task = entry
                        .task
                        .as_deref()
                        .and_then(|task| serde_json::from_str::<TaskRecord>(task).ok());
                    if let Some(task) = task.filter(|task| !task.stdio)
                        && resume
                        && crashed
                        && entry.now_ms < entry.deadline_ms
                    {
                        if let Some(resume) = self.take_over(&entry, task).await? {
                            return Ok(Admitted::Resume(resume));
                        }
                    } else {
                        let message = self.unknown(&entry);
                        let (mut result, _) =
                            Failure::broken(message).into_result(&self.key.call_id);
                        let record = record(&result, EntryState::Failed, &self.journaling.journal);
                        let settled = store
                            .settle(&self.key, &entry.owner, &record, crashed)
                            .await
                            .map_err(|e| self.failed(e))?;
                        if settled {
                            self.set(JournalState::UnknownAfterCrash);
                            result.replayed = true;
                            return Ok(Admitted::Answer(result));
                        }
                    }
                }
                EntryState::Sent => {
                    waited = true;
                    self.waiting.store(true, Ordering::Relaxed);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
            entry = match store.lookup(&self.key).await.map_err(|e| self.failed(e))? {
                Some(entry) => entry,
                // Pruned meanwhile: a new call.
                None => return Ok(Admitted::Go),
            };
        }
    }

    /// Why the outcome of `entry`'s call (sent, by an owner that stopped or has not recorded
    /// an outcome by its deadline) is unknown.
    fn unknown(&self, entry: &Entry) -> String {
        let crashed = !entry.owner_live;
        let task = entry
            .task
            .as_deref()
            .and_then(|task| serde_json::from_str::<TaskRecord>(task).ok());
        if let Some(task) = task.filter(|_| crashed) {
            let why = if task.stdio {
                "lived in a stdio server's process, which ended with the process that started \
                 it"
            } else {
                "passed its deadline while no process followed it"
            };
            return format!(
                "call id {:?} ran as MCP task {} under a process that stopped ({}); the task {why}, \
                 and the tool may have run. brain does not send it again: check the resource \
                 before calling with a new call id",
                self.key.call_id, task.task_id, entry.owner
            );
        }
        if crashed {
            format!(
                "call id {:?} was sent before by a process that stopped ({}) before it recorded \
                 the outcome; the tool may have run. brain does not send it again: check the \
                 resource before calling with a new call id",
                self.key.call_id, entry.owner
            )
        } else {
            format!(
                "call id {:?} was sent before by {}, which has not recorded an outcome by its \
                 deadline; the tool may have run. brain does not send it again: check the \
                 resource before calling with a new call id",
                self.key.call_id, entry.owner
            )
        }
    }

    /// The recorded result, marked replayed.
    fn replay(&self, entry: &Entry) -> ToolResult {
        let kept = entry
            .result
            .as_deref()
            .and_then(|json| serde_json::from_str::<ToolResult>(json).ok());
        let mut result = match kept {
            Some(result) => result,
            None => {
                let fact = if entry.unknown_outcome == Some(true) {
                    Fact::Broken
                } else {
                    Fact::Refused(crate::event::Reason::ResultNotKept)
                };
                let ended = match (entry.state, entry.is_error) {
                    (EntryState::Completed, Some(false)) => "completed",
                    (EntryState::Completed, _) => "completed with a tool error",
                    _ => "failed",
                };
                let message = format!(
                    "call id {:?} {ended} before; its result was not kept ({} bytes, over the \
                     journal's cap of {} bytes), and it is not sent again",
                    self.key.call_id,
                    entry.result_bytes.unwrap_or(0),
                    self.journaling.journal.result_cap
                );
                Failure::new(fact, message).into_result(&self.key.call_id).0
            }
        };
        result.call_id.clone_from(&self.key.call_id);
        result.replayed = true;
        result
    }

    /// After the call: records its outcome off the caller's path (nothing waits for the write;
    /// `token` is held until it is done, so that the runtime's `wait_for_cleanup` waits for
    /// it). Nothing when this process did not claim the call. `completed`: the call delivered a
    /// tool result; `sent`: the call may have reached the tool.
    pub(crate) fn settle(
        &self,
        result: &ToolResult,
        completed: bool,
        sent: bool,
        token: TaskTrackerToken,
    ) {
        let Some(owner) = self
            .claimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        let state = match (sent, completed) {
            (false, _) => EntryState::NotSent,
            (true, true) => EntryState::Completed,
            (true, false) => EntryState::Failed,
        };
        let record = record(result, state, &self.journaling.journal);
        let call_id = self.key.call_id.clone();
        let done = move |written: Result<bool, StoreError>| {
            match written {
                Ok(true) => {}
                // A claim that never committed (nothing to settle), or an outcome a retry
                // recorded first after this process's lease had expired.
                Ok(false) if state == EntryState::NotSent => {}
                Ok(false) => tracing::warn!(
                    call_id = %call_id,
                    "the journal had already recorded this call's outcome as unknown (this \
                     process's lease had expired); its result was not recorded"
                ),
                Err(error) => tracing::warn!(
                    call_id = %call_id,
                    %error,
                    "cannot record the call's outcome; a retry will report it as unknown"
                ),
            }
            drop(token);
        };
        self.journaling.shared_store().record(
            self.key.clone(),
            owner.to_string(),
            record,
            Box::new(done),
        );
    }
}

/// What is recorded of `result` (its digest only where the journal audits: the chain holds it).
fn record(result: &ToolResult, state: EntryState, journal: &super::owner::Journal) -> Record {
    let json = serde_json::to_string(result).unwrap_or_default();
    let bytes = json.len() as i64;
    let cap = journal.result_cap;
    Record {
        state,
        is_error: result.is_error,
        unknown_outcome: result.unknown_outcome,
        result_digest: if journal.audit.enabled {
            crate::audit::record::result_digest(&json)
        } else {
            String::new()
        },
        result: (json.len() <= cap && state != EntryState::NotSent).then_some(json),
        result_bytes: bytes,
    }
}

/// What every call of `binding` asks besides its arguments, hashed: the binding's name, what it
/// calls (`url` or `command`, `mcp_tool`), and the pin's digest (else the input schema's).
pub(crate) fn identity(binding: &ToolBinding) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let target = match (&binding.url, &binding.command) {
        (Some(url), _) => format!("url {url}"),
        (None, Some(command)) => format!("command {}", canonical(&Value::from(command.clone()))),
        (None, None) => String::new(),
    };
    let pinned = match &binding.pin {
        Some(pin) => format!("pin {}", pin.digest),
        None => {
            let schema = Sha256::digest(canonical(&binding.input_schema).as_bytes());
            format!("schema {}", hex(&schema))
        }
    };
    let mut hash = Sha256::new();
    for part in [
        "brain-journal-1",
        &binding.name,
        &target,
        binding.mcp_tool.as_deref().unwrap_or(""),
        &pinned,
    ] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}

/// The digest of a call: its binding's [`identity`], its arguments in RFC 8785 canonical JSON
/// (so `1` and `1.0` are one value) and, on behalf of a user, the user's `subject` — `sha256:`
/// and hex. Two users' calls under one key differ, so neither is answered from the other's
/// journaled result (nor uses the other's approval).
pub(crate) fn digest(identity: &[u8; 32], arguments: &Value, subject: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(identity);
    hash.update(canonical(arguments).as_bytes());
    if let Some(subject) = subject {
        hash.update(b"\0subject\0");
        hash.update(subject.as_bytes());
    }
    format!("sha256:{}", hex(&hash.finalize()))
}

fn canonical(value: &Value) -> String {
    serde_jcs::to_string(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn binding() -> brain_config::ToolBinding {
        serde_json::from_value(json!({
            "name": "echo", "description": "d", "url": "http://127.0.0.1:1/mcp",
            "mcp_tool": "echo", "tenants": ["t"],
            "input_schema": {"type": "object"}, "timeout_seconds": 30, "max_output_bytes": 1000
        }))
        .expect("a binding")
    }

    #[test]
    fn one_value_is_one_digest_and_arguments_change_it() {
        let identity = super::identity(&binding());
        let digest = |v| super::digest(&identity, &v, None);
        assert_eq!(
            digest(json!({"a": 1, "b": "x"})),
            digest(json!({"b": "x", "a": 1.0}))
        );
        assert_ne!(digest(json!({"a": 1})), digest(json!({"a": 2})));
        let mut other = binding();
        other.url = Some("http://127.0.0.1:2/mcp".into());
        let other = super::identity(&other);
        assert_ne!(super::digest(&other, &json!({}), None), digest(json!({})));
        let as_alice = super::digest(&identity, &json!({}), Some("https://as|alice"));
        assert_ne!(as_alice, digest(json!({})), "a user's call is their own");
        assert_ne!(
            as_alice,
            super::digest(&identity, &json!({}), Some("https://as|bob"))
        );
    }
}
