//! The MCP server a client sees: rmcp's server side answers the protocol, and this handler turns
//! a `tools/list` into the client's tenant's pinned bindings and a `tools/call` into a
//! [`CallRequest`] on the runtime — the same gate, journal, bounds and classifier as
//! `brain-harness call` — and its result back into a `CallToolResult`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use brain_config::ToolBinding;
use brain_runtime::{
    CallRequest, ContentBlock, Event, OutcomeKind, Reason, Refusal, Runtime, Scope, ToolResult, Via,
};
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

/// How long a client may keep serve's `tools/list` (2026-07-28's `ttlMs`): the list changes only
/// with a restart on another config (there is no live reload), so five minutes; a client that
/// verifies pins (brain) then lists once per five minutes, not before every call.
const LIST_TTL_MS: u64 = 300_000;
use super::owners::{CallSlot, Owners, SessionEnd};

/// serve's bounds on calls and sessions, from the config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) calls_per_client: u32,
    pub(crate) calls: u32,
    pub(crate) sessions_per_client: u32,
    pub(crate) sessions: u32,
}

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
    /// The per-client bound on calls.
    per_client: usize,
    /// Sessions' owners, and each principal's sessions and calls in flight.
    owners: Arc<Owners>,
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
        bounds: Bounds,
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
        let per_client = bounds.calls_per_client;
        let all = bounds.calls;
        Facade {
            inner: Arc::new(Inner {
                runtime,
                fixed,
                session,
                tools: tools.into_iter().map(|(t, v)| (t, Arc::new(v))).collect(),
                tenants,
                all_calls: Arc::new(Semaphore::new(all as usize)),
                per_client: per_client as usize,
                owners: Owners::new(
                    bounds.sessions_per_client as usize,
                    bounds.sessions as usize,
                    per_client as usize,
                ),
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

    /// The table of sessions' owners and principals' bounds.
    pub(crate) fn owners(&self) -> Arc<Owners> {
        Arc::clone(&self.inner.owners)
    }

    /// The runtime, to wait for its cleanups at shutdown.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The request's client: the fixed one, or the one the authentication layer put in the HTTP
    /// request's extensions.
    fn client<'a>(
        &'a self,
        context: &'a RequestContext<RoleServer>,
    ) -> Result<&'a Client, ErrorData> {
        if let Some(client) = &self.inner.fixed {
            return Ok(client);
        }
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Client>())
            .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
    }

    /// Permits for one more call of `client`, or why not.
    fn admit(
        &self,
        client: &Client,
    ) -> Result<(CallSlot, OwnedSemaphorePermit), (Refusal, String)> {
        if self.inner.draining.load(Ordering::SeqCst) {
            return Err((
                Refusal::Stopping,
                "refused: the server is stopping; nothing was sent — retry with the \
                        same call id against another replica or once it is back"
                    .to_owned(),
            ));
        }
        // Serve's own limits: concurrency quotas of this process, refused as a limit is.
        let own = self.inner.owners.admit_call(client).map_err(|_| {
            (
                Refusal::Limited,
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
                    Refusal::Limited,
                    "refused: over the limit of serve (serve's `concurrent_calls`); nothing was \
                     sent — retry shortly"
                        .to_owned(),
                )
            })?;
        Ok((own, all))
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
    if let Some(reason) = result.reason {
        outcome["reason"] = json!(reason);
    }
    if let Some(ms) = result.retry_after_ms {
        outcome["retry_after_ms"] = json!(ms);
    }
    if let Some(id) = &result.approval_id {
        outcome["approval_id"] = json!(id);
    }
    outcome
}

