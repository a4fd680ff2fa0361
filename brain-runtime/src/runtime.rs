//! The runtime: bindings ready to call, and the gate every call goes through.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use brain_config::{BindingKind, HostConfig, ToolBinding, compile_schema};
use futures_util::Stream;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::event::{Event, ToolResult};
use crate::http::HttpClient;
use crate::outcome::Failure;
use crate::session::{CallState, Exchange};
use crate::stateless::{ParamHeader, param_headers};
use crate::wire::{Endpoint, PROTOCOL_HEADER, SESSION_HEADER, Token};

/// Bound on the requests that clean up after a call (cancel, DELETE) and on answers to server
/// requests.
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// A binding ready to call: its schemas compiled once, its token read once.
pub(crate) struct Tool {
    pub(crate) binding: ToolBinding,
    input: jsonschema::Validator,
    pub(crate) output: Option<jsonschema::Validator>,
    token: Option<Token>,
    /// Arguments promoted to `Mcp-Param-*` headers (2026-07-28).
    pub(crate) param_headers: Vec<ParamHeader>,
    /// `token_env` is set but the variable was not (only with
    /// [`RuntimeBuilder::allow_missing_tokens`]).
    missing_token: bool,
}

impl Tool {
    /// How many raw response bytes a result may take before brain stops reading: JSON escaping
    /// can take 6 bytes per byte of text (`\u0000`), plus room for the envelope.
    pub(crate) fn raw_limit(&self) -> u64 {
        self.binding.max_output_bytes.saturating_mul(6) + 64 * 1024
    }
}

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// Environment variables named in `token_env` are not set (names only, never values).
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
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
}

fn missing_tokens_message(missing: &BTreeMap<String, Vec<String>>) -> String {
    let list: Vec<String> = missing
        .iter()
        .map(|(var, tools)| format!("{var} (token_env of {})", tools.join(", ")))
        .collect();
    format!(
        "environment variables not set: {}; set them to the servers' API keys",
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
}

impl<'a> RuntimeBuilder<'a> {
    /// Reads token variables through `env` instead of the process environment.
    pub fn env(mut self, env: impl Fn(&str) -> Option<String> + 'a) -> Self {
        self.env = Box::new(env);
        self
    }

    /// Builds even when token variables are missing; calls to those bindings are refused.
    pub fn allow_missing_tokens(mut self) -> Self {
        self.allow_missing_tokens = true;
        self
    }

    /// Compiles every schema, reads every token, builds the shared HTTP client.
    pub fn build(self) -> Result<Runtime, RuntimeError> {
        let mut tools = HashMap::new();
        let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for binding in &self.config.tools {
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
            let (token, missing_token) = match &binding.token_env {
                None => (None, false),
                Some(var) => match (self.env)(var) {
                    Some(value) => {
                        let token =
                            Token::new(&value).ok_or_else(|| RuntimeError::InvalidToken {
                                var: var.clone(),
                                tool: binding.name.clone(),
                            })?;
                        (Some(token), false)
                    }
                    None => {
                        missing
                            .entry(var.clone())
                            .or_default()
                            .push(binding.name.clone());
                        (None, true)
                    }
                },
            };
            let tool = Tool {
                param_headers: param_headers(&binding.input_schema),
                binding: binding.clone(),
                input,
                output,
                token,
                missing_token,
            };
            tools.insert(binding.name.clone(), Arc::new(tool));
        }
        if !missing.is_empty() && !self.allow_missing_tokens {
            return Err(RuntimeError::MissingTokens(missing));
        }
        Ok(Runtime {
            inner: Arc::new(Inner {
                tools,
                http: http_client()?,
            }),
        })
    }
}

/// One shared, pooled HTTP client (see `http.rs`): rustls (ring), redirects never followed (the
/// token only goes to the configured origin), no proxies, TCP_NODELAY and quick ACKs,
/// `localhost` always loopback.
pub(crate) fn http_client() -> Result<HttpClient, RuntimeError> {
    crate::http::client().map_err(RuntimeError::Http)
}

struct Inner {
    tools: HashMap<String, Arc<Tool>>,
    http: HttpClient,
}

/// Calls the tools of one host config. Cheap to clone; all clones share one HTTP pool.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.inner.tools.keys().collect();
        names.sort();
        f.debug_struct("Runtime").field("tools", &names).finish()
    }
}

/// Who is calling: the session's identity, sent to the server as `_meta["brain.dev/scope"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The tenant the session belongs to; checked against the binding's `tenants`.
    pub tenant_id: String,
    /// The agent session.
    pub session_id: String,
}

