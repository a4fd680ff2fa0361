//! The runtime: bindings ready to call, and the gate every call goes through.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use brain_config::model_api::Definitions;
use brain_config::policy::{Policies, Principal};
use brain_config::{BindingKind, HostConfig, ModelApi, ToolBinding, compile_schema};
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::approvals::signed::ApproverKeys;
use crate::approver::approval_ms;
use crate::auth::{OAuth, TokenStore, UserAgent};
use crate::call::{CallLimits, Keeper, Started};
use crate::event::{Event, ToolResult};
use crate::gate::{Gate, Gated};
use crate::http::HttpClient;
use crate::journal::{Journal, Journaling, Key, Ticket};
use crate::request::CallRequest;
use crate::session_token::{MIN_SESSION_TOKEN_KEY_BYTES, SESSION_TOKEN_KEY_ENV, SessionTokenKey};
use crate::telemetry::{Instruments, Peer};
use crate::tool::{Scope, Tool, Unavailable};
use crate::transport::Route;

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// Environment variables named in `token_env` or `env_from` are not set: each variable with
    /// where it is named (`token_env of NAME`, `env_from of NAME`, `inspect_session of NAME`);
    /// names only, never values.
    #[error("{}", missing_tokens_message(.0))]
    MissingTokens(BTreeMap<String, Vec<String>>),
    /// A token variable's value cannot be sent in an HTTP header.
    #[error(
        "the value of {var} (token_env of {tool:?}) cannot be sent as an HTTP header: it \
             holds a line break or another control character"
    )]
    InvalidToken {
        /// The variable.
        var: String,
        /// The binding.
        tool: String,
    },
    /// A binding's schema does not compile (configs loaded by brain-config never have one).
    #[error("{field} of {tool:?} is not a valid JSON Schema: {message}")]
    Schema {
        /// The binding.
        tool: String,
        /// `input_schema` or `output_schema`.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// `BRAIN_SESSION_TOKEN_KEY`, needed by bindings with `inspect_session`, is unusable.
    #[error(
        "{} (needed by inspect_session of {}): {error}",
        crate::session_token::SESSION_TOKEN_KEY_ENV,
        .tools.join(", ")
    )]
    SessionTokenKey {
        /// The bindings that send session inspection tokens.
        tools: Vec<String>,
        /// What is wrong with the key (never the key).
        error: crate::session_token::SessionTokenError,
    },
    /// A binding's `auth` cannot be used: a private key that does not parse, a DPoP key that
    /// cannot be made (the message names the variable, never its value).
    #[error("auth of {tool:?}: {message}")]
    Auth {
        /// The binding.
        tool: String,
        /// Why.
        message: String,
    },
    /// The host config's policies do not compile or check (a config loaded by brain-config
    /// never has such policies; one built in code, or whose policy texts were changed, may).
    #[error("{0}")]
    Policies(brain_config::Diagnostics),
    /// The `@approval` policies cannot be kept: no journal, or approvals outlive its retention.
    #[error("{0}")]
    Approvals(String),
    /// The config's `audit.public_keys` hold a key that is not Ed25519's (never once loaded).
    #[error("the config's audit.public_keys: {0}")]
    Audit(crate::audit::KeyError),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    /// A binding's `ca_file` cannot be read or holds no certificate.
    #[error(
        "ca_file of {tool:?}: {message}; name a PEM file of the CA that issued the server's certificate"
    )]
    CaFile {
        /// The binding.
        tool: String,
        /// Why.
        message: String,
    },
}

fn missing_tokens_message(missing: &BTreeMap<String, Vec<String>>) -> String {
    let list: Vec<String> = missing
        .iter()
        .map(|(var, uses)| format!("{var} ({})", uses.join(", ")))
        .collect();
    let key_hint = if missing.contains_key(SESSION_TOKEN_KEY_ENV) {
        format!(
            " ({SESSION_TOKEN_KEY_ENV}: a secret of at least {MIN_SESSION_TOKEN_KEY_BYTES} bytes \
             shared with the host's session inspection endpoint)"
        )
    } else {
        String::new()
    };
    format!(
        "environment variables not set: {}; set them to the servers' API keys and secrets{key_hint}",
        list.join("; ")
    )
}

/// Reads one environment variable.
type EnvLookup<'a> = Box<dyn Fn(&str) -> Option<String> + 'a>;

