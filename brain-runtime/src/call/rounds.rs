//! The `tools/call` message of each round, and the rounds themselves: the call, then — on MCP
//! 2026-07-28 only — each round its server asks for with an `input_required` result (SEP-2322),
//! at most [`MAX_ROUNDS`] after the call, the binding's `on_input_request` deciding what an input
//! request gets. The same on every transport that speaks 2026-07-28 (HTTP and stdio).

use brain_config::{OnInputRequest, ToolBinding};
use serde_json::{Map, Value, json};

use crate::event::ToolResult;
use crate::outcome::Failure;
use crate::tool::Scope;

/// The JSON-RPC id of the first `tools/call` of a call; rounds add their number.
pub(crate) const CALL_ID: u64 = 1;
/// What an MCP task is asked to be kept for beyond the call's own timeout (its `ttl`), in
/// seconds: its result can still be read after a slow last poll.
const TASK_TTL_GRACE_SECONDS: u64 = 60;
/// At most this many `input_required` rounds after the call.
const MAX_ROUNDS: u64 = 8;

/// The server's answer to one `tools/call` request.
pub(crate) enum Reply {
    /// The tool's result.
    Complete(ToolResult),
    /// An `input_required` result (2026-07-28): the tool has not completed.
    InputRequired(Value),
    /// A `CreateTaskResult`'s task (its `task` at 2025-11-25, the result itself at 2026-07-28):
    /// the server runs the tool as this task.
    Task(Value),
}

/// What one round of a call carries besides the call itself.
pub(crate) struct Round {
    /// 0 for the call, 1.. for the rounds the server asked for; also offsets the JSON-RPC id.
    pub(crate) number: u64,
    /// The `requestState` of the previous `input_required` result, exactly as received.
    request_state: Option<Value>,
    /// The answers to its `inputRequests`.
    input_responses: Option<Map<String, Value>>,
}

impl Round {
    pub(crate) fn first() -> Self {
        Round {
            number: 0,
            request_state: None,
            input_responses: None,
        }
    }

    /// The JSON-RPC id of this round's `tools/call`.
    pub(crate) fn request_id(&self) -> u64 {
        CALL_ID + self.number
    }

    /// The round that continues after an `input_required` result, or the failure when the
    /// result asks for user input that the binding's `policy` does not let brain answer.
    fn next(number: u64, asked: &Value, policy: OnInputRequest) -> Result<Self, Failure> {
        let mut responses = Map::new();
        if let Some(requests) = asked.get("inputRequests").and_then(Value::as_object) {
            for (key, request) in requests {
                let method = request.get("method").and_then(Value::as_str).unwrap_or("");
                let params = request.get("params").unwrap_or(&Value::Null);
                let answer = input_answer(policy, method, params)?;
                responses.insert(key.clone(), answer);
            }
        }
        Ok(Round {
            number,
            request_state: asked.get("requestState").cloned(),
            input_responses: (!responses.is_empty()).then_some(responses),
        })
    }
}

/// The rounds of one call.
pub(crate) struct Rounds {
    round: Round,
    policy: OnInputRequest,
    /// The revision has rounds (2026-07-28); on a session revision an `input_required` result
    /// is a protocol violation.
    allowed: bool,
}

impl Rounds {
    pub(crate) fn new(policy: OnInputRequest, allowed: bool) -> Self {
        Rounds {
            round: Round::first(),
            policy,
            allowed,
        }
    }

    /// The round to send now.
    pub(crate) fn current(&self) -> &Round {
        &self.round
    }

    /// The server's reply to the current round: the call's result, or `None` when the next
    /// round is ready to send, or the failure that ends the call.
    ///
    /// A round re-requests the call only because the server answered `input_required`, a
    /// definite answer that the tool has not completed. A result that asks only to be called
    /// again (`requestState`, no `inputRequests`) gets the next round, the state echoed exactly.
    /// One that asks for user input fails the call, unless the binding opted into declining
    /// elicitations (`on_input_request: "decline"`): then the elicitation is declined in the next
    /// round, and sampling and roots still fail it.
    pub(crate) fn after(&mut self, reply: Reply) -> Result<Option<ToolResult>, Failure> {
        let asked = match reply {
            Reply::Complete(result) => return Ok(Some(result)),
            Reply::InputRequired(asked) => asked,
            Reply::Task(_) => {
                return Err(Failure::broken(
                    "a task was created in a round after the first; the tool may have run",
                ));
            }
        };
        if !self.allowed {
            return Err(Failure::broken(
                "the server answered with an `input_required` result on a session revision, \
                 where MCP does not allow it; the tool may have run",
            ));
        }
        if self.round.number >= MAX_ROUNDS {
            return Err(Failure::broken(format!(
                "the server still asked for another round (input_required) after {MAX_ROUNDS} \
                 rounds; brain stopped, and the tool may have run"
            )));
        }
        self.round = Round::next(self.round.number + 1, &asked, self.policy)?;
        Ok(None)
    }
}

/// What brain answers to a server's request for user input, by the binding's
/// `on_input_request`: the answer's `result`, or the failure of the call. No user is ever asked:
/// at most an elicitation is declined, when the binding opted in.
pub(crate) fn input_answer(
    policy: OnInputRequest,
    method: &str,
    params: &Value,
) -> Result<Value, Failure> {
    if method == "elicitation/create" && policy == OnInputRequest::Decline {
        return Ok(json!({"action": "decline"}));
    }
    let what = match params.get("message").and_then(Value::as_str) {
        Some(message) => format!("{method}: {message:?}"),
        None => method.to_owned(),
    };
    let help = if method == "elicitation/create" {
        "Handle approval inside the tool instead, or set `\"on_input_request\": \"decline\"` on \
         the binding to decline elicitations and let the server go on"
    } else {
        "Handle it inside the tool instead"
    };
    Err(Failure::broken(format!(
        "the server asked for user input ({what}), which brain does not provide; the call \
         failed and the tool may have run. {help}"
    )))
}

/// The `tools/call` message of one round. `meta` holds the revision's own `_meta` entries;
/// brain's scope and progress token are added last, so that they win. `task`: augmented with
/// the `task` parameter (2025-11-25).
pub(crate) fn call_message(
    binding: &ToolBinding,
    call_id: &str,
    scope: &Scope,
    arguments: &Value,
    mut meta: Map<String, Value>,
    round: &Round,
    task: bool,
) -> Value {
    meta.insert("progressToken".into(), json!(call_id));
    meta.insert(
        "brain.dev/scope".into(),
        json!({
            "tenant_id": scope.tenant_id,
            "session_id": scope.session_id,
            "call_id": call_id,
        }),
    );
    let mut params = Map::new();
    params.insert(
        "name".into(),
        json!(binding.mcp_tool.as_deref().unwrap_or_default()),
    );
    params.insert("arguments".into(), arguments.clone());
    if task {
        // Kept by the server past the call's own deadline, so that its result can be read.
        let ttl = (binding.timeout_seconds + TASK_TTL_GRACE_SECONDS) * 1000;
        params.insert("task".into(), json!({"ttl": ttl}));
    }
    if let Some(responses) = &round.input_responses {
        params.insert("inputResponses".into(), Value::Object(responses.clone()));
    }
    if let Some(state) = &round.request_state {
        params.insert("requestState".into(), state.clone());
    }
    params.insert("_meta".into(), Value::Object(meta));
    json!({"jsonrpc": "2.0", "id": round.request_id(), "method": "tools/call", "params": params})
}
