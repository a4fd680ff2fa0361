//! HTTP and SSE tools: the bindings without `mcp_tool`. One `POST url` of the arguments, answered
//! by one body (an HTTP tool) or an event stream (an SSE tool). The spec leaves their wire
//! contract to the host; brain's is in the README ("HTTP and SSE tools"):
//!
//! - request: the arguments object as JSON; `Accept: application/json, text/event-stream` (SSE
//!   tools: `text/event-stream`); the token from `token_env`; the scope as `Brain-Tenant-Id`,
//!   `Brain-Session-Id`, `Brain-Call-Id`; `Idempotency-Key: <call id>`; with `inspect_session`,
//!   a session inspection token in `Brain-Session-Token` (`session_token.rs`);
//! - a 2xx `application/json` body becomes one text block holding it (and, with an
//!   `output_schema`, the validated `structured_content`), `text/plain` one text block, `204` an
//!   empty result, `text/event-stream` is read as an SSE tool's stream; any other type fails the
//!   call with `unknown_outcome: true`;
//! - an event stream: `event: progress` → `tool.progress`, `event: result` → the `tool.result`
//!   (converted and checked by `convert.rs`, like an MCP result), other events and comments
//!   ignored; each event read under the raw result bound (`wire::Bounded::per_event`); ending
//!   without `result` → unknown;
//! - a non-2xx status fails the call: 4xx with `unknown_outcome: false`, except 408, 409 and
//!   429 (the server may have started), and 1xx, 3xx (redirects are never followed), 5xx with
//!   `true`; the status and up to 4 KiB of the body go into the message.
//!
//! There is nothing to clean up: the request is one exchange, and dropping its response (a
//! timeout, a cancelled call) closes the connection.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use brain_config::BindingKind;
use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue, LOCATION};
use serde_json::{Map, Value, json};
use sse_stream::SseStream;

use crate::call::{CallState, Exchange, Tool, Transport};
use crate::convert::convert;
use crate::event::ToolResult;
use crate::http::{HttpClient, Response};
use crate::outcome::Failure;
use crate::session_token::SESSION_TOKEN_HEADER;
use crate::wire::{Bounded, ReadError, content_type, error_chain};

/// How much of an error response's body goes into the failure message.
const ERROR_BODY_BYTES: usize = 4096;
/// How long brain waits for that much of an error response's body.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(1);

/// The transport of HTTP and SSE tools.
pub(crate) struct HttpTool;

impl Transport for HttpTool {
    async fn exchange(&self, call: &Exchange<'_>) -> Result<ToolResult, Failure> {
        let sse = call.tool.binding.kind() == BindingKind::Sse;
        let headers = request_headers(call)?;
        let body = Bytes::from(serde_json::to_vec(call.arguments).expect("JSON serializes"));
        let accept = if sse {
            "text/event-stream"
        } else {
            "application/json, text/event-stream"
        };
        call.state().call_sent = true;
        let response = match call.endpoint.post_json(body, accept, headers).await {
            Ok(response) => response,
            Err(error) if error.is_connect() => {
                call.state().call_sent = false;
                return Err(Failure::not_sent(format!(
                    "could not connect to {}: {}",
                    call.url(),
                    error_chain(&error)
                )));
            }
            Err(error) => {
                return Err(Failure::sent(format!(
                    "the connection failed after the request was sent: {}; the tool may have run",
                    error_chain(&error)
                )));
            }
        };
        let status = response.status();
        if !status.is_success() {
            return Err(status_failure(call, response).await);
        }
        let content_type = content_type(&response);
        if content_type.starts_with("text/event-stream") {
            return read_events(call, response).await;
        }
        if sse {
            return Err(Failure::sent(format!(
                "the SSE tool answered with {}, not an event stream (text/event-stream); the \
                 tool may have run",
                describe_type(&content_type)
            )));
        }
        read_body(call, response, status, &content_type).await
    }

    /// Nothing stays open: the exchange's response was dropped with it.
    fn leaves_work(&self, _: &CallState) -> bool {
        false
    }

