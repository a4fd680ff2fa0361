//! The stateless transport (MCP 2026-07-28): no session. One POST carries the call, with the
//! protocol revision and client capabilities in `_meta`, and the `Mcp-Method`, `Mcp-Name` and
//! `Mcp-Param-*` headers (SEP-2243, `routing.rs`) computed from the pinned schema's
//! `x-mcp-header` annotations. There is no way back to the server: a cancelled call is a closed
//! response stream.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::call::{BackChannel, CallState, Exchange, Reply, Round, Tool, Transport};
use crate::event::ToolResult;
use crate::http::HttpClient;
use crate::outcome::Failure;
use crate::routing::headers;

/// The revision without sessions.
pub(crate) const REVISION: &str = crate::revision::STATELESS;
/// At most this many `input_required` rounds after the call.
const MAX_ROUNDS: u64 = 8;

/// The stateless transport.
pub(crate) struct Stateless;

impl Transport for Stateless {
    /// One POST, plus the rounds the server asks for (SEP-2322, bounded).
    ///
    /// A round re-requests the call only because the server answered `input_required`, a
    /// definite answer that the tool has not completed. A result that asks only to be called
    /// again (`requestState`, no `inputRequests`) gets the next round, the state echoed exactly.
    /// One that asks for user input fails the call, unless the binding opted into declining
    /// elicitations (`on_input_request: "decline"`): then the elicitation is declined in the next
    /// round, and sampling and roots still fail it.
    async fn exchange(&self, call: &Exchange<'_>) -> Result<ToolResult, Failure> {
        call.state().revision = Some(REVISION);
        let name = call.tool.binding.mcp_tool.as_deref().unwrap_or_default();
        let mut rounds = Rounds::new(call);
        loop {
            let headers = headers(name, call.arguments, &call.tool.param_headers);
            let reply = call
                .call(headers, meta(), rounds.current(), &NoWayBack)
                .await?;
            if let Some(result) = rounds.after(reply)? {
                return Ok(result);
            }
        }
    }

    /// Nothing to close: dropping the response closed its stream, which is how 2026-07-28
    /// cancels.
    fn leaves_work(&self, _: &CallState) -> bool {
        false
    }

    async fn clean_up(&self, _: HttpClient, _: Arc<Tool>, _: CallState) {}
}

/// The rounds of a 2026-07-28 call: the call, then each round its server asks for
/// (`input_required`), at most [`MAX_ROUNDS`] after the call, the binding's `on_input_request`
/// deciding what an input request gets. The same on every transport that speaks 2026-07-28.
pub(crate) struct Rounds {
    round: Round,
    policy: brain_config::OnInputRequest,
}

impl Rounds {
    pub(crate) fn new(call: &Exchange<'_>) -> Self {
        Rounds {
            round: Round::first(),
            policy: call.tool.binding.on_input_request(),
        }
    }

    /// The round to send now.
    pub(crate) fn current(&self) -> &Round {
        &self.round
    }

    /// The server's reply to the current round: the call's result, or `None` when the next
    /// round is ready to send, or the failure that ends the call.
    pub(crate) fn after(&mut self, reply: Reply) -> Result<Option<ToolResult>, Failure> {
        let asked = match reply {
            Reply::Complete(result) => return Ok(Some(result)),
            Reply::InputRequired(asked) => asked,
        };
        if self.round.number >= MAX_ROUNDS {
            return Err(Failure::sent(format!(
                "the server still asked for another round (input_required) after {MAX_ROUNDS} \
                 rounds; brain stopped, and the tool may have run"
            )));
        }
        self.round = Round::next(self.round.number + 1, &asked, self.policy)?;
        Ok(None)
    }
}

/// 2026-07-28 has no back-channel: server requests cannot be answered, streams not resumed.
struct NoWayBack;

impl BackChannel for NoWayBack {
    async fn answer(&self, _: &Value) -> bool {
        false
    }
}

/// The `_meta` entries that replace initialize on this revision.
pub(crate) fn meta() -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        json!(REVISION),
    );
    meta.insert(
        "io.modelcontextprotocol/clientInfo".into(),
        json!({"name": "brain", "version": env!("CARGO_PKG_VERSION")}),
    );
    // No capabilities: no elicitation, sampling or roots.
    meta.insert(
        "io.modelcontextprotocol/clientCapabilities".into(),
        json!({}),
    );
    meta
}
