//! The test server's HTTP and SSE tool endpoints (plain webhooks, not MCP), under `/tools`: a
//! healthy tool of each shape and one endpoint per fault of the wire contract (docs/src/guides/http-tools.md). Every endpoint counts the requests whose body arrived, the at-most-once counter of
//! these tools (in all and per `Idempotency-Key`), and keeps the last request's headers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use serde_json::{Map, Value, json};

/// What the HTTP tool endpoints saw.
#[derive(Debug, Default)]
pub struct ToolStats {
    /// Tool requests whose body arrived (the at-most-once counter for HTTP and SSE tools).
    pub requests: AtomicUsize,
    /// The same per `Idempotency-Key` (brain's call id), for the requests that carried one.
    pub requests_by_id: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    /// The headers of the last tool request (lowercase names → values; `authorization` only as
    /// `<present>`).
    pub last_headers: std::sync::Mutex<Map<String, Value>>,
}

impl ToolStats {
    /// [`ToolStats::requests_by_id`] as a JSON object (served at `GET /stats?by_id=1`).
    pub fn requests_by_id(&self) -> Value {
        json!(
            *self
                .requests_by_id
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        )
    }
}

struct Endpoints {
    stats: Arc<ToolStats>,
    require_token: Option<String>,
    session_key: Option<Vec<u8>>,
}

/// The routes, nested at `/tools` by the test server. With `require_token`, a request without
/// `Authorization: Bearer <token>` gets 401 (and is not counted); `session_key` is the key with
/// which `/tools/sse/inspect` verifies `Brain-Session-Token`.
pub fn router(
    stats: Arc<ToolStats>,
    require_token: Option<String>,
    session_key: Option<Vec<u8>>,
) -> axum::Router {
    let endpoints = Arc::new(Endpoints {
        stats,
        require_token,
        session_key,
    });
    axum::Router::new()
        .route("/status/{code}", axum::routing::post(status))
        .route("/{*path}", axum::routing::post(tool))
        .with_state(endpoints)
}

/// The request, counted, as `(headers, arguments)`; or the response that refuses it.
async fn accept(endpoints: &Endpoints, request: Request) -> Result<(HeaderMap, Value), Response> {
    if let Some(token) = &endpoints.require_token {
        let expected = format!("Bearer {token}");
        let given = request.headers().get(header::AUTHORIZATION);
        if given.and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
            return Err((StatusCode::UNAUTHORIZED, "a bearer token is required").into_response());
        }
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return Err(StatusCode::BAD_REQUEST.into_response());
    };
    endpoints.stats.requests.fetch_add(1, Ordering::SeqCst);
    if let Some(key) = parts
        .headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
    {
        *endpoints
            .stats
            .requests_by_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_owned())
            .or_default() += 1;
    }
    let headers = headers_json(&parts.headers, |_| true);
    *endpoints
        .stats
        .last_headers
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = headers;
    match serde_json::from_slice(&bytes) {
        Ok(arguments) => Ok((parts.headers, arguments)),
        Err(_) => Err((StatusCode::BAD_REQUEST, "the body is not JSON").into_response()),
    }
}

/// `/status/{code}`: that status, with a text body; 3xx with a `Location`.
async fn status(
    State(endpoints): State<Arc<Endpoints>>,
    Path(code): Path<u16>,
    request: Request,
) -> Response {
    if let Err(refused) = accept(&endpoints, request).await {
        return refused;
    }
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::IM_A_TEAPOT);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/plain")],
        format!("fault: status {code}"),
    )
        .into_response();
    if status.is_redirection() {
        response.headers_mut().insert(
            header::LOCATION,
            header::HeaderValue::from_static("/tools/echo"),
        );
    }
    response
}

