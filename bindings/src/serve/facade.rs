//! The MCP server a client sees: rmcp's server side answers the protocol, and this handler turns
//! a `tools/list` into the client's tenant's pinned bindings and a `tools/call` into a
//! [`CallRequest`] on the runtime — the same gate, journal, bounds and classifier as
//! `brain-harness call` — and its result back into a `CallToolResult`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use brain_config::ToolBinding;
use brain_runtime::{CallRequest, ContentBlock, Event, OutcomeKind, Runtime, Scope, ToolResult};
use futures_util::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::clients::Client;
use super::log::CallLine;

/// The MCP server of one `serve` process; cheap to clone (rmcp makes one per session).
#[derive(Clone)]
pub(crate) struct Facade {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Runtime,
    /// Over stdio: the one client. Over HTTP: `None`, each request's client is in its extensions.
    fixed: Option<Client>,
    /// `--session`: the session of calls whose `_meta` names none.
    session: Option<String>,
    /// Each tenant's tools, in config order.
    tools: HashMap<String, Arc<Vec<Tool>>>,
    /// Each binding's tenants, by name.
    tenants: HashMap<String, Vec<String>>,
    /// Calls in flight, all clients together.
    all_calls: Arc<Semaphore>,
    /// The per-client bound, and each client's calls in flight.
    per_client: usize,
    clients: std::sync::Mutex<HashMap<String, Arc<Semaphore>>>,
    /// The size of `all_calls`.
    all: u32,
    /// Log lines as JSON.
    json_log: bool,
    /// Set at shutdown: new calls are refused.
    draining: AtomicBool,
    /// Cancelled when the calls still in flight must end.
    stop: CancellationToken,
}

/// `_meta` keys a client may set.
const SESSION_KEY: &str = "brain.dev/session_id";
const CALL_KEY: &str = "brain.dev/call_id";
const SCOPE_KEY: &str = "brain.dev/scope";
/// The `_meta` key of every result's outcome.
pub(crate) const OUTCOME_KEY: &str = "brain.dev/outcome";
/// The session of calls that name none and have no `--session`.
pub(crate) const DEFAULT_SESSION: &str = "default";

impl Facade {
    /// The server for `runtime`'s bindings; `fixed` is the one client over stdio.
    pub(crate) fn new(
        runtime: Runtime,
        bindings: &[ToolBinding],
        fixed: Option<Client>,
        session: Option<String>,
        bounds: (u32, u32),
        json_log: bool,
        stop: CancellationToken,
    ) -> Facade {
        let mut tools: HashMap<String, Vec<Tool>> = HashMap::new();
        let mut tenants = HashMap::new();
        for binding in bindings {
            let tool = tool(binding);
            for tenant in &binding.tenants {
                tools.entry(tenant.clone()).or_default().push(tool.clone());
            }
            tenants.insert(binding.name.clone(), binding.tenants.clone());
        }
        let (per_client, all) = bounds;
        Facade {
            inner: Arc::new(Inner {
                runtime,
                fixed,
                session,
                tools: tools.into_iter().map(|(t, v)| (t, Arc::new(v))).collect(),
                tenants,
                all_calls: Arc::new(Semaphore::new(all as usize)),
                per_client: per_client as usize,
                clients: std::sync::Mutex::default(),
                all,
                json_log,
                draining: AtomicBool::new(false),
                stop,
            }),
        }
    }

    /// From now on, new calls are refused (the server is stopping).
    pub(crate) fn drain(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
    }

    /// The calls in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.inner.all as usize - self.inner.all_calls.available_permits()
    }

    /// Waits until no call is in flight.
    pub(crate) async fn idle(&self) {
        let _all = self.inner.all_calls.acquire_many(self.inner.all).await;
    }

    /// The runtime, to wait for its cleanups at shutdown.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The request's client: the fixed one, or the one the authentication layer put in the HTTP
    /// request's extensions.
    fn client(&self, context: &RequestContext<RoleServer>) -> Result<Client, ErrorData> {
        if let Some(client) = &self.inner.fixed {
            return Ok(client.clone());
        }
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Client>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
    }

    /// Permits for one more call of `client`, or why not.
    fn admit(&self, client: &Client) -> Result<[OwnedSemaphorePermit; 2], (OutcomeKind, String)> {
        if self.inner.draining.load(Ordering::SeqCst) {
            return Err((
                OutcomeKind::Refused,
                "refused: the server is stopping; nothing was sent — retry with the \
                        same call id against another replica or once it is back"
                    .to_owned(),
            ));
        }
        let own = {
            let mut clients = self.inner.clients.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(
                clients
                    .entry(client.id.clone())
                    .or_insert_with(|| Arc::new(Semaphore::new(self.inner.per_client))),
            )
        };
        // Serve's own limits: concurrency quotas of this process, refused as a limit is.
        let own = own.try_acquire_owned().map_err(|_| {
            (
                OutcomeKind::Limited,
                format!(
                    "refused: over the limit of serve/client ({} running at once: serve's \
                     `concurrent_calls_per_client`); nothing was sent — retry when one has ended",
                    self.inner.per_client
                ),
            )
        })?;
        let all = Arc::clone(&self.inner.all_calls)
            .try_acquire_owned()
            .map_err(|_| {
                (
                    OutcomeKind::Limited,
                    "refused: over the limit of serve (serve's `concurrent_calls`); nothing was \
                     sent — retry shortly"
                        .to_owned(),
                )
            })?;
        Ok([own, all])
    }
}

