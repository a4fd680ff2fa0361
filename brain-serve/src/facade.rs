//! The MCP server a client sees: rmcp's server side answers the protocol (serve's stateless
//! path, `stateless.rs`, answers well-formed 2026-07-28 calls and lists without it), and this
//! handler turns a `tools/list` into the client's tenant's pinned bindings and a `tools/call`
//! into a [`CallRequest`] on the runtime — the same gate, journal, bounds and classifier as
//! `brain-harness call` — and its result back into a `CallToolResult`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use brain_config::ToolBinding;
use brain_runtime::{
    CallRequest, Event, Reason, Refusal, Runtime, Scope, SubjectToken, ToolResult, Via,
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, RequestMetaObject, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::answer::{
    CALL_KEY, Line, SESSION_KEY, call_tool_result, continue_trace, named, server_span,
};
use super::clients::{Client, PrincipalName};

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
    /// Every tool, by name.
    by_name: HashMap<String, Tool>,
    /// The tools whose input schemas carry `x-mcp-header` annotations.
    param_headers: std::collections::HashSet<String>,
    /// The tools that call their servers on behalf of each user (`token_exchange`).
    on_behalf: std::collections::HashSet<String>,
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
        let mut by_name = HashMap::new();
        let mut param_headers = std::collections::HashSet::new();
        let mut on_behalf = std::collections::HashSet::new();
        for binding in bindings {
            if binding
                .auth
                .as_ref()
                .is_some_and(|auth| auth.on_behalf_of_users())
            {
                on_behalf.insert(binding.name.clone());
            }
            let tool = tool(binding);
            by_name.insert(binding.name.clone(), tool.clone());
            if annotated(&binding.input_schema) {
                param_headers.insert(binding.name.clone());
            }
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
                by_name,
                param_headers,
                on_behalf,
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

/// Whether a schema carries an `x-mcp-header` annotation anywhere (SEP-2243: a header the
/// client sends beside the argument, which rmcp checks against the body).
fn annotated(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.contains_key("x-mcp-header") || map.values().any(annotated),
        Value::Array(items) => items.iter().any(annotated),
        _ => false,
    }
}

/// The upstream call id of a client's call: a UUID derived from the tenant, the session and the
/// client's call id, so that a retry maps to the same journal entry and no client can choose
/// (or learn) what is sent upstream as `progressToken`, `Idempotency-Key` or `brain.dev/scope`.
/// For a tool on behalf of users, the principal's issuer and subject too (`user`): its results
/// are the user's own, and no other user of the tenant who writes the same ids is answered
/// from them. (The other tools keep the derivation they always had, so that a retry across an
/// upgrade still finds its journal entry.)
pub(crate) fn upstream_call_id(
    tenant: &str,
    user: Option<&PrincipalName>,
    session: &str,
    call_id: &str,
) -> String {
    let mut hash = Sha256::new();
    let parts: &[&str] = match user {
        None => &["brain serve call id v1", tenant, session, call_id],
        Some(user) => &[
            "brain serve call id v2",
            tenant,
            &user.issuer,
            &user.subject,
            session,
            call_id,
        ],
    };
    for part in parts {
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

impl ServerHandler for Facade {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info.name = "brain".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    /// A binding by name, for rmcp's check of a request's `Mcp-Param-*` headers against the
    /// `x-mcp-header` annotations of its pinned input schema.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.by_name.get(name).cloned()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(self.tools_of(self.client(&context)?))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let peer = context.peer.clone();
        let mut steps = self.calling(request, self.incoming(context)?);
        while let Some(step) = steps.next().await {
            match step {
                Step::Progress(param) => {
                    let _ = peer.notify_progress(param).await;
                }
                Step::Done(done) => return done,
            }
        }
        Err(ErrorData::internal_error(
            "the call ended without a result",
            None,
        ))
    }
}

impl Facade {
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

    /// What rmcp's context says of a `tools/call`.
    fn incoming(&self, mut context: RequestContext<RoleServer>) -> Result<Incoming, ErrorData> {
        let client = self.client(&context)?.clone();
        let parts = context.extensions.remove::<http::request::Parts>();
        let ended = parts
            .as_ref()
            .and_then(|parts| parts.extensions.get::<SessionEnd>())
            .map(|end| end.0.clone());
        Ok(Incoming {
            client,
            meta: std::mem::take(&mut context.meta),
            headers: parts.map(|parts| parts.headers),
            ended,
            cancelled: Some(context.ct),
        })
    }

    /// `client`'s tenant's tools, without those its policies hide (by scope and context-free
    /// forbids, never by arguments: `Runtime::visible`).
    pub(crate) fn tools_of(&self, client: &Client) -> ListToolsResult {
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
        ListToolsResult::with_all_items(tools).with_ttl_ms(LIST_TTL_MS)
    }

    /// Whether calls of `name` are checked against `Mcp-Param-*` headers (its pinned input
    /// schema has `x-mcp-header` annotations).
    pub(crate) fn has_param_headers(&self, name: &str) -> bool {
        self.inner.param_headers.contains(name)
    }
}

/// What a `tools/call` brings besides its params, whoever read it off the wire: rmcp's service
/// (stdio, sessions, requests the stateless path passes on) or the stateless path
/// (`stateless.rs`).
pub(crate) struct Incoming {
    pub(crate) client: Client,
    /// The request's `_meta`: brain's session and call ids, `progressToken`, trace context.
    pub(crate) meta: RequestMetaObject,
    /// The HTTP request's headers (`Mcp-Session-Id`, `traceparent`); none over stdio.
    pub(crate) headers: Option<http::HeaderMap>,
    /// Cancelled when the request's session ends (the owner's DELETE, or its idle expiry).
    pub(crate) ended: Option<CancellationToken>,
    /// Cancelled when the client cancels the request (rmcp's token for it). On the stateless
    /// path the client cancels by closing its stream, which drops the call's steps.
    pub(crate) cancelled: Option<CancellationToken>,
}

/// The user's own token, for a binding that acts on behalf of users: the bearer JWT this very
/// request was authenticated with, keyed by the verified issuer and subject. Only a JWT user
/// has one; a static client's token is serve's own credential, never a user's.
fn user_token(client: &Client, headers: Option<&http::HeaderMap>) -> Option<SubjectToken> {
    let brain_runtime::Principal::User {
        issuer, subject, ..
    } = &client.acts_as
    else {
        return None;
    };
    let token = headers?
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()
        .and_then(super::clients::bearer)?;
    Some(SubjectToken::verified(token, issuer, subject))
}

/// What a call gives its client: progress (only with a `progressToken`), then its answer.
pub(crate) enum Step {
    Progress(ProgressNotificationParam),
    Done(Result<CallToolResponse, ErrorData>),
}

impl Facade {
    /// A `tools/call` as the steps its client is given: the tenant's check, the ids, serve's own
    /// bounds, then the call on the runtime — progress relayed with the client's own token, in
    /// order; the client's cancellation (or, at 2026-07-28, its closed stream: the steps
    /// dropped) cancels the call, whose result is still classified and logged. The end of its
    /// session withdraws it instead: cancelled if not yet claimed, else run to its result, which
    /// the journal keeps for a retry with the same call id.
    pub(crate) fn calling(
        &self,
        request: CallToolRequestParams,
        incoming: Incoming,
    ) -> BoxStream<'static, Step> {
        let started = Instant::now();
        let Incoming {
            client,
            meta,
            headers,
            ended,
            cancelled,
        } = incoming;
        let name = request.name.to_string();
        // Another tenant's tool answers exactly as a tool that does not exist.
        if !self
            .inner
            .tenants
            .get(&name)
            .is_some_and(|tenants| tenants.contains(&client.tenant))
        {
            return done(Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                Some(json!({"reason": Reason::UnknownTool})),
            )));
        }
        let token = meta.get_progress_token();
        let meta = &meta.0.0;
        let session = named(meta, SESSION_KEY, "session_id")
            .or_else(|| self.inner.session.clone())
            .unwrap_or_else(|| DEFAULT_SESSION.to_owned());
        let call_id =
            named(meta, CALL_KEY, "call_id").unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        // An id that cannot be taken is refused before anything (the journal, the log) sees it.
        for (what, id) in [("session id", &session), ("call id", &call_id)] {
            if let Err(why) = brain_runtime::check_id(id) {
                let message = format!("refused: the {what} {why}; nothing was sent");
                let result = ToolResult::refused("-", Refusal::InvalidId, message);
                return done(Ok(call_tool_result(&result, "-").into()));
            }
        }
        let on_behalf = self.inner.on_behalf.contains(&name);
        let user = on_behalf.then(|| client.principal.name());
        let upstream = upstream_call_id(&client.tenant, user, &session, &call_id);
        let mcp_session = headers
            .as_ref()
            .and_then(|headers| headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let permits = self.admit(&client);
        let line = Line {
            tool: name,
            client,
            session,
            call_id,
            upstream,
            mcp_session,
            started,
        };
        let permits = match permits {
            Err((refusal, message)) => {
                let result = ToolResult::refused(&line.call_id, refusal, message);
                return done(self.finish(&line, result));
            }
            Ok(permits) => permits,
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let scope = Scope {
            tenant_id: line.client.tenant.clone(),
            session_id: line.session.clone(),
        };
        let span = server_span(
            &line.tool,
            &line.client,
            &line.call_id,
            line.mcp_session.as_deref(),
        );
        continue_trace(&span, meta, headers.as_ref());
        let mut request = CallRequest::new(line.tool.clone(), scope, arguments)
            .with_call_id(line.upstream.clone())
            .with_principal(line.client.acts_as.clone())
            .with_via(Via::Serve)
            .with_parent(span);
        if on_behalf && let Some(subject) = user_token(&line.client, headers.as_ref()) {
            request = request.with_subject_token(subject);
        }
        let running = Running {
            facade: self.clone(),
            call: Some(self.inner.runtime.call(request)),
            token,
            ended,
            cancelled,
            was_cancelled: false,
            withdrawn: false,
            line: Some(line),
            permits: Some(permits),
        };
        running.steps()
    }

    /// The answer to a call that ended with `result`: what its client may read of it (see
    /// [`for_the_client`]), with the call's log line written.
    fn finish(&self, line: &Line, result: ToolResult) -> Result<CallToolResponse, ErrorData> {
        Ok(line.answer(result, self.inner.json_log).into())
    }
}

/// Steps of one answer only.
fn done(answer: Result<CallToolResponse, ErrorData>) -> BoxStream<'static, Step> {
    futures_util::stream::once(std::future::ready(Step::Done(answer))).boxed()
}

