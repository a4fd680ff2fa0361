//! The fault-injecting MCP test server: rmcp's Streamable HTTP server with tools that exercise
//! every conversion rule and every row of the `unknown_outcome` table, behind an axum layer that
//! injects faults and counts what arrives; beside it, under `/tools`, the HTTP and SSE tool
//! endpoints of [`crate::http_tools`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
    InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::content::TINY_PNG;

/// Faults to inject, chosen when the server starts.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Every request must carry `Authorization: Bearer <token>`; others get 401.
    pub require_token: Option<String>,
    /// Answer initialize with HTTP 500.
    pub initialize_500: bool,
    /// Answer initialize with a JSON-RPC error.
    pub initialize_rpc_error: bool,
    /// Answer `tools/call` with this HTTP status (and no body).
    pub call_status: Option<u16>,
    /// Drop the connection on `tools/call` before reading its body (it is not counted).
    pub drop_before_call: bool,
    /// Read `tools/call` (it is counted), then drop the connection.
    pub drop_after_call: bool,
    /// Read `tools/call`, then never answer.
    pub stall_call: bool,
    /// Answer `tools/call` with `200 application/json` that is not JSON.
    pub malformed_call: bool,
    /// Answer `tools/call` with an SSE stream cut off in the middle of the result.
    pub truncated_call: bool,
    /// Answer `tools/call` with JSON-RPC error -32601.
    pub call_method_not_found: bool,
    /// Answer `tools/call` as a server that rate-limits it (after counting it).
    pub rate_limited: Option<RateLimited>,
    /// Leave Nagle's algorithm on (axum's default); brain's tests turn it off otherwise.
    pub nagle: bool,
    /// Offer this many more tools, `generated_000`, `generated_001`, ...
    pub extra_tools: usize,
    /// List tools in pages of this size (`nextCursor`); all at once when `None`.
    pub page_size: Option<usize>,
    /// Serve `echo` with a changed description and input schema, `weather` with a `title` and
    /// `_meta`, and `image` renamed `picture` (drift).
    pub drifted: bool,
    /// List `echo` with an output schema (`{"type": "object"}`); its results still carry no
    /// structured content.
    pub echo_output_schema: bool,
    /// Answer `tools/call` with an SSE stream that sends only a priming event (an id and this
    /// `retry` in ms) and closes; the result comes on the GET that resumes after that id.
    pub close_call_stream: Option<u64>,
    /// With `close_call_stream`: what a resuming GET gets.
    pub resume: Resume,
    /// Reject the first `server/discover` with HTTP 400 and JSON-RPC error -32022, naming these
    /// revisions as supported.
    pub reject_revision_once: Option<Vec<String>>,
    /// Answer every request with `307 Temporary Redirect` to this URL.
    pub redirect_to: Option<String>,
    /// Claim this protocol revision in initialize's answer, whatever was offered (the session
    /// is rmcp's own, at the revision rmcp chose).
    pub initialize_revision: Option<String>,
    /// Refuse sessions: answer initialize with HTTP 400 and JSON-RPC error -32022, naming
    /// 2026-07-28 as the only supported revision (a server that speaks only 2026-07-28).
    pub refuse_sessions: bool,
    /// Served over stdio: also offer `environment` (the process's variables and directory).
    pub stdio: bool,
    /// The key with which `/tools/sse/inspect` verifies session inspection tokens.
    pub session_token_key: Option<Vec<u8>>,
    /// Protect `/mcp` with OAuth: tokens of a real authorization server, checked by
    /// introspection on every request, before anything else happens to it.
    pub oauth: Option<OAuthGuard>,
    /// Serve over TLS (`https://127.0.0.1:PORT/mcp`), HTTP/2 or HTTP/1.1 as ALPN chooses.
    pub tls: Option<crate::tls::TlsOptions>,
}

/// How an upstream server says "too many calls".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimited {
    /// HTTP 429 with `Retry-After: SECONDS`.
    Seconds(u64),
    /// HTTP 429 with `Retry-After` as an HTTP date this many seconds ahead.
    Date(u64),
    /// JSON-RPC error -32023 (SEP-3304) with `data.retryAfterMs`.
    Rpc(u64),
}

/// How the test server checks OAuth access tokens (the MCP authorization spec, resource side).
#[derive(Debug, Clone)]
pub struct OAuthGuard {
    /// The authorization server's issuer (its introspection endpoint is
    /// `{issuer}/token/introspection`).
    pub issuer: String,
    /// The server's client at the authorization server, for introspection.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// The scope every request needs; named in the `401` challenge.
    pub scope: String,
    /// Tools whose calls also need `mcp:admin` (else `403 insufficient_scope`).
    pub admin_tools: Vec<String>,
}

