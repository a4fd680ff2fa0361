//! Streamable HTTP at `/mcp`: rmcp's service (sessions at the 2025 revisions, stateless requests
//! at 2026-07-28), behind brain's own layer, which runs first on every request: the `Origin`
//! check (403), authentication (401, `WWW-Authenticate: Bearer`), the request body bound (413),
//! and the cap on one client's sessions. `/ready` answers without authentication.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use brain_config::Serve;
use brain_runtime::journal::{Filter, Journal};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use brain_runtime::auth::{AccessTokenVerifier, TokenRejected};

use super::clients::{Client, Clients, bearer};
use super::facade::Facade;

/// Where and for whom `serve --listen` answers.
pub(crate) struct Listen {
    /// The address to listen on (loopback unless told otherwise).
    pub(crate) addr: SocketAddr,
    /// Browser origins allowed besides loopback ones (`https://app.example.com`).
    pub(crate) origins: Vec<String>,
    /// `Host` values allowed besides loopback ones (the name clients reach this server by).
    pub(crate) hosts: Vec<String>,
    /// `--anonymous-tenant`: a request without `Authorization` runs as this tenant (loopback
    /// addresses only).
    pub(crate) anonymous: Option<String>,
}

/// What brain's layer needs on every request.
struct Gate {
    clients: Clients,
    /// With `serve.authorization`: the JWT access token verifier, and where this resource's
    /// metadata is (named in every 401).
    oauth: Option<(AccessTokenVerifier, String)>,
    /// `--anonymous-tenant`.
    anonymous: Option<String>,
    origins: Vec<String>,
    max_request_bytes: usize,
    sessions_per_client: usize,
    sessions: Arc<LocalSessionManager>,
    /// Each live session's client.
    owners: tokio::sync::Mutex<HashMap<String, String>>,
}

/// When to stop: `accept` closes the listener (then the server returns once every connection
/// has ended); `sessions` ends rmcp's sessions and their streams.
pub(crate) struct Stop {
    pub(crate) accept: CancellationToken,
    pub(crate) sessions: CancellationToken,
}

/// Serves until `stop.accept` is cancelled; returns once the listener is closed and the
/// connections have ended. `ready` is told the address once the socket is bound.
pub(crate) async fn serve(
    facade: Facade,
    serve: &Serve,
    clients: Clients,
    journal: Option<Journal>,
    listen: Listen,
    stop: Stop,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen.addr).await?;
    let addr = listener.local_addr()?;
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive =
        Some(Duration::from_secs(u64::from(serve.session_idle_seconds())));
    let sessions = Arc::new(sessions);
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .map(str::to_owned)
        .to_vec();
    hosts.extend(listen.hosts.iter().cloned());
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
    origins.extend(listen.origins.iter().cloned());
    let max_request_bytes = serve.max_request_bytes() as usize;
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_json_response(true)
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(max_request_bytes)
        .with_cancellation_token(stop.sessions.child_token());
    let service: StreamableHttpService<Facade, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(facade.clone()), Arc::clone(&sessions), config);
    let oauth = match &serve.authorization {
        Some(authorization) => {
            let verifier = AccessTokenVerifier::new(
                &authorization.issuer,
                &authorization.resource,
                &authorization.tenant_claim,
            )
            .map_err(std::io::Error::other)?;
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
    let gate = Arc::new(Gate {
        clients,
        oauth,
        anonymous: listen.anonymous.clone(),
        origins,
        max_request_bytes,
        sessions_per_client: serve.sessions_per_client() as usize,
        sessions,
        owners: tokio::sync::Mutex::default(),
    });
    let mut router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(gate, guard))
        .route(
            "/ready",
            axum::routing::get(move || ready_answer(journal.clone())),
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
    ready(addr);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.accept.cancelled_owned().await })
        .await
}