    async fn clean_up(&self, _: HttpClient, _: Arc<Tool>, _: CallState) {}
}

/// The request's headers besides `Accept`, `Content-Type` and the token (`wire.rs` adds those):
/// the scope, the idempotency key and, with `inspect_session`, the session inspection token.
fn request_headers(call: &Exchange<'_>) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::new();
    let mut add = |name: &'static str, what: &str, value: &str| {
        let value = HeaderValue::from_str(value).map_err(|_| {
            Failure::not_sent(format!(
                "refused: the {what} {value:?} cannot be sent as an HTTP header (it holds a \
                 control character or non-ASCII text)"
            ))
        })?;
        headers.insert(HeaderName::from_static(name), value);
        Ok::<(), Failure>(())
    };
    add("brain-tenant-id", "tenant id", &call.scope.tenant_id)?;
    add("brain-session-id", "session id", &call.scope.session_id)?;
    add("brain-call-id", "call id", call.call_id)?;
    add("idempotency-key", "call id", call.call_id)?;
    if let Some(key) = &call.tool.session_key {
        let left = call
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let token = key.sign(
            &call.scope.tenant_id,
            &call.scope.session_id,
            call.call_id,
            &call.tool.binding.name,
            SystemTime::now() + left,
        );
        let mut value = HeaderValue::from_str(&token).expect("a JWS is a valid header value");
        value.set_sensitive(true);
        headers.insert(HeaderName::from_static(SESSION_TOKEN_HEADER), value);
    }
    Ok(headers)
}

fn describe_type(content_type: &str) -> String {
    if content_type.is_empty() {
        "no content type".to_owned()
    } else {
        format!("content type {content_type:?}")
    }
}