/// What a GET that resumes a closed `tools/call` stream gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Resume {
    /// The call's result.
    #[default]
    Answer,
    /// HTTP 405: this server offers no stream to resume.
    Refuse,
    /// Another priming event, and the stream closes again.
    CloseAgain,
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Stats {
    /// `tools/call` requests that arrived (the at-most-once counter).
    pub calls: AtomicUsize,
    /// The same per call id (brain's `params._meta.progressToken`), for the calls that gave
    /// one.
    pub calls_by_id: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    /// `initialize` requests.
    pub initializes: AtomicUsize,
    /// `notifications/cancelled` received.
    pub cancellations: AtomicUsize,
    /// Tool runs that stopped because the request was cancelled.
    pub cancelled_runs: AtomicUsize,
    /// DELETEs (sessions closed by the client).
    pub deletes: AtomicUsize,
    /// Answers the client sent to server requests (elicitation and others).
    pub client_answers: AtomicUsize,
    /// `server/discover` requests.
    pub discovers: AtomicUsize,
    /// Every HTTP request that arrived.
    pub requests: AtomicUsize,
    /// Requests that carried an `Authorization` header.
    pub authorized_requests: AtomicUsize,
    /// MCP requests that carried a `Brain-Session-Token` header (must stay 0).
    pub session_token_requests: AtomicUsize,
    /// Client connections open now.
    pub connections: AtomicUsize,
    /// Client connections accepted so far.
    pub accepted: AtomicUsize,
    /// Tool runs in progress now (a slow tool's calls are all counted while they sleep).
    pub running: AtomicUsize,
    /// The most tool runs ever in progress at once.
    pub peak_running: AtomicUsize,
    /// Requests refused for their token (`401` or `403`), before anything else happened.
    pub refused: AtomicUsize,
    /// `tools/call` requests among them (never counted in `calls`: they did not run).
    pub refused_calls: AtomicUsize,
    /// The `MCP-Protocol-Version` header of every POST after initialize (`None`: absent).
    pub protocol_headers: std::sync::Mutex<Vec<Option<String>>>,
    /// GETs of a session's own stream (not resuming one).
    pub listens: AtomicUsize,
    /// The `protocolVersion` each initialize offered.
    pub offered_revisions: std::sync::Mutex<Vec<String>>,
    /// GETs that resumed a stream, each with its `Last-Event-ID` and when it arrived.
    pub resumes: std::sync::Mutex<Vec<(Option<String>, std::time::Instant)>>,
    /// When the server closed a `tools/call` stream to be resumed.
    pub closed_streams: std::sync::Mutex<Vec<std::time::Instant>>,
    /// Over TLS: handshakes, versions, HTTP/2 connections.
    pub tls: Arc<crate::tls::TlsStats>,
    /// The change the server makes to its tools now (`POST /drift`), if any.
    pub drift: std::sync::Mutex<Option<crate::drift::Change>>,
    /// `tools/list` requests answered.
    pub lists: AtomicUsize,
    /// With `oauth`: each `tools/call` let through — the bearer token it carried, and its
    /// introspection's `sub` and `act.sub` (whom the token stands for, and who acts for them).
    pub identities: std::sync::Mutex<Vec<Identity>>,
}

/// Who a `tools/call` came from, as the server's introspection says ([`Stats::identities`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The bearer token the request carried.
    pub token: String,
    /// The introspection's `sub`.
    pub subject: Option<String>,
    /// Its `act.sub` (RFC 8693: the party acting for the subject).
    pub actor: Option<String>,
}

impl Stats {
    /// Reads one counter.
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }

    /// The counters as JSON (also served at `GET /stats`, for processes that drive the server).
    pub fn snapshot(&self) -> Value {
        let mut snapshot = json!({
            "calls": Self::get(&self.calls),
            "initializes": Self::get(&self.initializes),
            "cancellations": Self::get(&self.cancellations),
            "deletes": Self::get(&self.deletes),
            "requests": Self::get(&self.requests),
            "refused": Self::get(&self.refused),
            "refused_calls": Self::get(&self.refused_calls),
            "running": Self::get(&self.running),
            "peak_running": Self::get(&self.peak_running),
            "accepted": Self::get(&self.accepted),
            "lists": Self::get(&self.lists),
        });
        if let (Some(all), Value::Object(tls)) = (snapshot.as_object_mut(), self.tls.snapshot()) {
            all.extend(tls);
        }
        snapshot
    }

    /// [`Stats::calls_by_id`] as a JSON object (served at `GET /stats?by_id=1`).
    pub fn calls_by_id(&self) -> Value {
        json!(*lock(&self.calls_by_id))
    }
}

/// The call id a message carries as its progress token (a string or a number), if any.
pub fn progress_token(message: &Value) -> Option<String> {
    match &message["params"]["_meta"]["progressToken"] {
        Value::String(token) => Some(token.clone()),
        Value::Number(token) => Some(token.to_string()),
        _ => None,
    }
}

/// The server's listener: counts its open connections (`Stats::connections`), so that a test
/// can wait until the client has closed every one — after that, nothing more can arrive.
struct Counting {
    listener: tokio::net::TcpListener,
    nodelay: bool,
    open: Arc<Stats>,
}

impl axum::serve::Listener for Counting {
    type Io = Counted;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Counted, std::net::SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok((tcp, addr)) => {
                    let _ = tcp.set_nodelay(self.nodelay);
                    self.open.connections.fetch_add(1, Ordering::SeqCst);
                    self.open.accepted.fetch_add(1, Ordering::SeqCst);
                    let stats = Arc::clone(&self.open);
                    return (Counted { tcp, stats }, addr);
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }
}

