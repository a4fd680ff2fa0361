//! brain-serve: brain's bindings as one MCP server, over stdio (one local host, one tenant) or
//! Streamable HTTP (clients authenticated per request, each with its tenant). A front end of the
//! runtime like `brain-harness call`: each `tools/call` becomes a [`brain_runtime::CallRequest`]
//! on the runtime, through the whole gate, and its result a `CallToolResult`.
//!
//! `brain-harness serve` runs it as a process; a Rust host runs it in its own tokio service:
//! [`stdio`] on its standard streams, [`Http::listen`] with brain's own accept loop (connection
//! caps and timeouts before authentication), or [`Http::router`] mounted in the host's own axum
//! server (`examples/serve-host`).
//!
//! ```no_run
//! # async fn example(config: brain_config::HostConfig) -> Result<(), Box<dyn std::error::Error>> {
//! use brain_runtime::Runtime;
//! use brain_serve::{Http, HttpOptions, Options};
//!
//! let runtime = Runtime::new(&config)?;
//! let http = Http::new(&config, runtime, None, Options::default(), HttpOptions::default())?;
//! let app = axum::Router::new().merge(http.router().await?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod answer;
mod clients;
mod facade;
mod http;
mod listener;
mod log;
mod options;
mod owners;
mod sources;
mod stateless;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use brain_config::{HostConfig, Serve};
use brain_runtime::Runtime;
use brain_runtime::journal::Journal;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use clients::Client;
use facade::Facade;
pub use options::{HttpOptions, Options, ServeError};

/// How long calls in flight may take to finish after a shutdown before they are cancelled (and
/// journaled as what they are: unknown once sent).
pub const DRAIN_BOUND: Duration = Duration::from_secs(10);
/// How long cancelled calls' cleanup (telling the servers) may take after that.
const CLEANUP_BOUND: Duration = Duration::from_secs(2);

/// The server's bounds on calls and sessions, from the config's `serve` section.
fn bounds(serve: &Serve) -> facade::Bounds {
    facade::Bounds {
        calls_per_client: serve.concurrent_calls_per_client(),
        calls: serve.concurrent_calls(),
        sessions_per_client: serve.sessions_per_client(),
        sessions: serve.max_sessions(),
    }
}

/// The default session, checked.
fn checked(options: &Options) -> Result<(), ServeError> {
    match &options.session {
        Some(session) => brain_runtime::check_id(session).map_err(ServeError::InvalidSession),
        None => Ok(()),
    }
}

/// Refuses a tenant no binding allows.
fn offered(config: &HostConfig, tenant: &str) -> Result<(), ServeError> {
    if config
        .tools
        .iter()
        .any(|b| b.tenants.iter().any(|t| t == tenant))
    {
        Ok(())
    } else {
        Err(ServeError::NoToolForTenant(tenant.to_owned()))
    }
}

/// Serves one MCP session on stdin and stdout, every call as `tenant`, until stdin closes
/// (`Ok(None)`) or `shutdown` resolves (`Ok(Some(_))` with its value); calls still in flight then
/// are cancelled (the host is gone) and journaled as what they are.
pub async fn stdio<S>(
    config: &HostConfig,
    runtime: Runtime,
    tenant: &str,
    options: Options,
    shutdown: impl Future<Output = S>,
) -> Result<Option<S>, ServeError> {
    checked(&options)?;
    offered(config, tenant)?;
    let serve = config.serve.clone().unwrap_or_default();
    let client = Client::named(tenant, "stdio", "stdio", "stdio".into());
    let stop = CancellationToken::new();
    let facade = Facade::new(
        runtime,
        &config.tools,
        Some(client),
        options.session,
        bounds(&serve),
        options.json_log,
        stop.clone(),
    );
    let running = facade
        .clone()
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|error| ServeError::SessionStart(error.to_string()))?;
    let cancel = running.cancellation_token();
    let stopped = tokio::select! {
        _ = running.waiting() => None,
        value = shutdown => {
            cancel.cancel();
            Some(value)
        }
    };
    stop.cancel();
    let _ = tokio::time::timeout(CLEANUP_BOUND, facade.runtime().wait_for_cleanup()).await;
    Ok(stopped)
}

/// brain's MCP server over Streamable HTTP: `/mcp` for clients authenticated as the config's
/// `serve` section says, `/ready`, and (with `serve.authorization`) the protected resource
/// metadata.
pub struct Http {
    facade: Facade,
    serve: Serve,
    clients: clients::Clients,
    journal: Option<Journal>,
    options: HttpOptions,
    proxies: sources::TrustedProxies,
    /// Ends calls still running after the drain.
    stop: CancellationToken,
    /// Ends rmcp's sessions and their streams (and the session reaper, `/ready`'s probe).
    sessions: CancellationToken,
    /// [`Http::notices`].
    notices: Vec<String>,
}

