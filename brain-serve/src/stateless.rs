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
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, GetMeta, ProgressNotification,
    ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerNotification, ServerResult,
};

use super::clients::Client;
use super::facade::{Facade, Incoming, Step};

/// How often an SSE answer says it is alive while a call runs (as rmcp's, `http.rs`).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

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
                headers: Some(parts.headers),
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
    let ClientJsonRpcMessage::Request(request) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    let (method, name) = match &request.request {
        ClientRequest::CallToolRequest(call) => ("tools/call", Some(call.params.name.as_ref())),
        ClientRequest::ListToolsRequest(_) => ("tools/list", None),
        _ => return None,
    };
    let meta = request.request.get_meta();
    let version = meta.protocol_version()?;
    let revision = ProtocolVersion::V_2026_07_28;
    if version != revision
        || !facade.supported_protocol_versions().contains(&version)
        || !meta.missing_required_keys(&revision).is_empty()
        || sole(headers, "mcp-protocol-version") != Some(revision.as_str())
        || sole(headers, "mcp-method") != Some(method)
    {
        return None;
    }
    if let Some(name) = name {
        // A Base64-wrapped name, or a tool whose `Mcp-Param-*` headers rmcp checks: rmcp's.
        if sole(headers, "mcp-name") != Some(name)
            || name.starts_with("=?base64?")
            || facade.has_param_headers(name)
        {
            return None;
        }
    }
    Some((request.id, request.request))
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
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
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
