//! Discovery: the tools a server offers now, as it describes them, and the MCP revision it
//! speaks. `cargo xtask discover` turns them into bindings; `--check` compares them with pinned
//! ones.
//!
//! brain asks `server/discover` at 2026-07-28 first; a server that speaks that revision is
//! listed without a session. Any other answer falls back to a 2025-11-25 session: initialize,
//! `tools/list` page by page, DELETE.

use std::time::Duration;

use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::auth::{Authorizing, Credentials, OAuth, Token};
use crate::http::HttpError;
use crate::mcp::{UNSUPPORTED_PROTOCOL_VERSION, stateless_meta};
use crate::revision::{PROTOCOL_HEADER, STATELESS};
use crate::transport::session::{self, OpenError};
use crate::wire::{Endpoint, Messages, SESSION_HEADER, error_chain};

/// Bound on one discovery response body (128 tools with large schemas fit many times over).
const RESPONSE_LIMIT: u64 = 64 * 1024 * 1024;
/// At most this many `tools/list` pages.
const MAX_PAGES: usize = 1000;
/// Bound on the body of an HTTP error response read for its JSON-RPC error.
const ERROR_BODY_LIMIT: u64 = 64 * 1024;
/// The revisions discovery negotiates, newest first.
const SPOKEN: &[&str] = &[
    STATELESS,
    crate::revision::SESSIONS[0],
    crate::revision::SESSIONS[1],
    crate::revision::SESSIONS[2],
    crate::revision::SESSIONS[3],
];

/// What a server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// The revision the server speaks with brain (`2026-07-28`, or the one it negotiated).
    pub protocol_version: String,
    /// Its tools, as `tools/list` describes them (every page), in the server's order.
    pub tools: Vec<Value>,
    /// The server declared that it runs tool calls as MCP tasks: `tasks.requests.tools.call` at
    /// 2025-11-25, the tasks extension (`io.modelcontextprotocol/tasks`) at 2026-07-28.
    pub server_tasks: bool,
}

/// Where to discover, and how.
#[derive(Debug, Clone)]
pub struct DiscoverOptions {
    /// The server's Streamable HTTP endpoint.
    pub url: String,
    /// The token variable's name and value, when the server needs one.
    pub token: Option<(String, String)>,
    /// OAuth, when the server requires it (instead of `token`).
    pub auth: Option<DiscoverAuth>,
    /// Bound on the whole discovery.
    pub timeout: Duration,
    /// A PEM file of CA certificates trusted for the server beside the platform's roots.
    pub ca_file: Option<std::path::PathBuf>,
}

/// How discovery obtains OAuth tokens: a binding's `auth`, the values of the variables it
/// names, and for user-delegated tokens the tenant, the store and the user agent.
#[derive(Clone)]
pub struct DiscoverAuth {
    /// The `auth` the bindings will carry.
    pub config: brain_config::Auth,
    /// Values of the variables `config` names (by name).
    pub secrets: std::collections::BTreeMap<String, String>,
    /// Whose tokens (`authorization_code`, `token_exchange`).
    pub tenant: String,
    /// The user's own token, for a binding on behalf of users (`token_exchange`): discovery
    /// lists the server as that user.
    pub subject: Option<crate::subject::SubjectToken>,
    /// Where tokens are read and written (the state's store); else this process's memory.
    pub store: Option<std::sync::Arc<dyn crate::auth::TokenStore>>,
    /// Takes the user to the authorization server when no stored token works.
    pub agent: Option<std::sync::Arc<dyn crate::auth::UserAgent>>,
}

impl std::fmt::Debug for DiscoverAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoverAuth")
            .field("config", &self.config)
            .field("secrets", &"<redacted>")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