/// One call to make.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The binding's name (the name the model sees).
    pub tool: String,
    /// Who is calling.
    pub scope: Scope,
    /// The call's id, also the progress token; a UUID is generated when absent.
    pub call_id: Option<String>,
    /// The arguments, validated against the binding's `input_schema`.
    pub arguments: Value,
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
        }
    }

    /// Starts a call and returns its events: zero or more `tool.progress`, then one
    /// `tool.result`. A refused call does no I/O at all. Dropping the [`Call`] (or
    /// [`Call::cancel`]) cancels the request and closes the session. Must run inside a tokio
    /// runtime.
    pub fn call(&self, request: CallRequest) -> Call {
        let call_id = request
            .call_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let (sender, events) = mpsc::channel(64);
        let cancel = CancellationToken::new();
        let call = Call {
            call_id: call_id.clone(),
            events,
            cancel: cancel.clone(),
            _guard: cancel.clone().drop_guard(),
        };
        let tool = match self.check(&request.tool, &request.scope, &request.arguments) {
            Ok(tool) => tool,
            Err(failure) => {
                let result = ToolResult::failure(&call_id, false, failure.message);
                sender
                    .try_send(Event::Result(result))
                    .expect("a new channel has room");
                return call;
            }
        };
        let http = self.inner.http.clone();
        tokio::spawn(async move {
            let result = run(
                http,
                tool,
                &call_id,
                &request.scope,
                &request.arguments,
                &sender,
                cancel,
            )
            .await;
            let _ = sender.send(Event::Result(result)).await;
        });
        call
    }

    /// Starts a call with typed arguments (a generated `ToolCall`); see [`Runtime::call`].
    pub fn call_typed(
        &self,
        call: &impl crate::TypedCall,
        scope: Scope,
        call_id: Option<String>,
    ) -> Call {
        self.call(CallRequest {
            tool: call.tool().to_owned(),
            scope,
            call_id,
            arguments: call.arguments(),
        })
    }

    /// The gate: the tool exists and is callable, the tenant is allowed, the token is there, the
    /// arguments validate.
    fn check(&self, name: &str, scope: &Scope, arguments: &Value) -> Result<Arc<Tool>, Failure> {
        let tool = self.inner.tools.get(name).ok_or_else(|| {
            Failure::not_sent(format!("refused: there is no tool named {name:?}"))
        })?;
        let binding = &tool.binding;
        if !binding.tenants.contains(&scope.tenant_id) {
            return Err(Failure::not_sent(format!(
                "refused: tenant {:?} may not call {name:?}",
                scope.tenant_id
            )));
        }
        if binding.kind() != BindingKind::Mcp {
            return Err(Failure::not_sent(format!(
                "refused: {name:?} is an {} tool; brain-runtime calls MCP tools only",
                binding.kind().as_str().to_uppercase()
            )));
        }
        if tool.missing_token {
            return Err(Failure::not_sent(format!(
                "refused: the token variable {} is not set",
                binding.token_env.as_deref().unwrap_or_default()
            )));
        }
        let errors: Vec<String> = tool
            .input
            .iter_errors(arguments)
            .take(5)
            .map(|error| {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at `{at}`: {error}")
            })
            .collect();
        if !errors.is_empty() {
            return Err(Failure::not_sent(format!(
                "refused: the arguments do not match the input schema of {name:?}: {}",
                errors.join("; ")
            )));
        }
        Ok(Arc::clone(tool))
    }

    /// The bindings, in name order.
    pub fn bindings(&self) -> Vec<&ToolBinding> {
        let mut bindings: Vec<&ToolBinding> = self
            .inner
            .tools
            .values()
            .map(|tool| &tool.binding)
            .collect();
        bindings.sort_by(|a, b| a.name.cmp(&b.name));
        bindings
    }
}