/// Builds a [`Runtime`].
pub struct RuntimeBuilder<'a> {
    config: &'a HostConfig,
    env: EnvLookup<'a>,
    allow_missing_tokens: bool,
    token_store: Option<Arc<dyn TokenStore>>,
    user_agent: Option<Arc<dyn UserAgent>>,
    journal: Option<Journal>,
    listing_ttl: Duration,
    /// False only for a benchmark's baseline ([`__bench::without_pin_verification`]).
    verify_pins: bool,
}

impl<'a> RuntimeBuilder<'a> {
    /// Journals every call in `journal`, so that a call id is sent at most once across retries,
    /// process restarts and (with a shared store) replicas: a retried call id gets the recorded
    /// result (`"replayed": true`), waits while the call runs elsewhere, or reports
    /// `unknown_outcome: true` when its process died; a call id reused for another call is
    /// refused. Without a journal, at most once holds within one call only: a host that retries
    /// a call id runs the tool again. The config's `audit`, if any, is applied to it
    /// ([`Journal::audit_config`]).
    pub fn journal(mut self, journal: Journal) -> Self {
        self.journal = Some(journal);
        self
    }

    /// How long a verified listing of an MCP server over HTTP is kept before the next call
    /// takes it again ([`DEFAULT_LISTING_TTL`](crate::DEFAULT_LISTING_TTL) by default, at most
    /// [`MAX_LISTING_TTL`](crate::MAX_LISTING_TTL), shorter where the server's `ttlMs` says
    /// so): a change to a pinned tool is refused from the next listing on.
    pub fn listing_ttl(mut self, ttl: Duration) -> Self {
        self.listing_ttl = ttl;
        self
    }

    /// Reads token variables through `env` instead of the process environment.
    pub fn env(mut self, env: impl Fn(&str) -> Option<String> + 'a) -> Self {
        self.env = Box::new(env);
        self
    }

    /// Builds even when token or `env_from` variables are missing; calls to those bindings are
    /// refused.
    pub fn allow_missing_tokens(mut self) -> Self {
        self.allow_missing_tokens = true;
        self
    }