/// Why discovery failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// The server could not be reached.
    #[error("could not connect to {url}: {message}")]
    Connect {
        /// The endpoint.
        url: String,
        /// Why.
        message: String,
    },
    /// The server refused the token.
    #[error("the server refused the token in {var} (HTTP {status})")]
    TokenRefused {
        /// The variable that held it.
        var: String,
        /// 401 or 403.
        status: u16,
    },
    /// The server wants a token and none was given.
    #[error(
        "the server wants a token (HTTP {status}): name the variable that holds an API key with \
         --token-env, or, for a server that requires OAuth, give the bindings' auth with --auth"
    )]
    TokenRequired {
        /// 401 or 403.
        status: u16,
    },
    /// No OAuth token could be obtained.
    #[error("authorization failed: {0}")]
    Auth(String),
    /// The token's value cannot be sent in a header.
    #[error("the value of {0} cannot be sent as an HTTP header (it holds a control character)")]
    InvalidToken(String),
    /// The server speaks none of the revisions brain speaks.
    #[error(
        "the server rejected protocol revision {requested} and supports {supported:?}; brain speaks {spoken:?}"
    )]
    UnsupportedVersion {
        /// The revision brain asked for.
        requested: String,
        /// The revisions the server said it supports.
        supported: Vec<String>,
        /// The revisions brain speaks.
        spoken: &'static [&'static str],
    },
    /// The server answered, but not as MCP says.
    #[error("{0}")]
    Protocol(String),
    /// A stdio server could not be started, or failed before listing its tools.
    #[error("{0}")]
    Process(String),
    /// A variable the binding names (its `token_env`, an `env_from`) is not set here.
    #[error("{0}")]
    Unset(String),
    /// The whole discovery took longer than allowed.
    #[error("discovery took longer than {0} s; is {1} an MCP endpoint that answers?")]
    Timeout(u64, String),
}

/// Lists every tool of the server at `options.url`.
pub async fn discover(options: &DiscoverOptions) -> Result<Discovery, DiscoverError> {
    let roots = match &options.ca_file {
        Some(path) => crate::http::read_roots(path).map_err(DiscoverError::Protocol)?,
        None => Vec::new(),
    };
    let http = crate::http::client(true, &roots).map_err(|error| {
        DiscoverError::Protocol(format!("cannot build the HTTP client: {error}"))
    })?;
    let credentials = match (&options.token, &options.auth) {
        (Some((var, value)), _) => Credentials::Static(
            Token::new(value).ok_or_else(|| DiscoverError::InvalidToken(var.clone()))?,
        ),
        (None, Some(auth)) => {
            let env = |var: &str| auth.secrets.get(var).cloned();
            let oauth = OAuth::new(
                "discovery",
                &options.url,
                auth.config.clone(),
                http.clone(),
                &env,
                auth.store.clone().unwrap_or_else(|| {
                    std::sync::Arc::new(crate::auth::MemoryTokenStore::default())
                }),
                auth.agent.clone(),
            )
            .map_err(DiscoverError::Auth)?;
            Credentials::OAuth(std::sync::Arc::new(oauth))
        }
        (None, None) => Credentials::None,
    };
    let client = Client {
        endpoint: Endpoint {
            http: &http,
            url: &options.url,
            auth: Authorizing {
                credentials: &credentials,
                tenant: options
                    .auth
                    .as_ref()
                    .map_or("", |auth| auth.tenant.as_str()),
                subject: options.auth.as_ref().and_then(|auth| auth.subject.as_ref()),
            },
            departure: Default::default(),
        },
        token_var: options.token.as_ref().map(|(var, _)| var.as_str()),
        oauth: options.auth.is_some(),
    };
    let work = async {
        match client.stateless().await? {
            Some(discovery) => Ok(discovery),
            None => client.with_session().await,
        }
    };
    tokio::time::timeout(options.timeout, work)
        .await
        .map_err(|_| DiscoverError::Timeout(options.timeout.as_secs(), options.url.clone()))?
}