/// A TLS connection, counted open until dropped.
struct Open(Arc<Stats>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection, counted open until dropped.
struct Counted {
    tcp: tokio::net::TcpStream,
    stats: Arc<Stats>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.stats.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Counts one tool run in progress until dropped.
struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running test server; stopped when dropped.
#[derive(Debug)]
pub struct TestServer {
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// What it saw.
    pub stats: Arc<Stats>,
    /// What the HTTP and SSE tool endpoints (`/tools/...`) saw.
    pub tools: Arc<crate::http_tools::ToolStats>,
    stop: CancellationToken,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestServer {
    /// Waits (at most 5 s) until the client has closed every connection to this server — drop
    /// the runtime first, which closes its pool. After that nothing more can arrive, so a
    /// "nothing more arrived" check cannot pass by coming too early. Panics when they stay open.
    pub async fn closed_by_client(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while Stats::get(&self.stats.connections) > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} connections to the test server stayed open",
                Stats::get(&self.stats.connections)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Starts a server on a free loopback port with these faults.
    pub async fn start(faults: Faults) -> std::io::Result<TestServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        Self::serve(listener, faults)
    }

    /// Serves on `listener` until dropped.
    pub fn serve(listener: tokio::net::TcpListener, faults: Faults) -> std::io::Result<TestServer> {
        let addr = listener.local_addr()?;
        let stats = Arc::new(Stats::default());
        let stop = CancellationToken::new();
        let tools = TestTools::new(Arc::clone(&stats), &faults);
        let config = StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_cancellation_token(stop.child_token());
        let service: StreamableHttpService<TestTools, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(tools.clone()), Default::default(), config);
        let scheme = if faults.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let resource_metadata =
            format!("{scheme}://{addr}/.well-known/oauth-protected-resource/mcp");
        let layer = Arc::new(FaultLayer {
            faults: faults.clone(),
            stats: Arc::clone(&stats),
            pending_calls: std::sync::Mutex::default(),
            closed: AtomicUsize::new(0),
            resource_metadata,
            introspection: faults.oauth.as_ref().map(|_| {
                let _ = rustls::crypto::ring::default_provider().install_default();
                reqwest::Client::new()
            }),
        });
        let counters = Arc::clone(&stats);
        let tools = Arc::new(crate::http_tools::ToolStats::default());
        let tool_counters = Arc::clone(&tools);
        // `/stats` and the tool endpoints are added after the fault layer, so that no MCP fault
        // reaches them.
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(layer, inject))
            .nest(
                "/tools",
                crate::http_tools::router(
                    Arc::clone(&tools),
                    faults.require_token.clone(),
                    faults.session_token_key.clone(),
                ),
            )
            .route(
                "/drift",
                axum::routing::post({
                    let stats = Arc::clone(&stats);
                    move |body: String| {
                        let change = crate::drift::Change::parse(&body);
                        *lock(&stats.drift) = change;
                        async move { change.map_or("none", |c| c.as_str()).to_owned() }
                    }
                }),
            )
            .route(
                "/stats",
                axum::routing::get(
                    move |axum::extract::RawQuery(query): axum::extract::RawQuery| {
                        let stats = Arc::clone(&counters);
                        let tools = Arc::clone(&tool_counters);
                        async move {
                            let mut snapshot = stats.snapshot();
                            snapshot["tool_requests"] = json!(Stats::get(&tools.requests));
                            // Per call id only when asked: the counters stay small.
                            if query.is_some_and(|q| q.split('&').any(|pair| pair == "by_id=1")) {
                                snapshot["calls_by_id"] = stats.calls_by_id();
                                snapshot["tool_requests_by_id"] = tools.requests_by_id();
                            }
                            (
                                [(header::CONTENT_TYPE, "application/json")],
                                snapshot.to_string(),
                            )
                        }
                    },
                ),
            );
        let router = match &faults.oauth {
            Some(guard) => {
                let metadata = json!({
                    "resource": format!("{scheme}://{addr}/mcp"),
                    "authorization_servers": [guard.issuer],
                    "scopes_supported": ["mcp:basic", "mcp:admin"],
                })
                .to_string();
                router.route(
                    "/.well-known/oauth-protected-resource/mcp",
                    axum::routing::get(move || async move {
                        ([(header::CONTENT_TYPE, "application/json")], metadata)
                    }),
                )
            }
            None => router,
        };
        if let Some(tls) = &faults.tls {
            let open = Arc::clone(&stats);
            let on_accept = move |_: &tokio::net::TcpStream| {
                open.connections.fetch_add(1, Ordering::SeqCst);
                open.accepted.fetch_add(1, Ordering::SeqCst);
                Open(Arc::clone(&open))
            };
            let tls_stats = Arc::clone(&stats.tls);
            crate::tls::serve(listener, router, tls, tls_stats, on_accept, stop.clone());
            return Ok(TestServer {
                url: format!("https://{addr}/mcp"),
                stats,
                tools,
                stop,
            });
        }
        let listener = Counting {
            listener,
            nodelay: !faults.nagle,
            open: Arc::clone(&stats),
        };
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
                .await;
        });
        Ok(TestServer {
            url: format!("http://{addr}/mcp"),
            stats,
            tools,
            stop,
        })
    }
}

struct FaultLayer {
    faults: Faults,
    stats: Arc<Stats>,
    /// The `tools/call` requests whose streams were closed, by event id, to answer on the
    /// resuming GET.
    pending_calls: std::sync::Mutex<std::collections::HashMap<String, Value>>,
    /// Numbers the closed streams' event ids.
    closed: AtomicUsize,
    /// Where this server's protected resource metadata is (named in its challenges).
    resource_metadata: String,
    /// With `oauth`: the client that introspects tokens.
    introspection: Option<reqwest::Client>,
}