    /// Where OAuth grants are read, refreshed and stored, shared with every process on the same
    /// store (one refresh per grant across them). Without one, the journal's store keeps them
    /// ([`Journal::grants`]); without a journal, this runtime's memory (user-delegated bindings
    /// then have only the tokens a [`UserAgent`] obtains).
    pub fn token_store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.token_store = Some(store);
        self
    }

    /// Takes the user to the authorization server when a user-delegated binding has no usable
    /// token; without one, such a call fails asking for `brain-harness login`.
    pub fn user_agent(mut self, agent: Arc<dyn UserAgent>) -> Self {
        self.user_agent = Some(agent);
        self
    }

    /// Compiles every schema, reads every token, builds the shared HTTP client.
    pub fn build(self) -> Result<Runtime, RuntimeError> {
        let mut tools = HashMap::new();
        let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let session_key = self.session_key(&mut missing)?;
        let http = self.shared_client()?;
        // One client (one pool) per CA file and kind of answer, shared by its bindings.
        let mut own_clients: HashMap<(String, bool), HttpClient> = HashMap::new();
        let instruments = Arc::new(Instruments::new());
        let refresher = crate::discover::refresher();
        let on_call = crate::discover::listing_on_call;
        let journal = match (self.journal.clone(), &self.config.audit) {
            (Some(journal), Some(audit)) => {
                Some(journal.audit_config(audit).map_err(RuntimeError::Audit)?)
            }
            (journal, _) => journal,
        }
        .map(Journal::start);
        let cleanups = TaskTracker::new();
        let mut pins = crate::pins::Pins::new(
            self.listing_ttl,
            journal.as_ref().map(|j| j.drift_sink(&cleanups)),
            refresher,
            on_call,
        );
        pins.enforced = self.verify_pins;
        let pins = Arc::new(pins);
        let token_store: Arc<dyn TokenStore> = match (&self.token_store, &self.journal) {
            (Some(store), _) => Arc::clone(store),
            (None, Some(journal)) => journal.grants(),
            (None, None) => Arc::new(crate::auth::MemoryTokenStore::default()),
        };
        // Bindings of one server with the same `auth` share its tokens.
        let mut oauths: HashMap<(String, String), Arc<OAuth>> = HashMap::new();
        for binding in &self.config.tools {
            let (input, output) = schemas(binding)?;
            let mut missing_auth = Vec::new();
            let (credentials, missing_token) = self.credentials(
                binding,
                &http,
                &token_store,
                &mut oauths,
                &mut missing,
                &mut missing_auth,
            )?;
            let (route, route_missing) =
                Route::of(binding, &*self.env, session_key.as_ref(), &mut missing);
            let unavailable = Unavailable::of(
                binding,
                missing_token,
                &missing_auth,
                route_missing.session_key,
                &route_missing.env,
            );
            let tool = Tool {
                binding: binding.clone(),
                input,
                output,
                credentials,
                unavailable,
                peer: Peer::of(binding),
                instruments: instruments.clone(),
                identity: crate::journal::identity(binding),
            };
            let http = match &binding.ca_file {
                Some(path) => Some(self.own_client(binding, path, &mut own_clients)?),
                None => None,
            };
            let users = match binding.auth.as_ref().filter(|a| a.on_behalf_of_users()) {
                Some(_) => Some(self.user_pools(binding)?),
                None => None,
            };
            let tool = Bound {
                tool: Arc::new(tool),
                route,
                http,
                users,
                limits: crate::limits::Plan::of(binding, self.config),
            };
            tools.insert(binding.name.clone(), Arc::new(tool));
        }
        if !missing.is_empty() && !self.allow_missing_tokens {
            return Err(RuntimeError::MissingTokens(missing));
        }
        // Spares start now when there is a tokio runtime to start them on, else after the first call.
        if tokio::runtime::Handle::try_current().is_ok() {
            for bound in tools.values() {
                bound.route.refill(&bound.tool, &pins);
            }
        }
        self.runtime(tools, instruments, pins, http, cleanups, journal)
    }

    /// The runtime of the bound `tools`, with the config's policies and approvals compiled
    /// into its gate, and what its calls share.
    fn runtime(
        &self,
        tools: HashMap<String, Arc<Bound>>,
        instruments: Arc<Instruments>,
        pins: Arc<crate::pins::Pins>,
        http: HttpClient,
        cleanups: TaskTracker,
        journal: Option<Arc<Journaling>>,
    ) -> Result<Runtime, RuntimeError> {
        let policies = Policies::compile(self.config)
            .map_err(|errors| {
                RuntimeError::Policies(brain_config::Diagnostics {
                    file: "the host config".to_owned(),
                    errors,
                })
            })?
            .map(Arc::new);
        let approval_ms = approval_ms(self.config, policies.as_deref(), journal.as_deref())
            .map_err(RuntimeError::Approvals)?;
        Ok(Runtime {
            inner: Arc::new(Inner {
                gate: Gate::new(
                    tools,
                    policies,
                    approval_ms,
                    Arc::new(ApproverKeys::from_config(self.config)),
                ),
                order: self.config.tools.iter().map(|b| b.name.clone()).collect(),
                definitions: Mutex::default(),
                instruments,
                pins,
                http,
                http_plain: crate::http::client(false, &[]).map_err(RuntimeError::Http)?,
                cleanups,
                keeper: match &journal {
                    Some(journaling) => Keeper::Store(Arc::clone(journaling)),
                    None => Keeper::Memory(Arc::default()),
                },
                journal,
            }),
        })
    }
}

/// `binding`'s input schema and output schema (if any), compiled.
fn schemas(
    binding: &ToolBinding,
) -> Result<(jsonschema::Validator, Option<jsonschema::Validator>), RuntimeError> {
    let compile = |field, schema: &Value| {
        compile_schema(schema).map_err(|error| RuntimeError::Schema {
            tool: binding.name.clone(),
            field,
            message: error.message,
        })
    };
    let input = compile("input_schema", &binding.input_schema)?;
    let output = match &binding.output_schema {
        Some(schema) => Some(compile("output_schema", schema)?),
        None => None,
    };
    Ok((input, output))
}

