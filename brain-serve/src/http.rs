//! Streamable HTTP at `/mcp`: rmcp's service (sessions at the 2025 revisions, and the stateless
//! requests of 2026-07-28 that `stateless.rs` leaves to it), behind brain's own layer, which runs
//! first on every request: the `Origin` check (403), the failed-authentication throttle of its
//! source (429), authentication (401, `WWW-Authenticate: Bearer`), the session's owner (404 for
//! anyone else), the request body bound (413), and the caps on sessions (429). Connections are
//! bounded before all of it (`listener.rs`). `/ready` answers without authentication, from a
//! background probe.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use brain_config::Serve;
use brain_runtime::journal::Journal;
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use brain_runtime::auth::{AccessTokenVerifier, TokenRejected};

use super::clients::{Client, Clients, bearer};
use super::facade::Facade;
use super::listener;
use super::owners::{self, Full, Lookup, MAX_ID_BYTES, OwnedSessions, Owners, SessionEnd};
use super::sources::{Throttle, TrustedProxies};
use super::stateless;

/// What the router is built from (the parts of `Http`, in `lib.rs`).
pub(crate) struct Parts<'a> {
    pub(crate) facade: Facade,
    pub(crate) serve: &'a Serve,
    pub(crate) clients: Clients,
    pub(crate) journal: Option<Journal>,
    pub(crate) options: &'a crate::options::HttpOptions,
    pub(crate) proxies: TrustedProxies,
}

/// What admitting a request takes (brain's layer, before rmcp sees it): the clients and the
/// token verifier, the origins allowed, the session owners and caps, the throttle.
struct Admission {
    clients: Clients,
    /// The server: the stateless path's requests are its directly (`stateless.rs`).
    facade: Facade,
    /// The `Host`s the stateless path takes (rmcp judges any other).
    hosts: Vec<String>,
    /// With `serve.authorization`: the JWT access token verifier, and where this resource's
    /// metadata is (named in every 401).
    oauth: Option<(AccessTokenVerifier, String)>,
    /// `--anonymous-tenant`.
    anonymous: Option<String>,
    origins: Vec<String>,
    max_request_bytes: usize,
    /// Each session's owner, the caps on sessions and calls.
    owners: Arc<Owners>,
    /// rmcp's sessions (to close one that would break a cap).
    sessions: Arc<OwnedSessions>,
    /// `--trusted-proxy`.
    proxies: TrustedProxies,
    /// Failed authentications per source.
    throttle: Throttle,
}