/// Lists the tools of `server` as its bindings reach it: over Streamable HTTP with the token in
/// the variable `token_env` names or OAuth tokens obtained with `auth`, or from a process
/// started with the binding's environment (each `env_from` variable read from this process's).
pub async fn list_server(
    server: &brain_config::discovery::Server,
    token_env: Option<&str>,
    auth: Option<DiscoverAuth>,
    ca_file: Option<&str>,
    timeout: Duration,
) -> Result<Discovery, DiscoverError> {
    match server {
        brain_config::discovery::Server::Url(url) => {
            let token = match token_env {
                None => None,
                Some(var) => match std::env::var(var) {
                    Ok(value) if !value.is_empty() => Some((var.to_owned(), value)),
                    _ => {
                        return Err(DiscoverError::Unset(format!(
                            "{var} is not set: export it with the server's API key (brain \
                             reads the token from the variable named by token_env)"
                        )));
                    }
                },
            };
            discover(&DiscoverOptions {
                url: url.clone(),
                token,
                auth,
                timeout,
                ca_file: ca_file.map(std::path::PathBuf::from),
            })
            .await
        }
        brain_config::discovery::Server::Command {
            command,
            env,
            env_from,
            sandbox,
        } => {
            let mut vars: Vec<(String, String)> =
                env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let mut secrets = Vec::new();
            let mut missing = Vec::new();
            for (child, host) in env_from {
                match std::env::var(host) {
                    Ok(value) => {
                        secrets.push(value.clone());
                        vars.push((child.clone(), value));
                    }
                    Err(_) => missing.push(host.as_str()),
                }
            }
            if !missing.is_empty() {
                return Err(DiscoverError::Unset(format!(
                    "not set: {} (named by --env-from / env_from); export them with the values \
                     the server needs",
                    missing.join(", ")
                )));
            }
            discover_command(&CommandOptions {
                command: command.clone(),
                env: vars,
                secrets,
                timeout,
                sandbox: brain_config::Sandbox::rules(sandbox.as_ref()),
            })
            .await
        }
    }
}

/// Where to discover a stdio server: how to start it.
#[derive(Clone)]
pub struct CommandOptions {
    /// Program, then arguments (never run through a shell).
    pub command: Vec<String>,
    /// The process's variables beyond `PATH`, `HOME` and `LANG`: literal ones and resolved
    /// secrets alike.
    pub env: Vec<(String, String)>,
    /// Values to redact from anything reported (the resolved `env_from` secrets).
    pub secrets: Vec<String>,
    /// Bound on the whole discovery.
    pub timeout: Duration,
    /// How the kernel confines the process (`None`: not at all); see
    /// [`brain_config::Sandbox::rules`].
    pub sandbox: Option<brain_config::SandboxRules>,
}

impl std::fmt::Debug for CommandOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandOptions")
            .field("command", &self.command)
            .field("env", &"<redacted>")
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Lists every tool of the stdio server `options.command` starts: one process, a session, every
/// page of `tools/list`, then the process shut down (stdin closed, then its group signalled).
pub async fn discover_command(options: &CommandOptions) -> Result<Discovery, DiscoverError> {
    let launch = crate::transport::stdio::Launch {
        command: options.command.clone(),
        env: options.env.clone(),
        secrets: options.secrets.clone(),
        cwd: None,
        sandbox: options.sandbox.clone(),
    };
    let shown = options.command.join(" ");
    let listed = tokio::time::timeout(options.timeout, crate::transport::stdio::list_tools(launch))
        .await
        .map_err(|_| {
            DiscoverError::Process(format!(
                "discovery took longer than {} s; is `{shown}` an MCP server that speaks stdio?",
                options.timeout.as_secs()
            ))
        })?;
    let (revision, server_tasks, tools) = listed.map_err(DiscoverError::Process)?;
    Ok(Discovery {
        protocol_version: revision.to_owned(),
        tools,
        server_tasks,
    })
}

use crate::pins::CacheHints;

/// What a call's verification lists: every tool the server at `endpoint` lists now, at the
/// revision `pinned` (a session at a session revision, none at 2026-07-28; unpinned, a session,
/// or none when the server refuses sessions), with the list's cache hints.
pub(crate) async fn listing(
    endpoint: &Endpoint<'_>,
    pinned: Option<&str>,
) -> Result<(Vec<Value>, CacheHints), DiscoverError> {
    let client = Client::listing(endpoint);
    let stateless =
        || client.list_pages(|| stateless_headers("tools/list"), Some(stateless_meta()));
    if pinned == Some(STATELESS) {
        return stateless().await;
    }
    match client.session_listing(pinned).await {
        Ok((discovery, hints)) => Ok((discovery.tools, hints)),
        Err(DiscoverError::UnsupportedVersion { supported, .. })
            if pinned.is_none() && supported.iter().any(|v| v == STATELESS) =>
        {
            stateless().await
        }
        Err(error) => Err(error),
    }
}

