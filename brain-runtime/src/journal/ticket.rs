//! One call's journal entry, through the lifecycle: looked up at *admit* (when the transport
//! opens something; else the claim meets what is there), claimed at the send point, settled
//! after the call. The rules of what a retry gets live here, the same for every
//! backend.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use brain_config::ToolBinding;
use serde_json::Value;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::owner::Journaling;
use super::store::{Claim, Entry, EntryState, Key, Record, StoreError};
use crate::event::ToolResult;
use crate::outcome::{Fact, Failure};
use crate::state::hex;
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
}

impl JournalState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JournalState::New => "new",
            JournalState::Replayed => "replayed",
            JournalState::InProgressElsewhere => "in_progress_elsewhere",
            JournalState::UnknownAfterCrash => "unknown_after_crash",
            JournalState::Conflict => "conflict",
        }
    }
}

/// A call's entry in the journal.
pub(crate) struct Ticket {
    journaling: Arc<Journaling>,
    key: Key,
    digest: String,
    binding: String,
    timeout_ms: i64,
    trace_id: Option<String>,
    /// The owner it was claimed under, once claimed here.
    claimed: Mutex<Option<Arc<str>>>,
    state: Mutex<Option<JournalState>>,
    /// Waiting while another caller runs the call.
    waiting: AtomicBool,
}

impl Ticket {
    pub(crate) fn new(
        journaling: &Arc<Journaling>,
        key: Key,
        tool: &Tool,
        arguments: &Value,
        trace_id: Option<String>,
    ) -> Ticket {
        let binding = &tool.binding;
        Ticket {
            journaling: Arc::clone(journaling),
            key,
            digest: digest(&tool.identity, arguments),
            binding: binding.name.clone(),
            timeout_ms: i64::try_from(binding.timeout_seconds.saturating_mul(1000))
                .unwrap_or(i64::MAX),
            trace_id,
            claimed: Mutex::new(None),
            state: Mutex::new(None),
            waiting: AtomicBool::new(false),
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
            Fact::SetupFailed,
            format!(
                "refused: {error}; nothing was sent (brain never sends a call it could not record)"
            ),
        )
    }

    /// The admit step: `None` when the call goes on (a new key, or one whose earlier call was
    /// never sent); else the journal's answer. Waits while the call runs elsewhere.
    pub(crate) async fn admit(&self) -> Result<Option<ToolResult>, Failure> {
        let store = self.journaling.store();
        match store.lookup(&self.key).await.map_err(|e| self.failed(e))? {
            None => Ok(None),
            Some(entry) => self.resolve(entry).await,
        }
    }

    /// The claim, at the send point: `None` when the call is now claimed by this process (and
    /// durably recorded as sent); else the journal's answer (another caller claimed it first).
    pub(crate) async fn claim(&self) -> Result<Option<ToolResult>, Failure> {
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
            };
            // Owned before the claim is awaited: a claim that commits while the call is
            // cancelled (or whose answer is lost) is still settled after the call — as not
            // sent, since nothing was.
            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&owner));
            if store.claim(&claim).await.map_err(|e| self.failed(e))? {
                self.set(JournalState::New);
                return Ok(None);
            }
            *self.claimed.lock().unwrap_or_else(|p| p.into_inner()) = None;
            match store.lookup(&self.key).await.map_err(|e| self.failed(e))? {
                Some(entry) => match self.resolve(entry).await? {
                    None => continue,
                    answer => return Ok(answer),
                },
                // Nothing there, yet no claim: this process's lease had expired.
                None => self
                    .journaling
                    .revive(&owner)
                    .await
                    .map_err(|e| self.failed(e))?,
            }
        }
        Err(self.failed(StoreError {
            store: store.describe().to_owned(),
            message: "the call could not be claimed after 4 attempts".into(),
        }))
    }

    /// An entry exists for the key: answer from it, wait while its owner runs it, or go on
    /// (`None`) when it was never sent.
    async fn resolve(&self, mut entry: Entry) -> Result<Option<ToolResult>, Failure> {
        let store = self.journaling.store();
        let mut pause = Duration::from_millis(5);
        let mut waited = false;
        loop {
            if entry.digest != self.digest {
                self.set(JournalState::Conflict);
                return Err(Failure::new(
                    Fact::Refused,
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
                    return Ok(None);
                }
                EntryState::Completed | EntryState::Failed => {
                    self.set(if waited {
                        JournalState::InProgressElsewhere
                    } else {
                        JournalState::Replayed
                    });
                    return Ok(Some(self.replay(&entry)));
                }
                EntryState::Sent
                    if !entry.owner_live || entry.now_ms > entry.deadline_ms + GRACE_MS =>
                {
                    let crashed = !entry.owner_live;
                    let message = if crashed {
                        format!(
                            "call id {:?} was sent before by a process that stopped ({}) before \
                             it recorded the outcome; the tool may have run. brain does not send \
                             it again: check the resource before calling with a new call id",
                            self.key.call_id, entry.owner
                        )
                    } else {
                        format!(
                            "call id {:?} was sent before by {}, which has not recorded an \
                             outcome by its deadline; the tool may have run. brain does not send \
                             it again: check the resource before calling with a new call id",
                            self.key.call_id, entry.owner
                        )
                    };
                    let (mut result, _) = Failure::broken(message).into_result(&self.key.call_id);
                    let record = record(
                        &result,
                        EntryState::Failed,
                        self.journaling.journal.result_cap,
                    );
                    let settled = store
                        .settle(&self.key, &entry.owner, &record, crashed)
                        .await
                        .map_err(|e| self.failed(e))?;
                    if settled {
                        self.set(JournalState::UnknownAfterCrash);
                        result.replayed = true;
                        return Ok(Some(result));
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
                None => return Ok(None),
            };
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
                    Fact::Refused
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
        let record = record(result, state, self.journaling.journal.result_cap);
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

/// What is recorded of `result`.
fn record(result: &ToolResult, state: EntryState, cap: usize) -> Record {
    let json = serde_json::to_string(result).unwrap_or_default();
    let bytes = json.len() as i64;
    Record {
        state,
        is_error: result.is_error,
        unknown_outcome: result.unknown_outcome,
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

/// The digest of a call: its binding's [`identity`] and its arguments in RFC 8785 canonical
/// JSON (so `1` and `1.0` are one value) — `sha256:` and hex.
pub(crate) fn digest(identity: &[u8; 32], arguments: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(identity);
    hash.update(canonical(arguments).as_bytes());
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
        let digest = |v| super::digest(&identity, &v);
        assert_eq!(
            digest(json!({"a": 1, "b": "x"})),
            digest(json!({"b": "x", "a": 1.0}))
        );
        assert_ne!(digest(json!({"a": 1})), digest(json!({"a": 2})));
        let mut other = binding();
        other.url = Some("http://127.0.0.1:2/mcp".into());
        let other = super::identity(&other);
        assert_ne!(super::digest(&other, &json!({})), digest(json!({})));
    }
}
