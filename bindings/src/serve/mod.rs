//! `brain-harness serve`: the bindings as one MCP server, over stdio (one local host, one tenant)
//! or Streamable HTTP (clients authenticated per request, each with its tenant). A front end like
//! `call`: each `tools/call` becomes a [`brain_runtime::CallRequest`] on the runtime, and its
//! result a `CallToolResult`.

#![allow(clippy::print_stderr)]

mod clients;
mod facade;
mod http;
mod listener;
mod log;
mod owners;
mod sources;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use brain_config::{HostConfig, Serve};
use brain_runtime::Runtime;
use brain_runtime::journal::Journal;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use clients::Client;
use facade::Facade;

/// How long calls in flight may take to finish after SIGTERM before they are cancelled (and
/// journaled as what they are: unknown once sent).
pub(crate) const DRAIN_BOUND: Duration = Duration::from_secs(10);
/// How long cancelled calls' cleanup (telling the servers) may take after that.
const CLEANUP_BOUND: Duration = Duration::from_secs(2);

/// `brain-harness serve`'s command line.
#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve one MCP session on stdin and stdout (the command line a host's MCP config takes);
    /// needs `--tenant`.
    #[arg(long, conflicts_with = "listen", requires = "tenant")]
    stdio: bool,
    /// With `--stdio`: the tenant every call runs as.
    #[arg(long, requires = "stdio")]
    tenant: Option<String>,
    /// Serve Streamable HTTP at `http://ADDR/mcp` (e.g. `127.0.0.1:8080`); clients authenticate
    /// as the config's `serve` section says.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// A browser origin allowed besides loopback ones, e.g. `https://app.example.com` (`:*` for
    /// any port); repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    origins: Vec<String>,
    /// A `Host` allowed besides loopback ones: the name clients reach this server by, e.g.
    /// `brain.example.com`; repeatable.
    #[arg(long = "allow-host", value_name = "HOST")]
    hosts: Vec<String>,
    /// The session of calls whose `_meta` names none (else `default`).
    #[arg(long)]
    session: Option<String>,
    /// With `--listen` on a loopback address: a request without `Authorization` runs as this
    /// tenant (for a local client that cannot send a header, such as a test suite); a request
    /// with a credential is still checked.
    #[arg(long = "anonymous-tenant", value_name = "T", requires = "listen")]
    anonymous: Option<String>,
    /// With `--listen`: a proxy (an address or a CIDR block, e.g. `10.0.0.0/8`) whose
    /// `Forwarded`/`X-Forwarded-For` headers name a request's source for the throttle of failed
    /// authentications; repeatable. Without it, the source is the peer's address.
    #[arg(long = "trusted-proxy", value_name = "CIDR", requires = "listen")]
    trusted_proxies: Vec<String>,
    /// With `--trusted-proxy`: the one header those proxies write, `x-forwarded-for` (the
    /// default) or `forwarded` (RFC 7239); the other is never read.
    #[arg(
        long = "forwarded-header",
        value_name = "NAME",
        requires = "trusted_proxies"
    )]
    forwarded_header: Option<String>,
}