async fn tool(
    State(endpoints): State<Arc<Endpoints>>,
    Path(path): Path<String>,
    request: Request,
) -> Response {
    let (headers, arguments) = match accept(&endpoints, request).await {
        Ok(accepted) => accepted,
        Err(refused) => return refused,
    };
    let number = |name: &str, default: u64| arguments[name].as_u64().unwrap_or(default);
    match path.as_str() {
        "echo" => {
            let shown = headers_json(&headers, |name| {
                name.starts_with("brain-")
                    || matches!(
                        name,
                        "idempotency-key" | "content-type" | "accept" | "authorization"
                    )
            });
            json_response(&json!({"arguments": arguments, "headers": shown}))
        }
        "weather" => json_response(&json!({
            "city": arguments["city"].as_str().unwrap_or("Oslo"),
            "temperature_c": 21.5,
            "conditions": "sunny",
        })),
        "weather_broken" => json_response(&json!({
            "city": "Oslo", "temperature_c": "warm", "conditions": "sunny"
        })),
        "text" => {
            let said = match arguments["message"].as_str() {
                Some(message) => message.to_owned(),
                None => arguments.to_string(),
            };
            (
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("you said: {said}"),
            )
                .into_response()
        }
        "redirect" => (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, "/tools/echo")],
        )
            .into_response(),
        "no-content" => StatusCode::NO_CONTENT.into_response(),
        // The connection's task unwinds without a response: the client sees the connection
        // close before any headers. `resume_unwind` skips the panic hook (nothing is printed);
        // the server serves each connection on its own task, so only this one dies.
        "drop-before" => {
            std::panic::resume_unwind(Box::new("fault: connection dropped before the response"))
        }
        "drop-after" => streamed("application/json", failing(stream::empty())),
        "wrong-type" => (
            [(header::CONTENT_TYPE, "text/html")],
            "<html><body>not a tool</body></html>",
        )
            .into_response(),
        "invalid-json" => (
            [(header::CONTENT_TYPE, "application/json")],
            "{\"not\": json",
        )
            .into_response(),
        "stall" => std::future::pending().await,
        "huge" => {
            let body = stream::once(async { Bytes::from_static(b"\"") })
                .chain(x_chunks(number("bytes", 8 << 20)))
                .chain(stream::once(async { Bytes::from_static(b"\"") }));
            streamed("application/json", body.map(Ok))
        }
        "slow-body" => {
            let dribbles = number("seconds", 30) * 10;
            let body = stream::once(async { Bytes::from_static(b"{\"slow\": \"") })
                .chain(stream::unfold(0, move |sent| async move {
                    (sent < dribbles).then_some(())?;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Some((Bytes::from_static(b"x"), sent + 1))
                }))
                .chain(stream::once(async { Bytes::from_static(b"\"}") }));
            streamed("application/json", body.map(Ok))
        }
        sse if sse.starts_with("sse/") => sse_tool(&endpoints, &headers, &arguments, sse),
        _ => (StatusCode::NOT_FOUND, "no such tool endpoint").into_response(),
    }
}

/// The SSE tools (`sse/...`): progress then a result, a flood of progress, the session token's
/// claims, an error or an image result, and the stream faults (no result, cut mid-stream, an
/// oversized event, the wrong content type, a stall).
fn sse_tool(endpoints: &Endpoints, headers: &HeaderMap, arguments: &Value, path: &str) -> Response {
    let number = |name: &str, default: u64| arguments[name].as_u64().unwrap_or(default);
    match path {
        "sse/progress" => {
            let (steps, delay) = (number("steps", 3), number("delay_ms", 0));
            let head = stream::iter([
                Bytes::from_static(b": brain test server\n\n"),
                sse_event("debug", &json!({"ignored": true})),
            ]);
            let progress = stream::unfold(1, move |step| async move {
                (step <= steps).then_some(())?;
                tokio::time::sleep(Duration::from_millis(delay)).await;
                let data = json!({
                    "progress": step, "total": steps, "message": format!("step {step} of {steps}")
                });
                Some((sse_event("progress", &data), step + 1))
            });
            let result = sse_event(
                "result",
                &json!({"content": [{"type": "text", "text": format!("done after {steps} steps")}]}),
            );
            event_stream(head.chain(progress).chain(stream::iter([result])).map(Ok))
        }
        "sse/flood" => {
            let count = number("count", 100_000);
            let progress = stream::iter(1..=count)
                .map(|step| sse_event("progress", &json!({ "progress": step })));
            let result = sse_event(
                "result",
                &json!({"content": [{"type": "text", "text": format!("flooded {count}")}]}),
            );
            event_stream(progress.chain(stream::iter([result])).map(Ok))
        }
        "sse/inspect" => inspect(endpoints, headers),
        "sse/error" => event_stream(
            stream::iter([sse_event(
                "result",
                &json!({"content": [{"type": "text", "text": "the tool failed: no such city"}],
                        "is_error": true}),
            )])
            .map(Ok),
        ),
        "sse/image" => event_stream(
            stream::iter([sse_event(
                "result",
                &json!({"content": [
                    {"type": "text", "text": "a tiny image"},
                    {"type": "image", "data": crate::content::TINY_PNG, "mimeType": "image/png"}
                ]}),
            )])
            .map(Ok),
        ),
        "sse/no-result" => {
            event_stream(stream::iter([sse_event("progress", &json!({"progress": 1}))]).map(Ok))
        }
        // The progress event first (a pause lets it leave), then the cut: mid-stream.
        "sse/drop" => event_stream(failing(
            stream::iter([sse_event("progress", &json!({"progress": 1}))]).chain(
                stream::once(tokio::time::sleep(Duration::from_millis(50)))
                    .filter_map(|()| async { None }),
            ),
        )),
        "sse/huge-event" => {
            let head = stream::once(async {
                Bytes::from_static(b"event: progress\ndata: {\"progress\": 1, \"message\": \"")
            });
            let tail = stream::iter([
                Bytes::from_static(b"\"}\n\n"),
                sse_event("result", &json!({"content": []})),
            ]);
            event_stream(
                head.chain(x_chunks(number("bytes", 8 << 20)))
                    .chain(tail)
                    .map(Ok),
            )
        }
        "sse/wrong-type" => json_response(&json!({"content": []})),
        "sse/stall" => event_stream(
            stream::iter([sse_event("progress", &json!({"progress": 1}))])
                .chain(stream::pending())
                .map(Ok),
        ),
        _ => (StatusCode::NOT_FOUND, "no such tool endpoint").into_response(),
    }
}

