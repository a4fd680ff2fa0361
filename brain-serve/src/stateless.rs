//! The stateless requests of Streamable HTTP at 2026-07-28 — a sessionless POST of one
//! `tools/call` or `tools/list` — answered by the facade itself, with rmcp's model types on the
//! wire. rmcp's `StreamableHttpService` builds, for each such request, a service from the
//! factory, a `Peer` with its channel, a serve loop with its own channel, maps and join sets,
//! and two spawned tasks (ARCHITECTURE: "serve's stateless path"); here a request is one future
//! and, once it streams progress, one response body.
//!
//! This path takes only what rmcp would accept and answers it as rmcp would (a JSON answer, or an
//! SSE stream once progress comes first). Anything else — another method, a notification, a
//! batch, another revision, an `Origin` or `Host` rmcp must judge, any header that is not plainly
//! right — goes on to rmcp unchanged, so that rmcp's checks and its errors stay the only ones.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use http::{HeaderMap, StatusCode, header};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequest, ClientRequest, ErrorCode, ErrorData, GetMeta, JsonRpcRequest,
    ListToolsRequest, ProgressNotification, ProtocolVersion, RequestId, ServerJsonRpcMessage,
    ServerNotification, ServerResult,
};

use super::clients::Client;
use super::facade::{Facade, Incoming, Step};

/// How often an SSE answer says it is alive while a call runs: here, and on rmcp's (`http.rs`).
pub(crate) const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A stateless request this path answers, or gives back untouched for rmcp.
pub(crate) async fn answer(
    facade: &Facade,
    client: &Client,
    allowed_hosts: &[String],
    parts: http::request::Parts,
    body: Bytes,
) -> Result<Response, (http::request::Parts, Bytes)> {
    let Some((id, mut request)) = taken(facade, allowed_hosts, &parts, &body) else {
        return Err((parts, body));
    };
    // The body and the request's head are slices of hyper's read buffer: let them go before the
    // call is awaited, so that a call in flight does not hold the connection's old buffer beside
    // the one hyper reads into next.
    drop(body);
    let headers = headers_only(parts);
    // Where rmcp's service puts it for a handler: the request's `_meta`, out of the request.
    let meta = std::mem::take(request.get_meta_mut());
    Ok(match request {
        ClientRequest::ListToolsRequest(_) => json_answer(
            Ok(ServerResult::ListToolsResult(facade.tools_of(client))),
            id,
        ),
        ClientRequest::CallToolRequest(request) => {
            let incoming = Incoming {
                client: client.clone(),
                meta,
                headers: Some(headers),
                ended: None,
                cancelled: None,
            };
            let mut steps = facade.calling(request.params, incoming);
            match steps.next().await {
                Some(Step::Done(answer)) => json_answer(answer.map(ServerResult::from), id),
                Some(Step::Progress(first)) => streamed(first, steps, id),
                None => json_answer(
                    Err(ErrorData::internal_error(
                        "the call ended without a result",
                        None,
                    )),
                    id,
                ),
            }
        }
        _ => unreachable!("`taken` takes tools/call and tools/list only"),
    })
}

/// The head's headers, the rest of it (its URI, its extensions) let go.
fn headers_only(parts: http::request::Parts) -> HeaderMap {
    parts.headers
}

/// The request, if it is one this path answers exactly as rmcp would: `tools/call` or
/// `tools/list` at 2026-07-28 with its per-request `_meta`, and headers that rmcp accepts.
fn taken(
    facade: &Facade,
    allowed_hosts: &[String],
    parts: &http::request::Parts,
    body: &[u8],
) -> Option<(RequestId, ClientRequest)> {
    let headers = &parts.headers;
    if headers.contains_key(header::ORIGIN)
        || !host_allowed(parts, allowed_hosts)
        || !accepts_both(headers)
        || !sole(headers, header::CONTENT_TYPE.as_str()).is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
    {
        return None;
    }
    // The `Mcp-Method` header names the one type the body may be (rmcp rejects a body that
    // contradicts it): parsed as that, not as any client message.
    let method = sole(headers, "mcp-method")?;
    let (id, request) = match method {
        "tools/call" => {
            let call: JsonRpcRequest<CallToolRequest> = serde_json::from_slice(body).ok()?;
            (call.id, ClientRequest::CallToolRequest(call.request))
        }
        "tools/list" => {
            let list: JsonRpcRequest<ListToolsRequest> = serde_json::from_slice(body).ok()?;
            (list.id, ClientRequest::ListToolsRequest(list.request))
        }
        _ => return None,
    };
    let meta = request.get_meta();
    let version = meta.protocol_version()?;
    let revision = ProtocolVersion::V_2026_07_28;
    if version != revision
        || !facade.supported_protocol_versions().contains(&version)
        || !meta.missing_required_keys(&revision).is_empty()
        || sole(headers, "mcp-protocol-version") != Some(revision.as_str())
    {
        return None;
    }
    if let ClientRequest::CallToolRequest(call) = &request {
        let name = call.params.name.as_ref();
        // A Base64-wrapped name, or a tool whose `Mcp-Param-*` headers rmcp checks: rmcp's.
        if sole(headers, "mcp-name") != Some(name)
            || name.starts_with("=?base64?")
            || facade.has_param_headers(name)
        {
            return None;
        }
    }
    Some((id, request))
}