impl RuntimeBuilder<'_> {
    /// The session inspection token key, read once when a binding has `inspect_session`; a
    /// missing key is recorded in `missing` with the bindings that need it.
    fn session_key(
        &self,
        missing: &mut BTreeMap<String, Vec<String>>,
    ) -> Result<Option<Arc<SessionTokenKey>>, RuntimeError> {
        let tools: Vec<String> = self
            .config
            .tools
            .iter()
            .filter(|binding| inspects(binding))
            .map(|binding| binding.name.clone())
            .collect();
        if tools.is_empty() {
            return Ok(None);
        }
        let Some(value) = (self.env)(SESSION_TOKEN_KEY_ENV) else {
            missing
                .entry(SESSION_TOKEN_KEY_ENV.to_owned())
                .or_default()
                .extend(
                    tools
                        .iter()
                        .map(|name| format!("inspect_session of {name}")),
                );
            return Ok(None);
        };
        SessionTokenKey::new(value.as_bytes())
            .map(|key| Some(Arc::new(key)))
            .map_err(|error| RuntimeError::SessionTokenKey { tools, error })
    }
}

/// Whether calls to `binding` carry a session inspection token.
fn inspects(binding: &ToolBinding) -> bool {
    binding.inspect_session == Some(true) && binding.kind() != BindingKind::Mcp
}

/// A binding ready to call: its shared facts, and its transport's own value.
pub(crate) struct Bound {
    pub(crate) tool: Arc<Tool>,
    route: Route,
    /// Its own client, when it trusts a CA of its own (`ca_file`).
    http: Option<HttpClient>,
    /// On behalf of users: a pool per user, instead of `http` or the shared client.
    users: Option<crate::http::UserPools>,
    /// Its calls' buckets (`limits`, `tenant_limits`).
    limits: crate::limits::Plan,
}

impl Gated for Bound {
    fn tool(&self) -> &Tool {
        &self.tool
    }
}

/// A model API, and the tenant whose tools (or every tool).
type DefinitionsKey = (ModelApi, Option<String>);

pub(crate) struct Inner {
    /// The gate, which owns the bindings, the policies and the terms of approvals.
    pub(crate) gate: Gate<Bound>,
    /// The bindings' names in config order.
    order: Vec<String>,
    /// Each model API's definitions, per tenant, computed on first use.
    definitions: Mutex<HashMap<DefinitionsKey, Arc<Definitions>>>,
    /// The metric instruments, made from the global meter provider when the runtime was built.
    instruments: Arc<Instruments>,
    /// The verified listings of the servers, and the drift seen (`pins.rs`).
    pins: Arc<crate::pins::Pins>,
    http: HttpClient,
    /// For plain HTTP tools: no quick ACKs (their answers are one body, see `http.rs`).
    http_plain: HttpClient,
    /// The calls in flight, and the cleanups of ended calls (cancellation, session close, a
    /// stdio process's shutdown), run off the callers' path.
    cleanups: TaskTracker,
    /// The call journal, when the host keeps one.
    pub(crate) journal: Option<Arc<Journaling>>,
    /// Where the limits' buckets are kept: the journal's store, or this process's memory.
    keeper: Keeper,
}

/// Calls the tools of one host config. Cheap to clone; all clones share one HTTP pool.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.inner.gate.tools.keys().collect();
        names.sort();
        f.debug_struct("Runtime").field("tools", &names).finish()
    }
}

impl Runtime {
    /// A runtime for `config`, reading token variables from the environment; fails listing every
    /// variable that is not set.
    pub fn new(config: &HostConfig) -> Result<Runtime, RuntimeError> {
        Runtime::builder(config).build()
    }