/// `/sse/inspect`: verifies the session inspection token and returns its claims.
fn inspect(endpoints: &Endpoints, headers: &HeaderMap) -> Response {
    let refuse = |why: String| {
        (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("session token refused: {why}"),
        )
            .into_response()
    };
    let Some(key) = &endpoints.session_key else {
        return refuse("this server has no session token key".into());
    };
    let Some(token) = headers
        .get(brain_runtime::SESSION_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
    else {
        return refuse("no Brain-Session-Token header".into());
    };
    let claims = match brain_runtime::verify_session_token(token, key, SystemTime::now()) {
        Ok(claims) => claims,
        Err(error) => return refuse(error.to_string()),
    };
    let text = format!(
        "verified session token of tenant {}, session {}, call {}, tool {}",
        claims.tenant_id, claims.session_id, claims.call_id, claims.tool
    );
    let claims = serde_json::to_value(&claims).unwrap_or_default();
    event_stream(
        stream::iter([
            sse_event(
                "progress",
                &json!({"progress": 1, "total": 2, "message": "token verified"}),
            ),
            sse_event(
                "progress",
                &json!({"progress": 2, "total": 2, "message": "claims read"}),
            ),
            sse_event(
                "result",
                &json!({"content": [{"type": "text", "text": text}], "structured_content": claims}),
            ),
        ])
        .map(Ok),
    )
}

/// The headers `keep` keeps, as JSON (lowercase names; `authorization` only as `<present>`).
fn headers_json(headers: &HeaderMap, keep: impl Fn(&str) -> bool) -> Map<String, Value> {
    headers
        .iter()
        .filter(|(name, _)| keep(name.as_str()))
        .map(|(name, value)| {
            let value = if name == header::AUTHORIZATION {
                "<present>".to_owned()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            };
            (name.as_str().to_owned(), Value::String(value))
        })
        .collect()
}

fn sse_event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

fn json_response(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// `bytes` bytes of `x`, in 64 KiB chunks made as they are sent.
fn x_chunks(bytes: u64) -> impl Stream<Item = Bytes> + Send + 'static {
    const CHUNK: u64 = 64 * 1024;
    stream::unfold(bytes, |left| async move {
        (left > 0).then_some(())?;
        let size = left.min(CHUNK);
        Some((Bytes::from(vec![b'x'; size as usize]), left - size))
    })
}

/// `chunks`, then a body error: the connection is cut mid-response.
fn failing(
    chunks: impl Stream<Item = Bytes> + Send + 'static,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    chunks.map(Ok).chain(stream::once(async {
        Err(std::io::Error::other("fault: connection dropped"))
    }))
}

fn event_stream(
    body: impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
) -> Response {
    streamed("text/event-stream", body)
}

fn streamed(
    content_type: &'static str,
    body: impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from_stream(body))
        .expect("a valid response")
}