/// The router: `/mcp` behind brain's layer (authentication, origins, owners and caps),
/// `/ready`, and the protected resource metadata. `sessions` ends rmcp's sessions, their
/// streams, the session reaper and `/ready`'s probe.
pub(crate) async fn router(
    parts: Parts<'_>,
    sessions_stop: CancellationToken,
) -> Result<axum::Router, crate::options::ServeError> {
    let Parts {
        facade,
        serve,
        clients,
        journal,
        options,
        proxies,
    } = parts;
    let owners = facade.owners();
    // Sessions end on their idle time through the table (which withdraws their calls first),
    // not through rmcp's own keep-alive.
    let idle = Duration::from_secs(u64::from(serve.session_idle_seconds()));
    let mut local = LocalSessionManager::default();
    // rmcp's keep-alive only as a backstop (the table's expiry comes first).
    local.session_config.keep_alive = Some(idle * 2);
    let sessions = OwnedSessions::new(local, Arc::clone(&owners));
    let expiring = Arc::clone(&sessions);
    let reaper_stop = sessions_stop.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(
            (idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(5)),
        );
        loop {
            tokio::select! {
                _ = tick.tick() => expiring.expire(idle),
                () = reaper_stop.cancelled() => return,
            }
        }
    });
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .map(str::to_owned)
        .to_vec();
    hosts.extend(options.hosts.iter().cloned());
    let mut origins: Vec<String> = [
        "http://localhost:*",
        "http://127.0.0.1:*",
        "http://[::1]:*",
        "https://localhost:*",
        "https://127.0.0.1:*",
        "https://[::1]:*",
    ]
    .map(str::to_owned)
    .to_vec();
    origins.extend(options.origins.iter().cloned());
    let max_request_bytes = serve.max_request_bytes() as usize;
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(stateless::SSE_KEEP_ALIVE))
        .with_json_response(true)
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(max_request_bytes)
        .with_cancellation_token(sessions_stop.child_token());
    let factory = facade.clone();
    let service: StreamableHttpService<Facade, OwnedSessions> =
        StreamableHttpService::new(move || Ok(factory.clone()), Arc::clone(&sessions), config);
    let oauth = match &serve.authorization {
        Some(authorization) => {
            let verifier = AccessTokenVerifier::new(
                &authorization.issuer,
                &authorization.resource,
                &authorization.tenant_claim,
            )
            .map_err(|error| crate::options::ServeError::Authorization(error.to_string()))?
            .with_key_lifetimes(authorization.jwks_max_age(), authorization.jwks_max_stale());
            Some((verifier, metadata_url(&authorization.resource)))
        }
        None => None,
    };
    let metadata = serve.authorization.as_ref().map(|authorization| {
        json!({
            "resource": authorization.resource,
            "authorization_servers": [authorization.issuer],
            "bearer_methods_supported": ["header"],
        })
        .to_string()
    });
    let admission = Arc::new(Admission {
        clients,
        facade,
        hosts,
        oauth,
        anonymous: options.anonymous_tenant.clone(),
        origins,
        max_request_bytes,
        owners,
        sessions,
        proxies,
        throttle: Throttle::new(serve.failed_authentications_per_minute()),
    });
    let readiness = Readiness::start(journal, sessions_stop).await;
    let mut router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(admission, admit))
        .route(
            "/ready",
            axum::routing::get(move || std::future::ready(readiness.answer())),
        );
    if let Some(metadata) = metadata {
        // RFC 9728: the path-insert form for `/mcp`, and the root form.
        let answer = move || {
            let metadata = metadata.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], metadata) }
        };
        router = router
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                axum::routing::get(answer.clone()),
            )
            .route(
                "/.well-known/oauth-protected-resource",
                axum::routing::get(answer),
            );
    }
    Ok(router)
}

/// Serves `router` at `addr` with brain's accept loop and the config's connection bounds until
/// `accept` is cancelled; returns once the listener is closed and the connections have ended.
/// `ready` is told the address once the socket is bound.
pub(crate) async fn listen(
    addr: SocketAddr,
    router: axum::Router,
    serve: &Serve,
    accept: CancellationToken,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let bounds = listener::Bounds {
        max_connections: listener::connection_cap(serve.max_connections()),
        per_source: serve.connections_per_source() as usize,
        header_read: Duration::from_secs(u64::from(serve.header_read_timeout_seconds())),
        idle: Duration::from_secs(u64::from(serve.idle_timeout_seconds())),
        max_streams: serve.max_concurrent_streams(),
    };
    ready(addr);
    listener::serve(listener, router, bounds, accept).await
}

/// `/ready`: the state store's last probe, made every [`PROBE_EVERY`] in the background on a
/// reader (never behind the journal's writer), so that a flood of `/ready` costs a call nothing.
/// 503 when the last probe failed or is older than [`PROBE_STALE`]. Names the store's kind only.
struct Readiness {
    kind: Option<String>,
    /// When the last probe that succeeded ended, and whether the last one failed.
    last: Arc<std::sync::Mutex<(Option<tokio::time::Instant>, bool)>>,
}

/// How often `/ready` probes the state store.
const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How old a probe may be for `/ready` to answer 200.
const PROBE_STALE: Duration = Duration::from_secs(10);