/// What a client reads of a failure the runtime reported: what it may act on, naming the
/// binding — never a store's path or address, an upstream URL or address, or brain's derived
/// upstream call id. The runtime's own text (the operator's detail) is returned beside it for
/// the log, joined by the call id. A tool's own result (success or `isError`) and the argument
/// and limit refusals (the client's own doing, with nothing internal in them) pass unchanged.
fn for_the_client(result: &mut ToolResult, tool: &str) -> Option<String> {
    let kind = result.kind?;
    let detail = match result.content.first() {
        Some(ContentBlock::Text { text }) => text.clone(),
        _ => String::new(),
    };
    let told = match kind {
        // A policy's refusal names the deciding policies and their `@reason`s: the client acts
        // on it (other arguments, another tool), as on a schema mismatch; a call held for
        // approval says which approval to wait for.
        OutcomeKind::ToolError
        | OutcomeKind::Limited
        | OutcomeKind::PolicyDenied
        | OutcomeKind::ApprovalRequired => return None,
        OutcomeKind::Refused if result.reason == Some(Reason::InvalidArguments) => return None,
        // Serve's own check answers first, as for a tool that does not exist; should the
        // runtime's ever answer, the client learns no more.
        OutcomeKind::Refused if result.reason == Some(Reason::TenantNotAllowed) => {
            result.reason = Some(Reason::UnknownTool);
            format!("{tool}: refused: there is no such tool; nothing was sent")
        }
        OutcomeKind::Refused => format!(
            "{tool}: refused: this tool cannot be called now (the operator's log says why); \
             nothing was sent"
        ),
        OutcomeKind::JournalConflict => format!(
            "{tool}: refused: this call id was used before for another call (another tool or \
             other arguments); nothing was sent — use a new call id"
        ),
        OutcomeKind::PinDrift => format!(
            "{tool}: refused: its server now describes this tool otherwise than the operator \
             reviewed it; nothing was sent — it cannot be called until the operator reviews \
             the change"
        ),
        OutcomeKind::StoreUnavailable => format!(
            "{tool}: not sent: brain's state store is unavailable now; nothing was sent — \
             retry with the same call id shortly"
        ),
        OutcomeKind::NotSent => format!(
            "{tool}: not sent: the tool's server could not be reached or refused the call \
             before running it; retry with the same call id"
        ),
        OutcomeKind::Timeout | OutcomeKind::Cancelled => {
            let what = if kind == OutcomeKind::Timeout {
                "timed out"
            } else {
                "was cancelled"
            };
            if result.unknown_outcome {
                format!(
                    "{tool}: the call {what} after it was sent: the tool may have run — check \
                     before calling it again"
                )
            } else {
                format!("{tool}: the call {what} before it was sent; nothing ran")
            }
        }
        _ => format!(
            "{tool}: the outcome is unknown: the tool may have run — check before calling it \
             again; a retry with the same call id returns what brain recorded"
        ),
    };
    result.content = vec![ContentBlock::text(told)];
    result.structured_content = None;
    Some(detail)
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
        // The policies hide a tool only by its scope and context-free forbids (never by
        // arguments): `Runtime::visible`.
        let runtime = &self.inner.runtime;
        let tools = self
            .inner
            .tools
            .get(&client.tenant)
            .map(|tools| {
                tools
                    .iter()
                    .filter(|tool| runtime.visible(&client.acts_as, &tool.name))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(LIST_TTL_MS))
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
                Some(json!({"reason": Reason::UnknownTool})),
            ));
        }
        let meta = serde_json::to_value(&context.meta).unwrap_or_default();
        let session = named(&meta, SESSION_KEY, "session_id")
            .or_else(|| self.inner.session.clone())
            .unwrap_or_else(|| DEFAULT_SESSION.to_owned());
        let call_id =
            named(&meta, CALL_KEY, "call_id").unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        // An id that cannot be taken is refused before anything (the journal, the log) sees it.
        for (what, id) in [("session id", &session), ("call id", &call_id)] {
            if let Err(why) = brain_runtime::check_id(id) {
                let message = format!("refused: the {what} {why}; nothing was sent");
                let result = ToolResult::refused("-", Refusal::InvalidId, message);
                return Ok(call_tool_result(&result, "-").into());
            }
        }
        let upstream = upstream_call_id(&client.tenant, &session, &call_id);
        let mcp_session = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let line = CallLine {
            tool: &name,
            client,
            session: &session,
            call_id: &call_id,
            upstream: &upstream,
            mcp_session: mcp_session.as_deref(),
        };
        let ended = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<SessionEnd>())
            .map(|end| end.0.clone());
        let mut result = match self.admit(client) {
            Err((refusal, message)) => ToolResult::refused(&call_id, refusal, message),
            Ok(_permits) => {
                let arguments = Value::Object(request.arguments.unwrap_or_default());
                let scope = Scope {
                    tenant_id: client.tenant.clone(),
                    session_id: session.clone(),
                };
                let span = server_span(&name, client, &call_id, mcp_session.as_deref());
                continue_trace(&span, &meta, &context);
                let request = CallRequest::new(name.clone(), scope, arguments)
                    .with_call_id(upstream.clone())
                    .with_principal(client.acts_as.clone())
                    .with_via(Via::Serve)
                    .with_parent(span);
                self.run(request, &context, ended).await
            }
        };
        let detail = for_the_client(&mut result, &name);
        line.write(
            &result,
            detail.as_deref(),
            started.elapsed(),
            self.inner.json_log,
        );
        Ok(call_tool_result(&result, &call_id).into())
    }
}

