//! The stateless transport (MCP 2026-07-28): no session. One POST carries the call, with the
//! protocol revision and client capabilities in `_meta`, and the `Mcp-Method`, `Mcp-Name` and
//! `Mcp-Param-*` headers (SEP-2243) computed from the pinned schema's `x-mcp-header` annotations.
//! There is no way back to the server: a cancelled call is a closed response stream.

use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use std::sync::Arc;

use crate::call::{BackChannel, CallState, Exchange, Reply, Resume, Round, Tool, Transport};
use crate::event::ToolResult;
use crate::http::HttpClient;
use crate::outcome::Failure;
use crate::wire::{Messages, PROTOCOL_HEADER};

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
        let policy = call.tool.binding.on_input_request();
        let mut round = Round::first();
        loop {
            let headers = headers(name, call.arguments, &call.tool.param_headers);
            let asked = match call.call(headers, meta(), &round, &NoWayBack).await? {
                Reply::Complete(result) => return Ok(result),
                Reply::InputRequired(asked) => asked,
            };
            if round.number >= MAX_ROUNDS {
                return Err(Failure::sent(format!(
                    "the server still asked for another round (input_required) after \
                     {MAX_ROUNDS} rounds; brain stopped, and the tool may have run"
                )));
            }
            round = Round::next(round.number + 1, &asked, policy)?;
        }
    }

    /// Nothing to close: dropping the response closed its stream, which is how 2026-07-28
    /// cancels.
    async fn clean_up(&self, _: HttpClient, _: Arc<Tool>, _: CallState) {}
}

/// 2026-07-28 has no back-channel: server requests cannot be answered, streams not resumed.
struct NoWayBack;

impl BackChannel for NoWayBack {
    async fn answer(&self, _: &Value) -> bool {
        false
    }

    fn resumes(&self) -> bool {
        false
    }

    async fn resume(&self, _: &Resume) -> Result<Messages, Failure> {
        Err(Failure::sent(
            "a 2026-07-28 response stream cannot be resumed",
        ))
    }

    async fn side_message(&self) -> Value {
        std::future::pending().await
    }

    fn side_heard(&self) -> bool {
        false
    }
}

/// An argument promoted to a header: the property path from the schema root, and the header.
#[derive(Debug, Clone)]
pub(crate) struct ParamHeader {
    path: Vec<String>,
    header: HeaderName,
}

/// Every `x-mcp-header` annotation along `properties` chains of `schema`.
pub(crate) fn param_headers(schema: &Value) -> Vec<ParamHeader> {
    let mut out = Vec::new();
    let mut stack: Vec<(Vec<String>, &Value)> = vec![(Vec::new(), schema)];
    while let Some((path, schema)) = stack.pop() {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (name, property) in properties {
            let mut path = path.clone();
            path.push(name.clone());
            if let Some(header) = property.get("x-mcp-header").and_then(Value::as_str)
                && let Ok(header) = HeaderName::from_bytes(format!("mcp-param-{header}").as_bytes())
            {
                out.push(ParamHeader {
                    path: path.clone(),
                    header,
                });
            }
            stack.push((path, property));
        }
    }
    out
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

/// The headers of a `tools/call` POST.
pub(crate) fn headers(tool: &str, arguments: &Value, params: &[ParamHeader]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static(PROTOCOL_HEADER),
        HeaderValue::from_static(REVISION),
    );
    headers.insert(
        HeaderName::from_static("mcp-method"),
        HeaderValue::from_static("tools/call"),
    );
    if let Ok(value) = HeaderValue::from_str(&encode(tool)) {
        headers.insert(HeaderName::from_static("mcp-name"), value);
    }
    for param in params {
        let value = param
            .path
            .iter()
            .try_fold(arguments, |value, key| value.get(key));
        let text = match value {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        if let Ok(value) = HeaderValue::from_str(&encode(&text)) {
            headers.insert(param.header.clone(), value);
        }
    }
    headers
}

/// A header value as SEP-2243 sends it: as is, or `=?base64?...?=` when it could not travel.
fn encode(value: &str) -> String {
    let edges = [value.chars().next(), value.chars().last()];
    let needs_base64 = edges.iter().any(|c| matches!(c, Some(' ' | '\t')))
        || value.chars().any(|c| !(' '..='~').contains(&c))
        || (value.starts_with("=?base64?") && value.ends_with("?="));
    if needs_base64 {
        format!("=?base64?{}?=", BASE64_STANDARD.encode(value))
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding() {
        assert_eq!(encode("eu-west"), "eu-west");
        assert_eq!(encode("a b"), "a b");
        assert_eq!(encode(" a"), "=?base64?IGE=?=");
        assert_eq!(encode("é"), "=?base64?w6k=?=");
        assert_eq!(encode("x\r\ny"), "=?base64?eA0KeQ==?=");
    }

    #[test]
    fn param_headers_follow_properties_chains() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "options": {"type": "object", "properties": {"tier": {"type": "integer", "x-mcp-header": "Tier"}}},
            "plain": {"type": "string"}
        }});
        let params = param_headers(&schema);
        let headers = headers(
            "deploy",
            &json!({"region": "eu-west", "options": {"tier": 2}, "plain": "x"}),
            &params,
        );
        assert_eq!(headers["mcp-param-region"], "eu-west");
        assert_eq!(headers["mcp-param-tier"], "2");
        assert_eq!(headers["mcp-name"], "deploy");
        assert_eq!(headers["mcp-method"], "tools/call");
        assert_eq!(headers.len(), 5);
    }
}