impl Readiness {
    /// Probes once (so that `/ready` answers from the start), then every [`PROBE_EVERY`].
    async fn start(journal: Option<Journal>, stop: CancellationToken) -> Arc<Readiness> {
        // The store's kind only ("sqlite", "postgresql"), never its path or address.
        let kind = journal.as_ref().map(|journal| {
            journal
                .describe()
                .split([':', ' '])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase()
        });
        let readiness = Arc::new(Readiness {
            kind,
            last: Arc::default(),
        });
        if let Some(journal) = journal {
            let last = Arc::clone(&readiness.last);
            let probe = move || {
                let journal = journal.clone();
                let last = Arc::clone(&last);
                async move {
                    let probed = tokio::time::timeout(PROBE_EVERY, journal.probe()).await;
                    let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
                    match probed {
                        Ok(Ok(())) => *last = (Some(tokio::time::Instant::now()), false),
                        Ok(Err(error)) => {
                            tracing::warn!(%error, "serve: the state store's probe failed");
                            last.1 = true;
                        }
                        Err(_) => last.1 = true,
                    }
                }
            };
            probe().await;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(PROBE_EVERY);
                tick.tick().await;
                loop {
                    tokio::select! {
                        _ = tick.tick() => probe().await,
                        () = stop.cancelled() => return,
                    }
                }
            });
        }
        readiness
    }

    fn answer(&self) -> Response {
        let Some(kind) = &self.kind else {
            return json_response(StatusCode::OK, json!({"ready": true, "state": "none"}));
        };
        let (at, failed) = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = at.is_some_and(|at| at.elapsed() <= PROBE_STALE);
        if fresh && !failed {
            json_response(StatusCode::OK, json!({"ready": true, "state": kind}))
        } else {
            json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"ready": false, "state": kind, "reason": "the state store does not answer"}),
            )
        }
    }
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A JSON-RPC error as an HTTP response (`id` unknown: null).
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    json_response(
        status,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}),
    )
}

/// A session another client cannot tell from one that does not exist.
fn no_session() -> Response {
    rpc_error(StatusCode::NOT_FOUND, -32600, "Session not found")
}

/// Whether rmcp itself rejects an `Mcp-Method` header that contradicts the body: it checks the
/// standard headers against the body only when the request's `MCP-Protocol-Version` is at least
/// 2026-07-28 (its own predicate, `validate_standard_headers`). Elsewhere the header is the
/// client's word and says nothing.
fn method_header_checked(headers: &HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|version| version >= ProtocolVersion::STANDARD_HEADERS.as_str())
}

/// Whether a request without a session may open one: its JSON-RPC body decides (`initialize`),
/// except where rmcp checks the `Mcp-Method` header against the body — there a header naming
/// another method is enough to know it cannot.
fn may_initialize(headers: &HeaderMap) -> bool {
    if !method_header_checked(headers) {
        return true;
    }
    let mut methods = headers.get_all("mcp-method").iter();
    match (methods.next(), methods.next()) {
        (Some(method), None) => method == "initialize",
        // None: the body decides; several: rmcp rejects them, and the body still decides.
        _ => true,
    }
}

/// Whether a JSON-RPC body is (or, as a batch, holds) an `initialize` request.
fn is_initialize(body: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(messages)) => messages.iter().any(|m| m["method"] == "initialize"),
        Ok(message) => message["method"] == "initialize",
        // Not JSON: rmcp refuses it; should it not, the answer's session is still owned below.
        Err(_) => false,
    }
}