impl FaultLayer {
    /// With `oauth`: the refusal of a request whose token is missing, inactive, or lacks the
    /// scope its tool needs — decided before the request goes anywhere; `None` to let it pass.
    async fn refusal(&self, headers: &HeaderMap, message: &Value) -> Option<Response> {
        let (Some(guard), Some(http)) = (&self.faults.oauth, &self.introspection) else {
            return None;
        };
        let challenge = |status: StatusCode, error: &str, scope: &str| {
            self.stats.refused.fetch_add(1, Ordering::SeqCst);
            if message.get("method").and_then(Value::as_str) == Some("tools/call") {
                self.stats.refused_calls.fetch_add(1, Ordering::SeqCst);
            }
            let value = format!(
                "Bearer error=\"{error}\", scope=\"{scope}\", resource_metadata=\"{}\"",
                self.resource_metadata
            );
            Some((status, [(header::WWW_AUTHENTICATE, value)]).into_response())
        };
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(token) = token else {
            return challenge(StatusCode::UNAUTHORIZED, "invalid_token", &guard.scope);
        };
        let form: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .finish();
        let introspected: Value = match http
            .post(format!("{}/token/introspection", guard.issuer))
            .basic_auth(&guard.client_id, Some(&guard.client_secret))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
        {
            Ok(response) => response.json().await.unwrap_or_default(),
            Err(_) => Value::Null,
        };
        if introspected["active"] != json!(true) {
            return challenge(StatusCode::UNAUTHORIZED, "invalid_token", &guard.scope);
        }
        let scopes: Vec<&str> = introspected["scope"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let tool = message["params"]["name"].as_str().unwrap_or_default();
        let needs_admin = message.get("method").and_then(Value::as_str) == Some("tools/call")
            && guard.admin_tools.iter().any(|admin| admin == tool);
        if needs_admin && !scopes.contains(&"mcp:admin") {
            return challenge(StatusCode::FORBIDDEN, "insufficient_scope", "mcp:admin");
        }
        if message.get("method").and_then(Value::as_str) == Some("tools/call") {
            let text = |value: &Value| value.as_str().map(str::to_owned);
            self.stats
                .identities
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Identity {
                    token: token.to_owned(),
                    subject: text(&introspected["sub"]),
                    actor: text(&introspected["act"]["sub"]),
                });
        }
        None
    }
}

/// The axum layer in front of rmcp: counts, and injects the configured faults.
async fn inject(State(layer): State<Arc<FaultLayer>>, request: Request, next: Next) -> Response {
    let faults = &layer.faults;
    let stats = &layer.stats;
    count(stats, request.headers());
    if let Some(refused) = entry_fault(faults, request.headers()) {
        return refused;
    }
    if request.method() != Method::POST && faults.oauth.is_some() {
        let headers = request.headers().clone();
        if let Some(refused) = layer.refusal(&headers, &Value::Null).await {
            return refused;
        }
    }
    if request.method() == Method::DELETE {
        stats.deletes.fetch_add(1, Ordering::SeqCst);
        return next.run(request).await;
    }
    if request.method() == Method::GET && !request.headers().contains_key("last-event-id") {
        stats.listens.fetch_add(1, Ordering::SeqCst);
    }
    if request.method() == Method::GET && faults.close_call_stream.is_some() {
        return resume_stream(&layer, request.headers());
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let message: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    if let Some(refused) = layer.refusal(&parts.headers, &message).await {
        return refused;
    }
    let method = message.get("method").and_then(Value::as_str);
    if faults.drop_before_call && method == Some("tools/call") {
        // Dropped before the server takes it in: not counted.
        return dropped_connection();
    }
    if method != Some("initialize") {
        record_protocol_header(stats, &parts.headers);
    }
    match method {
        Some("initialize") => {
            stats.initializes.fetch_add(1, Ordering::SeqCst);
            let offered = message["params"]["protocolVersion"].as_str().unwrap_or("");
            lock(&stats.offered_revisions).push(offered.to_owned());
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            if faults.refuse_sessions {
                return unsupported_revision(id, json!(["2026-07-28"]), offered);
            }
            if let Some(revision) = &faults.initialize_revision {
                let answer = next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
                return claim_revision(answer, revision).await;
            }
            if faults.initialize_500 {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
            if faults.initialize_rpc_error {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "Unsupported protocol version"}});
                return (
                    [(header::CONTENT_TYPE, "application/json")],
                    body.to_string(),
                )
                    .into_response();
            }
        }
        Some("notifications/cancelled") => {
            stats.cancellations.fetch_add(1, Ordering::SeqCst);
        }
        Some("tools/call") => {
            if let Some(response) = tools_call(&layer, &message).await {
                return response;
            }
        }
        Some("server/discover") => {
            if stats.discovers.fetch_add(1, Ordering::SeqCst) == 0
                && let Some(supported) = &faults.reject_revision_once
            {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                return unsupported_revision(id, json!(supported), "2026-07-28");
            }
        }
        None if message.get("id").is_some() => {
            stats.client_answers.fetch_add(1, Ordering::SeqCst);
            if message["id"]
                .as_str()
                .is_some_and(|id| id.starts_with(CHATTY_PING))
            {
                return StatusCode::ACCEPTED.into_response();
            }
        }
        _ => {}
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The faults that answer a request before anything else: a redirect, or `401` without the
/// required bearer token.
fn entry_fault(faults: &Faults, headers: &HeaderMap) -> Option<Response> {
    if let Some(target) = &faults.redirect_to {
        return Some(
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, target.as_str())],
            )
                .into_response(),
        );
    }
    if let Some(token) = &faults.require_token {
        let expected = format!("Bearer {token}");
        let given = headers.get(header::AUTHORIZATION);
        if given.and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
            return Some(StatusCode::UNAUTHORIZED.into_response());
        }
    }
    None
}

/// Records the `MCP-Protocol-Version` header a request after `initialize` carried (`None`: none).
fn record_protocol_header(stats: &Stats, headers: &HeaderMap) {
    let header = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    lock(&stats.protocol_headers).push(header);
}