    /// A builder, to read variables elsewhere or allow missing tokens.
    pub fn builder(config: &HostConfig) -> RuntimeBuilder<'_> {
        RuntimeBuilder {
            config,
            env: Box::new(|var| std::env::var(var).ok()),
            allow_missing_tokens: false,
            token_store: None,
            user_agent: None,
            journal: None,
            listing_ttl: crate::pins::DEFAULT_LISTING_TTL,
            verify_pins: true,
        }
    }

    /// Starts a call and returns its events: zero or more `tool.progress`, then one
    /// `tool.result`. A refused call does no I/O at all. Dropping the [`Call`] (or
    /// [`Call::cancel`]) cancels the request and closes the session (for a stdio binding, ends
    /// the server's process). Must run inside a tokio runtime.
    pub fn call(&self, mut request: CallRequest) -> Call {
        if request.from.is_some_and(|api| api != ModelApi::Mcp)
            && let Some(bound) = self.inner.gate.tools.get(&request.tool)
        {
            brain_config::model_api::unproject(
                &bound.tool.binding.input_schema,
                &mut request.arguments,
            );
        }
        let call_id = request
            .call_id
            .take()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let (sender, events) = mpsc::channel::<Box<Event>>(64);
        let cancel = CancellationToken::new();
        let withdrawal = Arc::new(crate::call::Withdrawal::default());
        let call = Call {
            call_id: call_id.clone(),
            events,
            cancel: cancel.clone(),
            withdrawal: Arc::clone(&withdrawal),
            _guard: cancel.clone().drop_guard(),
        };
        let parent = request
            .parent
            .clone()
            .unwrap_or_else(tracing::Span::current);
        let (bound, hold) = match self.inner.gate.check(&request, &call_id) {
            Ok(checked) => checked,
            Err(failure) => {
                self.refused(&request, &call_id, failure, &parent, &sender);
                return call;
            }
        };
        let tool = Arc::clone(&bound.tool);
        let span = crate::telemetry::call_span(
            &parent,
            &tool.binding,
            &tool.peer,
            &call_id,
            &request.scope.tenant_id,
        );
        let inner = Arc::clone(&self.inner);
        // Tracked with the cleanups: a call dropped or cancelled just before
        // `wait_for_cleanup` is waited for until its cleanup has been handed over.
        self.inner.cleanups.spawn(async move {
            let user = bound.user_client(request.subject_token.as_ref());
            let http = user.as_ref().unwrap_or_else(|| bound.client(&inner));
            let ticket = inner.journal.as_ref().map(|journaling| {
                let key = Key {
                    tenant: request.scope.tenant_id.clone(),
                    session: request.scope.session_id.clone(),
                    call_id: call_id.clone(),
                };
                let trace_id = crate::telemetry::trace_id(&span);
                let upstream = crate::store::UpstreamIdentity::of(
                    &tool.binding,
                    request.subject_token.as_ref(),
                );
                Ticket::new(
                    journaling,
                    key,
                    &tool,
                    &request.arguments,
                    trace_id,
                    upstream,
                )
                .held(hold)
            });
            let limits = CallLimits::of(
                &bound.limits,
                &tool.binding,
                &request.scope.tenant_id,
                &inner.keeper,
                &inner.instruments,
            );
            let started = Started {
                http,
                ticket: ticket.as_ref(),
                limits: limits.as_ref(),
                tool,
                call_id: &call_id,
                scope: &request.scope,
                subject: request.subject_token.as_ref(),
                arguments: &request.arguments,
                events: &sender,
                cancel,
                withdrawal: &withdrawal,
                cleanups: &inner.cleanups,
                span: &span,
                pins: &inner.pins,
            };
            let result = bound.route.call(started).await;
            let _ = sender.send(Box::new(Event::Result(result))).await;
        });
        call
    }

    /// A call the gate refused, before any I/O: counted, audited when a policy denied it,
    /// recorded as a refused span under `parent`, and its result sent to its events.
    fn refused(
        &self,
        request: &CallRequest,
        call_id: &str,
        failure: crate::outcome::Failure,
        parent: &tracing::Span,
        sender: &mpsc::Sender<Box<Event>>,
    ) {
        self.inner.instruments.refused(&request.tool);
        let (result, kind) = failure.into_result(call_id);
        if kind == crate::event::OutcomeKind::PolicyDenied
            && let (Some(journaling), Some(bound)) = (
                &self.inner.journal,
                self.inner.gate.tools.get(&request.tool),
            )
        {
            crate::journal::denial::record(journaling, request, call_id, &bound.tool);
        }
        crate::telemetry::refused_span(
            parent,
            &request.tool,
            call_id,
            &request.scope.tenant_id,
            kind.error_type(),
        );
        sender
            .try_send(Box::new(Event::Result(result)))
            .expect("a new channel has room");
    }

    /// Waits until every call started on this runtime has ended and its cleanup is done: the
    /// cancellation of an unanswered request and the close of its session, each bounded by 5 s,
    /// or the shutdown of a stdio server's process group (about 1 s at most), and the journal's
    /// record of a drift seen (`brain-harness drift`). A call still in
    /// progress is waited for (at most its timeout); drop or cancel the calls first to end them
    /// now. Then, when the journal has an audit key, it signs a checkpoint (a clean shutdown's).
    /// Call it before the process exits, or the server may never learn that a call was
    /// cancelled.
    pub async fn wait_for_cleanup(&self) {
        self.inner.cleanups.close();
        self.inner.cleanups.wait().await;
        if let Some(journaling) = &self.inner.journal {
            journaling.checkpoint().await;
        }
    }

    /// `api`'s tool definitions (`document` is `{"tools": [...]}`, ready to splice into a
    /// request) of the tools `tenant` may call, or of every tool (`None`), in config order, with
    /// the notes on what is not strict and why. Computed once per API and tenant, on first use:
    /// a call never pays for them.
    pub fn definitions(&self, api: ModelApi, tenant: Option<&str>) -> Arc<Definitions> {
        let key = (api, tenant.map(str::to_owned));
        let mut cache = self
            .inner
            .definitions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Arc::clone(cache.entry(key).or_insert_with(|| {
            let bindings = self
                .inner
                .order
                .iter()
                .filter_map(|name| self.inner.gate.tools.get(name))
                .map(|bound| &bound.tool.binding)
                .filter(|binding| {
                    tenant.is_none_or(|t| {
                        self.visible(&Principal::Tenant(t.to_owned()), &binding.name)
                    })
                });
            Arc::new(brain_config::model_api::definitions(api, bindings))
        }))
    }

    /// Whether `tools/list` (serve's, `brain-harness tools`) shows the binding `name` to
    /// `principal`: the tenant may call it, and, when the host config has policies, a `forbid`
    /// that never reads `context` does not apply and some `permit`'s scope matches. Never reads
    /// arguments: a tool whose calls a policy decides by their arguments stays listed.
    pub fn visible(&self, principal: &Principal, name: &str) -> bool {
        self.inner.gate.visible(principal, name)
    }

    /// The host config's policies, compiled, when it has any.
    pub fn policies(&self) -> Option<&Policies> {
        self.inner.gate.policies.as_deref()
    }

    /// Why calls to the binding `name` are refused before any I/O whatever their arguments, if
    /// they are: its token, `env_from` or session token key variables were not set (with
    /// [`RuntimeBuilder::allow_missing_tokens`]). `None` for a callable or unknown binding.
    pub fn unavailable(&self, name: &str) -> Option<String> {
        let bound = self.inner.gate.tools.get(name)?;
        bound.tool.unavailable.as_ref().map(|u| u.why.clone())
    }

    /// Starts a call with typed arguments (a generated `ToolCall`); see [`Runtime::call`].
    pub fn call_typed(
        &self,
        call: &impl crate::typed::TypedCall,
        scope: Scope,
        call_id: Option<String>,
    ) -> Call {
        self.call(
            CallRequest::new(call.tool(), scope, call.arguments()).with_optional_call_id(call_id),
        )
    }

    /// The bindings, in name order.
    pub fn bindings(&self) -> Vec<&ToolBinding> {
        let mut bindings: Vec<&ToolBinding> = self
            .inner
            .gate
            .tools
            .values()
            .map(|bound| &bound.tool.binding)
            .collect();
        bindings.sort_by(|a, b| a.name.cmp(&b.name));
        bindings
    }
}