/// Brain's layer in front of rmcp's service: admits a request (origin, throttle, credential,
/// session owner, body bound, caps) or answers it.
async fn admit(
    State(admission): State<Arc<Admission>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN)
        && !origin_allowed(origin, &admission.origins)
    {
        return rpc_error(
            StatusCode::FORBIDDEN,
            -32600,
            "this Origin may not use this server (serve --allow-origin names the ones that may)",
        );
    }
    let peer = request
        .extensions()
        .get::<listener::Peer>()
        .map_or(IpAddr::from([127, 0, 0, 1]), |peer| peer.0.ip());
    let source = admission.proxies.source(peer, request.headers());
    if let Some(wait) = admission.throttle.throttled(source) {
        let mut response = rpc_error(
            StatusCode::TOO_MANY_REQUESTS,
            -32000,
            "too many failed authentications from this address: retry later",
        );
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        return response;
    }
    let client = match admission
        .authenticate(request.headers().get(header::AUTHORIZATION))
        .await
    {
        Ok(client) => client,
        Err((response, failed)) => {
            if failed {
                admission.throttle.failed(source);
            }
            return response;
        }
    };
    let session = match request.headers().get("mcp-session-id") {
        None => None,
        Some(value) => match value.to_str() {
            Ok(id) if id.len() <= MAX_ID_BYTES => Some(id.to_owned()),
            _ => return no_session(),
        },
    };
    // A session is its owner's: another's, or one with no owner, is a session that does not
    // exist.
    // The session is in use (never idle) until this request is answered.
    let mut in_use = None;
    if let Some(session) = &session {
        match admission.owners.lookup(session, &client) {
            Lookup::Owned(ended, session_use) => {
                request.extensions_mut().insert(SessionEnd(ended));
                in_use = Some(session_use);
            }
            Lookup::NotFound => return no_session(),
        }
    }
    let opens = request.method() == Method::POST && session.is_none();
    let mut reservation = None;
    if opens {
        (request, reservation) = match opening(&admission, &client, request).await {
            Ok(opened) => opened,
            Err(answered) => return answered,
        };
    }
    request.extensions_mut().insert(client.clone());
    let mut response = next.run(request).await;
    // A session's answer may be a stream (its SSE): the session is in use until it has ended.
    if let Some(in_use) = in_use {
        response = response.map(|body| {
            Body::new(listener::Holding {
                body,
                _held: in_use,
            })
        });
    }
    // Every answer that names a new session records its owner before it leaves, whatever the
    // request claimed to be; a session that would break a cap is closed at once.
    let Some(id) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
    else {
        return response;
    };
    if admission.owners.knows(id) {
        return response;
    }
    let id = id.to_owned();
    if !opens {
        // rmcp names a new session only in answer to an `initialize` without one: anything
        // else is closed rather than left without an owner.
        tracing::warn!("serve: an answer named a session nobody opened; closed");
        admission.sessions.close_soon(id);
        return rpc_error(StatusCode::INTERNAL_SERVER_ERROR, -32603, "internal error");
    }
    let reserved = match reservation {
        Some(reserved) => Ok(reserved),
        None => admission.owners.reserve(&client),
    };
    match reserved {
        Ok(reserved) => {
            reserved.commit(&id);
            admission.sessions.owned(&id);
            // A session whose worker already ended (its close found no owner to tell).
            let alive = admission
                .sessions
                .local
                .has_session(&id.clone().into())
                .await
                .unwrap_or(false);
            if !alive {
                admission.owners.end(&id);
            }
            response
        }
        Err(full) => {
            admission.sessions.close_soon(id);
            over_cap(full)
        }
    }
}

/// A POST without a session, its body read (within the bound): an `initialize`, its session
/// reserved against the caps, or a stateless request — the facade's own to answer
/// (`stateless.rs`), or rmcp's. `Err`: the answer already given.
async fn opening(
    admission: &Admission,
    client: &Client,
    request: Request,
) -> Result<(Request, Option<owners::Reservation>), Response> {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, admission.max_request_bytes).await else {
        return Err(rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            "the request body is larger than serve's `max_request_bytes`",
        ));
    };
    if may_initialize(&parts.headers) && is_initialize(&bytes) {
        let reserved = admission.owners.reserve(client).map_err(over_cap)?;
        return Ok((
            Request::from_parts(parts, Body::from(bytes)),
            Some(reserved),
        ));
    }
    let answered = stateless::answer(&admission.facade, client, &admission.hosts, parts, bytes);
    match answered.await {
        Ok(response) => Err(response),
        Err((parts, bytes)) => Ok((Request::from_parts(parts, Body::from(bytes)), None)),
    }
}

/// The 429 of a session over a cap.
fn over_cap(full: Full) -> Response {
    match full {
        Full::Principal => rpc_error(
            StatusCode::TOO_MANY_REQUESTS,
            -32000,
            "this client has as many sessions open as serve's `sessions_per_client` allows: \
             end one (HTTP DELETE) or let one expire",
        ),
        Full::Server => rpc_error(
            StatusCode::TOO_MANY_REQUESTS,
            -32000,
            "serve holds as many sessions as its `max_sessions` allows: retry later",
        ),
    }
}

