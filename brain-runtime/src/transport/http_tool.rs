//! HTTP and SSE tools: the bindings without `mcp_tool`. One `POST url` of the arguments, answered
//! by one body (an HTTP tool) or an event stream (an SSE tool). The spec leaves their wire
//! contract to the host; brain's is in docs/src/guides/http-tools.md:
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

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use brain_config::BindingKind;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue, LOCATION};
use serde_json::{Map, Value, json};
use sse_stream::{Sse, SseStream};

use crate::call::{CallState, Exchange, Incoming, Reading, Round, Transport};
use crate::convert::convert;
use crate::event::ToolResult;
use crate::http::{HttpClient, Response};
use crate::outcome::{Fact, Failure};
use crate::session_token::{SESSION_TOKEN_HEADER, SessionTokenKey};
use crate::tool::Tool;
use crate::wire::{Bounded, ReadError, content_type, error_chain};

/// How much of an error response's body goes into the failure message.
const ERROR_BODY_BYTES: usize = 4096;
/// How long brain waits for that much of an error response's body.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(1);

/// An HTTP or SSE tool: what its calls need beyond the shared facts.
pub(crate) struct HttpTool {
    /// With `inspect_session`: the key its session inspection tokens are signed with.
    pub(crate) session_key: Option<Arc<SessionTokenKey>>,
}

impl Transport for Arc<HttpTool> {
    type Opened = ();
    type Reading = HttpToolReading;

    const OPENS: bool = false;

    /// Nothing to open: the request is one exchange.
    async fn open(&self, _: &Exchange<'_>) -> Result<(), Failure> {
        Ok(())
    }

    /// The one POST of the arguments.
    async fn write(
        &self,
        call: &Exchange<'_>,
        _: &(),
        _: &Round,
    ) -> Result<HttpToolReading, Failure> {
        let sse = call.tool.binding.kind() == BindingKind::Sse;
        let headers = request_headers(call, self.session_key.as_deref())?;
        let body = Bytes::from(serde_json::to_vec(call.arguments).expect("JSON serializes"));
        let accept = if sse {
            "text/event-stream"
        } else {
            "application/json, text/event-stream"
        };
        let response = match call.endpoint.post_json(body, accept, headers).await {
            Ok(response) => response,
            Err(error) if call.endpoint.never_left(&error) => {
                return Err(Failure::new(
                    Fact::NotWritten { round: 0 },
                    format!(
                        "could not connect to {}: {}",
                        call.url(),
                        error_chain(&error)
                    ),
                ));
            }
            Err(error) => {
                return Err(Failure::broken(format!(
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
            let events = Bounded::per_event(response, call.tool.raw_limit());
            return Ok(HttpToolReading::Events(Box::pin(
                SseStream::from_bytes_stream(events),
            )));
        }
        if sse {
            return Err(Failure::broken(format!(
                "the SSE tool answered with {}, not an event stream (text/event-stream); the \
                 tool may have run",
                describe_type(&content_type)
            )));
        }
        Ok(HttpToolReading::Body(Some((
            response,
            status,
            content_type,
        ))))
    }

    /// Nothing stays open: the exchange's response was dropped with it.
    fn leaves_work(&self, _: &CallState) -> bool {
        false
    }

    async fn clean_up(self, _: HttpClient, _: Arc<Tool>, _: CallState) {}
}

/// An event stream's events, each read under the raw result bound.
type Events = Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>;

/// An HTTP tool's answer: one body, or an event stream.
pub(crate) enum HttpToolReading {
    /// A 2xx body not yet read: the response, its status and content type.
    Body(Option<(Response, StatusCode, String)>),
    /// An event stream (an SSE tool's, or an HTTP tool's that answered with one).
    Events(Events),
}

impl Reading for HttpToolReading {
    async fn next(&mut self, call: &Exchange<'_>) -> Result<Incoming, Failure> {
        match self {
            HttpToolReading::Body(body) => {
                let Some((response, status, content_type)) = body.take() else {
                    return Err(Failure::broken("the HTTP tool's response was already read"));
                };
                read_body(call, response, status, &content_type)
                    .await
                    .map(Incoming::Result)
            }
            HttpToolReading::Events(events) => next_event(call, events).await,
        }
    }
}

/// The request's headers besides `Accept`, `Content-Type` and the token (`wire.rs` adds those):
/// the scope, the idempotency key and, with `inspect_session`, the session inspection token.
fn request_headers(
    call: &Exchange<'_>,
    session_key: Option<&SessionTokenKey>,
) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::new();
    let mut add =
        |name: &'static str, what: &str, value: &str| {
            let value = HeaderValue::from_str(value).map_err(|_| {
            Failure::new(Fact::Refused(crate::event::Reason::InvalidHeader), format!(
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
    if let Some(key) = session_key {
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
    let retry_after =
        crate::outcome::retry_after_header(response.headers(), call.tool.binding.timeout_seconds);
    let detail = error_body(response).await;
    let fact = Fact::ToolStatus(status.as_u16());
    let unknown_outcome = crate::outcome::classify(fact).unknown_outcome;
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
    Failure::new(fact, message).retry_after(retry_after)
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
        return Err(Failure::broken(format!(
            "the HTTP tool answered HTTP {status} with {}, which brain does not read \
             (application/json, text/plain or text/event-stream); the tool may have run",
            describe_type(content_type)
        )));
    }
    let limit = call.tool.raw_limit();
    let bytes = Bounded::new(response, limit)
        .collect_all()
        .await
        .map_err(|error| error.failure(call.tool.binding.max_output_bytes))?;
    let result = if status == StatusCode::NO_CONTENT || (bytes.is_empty() && !json) {
        json!({"content": []})
    } else {
        let Ok(body) = String::from_utf8(bytes) else {
            return Err(Failure::broken(
                "the HTTP tool's response body is not UTF-8 text; the tool may have run",
            ));
        };
        let mut result = json!({"content": [{"type": "text", "text": body}]});
        if json {
            let value: Value = serde_json::from_str(&body).map_err(|error| {
                Failure::broken(format!(
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

/// The next event of an event stream that means something: a `progress` event, or the
/// `result` event as the call's result; other events and comments are passed over.
async fn next_event(call: &Exchange<'_>, events: &mut Events) -> Result<Incoming, Failure> {
    loop {
        let event = match events.next().await {
            None => {
                return Err(Failure::broken(
                    "the event stream ended without a `result` event; the tool may have run",
                ));
            }
            Some(Ok(event)) => event,
            Some(Err(error)) => {
                return Err(ReadError::from(error).failure(call.tool.binding.max_output_bytes));
            }
        };
        let data = event.data.as_deref().unwrap_or_default();
        match event.event.as_deref() {
            Some("progress") => match serde_json::from_str::<Value>(data) {
                Ok(params) => return Ok(Incoming::Progress(params)),
                Err(error) => {
                    tracing::debug!(call_id = call.call_id, %error, "progress event ignored: not JSON");
                }
            },
            Some("result") => return event_result(call, data).map(Incoming::Result),
            _ => {}
        }
    }
}

/// The `result` event's data (`{"content", "structured_content"?, "is_error"?}`) as the call's
/// result, through the conversion MCP results go through.
fn event_result(call: &Exchange<'_>, data: &str) -> Result<ToolResult, Failure> {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(data) else {
        return Err(Failure::broken(
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
    fn json_types() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/problem+json"));
        assert!(!is_json("text/json-ish"));
        assert!(!is_json("application/jsonl"));
    }
}