/// Counts a request, with an `Authorization` and with a session inspection token.
fn count(stats: &Stats, headers: &HeaderMap) {
    stats.requests.fetch_add(1, Ordering::SeqCst);
    if headers.contains_key(header::AUTHORIZATION) {
        stats.authorized_requests.fetch_add(1, Ordering::SeqCst);
    }
    if headers.contains_key(brain_runtime::SESSION_TOKEN_HEADER) {
        stats.session_token_requests.fetch_add(1, Ordering::SeqCst);
    }
}

/// A `tools/call` (counted, by call id too): the chatty tool's stream of requests, a call stream
/// closed to be resumed, or the configured call fault; `None` to let the server answer.
async fn tools_call(layer: &FaultLayer, message: &Value) -> Option<Response> {
    let (faults, stats) = (&layer.faults, &layer.stats);
    stats.calls.fetch_add(1, Ordering::SeqCst);
    if let Some(id) = progress_token(message) {
        *lock(&stats.calls_by_id).entry(id).or_default() += 1;
    }
    if message["params"]["name"] == "chatty" {
        let events = chatty_messages(message)
            .map(|message| Ok::<_, std::convert::Infallible>(format!("data: {message}\n\n")));
        return Some(
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(futures_util::stream::iter(events)),
            )
                .into_response(),
        );
    }
    if let Some(retry) = faults.close_call_stream {
        let id = format!("call-{}", layer.closed.fetch_add(1, Ordering::SeqCst) + 1);
        lock(&layer.pending_calls).insert(id.clone(), message.clone());
        lock(&stats.closed_streams).push(std::time::Instant::now());
        return Some(sse_response(format!("id: {id}\nretry: {retry}\ndata:\n\n")));
    }
    call_fault(faults, message).await
}

/// The `-32022` error (with HTTP 400) of a server that does not speak revision `requested`, and
/// speaks `supported`, answering request `id`.
fn unsupported_revision(id: Value, supported: Value, requested: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {"supported": supported, "requested": requested}
    }});
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `answer` (to initialize) with its `protocolVersion` replaced by `revision`.
async fn claim_revision(answer: Response, revision: &str) -> Response {
    let (parts, body) = answer.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1024 * 1024).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    let key = "\"protocolVersion\":\"";
    let claimed = match text.find(key) {
        Some(at) => {
            let start = at + key.len();
            let end = start + text[start..].find('"').unwrap_or(0);
            format!("{}{revision}{}", &text[..start], &text[end..])
        }
        None => text.into_owned(),
    };
    let mut parts = parts;
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(claimed))
}

/// A GET resuming the `tools/call` stream that `close_call_stream` closed.
fn resume_stream(layer: &FaultLayer, headers: &HeaderMap) -> Response {
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    lock(&layer.stats.resumes).push((last_event_id.clone(), std::time::Instant::now()));
    let retry = layer.faults.close_call_stream.unwrap_or_default();
    match layer.faults.resume {
        Resume::Refuse => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        Resume::CloseAgain => {
            lock(&layer.stats.closed_streams).push(std::time::Instant::now());
            let id = last_event_id.unwrap_or_default();
            sse_response(format!("id: {id}\nretry: {retry}\ndata:\n\n"))
        }
        Resume::Answer => {
            let call = last_event_id.and_then(|id| lock(&layer.pending_calls).remove(&id));
            let Some(call) = call else {
                return StatusCode::NOT_FOUND.into_response();
            };
            let answer = json!({"jsonrpc": "2.0", "id": call["id"], "result": {"content": [
                {"type": "text", "text": format!("resumed: {}", call["params"]["arguments"])}
            ]}});
            sse_response(format!("id: answer\ndata: {answer}\n\n"))
        }
    }
}

fn sse_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn call_fault(faults: &Faults, message: &Value) -> Option<Response> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if let Some(status) = faults.call_status {
        return Some(
            StatusCode::from_u16(status)
                .unwrap_or(StatusCode::IM_A_TEAPOT)
                .into_response(),
        );
    }
    if faults.drop_after_call {
        return Some(dropped_connection());
    }
    if let Some(limited) = faults.rate_limited {
        let retry_after = match limited {
            RateLimited::Seconds(seconds) => seconds.to_string(),
            RateLimited::Date(seconds) => {
                httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(seconds))
            }
            RateLimited::Rpc(ms) => {
                let body = json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32023, "message": "Rate limit exceeded",
                    "data": {"retryAfterMs": ms}
                }});
                return Some(
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        body.to_string(),
                    )
                        .into_response(),
                );
            }
        };
        return Some(
            (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, retry_after)],
            )
                .into_response(),
        );
    }
    if faults.stall_call {
        std::future::pending::<()>().await;
    }
    if faults.malformed_call {
        return Some(
            (
                [(header::CONTENT_TYPE, "application/json")],
                "{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {\"content\": [",
            )
                .into_response(),
        );
    }
    if faults.truncated_call {
        let event = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "cut"}]}}).to_string();
        let cut = format!("data: {}", &event[..event.len() / 2]);
        return Some(([(header::CONTENT_TYPE, "text/event-stream")], cut).into_response());
    }
    if faults.call_method_not_found {
        let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
        return Some(
            (
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response(),
        );
    }
    None
}

/// A response whose body fails at once: hyper aborts the connection mid-response.
fn dropped_connection() -> Response {
    let body = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("fault: connection dropped"))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .expect("a valid response")
}

/// The test server's tools.
#[derive(Clone)]
pub(crate) struct TestTools {
    stats: Arc<Stats>,
    catalog: Arc<Vec<Tool>>,
    page_size: Option<usize>,
}