/// Every tool the server lists now, on a call's own session (`session`: its headers) or, at
/// 2026-07-28 (`None`), without one, with the list's cache hints.
pub(crate) async fn listing_on(
    endpoint: &Endpoint<'_>,
    session: Option<&HeaderMap>,
) -> Result<(Vec<Value>, CacheHints), DiscoverError> {
    let client = Client::listing(endpoint);
    match session {
        Some(headers) => client.list_pages(|| headers.clone(), None).await,
        None => {
            client
                .list_pages(|| stateless_headers("tools/list"), Some(stateless_meta()))
                .await
        }
    }
}

/// [`listing_on`], as the runtime's verification takes it (`pins.rs`).
pub(crate) fn listing_on_call<'a>(
    endpoint: &'a Endpoint<'a>,
    session: Option<&'a HeaderMap>,
) -> futures_util::future::BoxFuture<'a, Result<(Vec<Value>, CacheHints), String>> {
    Box::pin(async move {
        listing_on(endpoint, session)
            .await
            .map_err(|error| error.to_string())
    })
}

/// How a runtime refreshes an upstream's verified listing off the call path: a session of its
/// own at the binding's revision (`pins.rs`).
pub(crate) fn refresher() -> crate::pins::Lister {
    std::sync::Arc::new(|http, tool, tenant, subject| {
        Box::pin(async move {
            let endpoint = Endpoint {
                http: &http,
                url: tool.binding.url.as_deref().unwrap_or_default(),
                auth: Authorizing {
                    credentials: &tool.credentials,
                    tenant: &tenant,
                    subject: subject.as_ref(),
                },
                departure: Default::default(),
            };
            listing(&endpoint, tool.binding.pinned_revision())
                .await
                .map_err(|error| error.to_string())
        })
    })
}

struct Client<'a> {
    endpoint: Endpoint<'a>,
    token_var: Option<&'a str>,
    /// Tokens come from OAuth.
    oauth: bool,
}