/// `/ready`: 200 when the state store answers (or there is none), 503 when it does not. Names
/// nothing secret: the store's kind only.
async fn ready_answer(journal: Option<Journal>) -> Response {
    let Some(journal) = journal else {
        return json_response(StatusCode::OK, json!({"ready": true, "state": "none"}));
    };
    // The store's kind only ("sqlite", "postgresql"), never its path or address.
    let kind = journal
        .describe()
        .split([':', ' '])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let probe = Filter {
        limit: 1,
        ..Filter::default()
    };
    match tokio::time::timeout(Duration::from_secs(2), journal.list(&probe)).await {
        Ok(Ok(_)) => json_response(StatusCode::OK, json!({"ready": true, "state": kind})),
        _ => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"ready": false, "state": kind, "reason": "the state store does not answer"}),
        ),
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

/// Brain's layer in front of rmcp's service.
async fn guard(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN)
        && !origin_allowed(origin, &gate.origins)
    {
        return rpc_error(
            StatusCode::FORBIDDEN,
            -32600,
            "this Origin may not use this server (serve --allow-origin names the ones that may)",
        );
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let client = match gate.authenticate(authorization).await {
        Ok(client) => client,
        Err(response) => return response,
    };
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    // A session is its client's: another client's session id is a session that does not exist.
    if let Some(session) = &session {
        let owners = gate.owners.lock().await;
        if owners.get(session).is_some_and(|owner| *owner != client.id) {
            return rpc_error(StatusCode::NOT_FOUND, -32600, "Session not found");
        }
    }
    // A request that may open a session: a POST without a session, unless its `Mcp-Method`
    // (2026-07-28, checked against the body by rmcp) names another method.
    let named_method = request
        .headers()
        .get("mcp-method")
        .and_then(|value| value.to_str().ok());
    let opens_session = request.method() == Method::POST
        && session.is_none()
        && named_method.is_none_or(|method| method == "initialize");
    if opens_session {
        // Read the body (within the bound) to see whether it is `initialize`.
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, gate.max_request_bytes).await {
            Ok(bytes) => bytes,
            Err(_) => {
                return rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    -32600,
                    "the request body is larger than serve's `max_request_bytes`",
                );
            }
        };
        let initialize = serde_json::from_slice::<Value>(&bytes)
            .is_ok_and(|message| message["method"] == "initialize");
        if initialize && gate.live_sessions(&client.id).await >= gate.sessions_per_client {
            return rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                -32000,
                "this client has as many sessions open as serve's `sessions_per_client` allows: \
                 end one (HTTP DELETE) or let one expire",
            );
        }
        request = Request::from_parts(parts, Body::from(bytes));
        request.extensions_mut().insert(client.clone());
        let response = next.run(request).await;
        if initialize
            && let Some(id) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|value| value.to_str().ok())
        {
            gate.owners.lock().await.insert(id.to_owned(), client.id);
        }
        return response;
    }
    request.extensions_mut().insert(client);
    next.run(request).await
}

impl Gate {
    /// The client a request's `Authorization` names: a static token's, else a verified JWT
    /// access token's; otherwise the answer to give (401, or 503 when the issuer's keys cannot
    /// be read).
    async fn authenticate(&self, authorization: &str) -> Result<Client, Response> {
        if let Some(client) = self.clients.authenticate(authorization) {
            return Ok(client);
        }
        if authorization.is_empty()
            && let Some(tenant) = &self.anonymous
        {
            return Ok(Client {
                tenant: tenant.clone(),
                id: "anonymous".into(),
            });
        }
        let rejected = match (&self.oauth, bearer(authorization)) {
            (Some((verifier, _)), Some(token)) => match verifier.verify(token).await {
                Ok(verified) => {
                    return Ok(Client {
                        tenant: verified.tenant,
                        id: format!("jwt:{}", verified.subject),
                    });
                }
                Err(TokenRejected::KeysUnavailable(why)) => {
                    tracing::warn!(%why, "no access token can be checked");
                    return Err(rpc_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        -32603,
                        "the authorization server's keys cannot be read now; retry shortly",
                    ));
                }
                Err(rejected) => Some(rejected.to_string()),
            },
            _ => None,
        };
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
        Err(response)
    }

    /// The sessions `client` holds that rmcp still has (ended and expired ones are forgotten).
    async fn live_sessions(&self, client: &str) -> usize {
        let live = self.sessions.sessions.read().await;
        let mut owners = self.owners.lock().await;
        owners.retain(|id, _| live.contains_key(id.as_str()));
        owners.values().filter(|owner| *owner == client).count()
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