impl Http {
    /// Reads the clients (their token variables, now) and checks the options. The clients left
    /// out (their variable not set) are [`Http::notices`].
    pub fn new(
        config: &HostConfig,
        runtime: Runtime,
        journal: Option<Journal>,
        options: Options,
        http: HttpOptions,
    ) -> Result<Http, ServeError> {
        checked(&options)?;
        let serve = config.serve.clone().unwrap_or_default();
        let (clients, disabled) = clients::Clients::read(&serve, |var| std::env::var(var).ok())
            .map_err(ServeError::Clients)?;
        if let Some(tenant) = &http.anonymous_tenant {
            offered(config, tenant)?;
        }
        if clients.is_empty() && serve.authorization.is_none() && http.anonymous_tenant.is_none() {
            return Err(ServeError::NoClient {
                variables: names(&serve),
            });
        }
        let proxies =
            sources::TrustedProxies::parse(&http.trusted_proxies, http.forwarded_header.as_deref())
                .map_err(ServeError::TrustedProxies)?;
        let stop = CancellationToken::new();
        let facade = Facade::new(
            runtime,
            &config.tools,
            None,
            options.session,
            bounds(&serve),
            options.json_log,
            stop.clone(),
        );
        Ok(Http {
            facade,
            serve,
            clients,
            journal,
            options: http,
            proxies,
            stop,
            sessions: CancellationToken::new(),
            notices: disabled,
        })
    }

    /// What the operator should know: the clients left out (their variable not set).
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// The server as an axum router, for a host to mount in its own service (its own listener
    /// and connection bounds; [`Http::listen`] brings brain's). Refused with an anonymous
    /// tenant, which only brain's loopback listener serves. [`Http::close`] ends its sessions.
    pub async fn router(&self) -> Result<axum::Router, ServeError> {
        if self.options.anonymous_tenant.is_some() {
            return Err(ServeError::AnonymousNotLoopback(
                ", not a router mounted elsewhere".into(),
            ));
        }
        http::router(self.parts(), self.sessions.clone()).await
    }

    /// Ends the sessions of the routers [`Http::router`] made, and calls still running.
    pub fn close(&self) {
        self.stop.cancel();
        self.sessions.cancel();
    }

    /// The parts `http.rs` builds the router from.
    fn parts(&self) -> http::Parts<'_> {
        http::Parts {
            facade: self.facade.clone(),
            serve: &self.serve,
            clients: self.clients.clone(),
            journal: self.journal.clone(),
            options: &self.options,
            proxies: self.proxies.clone(),
        }
    }

    /// Listens at `addr` with brain's own accept loop (`ready` is told the bound address) until
    /// `shutdown` resolves (`Ok(Some(_))` with its value) or the listener fails. Then new calls
    /// are refused, calls in flight (`stopping` is told how many) have [`DRAIN_BOUND`] to finish
    /// (the rest are cancelled, and say whether they were sent), and it returns within
    /// DRAIN_BOUND + 3 × 2 s. It raises the process's soft limit of open files to its hard limit
    /// (the connection cap counts on it), as `brain-harness serve` does.
    pub async fn listen<S>(
        self,
        addr: SocketAddr,
        ready: impl FnOnce(SocketAddr),
        shutdown: impl Future<Output = S>,
        stopping: impl FnOnce(usize),
    ) -> Result<Option<S>, ServeError> {
        if self.options.anonymous_tenant.is_some() && !addr.ip().is_loopback() {
            return Err(ServeError::AnonymousNotLoopback(format!(", not {addr}")));
        }
        let accept = CancellationToken::new();
        let router = http::router(self.parts(), self.sessions.clone()).await?;
        let server = http::listen(addr, router, &self.serve, accept.clone(), ready);
        tokio::pin!(server);
        let value = tokio::select! {
            served = &mut server => return served.map(|()| None).map_err(ServeError::Io),
            value = shutdown => value,
        };
        let facade = &self.facade;
        facade.drain();
        stopping(facade.in_flight());
        let drained = tokio::time::timeout(DRAIN_BOUND, facade.idle())
            .await
            .is_ok();
        if !drained {
            // What is still running is cancelled: each result says whether it was sent.
            self.stop.cancel();
            let _ = tokio::time::timeout(CLEANUP_BOUND, facade.idle()).await;
        }
        // The listener closes; the answers written by now reach their clients (connections
        // that stay open, such as a session's GET stream, get CLEANUP_BOUND), then the sessions
        // end.
        accept.cancel();
        if tokio::time::timeout(CLEANUP_BOUND, &mut server)
            .await
            .is_err()
        {
            self.sessions.cancel();
            let _ = tokio::time::timeout(CLEANUP_BOUND, &mut server).await;
        }
        self.sessions.cancel();
        let _ = tokio::time::timeout(CLEANUP_BOUND, facade.runtime().wait_for_cleanup()).await;
        Ok(Some(value))
    }
}

/// The variables of the config's clients, for a message.
fn names(serve: &Serve) -> String {
    if serve.clients.is_empty() {
        return "there are none".into();
    }
    serve
        .clients
        .iter()
        .map(|c| c.token_env.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