/// A call on the runtime, from its start to its result.
struct Running {
    facade: Facade,
    /// `None` once its result is in.
    call: Option<brain_runtime::Call>,
    token: Option<ProgressToken>,
    ended: Option<CancellationToken>,
    cancelled: Option<CancellationToken>,
    was_cancelled: bool,
    withdrawn: bool,
    /// Taken with the result (here, or by the drop's wait for it).
    line: Option<Line>,
    /// serve's bounds on calls in flight, held until the result.
    permits: Option<(CallSlot, OwnedSemaphorePermit)>,
}

impl Running {
    /// The call's steps, its answer the last.
    fn steps(self) -> BoxStream<'static, Step> {
        futures_util::stream::unfold(Some(self), |running| async move {
            let mut running = running?;
            match running.next().await {
                Step::Progress(param) => Some((Step::Progress(param), Some(running))),
                Step::Done(answer) => Some((Step::Done(answer), None)),
            }
        })
        .boxed()
    }

    /// The call's next step for its client: a progress notification (with a token), or its
    /// answer.
    async fn next(&mut self) -> Step {
        // `steps` stops at the answer: the call is there whenever a step is asked for.
        let call = self
            .call
            .as_mut()
            .expect("no step is asked for after the answer");
        let stop = &self.facade.inner.stop;
        loop {
            let session_ended = self
                .ended
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled);
            let event = tokio::select! {
                biased;
                // Without a session (stdio, 2026-07-28) this branch is never polled.
                () = cancelled(self.ended.as_ref()),
                    if self.ended.is_some() && !self.withdrawn && !self.was_cancelled => {
                    self.withdrawn = true;
                    call.withdraw();
                    continue;
                }
                event = call.next() => event,
                () = cancelled(self.cancelled.as_ref()),
                    if self.cancelled.is_some() && !self.was_cancelled && !self.withdrawn => {
                    // rmcp cancels a session's requests as the session ends: that is the
                    // session's end, not the client asking to cancel.
                    if session_ended {
                        self.withdrawn = true;
                        call.withdraw();
                    } else {
                        self.was_cancelled = true;
                        call.cancel();
                    }
                    continue;
                }
                () = stop.cancelled(), if !self.was_cancelled => {
                    self.was_cancelled = true;
                    call.cancel();
                    continue;
                }
            };
            let result = match event {
                Some(Event::Progress(progress)) => {
                    if let Some(token) = &self.token {
                        let mut param =
                            ProgressNotificationParam::new(token.clone(), progress.progress);
                        param.total = progress.total;
                        param.message = progress.message;
                        return Step::Progress(param);
                    }
                    continue;
                }
                Some(Event::Result(result)) => result,
                Some(_) => continue,
                None => ToolResult::ended_without_result(call.call_id()),
            };
            self.call = None;
            self.permits = None;
            let line = self.line.take().expect("a running call has its line");
            return Step::Done(self.facade.finish(&line, result));
        }
    }
}

impl Drop for Running {
    /// The client went away before the result (on the stateless path, its closed stream): the
    /// call is cancelled, and its result still classified and logged once it is in, with
    /// serve's bounds held until then.
    fn drop(&mut self) {
        let (Some(call), Some(line)) = (self.call.take(), self.line.take()) else {
            return;
        };
        call.cancel();
        let facade = self.facade.clone();
        let permits = self.permits.take();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let result = call.result().await;
                let _ = facade.finish(&line, result);
                drop(permits);
            });
        }
    }
}

/// Resolves when `token` is cancelled (never without one).
async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}