/// Resolves when the session ends (never without one).
async fn session_end(ended: Option<&CancellationToken>) {
    match ended {
        Some(ended) => ended.cancelled().await,
        None => std::future::pending().await,
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
    /// result still comes back classified. The end of its session (`ended`: the owner's DELETE,
    /// or its idle expiry) withdraws it instead: cancelled if not yet claimed, else run to its
    /// result, which the journal keeps for a retry with the same call id.
    async fn run(
        &self,
        request: CallRequest,
        context: &RequestContext<RoleServer>,
        ended: Option<CancellationToken>,
    ) -> ToolResult {
        let token = context.meta.get_progress_token();
        let mut call = self.inner.runtime.call(request);
        let mut cancelled = false;
        let mut withdrawn = false;
        let session_ended = || ended.as_ref().is_some_and(CancellationToken::is_cancelled);
        loop {
            let event = tokio::select! {
                biased;
                // Without a session (stdio, 2026-07-28) this branch is never polled.
                () = session_end(ended.as_ref()), if ended.is_some() && !withdrawn && !cancelled => {
                    withdrawn = true;
                    call.withdraw();
                    continue;
                }
                event = call.next() => event,
                () = context.ct.cancelled(), if !cancelled && !withdrawn => {
                    // rmcp cancels a session's requests as the session ends: that is the
                    // session's end, not the client asking to cancel.
                    if session_ended() {
                        withdrawn = true;
                        call.withdraw();
                    } else {
                        cancelled = true;
                        call.cancel();
                    }
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
                None => return ToolResult::ended_without_result(call.call_id()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result as the journal or the runtime would have it, with `kind` (a refusal with
    /// `reason`: `kind` is `refused/REASON`).
    fn failed(kind: &str, unknown: bool, text: &str) -> ToolResult {
        let (kind, reason) = match kind.split_once('/') {
            Some((kind, reason)) => (kind, Some(reason)),
            None => (kind, None),
        };
        serde_json::from_value(json!({"call_id": "c1", "is_error": true,
            "unknown_outcome": unknown, "content": [{"type": "text", "text": text}],
            "kind": kind, "reason": reason}))
        .unwrap()
    }

    #[test]
    fn a_client_is_told_what_it_may_do_and_nothing_internal() {
        let internal = [
            (
                "store_unavailable",
                false,
                "the call journal (SQLite /var/lib/brain/state.db) failed",
            ),
            (
                "store_unavailable",
                false,
                "the call journal (PostgreSQL db.internal:5432) failed",
            ),
            (
                "not_sent",
                false,
                "could not connect to http://10.0.0.7:8080/internal-mcp",
            ),
            (
                "journal_conflict",
                false,
                "call id 1b4e28ba-2fa1-4d2b-8f0e-9c3a1f2b3c4d was used",
            ),
            (
                "unknown_outcome",
                true,
                "http://10.0.0.7:8080/internal-mcp dropped the stream",
            ),
            (
                "timeout",
                true,
                "the call timed out after 30s (http://10.0.0.7/mcp)",
            ),
            (
                "cancelled",
                false,
                "interrupted before tools/call was sent to 10.0.0.7",
            ),
            (
                "refused/unavailable",
                false,
                "refused: MCP_API_KEY is not set; export it",
            ),
        ];
        for (kind, unknown, text) in internal {
            let mut result = failed(kind, unknown, text);
            let detail = for_the_client(&mut result, "docs_search");
            assert_eq!(detail.as_deref(), Some(text), "the log keeps the detail");
            let ContentBlock::Text { text: told } = &result.content[0] else {
                panic!("a text block");
            };
            assert!(told.starts_with("docs_search: "), "{told}");
            for secret in [
                "/var/lib",
                "db.internal",
                "10.0.0.7",
                "1b4e28ba",
                "MCP_API_KEY",
            ] {
                assert!(!told.contains(secret), "{kind}: {told}");
            }
            assert_eq!(result.unknown_outcome, unknown, "the outcome is unchanged");
        }
        // The client's own doing passes as it is.
        for (kind, text) in [
            (
                "refused/invalid_arguments",
                "refused: the arguments do not match the input schema of \"x\": at `/q`",
            ),
            (
                "limited",
                "refused: over the limit of x (1 a minute); retry in 3 s",
            ),
            ("tool_error", "the tool's own words"),
        ] {
            let mut result = failed(kind, false, text);
            assert_eq!(for_the_client(&mut result, "x"), None);
            assert_eq!(result.content, vec![ContentBlock::text(text)]);
        }
    }
}