impl TestTools {
    pub(crate) fn new(stats: Arc<Stats>, faults: &Faults) -> Self {
        TestTools {
            stats,
            catalog: Arc::new(catalog(faults)),
            page_size: faults.page_size,
        }
    }
}

/// The tools as this server lists them: [`tool_list`], changed and extended by the faults.
fn catalog(faults: &Faults) -> Vec<Tool> {
    let mut tools = tool_list();
    if faults.drifted {
        for tool in tools.iter_mut().filter(|t| t.name == "echo") {
            *tool = Tool::new(
                "echo",
                "Echo a message back, louder.",
                object(
                    json!({"type": "object", "properties": {"message": {"type": "string"}, "volume": {"type": "integer"}}, "required": ["message"]}),
                ),
            );
        }
        // Fields drift reads only through the pin: `title` and `_meta`.
        for tool in tools.iter_mut().filter(|t| t.name == "weather") {
            tool.title = Some("Weather now".into());
            tool.meta = serde_json::from_value(json!({"version": 2})).ok();
        }
        // A rename: the same tool, the same schema, another name.
        for tool in tools.iter_mut().filter(|t| t.name == "image") {
            tool.name = "picture".into();
        }
    }
    if faults.echo_output_schema {
        for tool in tools.iter_mut().filter(|t| t.name == "echo") {
            tool.output_schema = Some(Arc::new(object(json!({"type": "object"}))));
        }
    }
    if faults.stdio {
        tools.push(tool(
            "environment",
            "The server process's environment variables and working directory.",
            json!({"type": "object", "properties": {}}),
        ));
    }
    for i in 0..faults.extra_tools {
        let name = format!("generated_{i:03}");
        let input = json!({
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["query"]
        });
        tools.push(Tool::new(
            name,
            format!("Generated tool number {i}."),
            object(input),
        ));
    }
    tools
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn tool(name: &'static str, description: &'static str, input: Value) -> Tool {
    Tool::new(name, description, object(input))
}

/// How long the server says its `tools/list` may be kept (2026-07-28's `ttlMs`): a minute, as a
/// server whose tools rarely change would say.
pub const LIST_TTL_MS: u64 = 60_000;

/// The prefix of the ids of the `chatty` tool's ping requests (answers to them are counted in
/// [`Stats::client_answers`] and go no further).
pub const CHATTY_PING: &str = "chatty-ping-";

/// The messages a `chatty` call (`call`: its `tools/call` request) gets, in order, as JSON
/// text: its progress notifications (with the call's progress token), its ping requests, its
/// oversized log notification, then its result. The layers (HTTP and stdio) send them
/// themselves, not rmcp: the same stream at every revision, as fast as the client reads.
pub fn chatty_messages(call: &Value) -> impl Iterator<Item = String> + Send + 'static {
    let args = &call["params"]["arguments"];
    let count = |name: &str| args.get(name).and_then(Value::as_u64).unwrap_or(0);
    let (progress, pings, bytes) = (
        count("progress"),
        count("pings"),
        count("notification_bytes"),
    );
    let token = call["params"]["_meta"]["progressToken"].clone();
    let id = call["id"].clone();
    let progress_messages = (1..=progress).map(move |step| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": token, "progress": step, "total": progress
        }})
        .to_string()
    });
    let ping_messages = (1..=pings).map(|n| {
        json!({"jsonrpc": "2.0", "id": format!("{CHATTY_PING}{n}"), "method": "ping"}).to_string()
    });
    let log = (bytes > 0).then(|| {
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "level": "info", "data": "x".repeat(bytes as usize)
        }})
        .to_string()
    });
    let result = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text",
        "text": format!("chatted: {progress} progress, {pings} pings")}]}})
    .to_string();
    progress_messages
        .chain(ping_messages)
        .chain(log)
        .chain(std::iter::once(result))
}