/// A binding as the client sees it: its name, with its pinned description, schemas and
/// annotations. No `execution`: serve runs tasks upstream, not for its clients.
fn tool(binding: &ToolBinding) -> Tool {
    let mut tool = json!({
        "name": binding.name,
        "description": binding.description,
        "inputSchema": binding.input_schema,
    });
    if let Some(output) = &binding.output_schema {
        tool["outputSchema"] = output.clone();
    }
    if let Some(annotations) = &binding.annotations {
        tool["annotations"] = Value::Object(annotations.clone());
    }
    serde_json::from_value(tool).expect("a validated binding is an MCP tool")
}

/// The upstream call id of a client's call: a UUID derived from the tenant, the session and the
/// client's call id, so that a retry maps to the same journal entry and no client can choose
/// (or learn) what is sent upstream as `progressToken`, `Idempotency-Key` or `brain.dev/scope`.
pub(crate) fn upstream_call_id(tenant: &str, session: &str, call_id: &str) -> String {
    let mut hash = Sha256::new();
    for part in ["brain serve call id v1", tenant, session, call_id] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// A string at `key` of `meta`, or at `field` of its `brain.dev/scope` (a brain in front of a
/// brain sends that).
fn named(meta: &Value, key: &str, field: &str) -> Option<String> {
    let direct = meta.get(key).and_then(Value::as_str);
    let scoped = || meta.get(SCOPE_KEY)?.get(field)?.as_str();
    direct
        .or_else(scoped)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The `CallToolResult` of a brain result: its content as brain converted it, and the outcome in
/// `_meta` under the client's call id.
fn call_tool_result(result: &ToolResult, call_id: &str) -> CallToolResult {
    let content: Vec<Value> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => json!({"type": "text", "text": text}),
            ContentBlock::Image { data, mime_type } => {
                json!({"type": "image", "data": data, "mimeType": mime_type})
            }
            other => {
                json!({"type": "text", "text": serde_json::to_string(other).unwrap_or_default()})
            }
        })
        .collect();
    let mut value = json!({
        "resultType": "complete",
        "content": content,
        "isError": result.is_error,
        "_meta": {OUTCOME_KEY: outcome(result, call_id)},
    });
    if let Some(structured) = &result.structured_content {
        value["structuredContent"] = structured.clone();
    }
    serde_json::from_value(value).expect("brain's result is a CallToolResult")
}

/// `_meta["brain.dev/outcome"]`.
fn outcome(result: &ToolResult, call_id: &str) -> Value {
    let mut outcome = json!({
        "call_id": call_id,
        "unknown_outcome": result.unknown_outcome,
        "replayed": result.replayed,
        "error_type": result.kind.map(OutcomeKind::as_str),
    });
    if let Some(ms) = result.retry_after_ms {
        outcome["retry_after_ms"] = json!(ms);
    }
    outcome
}

/// A refusal before the runtime: `isError`, nothing sent; `kind` says whether by serve's
/// concurrency bounds (limited) or because it is stopping (refused).
fn refusal(call_id: &str, (kind, message): (OutcomeKind, String)) -> ToolResult {
    let mut result = ToolResult::tool_error(call_id, vec![ContentBlock::text(message)]);
    result.kind = Some(kind);
    result
}