/// A call in progress: a stream of its [`Event`]s, ending with one `tool.result`.
pub struct Call {
    call_id: String,
    events: mpsc::Receiver<Box<Event>>,
    cancel: CancellationToken,
    withdrawal: Arc<crate::call::Withdrawal>,
    _guard: DropGuard,
}

impl Call {
    /// The call's id (also its progress token).
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Cancels the call; the stream still ends with its `tool.result`.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the result, skipping progress.
    pub async fn result(mut self) -> ToolResult {
        while let Some(event) = self.events.recv().await {
            if let Event::Result(result) = *event {
                return result;
            }
        }
        ToolResult::ended_without_result(&self.call_id)
    }

    /// Withdraws the call: cancels it if it has not been claimed as sent yet (its result is then
    /// `cancelled`, nothing sent, nothing journaled as sent); a call already sent runs on to its
    /// result, which the journal keeps for a retry with the same call id. For a front end whose
    /// client went away without asking to cancel (an MCP session that ended).
    pub fn withdraw(&self) {
        if self.withdrawal.withdraw() {
            self.cancel.cancel();
        }
    }
}

impl Stream for Call {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.events
            .poll_recv(cx)
            .map(|event| event.map(|event| *event))
    }
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("call_id", &self.call_id)
            .finish()
    }
}

/// Not API: the runtime's own work for one call without the network, for benchmarks (P4).
#[doc(hidden)]
pub mod __bench;
mod clients;
mod credentials;