/// Runs `serve` until stdin closes (stdio), or SIGTERM or SIGINT.
pub(crate) fn run(
    config: &HostConfig,
    journal: Option<Journal>,
    runtime: Runtime,
    tokio: tokio::runtime::Runtime,
    options: ServeArgs,
) -> ExitCode {
    let serve = config.serve.clone().unwrap_or_default();
    let json_log = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bounds = facade::Bounds {
        calls_per_client: serve.concurrent_calls_per_client(),
        calls: serve.concurrent_calls(),
        sessions_per_client: serve.sessions_per_client(),
        sessions: serve.max_sessions(),
    };
    let bindings = &config.tools;
    if let Some(session) = &options.session
        && let Err(why) = brain_runtime::check_id(session)
    {
        eprintln!("error: --session {why}");
        return ExitCode::from(2);
    }
    match (options.tenant.filter(|_| options.stdio), options.listen) {
        (Some(tenant), None) => {
            if !bindings.iter().any(|b| b.tenants.contains(&tenant)) {
                eprintln!("error: no binding allows tenant {tenant:?}: serve would offer no tool");
                return ExitCode::from(2);
            }
            let client = Client::named(&tenant, "stdio", "stdio", "stdio".into());
            let stop = CancellationToken::new();
            let facade = Facade::new(
                runtime,
                bindings,
                Some(client),
                options.session,
                bounds,
                json_log,
                stop.clone(),
            );
            tokio.block_on(stdio(facade, stop))
        }
        (None, Some(addr)) => {
            let (clients, disabled) =
                match clients::Clients::read(&serve, |var| std::env::var(var).ok()) {
                    Ok(read) => read,
                    Err(message) => {
                        eprintln!("error: {message}");
                        return ExitCode::from(2);
                    }
                };
            for notice in disabled {
                eprintln!("note: {notice}");
            }
            if let Some(tenant) = &options.anonymous {
                if !addr.ip().is_loopback() {
                    eprintln!(
                        "error: --anonymous-tenant lets any request in without a credential: it \
                         listens on a loopback address only (e.g. 127.0.0.1:8080), not {addr}"
                    );
                    return ExitCode::from(2);
                }
                if !bindings.iter().any(|b| b.tenants.contains(tenant)) {
                    eprintln!(
                        "error: no binding allows tenant {tenant:?}: serve would offer no tool"
                    );
                    return ExitCode::from(2);
                }
            }
            if clients.is_empty() && serve.authorization.is_none() && options.anonymous.is_none() {
                eprintln!(
                    "error: no client could authenticate: set the variable of a client in the \
                     config's `serve.clients` ({}), or declare `serve.authorization`",
                    names(&serve)
                );
                return ExitCode::from(2);
            }
            let proxies = match sources::TrustedProxies::parse(
                &options.trusted_proxies,
                options.forwarded_header.as_deref(),
            ) {
                Ok(proxies) => proxies,
                Err(message) => {
                    eprintln!("error: {message}");
                    return ExitCode::from(2);
                }
            };
            let stop = CancellationToken::new();
            let facade = Facade::new(
                runtime,
                bindings,
                None,
                options.session,
                bounds,
                json_log,
                stop.clone(),
            );
            let listen = http::Listen {
                addr,
                origins: options.origins,
                hosts: options.hosts,
                anonymous: options.anonymous,
                proxies,
            };
            tokio.block_on(listen_http(facade, &serve, clients, journal, listen, stop))
        }
        _ => {
            eprintln!("error: serve needs exactly one of --stdio and --listen ADDR");
            ExitCode::from(2)
        }
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

/// stdio: one session on stdin and stdout until stdin closes or a signal comes; calls still in
/// flight then are cancelled (the host is gone) and journaled as what they are.
async fn stdio(facade: Facade, stop: CancellationToken) -> ExitCode {
    let running = match facade.clone().serve(rmcp::transport::io::stdio()).await {
        Ok(running) => running,
        Err(error) => {
            eprintln!("error: the MCP session did not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let cancel = running.cancellation_token();
    let signal = signals();
    tokio::select! {
        _ = running.waiting() => {}
        code = signal => {
            stop.cancel();
            cancel.cancel();
            let _ = tokio::time::timeout(CLEANUP_BOUND, facade.runtime().wait_for_cleanup()).await;
            return ExitCode::from(code);
        }
    }
    stop.cancel();
    let _ = tokio::time::timeout(CLEANUP_BOUND, facade.runtime().wait_for_cleanup()).await;
    ExitCode::SUCCESS
}

/// HTTP: serves until SIGTERM or SIGINT; then new calls are refused, calls in flight have
/// [`DRAIN_BOUND`] to finish (the rest are cancelled, and say whether they were sent), and the
/// process exits within DRAIN_BOUND + 3 × CLEANUP_BOUND.
async fn listen_http(
    facade: Facade,
    serve: &Serve,
    clients: clients::Clients,
    journal: Option<Journal>,
    listen: http::Listen,
    stop: CancellationToken,
) -> ExitCode {
    let accept = CancellationToken::new();
    let sessions = CancellationToken::new();
    let server = http::serve(
        facade.clone(),
        serve,
        clients,
        journal,
        listen,
        http::Stop {
            accept: accept.clone(),
            sessions: sessions.clone(),
        },
        |addr| eprintln!("brain serve: listening on http://{addr}/mcp"),
    );
    tokio::pin!(server);
    let code = tokio::select! {
        served = &mut server => {
            return match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("error: cannot serve: {error}");
                    ExitCode::FAILURE
                }
            };
        }
        code = signals() => code,
    };
    facade.drain();
    eprintln!(
        "brain serve: stopping: {} call(s) in flight get up to {} s to finish",
        facade.in_flight(),
        DRAIN_BOUND.as_secs()
    );
    let drained = tokio::time::timeout(DRAIN_BOUND, facade.idle())
        .await
        .is_ok();
    if !drained {
        // What is still running is cancelled: each result says whether it was sent.
        stop.cancel();
        let _ = tokio::time::timeout(CLEANUP_BOUND, facade.idle()).await;
    }
    // The listener closes; the answers written by now reach their clients (connections that
    // stay open, such as a session's GET stream, get CLEANUP_BOUND), then the sessions end.
    accept.cancel();
    if tokio::time::timeout(CLEANUP_BOUND, &mut server)
        .await
        .is_err()
    {
        sessions.cancel();
        let _ = tokio::time::timeout(CLEANUP_BOUND, &mut server).await;
    }
    sessions.cancel();
    let _ = tokio::time::timeout(CLEANUP_BOUND, facade.runtime().wait_for_cleanup()).await;
    ExitCode::from(code)
}

/// Waits for SIGTERM (exit code 143) or SIGINT (130).
async fn signals() -> u8 {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigint = signal(SignalKind::interrupt()).expect("SIGINT can be handled");
    let mut sigterm = signal(SignalKind::terminate()).expect("SIGTERM can be handled");
    tokio::select! {
        _ = sigint.recv() => 130,
        _ = sigterm.recv() => 143,
    }
}