impl<'a> Client<'a> {
    /// A client for a call's verification, on the call's endpoint.
    fn listing(endpoint: &Endpoint<'a>) -> Client<'a> {
        Client {
            endpoint: Endpoint {
                http: endpoint.http,
                url: endpoint.url,
                auth: endpoint.auth,
                departure: Default::default(),
            },
            token_var: None,
            oauth: false,
        }
    }

    /// `server/discover` at 2026-07-28; `None` when the server does not speak it.
    ///
    /// A server that rejects the revision (`-32022`) while listing it among the supported ones
    /// is asked once more; one that lists only 2025-11-25 gets a session.
    async fn stateless(&self) -> Result<Option<Discovery>, DiscoverError> {
        let mut asked_again = false;
        let result = loop {
            let request = json!({
                "jsonrpc": "2.0", "id": 1, "method": "server/discover",
                "params": {"_meta": stateless_meta()}
            });
            match self
                .request(&request, stateless_headers("server/discover"))
                .await
            {
                Ok(result) => break result,
                Err(DiscoverError::UnsupportedVersion { supported, .. })
                    if supported.iter().any(|v| v == STATELESS) && !asked_again =>
                {
                    asked_again = true;
                }
                Err(DiscoverError::UnsupportedVersion { supported, .. })
                    if supported.iter().any(|v| SPOKEN.contains(&v.as_str())) =>
                {
                    return Ok(None);
                }
                Err(
                    error @ (DiscoverError::TokenRefused { .. }
                    | DiscoverError::TokenRequired { .. }
                    | DiscoverError::Auth(_)
                    | DiscoverError::Connect { .. }
                    | DiscoverError::UnsupportedVersion { .. }),
                ) => return Err(error),
                Err(_) => return Ok(None),
            }
        };
        let speaks = result
            .get("supportedVersions")
            .and_then(Value::as_array)
            .is_some_and(|versions| versions.iter().any(|v| v == STATELESS));
        if !speaks {
            return Ok(None);
        }
        let tools = self
            .list_tools(|| stateless_headers("tools/list"), Some(stateless_meta()))
            .await?;
        Ok(Some(Discovery {
            protocol_version: STATELESS.to_owned(),
            tools,
            server_tasks: crate::mcp::declares_tasks(&result["capabilities"]),
        }))
    }

    /// A session, opened as a call's is (`transport::session`): initialize offering the newest
    /// session revision, `notifications/initialized`, every page of `tools/list`, DELETE.
    async fn with_session(&self) -> Result<Discovery, DiscoverError> {
        Ok(self.session_listing(None).await?.0)
    }

    /// A session at `pinned` (any session revision when `None`), every page of `tools/list`,
    /// DELETE.
    async fn session_listing(
        &self,
        pinned: Option<&str>,
    ) -> Result<(Discovery, CacheHints), DiscoverError> {
        let (_, opened) = session::initialize(&self.endpoint, pinned, &tracing::Span::none()).await;
        let opened = opened.map_err(|error| self.open_error(error, "initialize"))?;
        let headers = opened.headers;
        session::initialized(&self.endpoint, &headers)
            .await
            .map_err(|error| self.open_error(error, "notifications/initialized"))?;
        let listed = self.list_pages(|| headers.clone(), None).await;
        if headers.contains_key(SESSION_HEADER) {
            session::close(&self.endpoint, headers.clone(), None).await;
        }
        let (tools, hints) = listed?;
        let discovery = Discovery {
            protocol_version: opened.revision.to_owned(),
            tools,
            server_tasks: opened.tasks,
        };
        Ok((discovery, hints))
    }

    /// Discovery's error for a session that could not be opened.
    fn open_error(&self, error: OpenError, method: &str) -> DiscoverError {
        match error {
            OpenError::Post(HttpError::Auth(why)) => DiscoverError::Auth(why),
            OpenError::Post(error) => DiscoverError::Connect {
                url: self.endpoint.url.to_owned(),
                message: error_chain(&error),
            },
            OpenError::Status { status, .. } if matches!(status.as_u16(), 401 | 403) => {
                self.status_error(status)
            }
            OpenError::Status {
                error: Some(error), ..
            } => rpc_error(method, &error),
            OpenError::Status { status, .. } => self.status_error(status),
            OpenError::Read(what) => DiscoverError::Protocol(format!("{method}: {what}")),
            OpenError::Unanswered => DiscoverError::Protocol(format!(
                "the server ended its response to {method} without an answer"
            )),
            OpenError::Rpc(error) | OpenError::StatelessOnly(error) => rpc_error(method, &error),
            OpenError::Revision { offered: None, .. } => DiscoverError::Protocol(
                "the server's initialize result has no protocolVersion".into(),
            ),
            OpenError::Revision {
                offered: Some(offered),
                ..
            } => DiscoverError::Protocol(format!(
                "the server offered MCP {offered}, which brain does not speak over a session \
                 (it speaks {})",
                crate::revision::SESSIONS.join(", ")
            )),
        }
    }

    /// Every page of `tools/list`.
    async fn list_tools(
        &self,
        headers: impl Fn() -> HeaderMap,
        meta: Option<serde_json::Map<String, Value>>,
    ) -> Result<Vec<Value>, DiscoverError> {
        Ok(self.list_pages(headers, meta).await?.0)
    }

    /// Every page of `tools/list`, and what its pages said of caching it (2026-07-28).
    async fn list_pages(
        &self,
        headers: impl Fn() -> HeaderMap,
        meta: Option<serde_json::Map<String, Value>>,
    ) -> Result<(Vec<Value>, CacheHints), DiscoverError> {
        let mut hints = CacheHints {
            ttl: None,
            public: true,
        };
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 1.. {
            if page > MAX_PAGES {
                return Err(DiscoverError::Protocol(format!(
                    "tools/list did not end after {MAX_PAGES} pages"
                )));
            }
            let mut params = serde_json::Map::new();
            if let Some(cursor) = &cursor {
                params.insert("cursor".into(), json!(cursor));
            }
            if let Some(meta) = &meta {
                params.insert("_meta".into(), Value::Object(meta.clone()));
            }
            let request =
                json!({"jsonrpc": "2.0", "id": page + 1, "method": "tools/list", "params": params});
            let mut result = self.request(&request, headers()).await?;
            hints.read(&result);
            // The page's tools are moved out, not copied.
            match result.get_mut("tools").map(Value::take) {
                Some(Value::Array(page)) => tools.extend(page),
                _ => {
                    return Err(DiscoverError::Protocol(
                        "the server's tools/list result has no `tools` array".into(),
                    ));
                }
            }
            let next = result
                .get("nextCursor")
                .and_then(Value::as_str)
                .filter(|next| !next.is_empty())
                .map(str::to_owned);
            if next.is_none() || next == cursor {
                break;
            }
            cursor = next;
        }
        Ok((tools, hints))
    }

    async fn post(
        &self,
        message: &Value,
        headers: HeaderMap,
    ) -> Result<crate::http::Response, DiscoverError> {
        self.endpoint
            .post(message, headers)
            .await
            .map_err(|error| match error {
                HttpError::Auth(why) => DiscoverError::Auth(why),
                error => DiscoverError::Connect {
                    url: self.endpoint.url.to_owned(),
                    message: error_chain(&error),
                },
            })
    }

    /// POSTs a request and returns its result.
    async fn request(&self, message: &Value, headers: HeaderMap) -> Result<Value, DiscoverError> {
        let response = self.post(message, headers).await?;
        self.answer(response, message).await
    }

    /// The result answering `request` in `response`.
    async fn answer(
        &self,
        response: crate::http::Response,
        request: &Value,
    ) -> Result<Value, DiscoverError> {
        let method = request["method"].as_str().unwrap_or_default();
        let status = response.status();
        if !status.is_success() {
            if matches!(status.as_u16(), 401 | 403) {
                return Err(self.status_error(status));
            }
            // An error status may carry the JSON-RPC error that explains it.
            let error = match Messages::read(response, ERROR_BODY_LIMIT).await {
                Ok(mut messages) => match messages.next().await {
                    Some(Ok(message)) => message.get("error").cloned(),
                    _ => None,
                },
                Err(_) => None,
            };
            return Err(match error {
                Some(error) => rpc_error(method, &error),
                None => self.status_error(status),
            });
        }
        let mut messages = Messages::read(response, RESPONSE_LIMIT)
            .await
            .map_err(|error| DiscoverError::Protocol(format!("{method}: {error}")))?;
        while let Some(message) = messages.next().await {
            let message =
                message.map_err(|error| DiscoverError::Protocol(format!("{method}: {error}")))?;
            if message.get("id") != request.get("id") || message.get("method").is_some() {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(rpc_error(method, error));
            }
            return Ok(message.get("result").cloned().unwrap_or_default());
        }
        Err(DiscoverError::Protocol(format!(
            "the server ended its response to {method} without an answer"
        )))
    }

    fn status_error(&self, status: StatusCode) -> DiscoverError {
        match (status.as_u16(), self.token_var) {
            (code @ (401 | 403), _) if self.oauth => DiscoverError::Auth(format!(
                "the server refused the token brain obtained (HTTP {code})"
            )),
            (code @ (401 | 403), Some(var)) => DiscoverError::TokenRefused {
                var: var.to_owned(),
                status: code,
            },
            (code @ (401 | 403), None) => DiscoverError::TokenRequired { status: code },
            _ => DiscoverError::Protocol(format!("the server answered HTTP {status}")),
        }
    }
}

/// The error a JSON-RPC `error` object stands for.
fn rpc_error(method: &str, error: &Value) -> DiscoverError {
    if error["code"].as_i64() == Some(UNSUPPORTED_PROTOCOL_VERSION) {
        let data = &error["data"];
        return DiscoverError::UnsupportedVersion {
            requested: data["requested"].as_str().unwrap_or_default().to_owned(),
            supported: data["supported"]
                .as_array()
                .map(|versions| {
                    versions
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            spoken: SPOKEN,
        };
    }
    DiscoverError::Protocol(format!(
        "{method} failed: JSON-RPC error {}: {}",
        error["code"],
        error["message"].as_str().unwrap_or("no message")
    ))
}

fn stateless_headers(method: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static(PROTOCOL_HEADER),
        HeaderValue::from_static(STATELESS),
    );
    headers.insert(
        HeaderName::from_static("mcp-method"),
        HeaderValue::from_static(method),
    );
    headers
}