/// Every tool the server offers, with its schemas.
pub fn tool_list() -> Vec<Tool> {
    let empty = json!({"type": "object", "properties": {}});
    let weather_schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
        "required": ["city", "temperature"]
    });
    vec![
        tool("echo", "Echo a message back.", json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})),
        tool("echo_meta", "Return the request's _meta and HTTP headers as structured content.", empty.clone()),
        tool("progress", "Report progress `steps` times, then finish.", json!({"type": "object", "properties": {"steps": {"type": "integer", "minimum": 0}, "delay_ms": {"type": "integer", "minimum": 0}}, "required": ["steps"]})),
        tool("progress_jumbled", "Progress 1, 3, 2, 3, 4 (out of order and repeated), then finish.", empty.clone()),
        tool("slow", "Sleep for `seconds`, stopping early when cancelled.", json!({"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}, "required": ["seconds"]})),
        tool("weather", "Structured weather for a city.", json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
            .with_raw_output_schema(Arc::new(object(weather_schema.clone()))),
        tool("weather_broken", "Structured output that breaks its own output schema.", empty.clone())
            .with_raw_output_schema(Arc::new(object(weather_schema))),
        tool("image", "A 1x1 PNG.", empty.clone()),
        tool("audio", "An audio block (unsupported by brain).", empty.clone()),
        tool("resource_link", "A resource link (unsupported by brain).", empty.clone()),
        tool("embedded_resource", "An embedded resource (unsupported by brain).", empty.clone()),
        tool("fail", "A tool error: isError true.", empty.clone()),
        tool("rpc_error", "Answers with a JSON-RPC error.", empty.clone()),
        tool("huge", "Text of `bytes` bytes.", json!({"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0}}, "required": ["bytes"]})),
        tool("chatty", "Sends `progress` progress notifications, `pings` ping requests and one log notification of `notification_bytes` bytes (when not 0), then the result, on the call's own stream, without waiting for answers.", json!({"type": "object", "properties": {"progress": {"type": "integer", "minimum": 0}, "pings": {"type": "integer", "minimum": 0}, "notification_bytes": {"type": "integer", "minimum": 0}}})),
        tool("elicit", "Asks the user for approval (elicitation/create).", empty.clone()),
        tool("sample", "Asks the client's model for a completion (sampling/createMessage).", empty.clone()),
        tool("roots", "Asks the client for its roots (roots/list).", empty.clone()),
        tool("input_required", "Answers input_required (2026-07-28) for `rounds` rounds, asking for `ask`: only requestState (default), or an elicitation, sampling or roots input request with it; then completes with what the last round carried.", json!({
            "type": "object",
            "properties": {
                "rounds": {"type": "integer", "minimum": 1},
                "ask": {"type": "string", "enum": ["state", "elicitation", "sampling", "roots"]}
            }
        })),
        tool("routed", "Returns its headers; `region` travels as the Mcp-Param-Region header.", json!({
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"]
        })),
    ]
}

/// The pin discovery writes for the tool `name` of [`tool_list`] (as JSON): a binding that
/// carries it may narrow its schema or rewrite its description and still pass verification.
pub fn pin(name: &str) -> Value {
    let tool = tool_list()
        .into_iter()
        .find(|tool| tool.name == name)
        .unwrap_or_else(|| panic!("the test server has no tool {name}"));
    let tool = serde_json::to_value(tool).expect("a tool is JSON");
    serde_json::to_value(brain_config::ToolPin::of(&tool)).expect("a pin is JSON")
}

/// One binding per tool of [`tool_list`], as host config JSON: named as on the server, at `url`,
/// for tenant `local`; `patch` may change each (it gets the tool's name).
pub fn bindings_json(url: &str, patch: impl Fn(&str, &mut Value)) -> Vec<Value> {
    tool_list()
        .into_iter()
        .map(|tool| {
            let mut binding = json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": Value::Object((*tool.input_schema).clone()),
                "url": url,
                "mcp_tool": tool.name,
                "tenants": ["local"],
            });
            if let Some(schema) = &tool.output_schema {
                binding["output_schema"] = Value::Object((**schema).clone());
            }
            patch(&tool.name, &mut binding);
            binding
        })
        .collect()
}

/// A complete result. `resultType` is spelled out: rmcp leaves it out, and the Python SDK client
/// requires it at 2026-07-28.
fn result(mut value: Value) -> Result<CallToolResponse, ErrorData> {
    value["resultType"] = json!("complete");
    serde_json::from_value::<CallToolResult>(value)
        .map(Into::into)
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
}

impl ServerHandler for TestTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.stats.lists.fetch_add(1, Ordering::SeqCst);
        let drift = (*lock(&self.stats.drift)).or_else(crate::drift::from_file);
        if drift == Some(crate::drift::Change::Unlisted) {
            return Err(ErrorData::internal_error("tools/list is down", None));
        }
        let catalog = match drift {
            Some(change) => Arc::new(change.apply(&self.catalog)),
            None => Arc::clone(&self.catalog),
        };
        let Some(page_size) = self.page_size else {
            return Ok(ListToolsResult::with_all_items(catalog.to_vec()).with_ttl_ms(LIST_TTL_MS));
        };
        let start: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let end = (start + page_size).min(catalog.len());
        let mut result = ListToolsResult::with_all_items(catalog[start.min(end)..end].to_vec())
            .with_ttl_ms(LIST_TTL_MS);
        if end < catalog.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let now = self.stats.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.stats.peak_running.fetch_max(now, Ordering::SeqCst);
        let _running = Running(&self.stats.running);
        self.run_tool(request, context).await
    }
}

impl TestTools {
    /// A tool's work (`call_tool` counts the runs in progress around it).
    async fn run_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let number = |name: &str| args.get(name).and_then(Value::as_f64).unwrap_or(0.0);
        match request.name.as_ref() {
            "echo" => result(json!({"content": [{"type": "text", "text": args["message"]}]})),
            "echo_meta" | "routed" => {
                let headers: serde_json::Map<String, Value> = context
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .map(|parts| headers_json(&parts.headers))
                    .unwrap_or_default();
                let meta = serde_json::to_value(&context.meta).unwrap_or_default();
                result(json!({
                    "content": [],
                    "structuredContent": {"meta": meta, "headers": headers}
                }))
            }
            "progress" => {
                let steps = number("steps") as u64;
                let delay = Duration::from_millis(number("delay_ms") as u64);
                progress(&context, steps, delay).await
            }
            "progress_jumbled" => {
                if let Some(token) = context.meta.get_progress_token() {
                    for step in [1.0, 3.0, 2.0, 3.0, 4.0] {
                        let param =
                            ProgressNotificationParam::new(token.clone(), step).with_total(4.0);
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
                result(json!({"content": [{"type": "text", "text": "done"}]}))
            }
            "slow" => {
                let sleep = tokio::time::sleep(Duration::from_secs_f64(number("seconds")));
                tokio::select! {
                    () = sleep => result(json!({"content": [{"type": "text", "text": "slept"}]})),
                    () = context.ct.cancelled() => {
                        self.stats.cancelled_runs.fetch_add(1, Ordering::SeqCst);
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
            "weather" => result(json!({
                "content": [],
                "structuredContent": {"city": args["city"], "temperature": 21.5}
            })),
            "weather_broken" => result(json!({
                "content": [],
                "structuredContent": {"city": 7}
            })),
            "image" => result(
                json!({"content": [{"type": "image", "data": TINY_PNG, "mimeType": "image/png"}]}),
            ),
            "audio" => result(
                json!({"content": [{"type": "audio", "data": TINY_PNG, "mimeType": "audio/wav"}]}),
            ),
            "resource_link" => result(
                json!({"content": [{"type": "resource_link", "uri": "file:///tmp/x.txt", "name": "x.txt"}]}),
            ),
            "embedded_resource" => result(
                json!({"content": [{"type": "resource", "resource": {"uri": "file:///tmp/x.txt", "text": "x"}}]}),
            ),
            "environment" => {
                let vars: serde_json::Map<String, Value> = std::env::vars()
                    .map(|(name, value)| (name, Value::String(value)))
                    .collect();
                let cwd = std::env::current_dir().unwrap_or_default();
                result(json!({
                    "content": [{"type": "text", "text": cwd.display().to_string()}],
                    "structuredContent": {"env": vars, "cwd": cwd.display().to_string()}
                }))
            }
            "fail" => result(
                json!({"content": [{"type": "text", "text": "the tool failed"}], "isError": true}),
            ),
            "rpc_error" => Err(ErrorData::invalid_params("rpc_error always fails", None)),
            "huge" => {
                let text = "x".repeat(number("bytes") as usize);
                result(json!({"content": [{"type": "text", "text": text}]}))
            }
            "elicit" | "sample" | "roots" => ask_client(&request.name, &context).await,
            "input_required" => input_required(&args, &request),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

/// `progress`: `steps` progress notifications, `delay` apart, then "done N steps".
async fn progress(
    context: &RequestContext<RoleServer>,
    steps: u64,
    delay: Duration,
) -> Result<CallToolResponse, ErrorData> {
    if let Some(token) = context.meta.get_progress_token() {
        for step in 1..=steps {
            let param = ProgressNotificationParam::new(token.clone(), step as f64)
                .with_total(steps as f64)
                .with_message(format!("step {step}/{steps}"));
            let _ = context.peer.notify_progress(param).await;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
    }
    result(json!({"content": [{"type": "text", "text": format!("done {steps} steps")}]}))
}

/// `elicit`, `sample` and `roots` (tool `name`): a request to the client in the call (an
/// elicitation, a sampling, its roots), answered with what the client said.
async fn ask_client(
    name: &str,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    match name {
        "elicit" => {
            let params: ElicitRequestParams = serde_json::from_value(json!({
                "mode": "form",
                "message": "Approve?",
                "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            }))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
            match context.peer.create_elicitation(params).await {
                Ok(answer) => result(
                    json!({"content": [{"type": "text", "text": format!("elicited: {answer:?}")}]}),
                ),
                Err(error) => result(
                    json!({"content": [{"type": "text", "text": format!("elicitation failed: {error}")}], "isError": true}),
                ),
            }
        }
        "sample" => {
            #[allow(deprecated)] // sampling: deprecated by SEP-2577, still sent by servers
            let params: rmcp::model::CreateMessageRequestParams = serde_json::from_value(json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
                "maxTokens": 10
            }))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
            #[allow(deprecated)]
            let answer = context.peer.create_message(params).await;
            let text = match answer {
                Ok(answer) => format!("sampled: {answer:?}"),
                Err(error) => format!("sampling failed: {error}"),
            };
            result(json!({"content": [{"type": "text", "text": text}]}))
        }
        "roots" => {
            #[allow(deprecated)]
            let answer = context.peer.list_roots().await;
            let text = match answer {
                Ok(answer) => format!("roots: {answer:?}"),
                Err(error) => format!("roots failed: {error}"),
            };
            result(json!({"content": [{"type": "text", "text": text}]}))
        }
        other => Err(ErrorData::invalid_params(
            format!("unknown tool {other}"),
            None,
        )),
    }
}

/// `input_required`: asks for the input `args` names (`ask`: elicitation, sampling, roots) for
/// `rounds` rounds, carrying the round in `requestState`, then completes with the responses.
fn input_required(
    args: &Value,
    request: &CallToolRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    let rounds = args.get("rounds").and_then(Value::as_u64).unwrap_or(1);
    let round = request
        .request_state
        .as_deref()
        .and_then(|state| state.strip_prefix("round-"))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    if round >= rounds {
        let responses = serde_json::to_value(&request.input_responses).unwrap_or_default();
        return result(json!({"content": [{"type": "text", "text": format!(
            "completed after {round} rounds, input responses: {responses}"
        )}]}));
    }
    let mut asked = json!({
        "resultType": "input_required",
        "requestState": format!("round-{}", round + 1)
    });
    match args.get("ask").and_then(Value::as_str) {
        Some("elicitation") => {
            asked["inputRequests"] = json!({"approval": {
                "method": "elicitation/create",
                "params": {
                    "message": "Go ahead?",
                    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
                }
            }});
        }
        Some("sampling") => {
            asked["inputRequests"] = json!({"llm": {
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
                    "maxTokens": 10
                }
            }});
        }
        Some("roots") => {
            asked["inputRequests"] = json!({"where": {"method": "roots/list", "params": {}}});
        }
        _ => {}
    }
    serde_json::from_value::<InputRequiredResult>(asked)
        .map(CallToolResponse::InputRequired)
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
}

fn headers_json(headers: &HeaderMap) -> serde_json::Map<String, Value> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned()),
            )
        })
        .collect()
}