/// The one value of header `name`, as text; `None` when absent, repeated or not text.
fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// Whether `Accept` names both JSON and SSE plainly (a weighted entry is rmcp's to read).
fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',') {
            let (essence, params) = entry.split_once(';').unwrap_or((entry, ""));
            if params.contains("q=") || params.contains("Q=") {
                return false;
            }
            let essence = essence.trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// Whether the request's `Host` (or, over HTTP/2, `:authority`) is one serve allows, by rmcp's
/// rule: the host, without brackets and case, and the port where the entry names one.
fn host_allowed(parts: &http::request::Parts, allowed: &[String]) -> bool {
    let authority = match parts.headers.get(header::HOST) {
        Some(host) => host
            .to_str()
            .ok()
            .and_then(|host| http::uri::Authority::try_from(host).ok()),
        None => parts.uri.authority().cloned(),
    };
    let Some(authority) = authority else {
        return false;
    };
    let host = normalized(authority.host());
    let port = authority.port_u16();
    allowed.iter().any(|entry| {
        let entry = entry.trim();
        let (entry_host, entry_port) = match http::uri::Authority::try_from(entry) {
            Ok(allowed) => (normalized(allowed.host()), allowed.port_u16()),
            Err(_) => (normalized(entry), None),
        };
        !entry.is_empty() && entry_host == host && entry_port.is_none_or(|p| port == Some(p))
    })
}

fn normalized(host: &str) -> String {
    host.trim_matches('[')
        .trim_matches(']')
        .to_ascii_lowercase()
}

/// The message of an answer: the result with 2026-07-28's caching hints filled, or the error.
fn message(answer: Result<ServerResult, ErrorData>, id: RequestId) -> ServerJsonRpcMessage {
    match answer {
        Ok(mut result) => {
            result.fill_missing_cache_hints();
            ServerJsonRpcMessage::response(result, id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    }
}

/// A whole answer as JSON, with rmcp's HTTP status for a JSON-RPC error at 2026-07-28.
fn json_answer(answer: Result<ServerResult, ErrorData>, id: RequestId) -> Response {
    let status = match &answer {
        Err(error)
            if [
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
                ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                ErrorCode::HEADER_MISMATCH,
            ]
            .contains(&error.code) =>
        {
            StatusCode::BAD_REQUEST
        }
        Err(error) if error.code == ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    };
    match serde_json::to_vec(&message(answer, id)) {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(body),
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A call whose progress came first: an SSE stream of its progress, then its answer. The call
/// runs as the body is read; a client that closes the stream drops it, which cancels the call.
fn streamed(
    first: rmcp::model::ProgressNotificationParam,
    steps: futures_util::stream::BoxStream<'static, Step>,
    id: RequestId,
) -> Response {
    let progress = |param| {
        ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(
            ProgressNotification::new(param),
        ))
    };
    let first = progress(first);
    let rest = steps.map(move |step| match step {
        Step::Progress(param) => progress(param),
        Step::Done(answer) => message(answer.map(ServerResult::from), id.clone()),
    });
    let events = futures_util::stream::once(std::future::ready(first))
        .chain(rest)
        .map(|message| {
            serde_json::to_string(&message)
                .map(|data| SseEvent::default().data(data))
                .map_err(axum::Error::new)
        });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&str, &str)]) -> http::request::Parts {
        let mut request = http::Request::post("/mcp");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    /// A facade over two bindings (never called): `echo`, and `routed`, whose schema asks for an
    /// `Mcp-Param-Region` header.
    fn facade() -> (Facade, tokio::runtime::Runtime) {
        let binding = |name: &str, schema: serde_json::Value| {
            serde_json::json!({"name": name, "description": "d", "input_schema": schema,
                "url": "http://127.0.0.1:9/mcp", "mcp_tool": name, "tenants": ["acme"],
                "protocol_version": "2026-07-28"})
        };
        let region = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}});
        let config = serde_json::json!({"tools": [
            binding("echo", serde_json::json!({"type": "object"})),
            binding("routed", region),
        ]});
        let config = brain_config::parse(config.to_string().as_bytes(), "host.json").unwrap();
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _entered = tokio.enter();
        let runtime = brain_runtime::Runtime::new(&config).unwrap();
        let bounds = crate::facade::Bounds {
            calls_per_client: 4,
            calls: 4,
            sessions_per_client: 4,
            sessions: 4,
        };
        let stop = tokio_util::sync::CancellationToken::new();
        let facade = Facade::new(runtime, &config.tools, None, None, bounds, false, stop);
        (facade, tokio)
    }

    /// What the stateless path takes, and what it leaves to rmcp: each case changes one thing of
    /// a well-formed request; none of them is taken.
    #[test]
    fn only_what_rmcp_would_accept_is_taken() {
        let (facade, _tokio) = facade();
        let hosts = ["localhost".to_owned(), "127.0.0.1".to_owned()];
        let meta = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}});
        let call = |name: &str, meta: &serde_json::Value| {
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": {}, "_meta": meta}})
        };
        let headers = |method: &str, name: Option<&str>| {
            let mut headers = vec![
                ("host", "127.0.0.1:8080".to_owned()),
                ("accept", "application/json, text/event-stream".to_owned()),
                ("content-type", "application/json".to_owned()),
                ("mcp-protocol-version", "2026-07-28".to_owned()),
                ("mcp-method", method.to_owned()),
            ];
            if let Some(name) = name {
                headers.push(("mcp-name", name.to_owned()));
            }
            headers
        };
        let taken_as = |headers: &[(&str, String)], body: &serde_json::Value| {
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            taken(&facade, &hosts, &parts(&pairs), body.to_string().as_bytes()).is_some()
        };
        let echo = call("echo", &meta);
        let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
            "params": {"_meta": meta}});
        assert!(taken_as(&headers("tools/call", Some("echo")), &echo));
        assert!(taken_as(&headers("tools/list", None), &list));

        let with = |name: &'static str, value: &str| {
            let mut changed = headers("tools/call", Some("echo"));
            changed.retain(|(n, _)| *n != name);
            changed.push((name, value.to_owned()));
            changed
        };
        let without = |name: &'static str| {
            let mut changed = headers("tools/call", Some("echo"));
            changed.retain(|(n, _)| *n != name);
            changed
        };
        let mut twice = headers("tools/call", Some("echo"));
        twice.push(("mcp-protocol-version", "2026-07-28".to_owned()));
        let header_cases: Vec<(&str, Vec<(&str, String)>)> = vec![
            ("an Origin", with("origin", "http://localhost:3000")),
            ("another Host", with("host", "evil.example:8080")),
            ("no Host", without("host")),
            ("Accept without SSE", with("accept", "application/json")),
            (
                "a weighted Accept",
                with("accept", "application/json, text/event-stream;q=0"),
            ),
            ("another Content-Type", with("content-type", "text/plain")),
            ("no Mcp-Method", without("mcp-method")),
            ("another Mcp-Method", with("mcp-method", "tools/list")),
            ("no Mcp-Name", without("mcp-name")),
            ("another Mcp-Name", with("mcp-name", "other")),
            ("a Base64 Mcp-Name", with("mcp-name", "=?base64?ZWNobw==?=")),
            (
                "another revision's header",
                with("mcp-protocol-version", "2025-11-25"),
            ),
            ("no revision header", without("mcp-protocol-version")),
            ("the revision header twice", twice),
        ];
        for (what, changed) in header_cases {
            assert!(!taken_as(&changed, &echo), "{what}");
        }

        let mut older = meta.clone();
        older["io.modelcontextprotocol/protocolVersion"] = "2025-11-25".into();
        let mut no_capabilities = meta.clone();
        no_capabilities
            .as_object_mut()
            .unwrap()
            .remove("io.modelcontextprotocol/clientCapabilities");
        let mut notification = echo.clone();
        notification.as_object_mut().unwrap().remove("id");
        let body_cases = [
            ("another revision in _meta", call("echo", &older)),
            ("no clientCapabilities", call("echo", &no_capabilities)),
            ("no _meta", call("echo", &serde_json::Value::Null)),
            ("a notification", notification),
            ("a batch", serde_json::json!([echo.clone()])),
            ("not JSON-RPC 2.0", {
                let mut old = echo.clone();
                old["jsonrpc"] = "1.0".into();
                old
            }),
        ];
        for (what, body) in body_cases {
            assert!(
                !taken_as(&headers("tools/call", Some("echo")), &body),
                "{what}"
            );
        }
        // A tool whose `Mcp-Param-*` headers rmcp checks.
        let routed = call("routed", &meta);
        assert!(!taken_as(&headers("tools/call", Some("routed")), &routed));
    }

    #[test]
    fn hosts_by_rmcp_rule() {
        let allowed = [
            "localhost".to_owned(),
            "[::1]".to_owned(),
            "example.com:8443".to_owned(),
        ];
        let ok = |host: &str| host_allowed(&parts(&[("host", host)]), &allowed);
        assert!(ok("localhost:3000"));
        assert!(ok("LOCALHOST"));
        assert!(ok("[::1]:8080"));
        assert!(ok("example.com:8443"));
        assert!(!ok("example.com"));
        assert!(!ok("example.com:443"));
        assert!(!ok("evil.com"));
        assert!(!ok("localhost.evil.com"));
        assert!(!host_allowed(&parts(&[]), &allowed));
    }

    #[test]
    fn accept_plain_both_or_rmcp_reads_it() {
        let accepts = |value: &str| accepts_both(&parts(&[("accept", value)]).headers);
        assert!(accepts("application/json, text/event-stream"));
        assert!(accepts("Application/JSON;charset=utf-8,text/event-stream"));
        assert!(!accepts("application/json"));
        assert!(!accepts("application/json, text/event-stream;q=0"));
        assert!(!accepts("*/*"));
    }
}