impl Admission {
    /// The client a request's `Authorization` names: a static token's, else a verified JWT
    /// access token's; otherwise the answer to give (401, or 503 when the issuer's keys cannot
    /// be read) and whether it counts as a failed authentication.
    async fn authenticate(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<Client, (Response, bool)> {
        let Some(authorization) = authorization else {
            if let Some(tenant) = &self.anonymous {
                return Ok(Client::named(
                    tenant,
                    "anonymous",
                    "anonymous",
                    "anonymous".into(),
                ));
            }
            return Err((self.challenge(None), false));
        };
        // Present but unreadable (not text, not `Bearer`): a credential that fails, never an
        // absent one.
        let Some(token) = authorization.to_str().ok().and_then(bearer) else {
            return Err((
                self.challenge(Some(
                    "the Authorization header is not `Bearer TOKEN`".into(),
                )),
                true,
            ));
        };
        if let Some(client) = self.clients.authenticate_token(token) {
            return Ok(client);
        }
        let rejected = match &self.oauth {
            Some((verifier, _)) => match verifier.verify(token).await {
                Ok(verified) => {
                    return Ok(Client::of_token(
                        verified.tenant,
                        verified.issuer,
                        verified.subject,
                        verified.client_id,
                    ));
                }
                Err(TokenRejected::KeysUnavailable(why)) => {
                    tracing::warn!(%why, "no access token can be checked");
                    let mut response = rpc_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        -32603,
                        "the authorization server's keys cannot be read now; retry shortly",
                    );
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from(2u64));
                    return Err((response, false));
                }
                Err(rejected) => rejected.to_string(),
            },
            None => "a valid bearer token is required".to_owned(),
        };
        Err((self.challenge(Some(rejected)), true))
    }

    /// The 401: `WWW-Authenticate: Bearer`, naming the resource metadata with OAuth, and
    /// `invalid_token` when a credential was presented.
    fn challenge(&self, rejected: Option<String>) -> Response {
        let mut challenge = "Bearer".to_owned();
        if let Some((_, metadata)) = &self.oauth {
            challenge.push_str(&format!(" resource_metadata=\"{metadata}\""));
            if rejected.is_some() {
                challenge.push_str(", error=\"invalid_token\"");
            }
        }
        let message = rejected.unwrap_or_else(|| "a valid bearer token is required".to_owned());
        let mut response = rpc_error(StatusCode::UNAUTHORIZED, -32001, &message);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// Where the protected resource metadata of `resource` is (RFC 9728 §3.1: the well-known path
/// inserted between the origin and the resource's path).
fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(url) => {
            let path = url.path().trim_end_matches('/');
            format!(
                "{}/.well-known/oauth-protected-resource{path}",
                url.origin().ascii_serialization()
            )
        }
        Err(_) => resource.to_owned(),
    }
}

/// Whether `origin` is one of `allowed`: `scheme://host:port`, `:*` for any port.
fn origin_allowed(origin: &HeaderValue, allowed: &[String]) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let Ok(url) = url::Url::parse(origin) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let port = url.port_or_known_default();
    allowed.iter().any(|entry| {
        let (base, any_port) = match entry.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (entry.as_str(), false),
        };
        let Ok(allowed) = url::Url::parse(base) else {
            return false;
        };
        allowed.scheme() == url.scheme()
            && allowed.host_str() == Some(host)
            && (any_port || allowed.port_or_known_default() == port)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_match_scheme_host_and_port() {
        let allowed = [
            "http://localhost:*".to_owned(),
            "https://app.example.com".to_owned(),
        ];
        let ok = |origin: &str| origin_allowed(&HeaderValue::from_str(origin).unwrap(), &allowed);
        assert!(ok("http://localhost:5173"));
        assert!(ok("https://app.example.com"));
        assert!(ok("https://app.example.com:443"));
        assert!(!ok("https://app.example.com:8443"));
        assert!(!ok("http://app.example.com"));
        assert!(!ok("https://evil.example.com"));
        assert!(!ok("http://localhost.evil.com"));
        assert!(!ok("null"));
    }
}