impl ServerHandler for Facade {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info.name = "brain".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let client = self.client(&context)?;
        let tools = self
            .inner
            .tools
            .get(&client.tenant)
            .map(|tools| tools.to_vec())
            .unwrap_or_default();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let client = self.client(&context)?;
        let name = request.name.to_string();
        // Another tenant's tool answers exactly as a tool that does not exist.
        if !self
            .inner
            .tenants
            .get(&name)
            .is_some_and(|tenants| tenants.contains(&client.tenant))
        {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                None,
            ));
        }
        let meta = serde_json::to_value(&context.meta).unwrap_or_default();
        let session = named(&meta, SESSION_KEY, "session_id")
            .or_else(|| self.inner.session.clone())
            .unwrap_or_else(|| DEFAULT_SESSION.to_owned());
        let call_id =
            named(&meta, CALL_KEY, "call_id").unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let upstream = upstream_call_id(&client.tenant, &session, &call_id);
        let mcp_session = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let line = CallLine {
            tool: &name,
            client: &client,
            session: &session,
            call_id: &call_id,
            upstream: &upstream,
            mcp_session: mcp_session.as_deref(),
        };
        let result = match self.admit(&client) {
            Err(message) => refusal(&call_id, message),
            Ok(_permits) => {
                let arguments = Value::Object(request.arguments.unwrap_or_default());
                let scope = Scope {
                    tenant_id: client.tenant.clone(),
                    session_id: session.clone(),
                };
                let span = server_span(&name, &client, &call_id, mcp_session.as_deref());
                continue_trace(&span, &meta, &context);
                let request = CallRequest::new(name.clone(), scope, arguments)
                    .with_call_id(upstream.clone())
                    .with_parent(span);
                self.run(request, &context).await
            }
        };
        line.write(&result, started.elapsed(), self.inner.json_log);
        Ok(call_tool_result(&result, &call_id).into())
    }
}

/// The client's request as a server span: the parent of brain's client span.
fn server_span(
    name: &str,
    client: &Client,
    call_id: &str,
    mcp_session: Option<&str>,
) -> tracing::Span {
    tracing::info_span!(
        "brain serve tools/call",
        otel.name = format!("tools/call {name}"),
        otel.kind = "server",
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        mcp.session.id = mcp_session,
        brain.tenant_id = client.tenant.as_str(),
        brain.call_id = call_id,
    )
}

/// Continues the client's trace: its `_meta` `traceparent` and `tracestate` (MCP's place for
/// them), else the HTTP request's headers.
fn continue_trace(span: &tracing::Span, meta: &Value, context: &RequestContext<RoleServer>) {
    use opentelemetry::propagation::TextMapPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let mut carrier: HashMap<String, String> = HashMap::new();
    for key in ["traceparent", "tracestate"] {
        if let Some(value) = meta.get(key).and_then(Value::as_str) {
            carrier.insert(key.to_owned(), value.to_owned());
        }
    }
    if !carrier.contains_key("traceparent")
        && let Some(parts) = context.extensions.get::<http::request::Parts>()
    {
        for key in ["traceparent", "tracestate"] {
            if let Some(value) = parts.headers.get(key).and_then(|v| v.to_str().ok()) {
                carrier.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    if carrier.contains_key("traceparent") {
        let parent =
            opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        let _ = span.set_parent(parent);
    }
}

impl Facade {
    /// Runs the call on the runtime: progress relayed with the client's own token, in order; the
    /// client's cancellation (or, at 2026-07-28, its closed stream) cancels the call, whose
    /// result still comes back classified.
    async fn run(&self, request: CallRequest, context: &RequestContext<RoleServer>) -> ToolResult {
        let token = context.meta.get_progress_token();
        let mut call = self.inner.runtime.call(request);
        let mut cancelled = false;
        loop {
            let event = tokio::select! {
                event = call.next() => event,
                () = context.ct.cancelled(), if !cancelled => {
                    cancelled = true;
                    call.cancel();
                    continue;
                }
                () = self.inner.stop.cancelled(), if !cancelled => {
                    cancelled = true;
                    call.cancel();
                    continue;
                }
            };
            match event {
                Some(Event::Progress(progress)) => {
                    if let Some(token) = &token {
                        let mut param =
                            ProgressNotificationParam::new(token.clone(), progress.progress);
                        param.total = progress.total;
                        param.message = progress.message;
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
                Some(Event::Result(result)) => return result,
                Some(_) => {}
                None => {
                    let mut result = ToolResult::tool_error(
                        call.call_id(),
                        vec![ContentBlock::text("the call ended without a result")],
                    );
                    result.unknown_outcome = true;
                    result.kind = Some(OutcomeKind::UnknownOutcome);
                    return result;
                }
            }
        }
    }
}