/// Runs one call to its result: the exchange, bounded by the timeout and by cancellation, then
/// the cleanup, off the caller's path.
async fn run(
    http: HttpClient,
    tool: Arc<Tool>,
    call_id: &str,
    scope: &Scope,
    arguments: &Value,
    events: &mpsc::Sender<Event>,
    cancel: CancellationToken,
) -> ToolResult {
    let state = Mutex::new(CallState::default());
    let exchange = Exchange {
        endpoint: Endpoint {
            http: &http,
            url: &tool.binding.url,
            token: tool.token.as_ref(),
        },
        tool: &tool,
        call_id,
        scope,
        arguments,
        events,
        state: &state,
    };
    let timeout = Duration::from_secs(tool.binding.timeout_seconds);
    let started = std::time::Instant::now();
    tracing::debug!(
        tool = %tool.binding.name,
        call_id,
        url = %tool.binding.url,
        revision = tool.binding.protocol_version(),
        "call started"
    );
    let interrupted = |what: String| {
        let sent = state.lock().map(|s| s.call_sent).unwrap_or(true);
        if sent {
            Failure::sent(format!(
                "{what}; the request was cancelled and the tool may have run"
            ))
        } else {
            Failure::not_sent(format!("{what} before tools/call was sent"))
        }
    };
    let outcome = tokio::select! {
        outcome = exchange.run() => outcome,
        () = tokio::time::sleep(timeout) => {
            Err(interrupted(format!("the call timed out after {}s", timeout.as_secs())))
        }
        () = cancel.cancelled() => Err(interrupted("the call was interrupted".to_owned())),
    };
    let state = state.into_inner().unwrap_or_else(|p| p.into_inner());
    tokio::spawn(clean_up(http.clone(), Arc::clone(&tool), state));
    let result = outcome.unwrap_or_else(|failure| {
        ToolResult::failure(call_id, failure.unknown_outcome, failure.message)
    });
    tracing::debug!(
        call_id,
        is_error = result.is_error,
        unknown_outcome = result.unknown_outcome,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "call ended"
    );
    result
}

/// Cancels an unanswered `tools/call` and closes the session, bounded in time.
async fn clean_up(http: HttpClient, tool: Arc<Tool>, state: CallState) {
    let Some(session) = state
        .session_id
        .and_then(|s| HeaderValue::from_str(&s).ok())
    else {
        return;
    };
    let endpoint = Endpoint {
        http: &http,
        url: &tool.binding.url,
        token: tool.token.as_ref(),
    };
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static(SESSION_HEADER), session);
    headers.insert(
        HeaderName::from_static(PROTOCOL_HEADER),
        HeaderValue::from_str(tool.binding.protocol_version()).expect("header-safe"),
    );
    let work = async {
        if state.call_sent && !state.answered {
            let cancelled = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1, "reason": "cancelled by brain (timeout or interruption)"}
            });
            let _ = endpoint.post(&cancelled, headers.clone()).await;
        }
        endpoint.delete(headers).await;
    };
    let _ = tokio::time::timeout(CONTROL_TIMEOUT, work).await;
}

/// A call in progress: a stream of its [`Event`]s, ending with one `tool.result`.
pub struct Call {
    call_id: String,
    events: mpsc::Receiver<Event>,
    cancel: CancellationToken,
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
            if let Event::Result(result) = event {
                return result;
            }
        }
        ToolResult::failure(
            &self.call_id,
            true,
            "the call ended without a result".into(),
        )
    }
}

impl Stream for Call {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.events.poll_recv(cx)
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
pub mod __bench {
    use serde_json::{Map, Value};

    use super::{CallRequest, Runtime};
    use crate::event::ToolResult;
    use crate::session::{Round, call_message};
    use crate::stateless;

    /// The gate (tool, tenant, token, argument validation), the `tools/call` message as the
    /// binding's revision sends it (its `_meta`, and for 2026-07-28 its headers) serialized to
    /// bytes, and the conversion of `result` into a `tool.result` — everything a call does but
    /// the I/O. `None` when the gate refuses.
    pub fn per_call_work(
        runtime: &Runtime,
        request: &CallRequest,
        result: &Value,
    ) -> Option<ToolResult> {
        let tool = runtime
            .check(&request.tool, &request.scope, &request.arguments)
            .ok()?;
        let call_id = request.call_id.as_deref().unwrap_or("bench");
        let binding = &tool.binding;
        let meta = if binding.protocol_version() == stateless::REVISION {
            let name = binding.mcp_tool.as_deref().unwrap_or_default();
            std::hint::black_box(stateless::headers(
                name,
                &request.arguments,
                &tool.param_headers,
            ));
            stateless::meta()
        } else {
            Map::new()
        };
        let message = call_message(
            binding,
            call_id,
            &request.scope,
            &request.arguments,
            meta,
            &Round::first(),
        );
        std::hint::black_box(serde_json::to_vec(&message).ok()?);
        crate::convert::convert(
            call_id,
            result,
            tool.output.as_ref(),
            binding.max_output_bytes,
        )
        .ok()
    }
}