/// Whether a JSON media type: `application/json` or `application/<something>+json`.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A non-2xx status: the call's failure, with the status and the start of the body.
async fn status_failure(call: &Exchange<'_>, response: Response) -> Failure {
    let status = response.status();
    let location = response
        .headers()
        .get(LOCATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let detail = error_body(response).await;
    let unknown_outcome = status_unknown(status);
    let mut message = format!("{} answered HTTP {status}", call.url());
    if status.is_redirection() {
        message += &format!(
            " (a redirect{}: brain does not follow redirects; put the final URL in the binding)",
            location.map(|l| format!(" to {l}")).unwrap_or_default()
        );
    }
    message += &call.auth_hint(status);
    if !detail.is_empty() {
        message += &format!(": {detail}");
    }
    message += if unknown_outcome {
        "; the tool may have run"
    } else {
        "; the request was refused"
    };
    Failure {
        unknown_outcome,
        message,
    }
}

/// Whether a non-2xx status leaves it open whether the tool ran: 5xx, 1xx and 3xx, and the
/// 4xx statuses that a server may send after it started (408 Request Timeout, 409 Conflict,
/// 429 Too Many Requests). Other 4xx statuses refuse the request.
fn status_unknown(status: StatusCode) -> bool {
    match status.as_u16() {
        408 | 409 | 429 => true,
        400..=499 => false,
        _ => true,
    }
}

/// Up to [`ERROR_BODY_BYTES`] of an error response's body as text, waiting at most
/// [`ERROR_BODY_WAIT`] for it.
async fn error_body(response: Response) -> String {
    let mut body = http_body_util::BodyDataStream::new(response.into_body());
    let mut bytes = Vec::new();
    let read = async {
        while let Some(Ok(chunk)) = body.next().await {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > ERROR_BODY_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(ERROR_BODY_WAIT, read).await;
    let truncated = bytes.len() > ERROR_BODY_BYTES;
    bytes.truncate(ERROR_BODY_BYTES);
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if truncated {
        format!("{text}… (truncated at {ERROR_BODY_BYTES} bytes)")
    } else {
        text.to_owned()
    }
}

/// An HTTP tool's 2xx body, read under the raw result bound, as the call's result.
async fn read_body(
    call: &Exchange<'_>,
    response: Response,
    status: StatusCode,
    content_type: &str,
) -> Result<ToolResult, Failure> {
    let json = is_json(content_type);
    let text = content_type.starts_with("text/plain");
    if !json && !text && status != StatusCode::NO_CONTENT {
        return Err(Failure::sent(format!(
            "the HTTP tool answered HTTP {status} with {}, which brain does not read \
             (application/json, text/plain or text/event-stream); the tool may have run",
            describe_type(content_type)
        )));
    }
    let limit = call.tool.raw_limit();
    let bytes = Bounded::new(response, limit)
        .collect_all()
        .await
        .map_err(|error| call.read_failure(error))?;
    let result = if status == StatusCode::NO_CONTENT || (bytes.is_empty() && !json) {
        json!({"content": []})
    } else {
        let Ok(body) = String::from_utf8(bytes) else {
            return Err(Failure::sent(
                "the HTTP tool's response body is not UTF-8 text; the tool may have run",
            ));
        };
        let mut result = json!({"content": [{"type": "text", "text": body}]});
        if json {
            let value: Value = serde_json::from_str(&body).map_err(|error| {
                Failure::sent(format!(
                    "the HTTP tool's response is not valid JSON ({error}); the tool may have run"
                ))
            })?;
            if call.tool.output.is_some() {
                result["structuredContent"] = value;
            }
        }
        result
    };
    convert(
        call.call_id,
        &result,
        call.tool.output.as_ref(),
        call.tool.binding.max_output_bytes,
    )
}

/// An event stream (an SSE tool's, or an HTTP tool's that answered with one): progress events
/// become `tool.progress`, the `result` event the call's result.
async fn read_events(call: &Exchange<'_>, response: Response) -> Result<ToolResult, Failure> {
    let mut events =
        SseStream::from_bytes_stream(Bounded::per_event(response, call.tool.raw_limit()));
    let mut last_progress = None;
    loop {
        let event = match events.next().await {
            None => {
                return Err(Failure::sent(
                    "the event stream ended without a `result` event; the tool may have run",
                ));
            }
            Some(Ok(event)) => event,
            Some(Err(error)) => return Err(call.read_failure(ReadError::from(error))),
        };
        let data = event.data.as_deref().unwrap_or_default();
        match event.event.as_deref() {
            Some("progress") => match serde_json::from_str::<Value>(data) {
                Ok(params) => call.report_progress(&params, &mut last_progress).await,
                Err(error) => {
                    tracing::debug!(call_id = call.call_id, %error, "progress event ignored: not JSON");
                }
            },
            Some("result") => return event_result(call, data),
            _ => {}
        }
    }
}

/// The `result` event's data (`{"content", "structured_content"?, "is_error"?}`) as the call's
/// result, through the conversion MCP results go through.
fn event_result(call: &Exchange<'_>, data: &str) -> Result<ToolResult, Failure> {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(data) else {
        return Err(Failure::sent(
            "the `result` event's data is not a JSON object; the tool may have run",
        ));
    };
    let mut result = Map::new();
    for (from, to) in [
        ("content", "content"),
        ("structured_content", "structuredContent"),
        ("is_error", "isError"),
    ] {
        if let Some(value) = fields.get(from) {
            result.insert(to.to_owned(), value.clone());
        }
    }
    convert(
        call.call_id,
        &Value::Object(result),
        call.tool.output.as_ref(),
        call.tool.binding.max_output_bytes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_classify_as_the_contract_says() {
        for (code, unknown) in [
            (400, false),
            (401, false),
            (403, false),
            (404, false),
            (408, true),
            (409, true),
            (422, false),
            (429, true),
            (500, true),
            (502, true),
            (503, true),
            (307, true),
            (303, true),
        ] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(status_unknown(status), unknown, "HTTP {code}");
        }
    }

    #[test]
    fn json_types() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/problem+json"));
        assert!(!is_json("text/json-ish"));
        assert!(!is_json("application/jsonl"));
    }
}
