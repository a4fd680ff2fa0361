//! `brain-harness serve`: its command line, handed to brain-serve ([`brain_serve::stdio`],
//! [`brain_serve::Http::listen`]); errors and notices printed, signals turned into exit codes.

#![allow(clippy::print_stderr)]

use std::net::SocketAddr;
use std::process::ExitCode;

use brain_config::HostConfig;
use brain_runtime::Runtime;
use brain_runtime::journal::Journal;
use brain_serve::{Http, HttpOptions, Options, ServeError};

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

/// Runs `serve` until stdin closes (stdio), or SIGTERM or SIGINT (exit 143, 130).
pub(crate) fn run(
    config: &HostConfig,
    journal: Option<Journal>,
    runtime: Runtime,
    tokio: tokio::runtime::Runtime,
    args: ServeArgs,
) -> ExitCode {
    let mut options =
        Options::default().json_log(!std::io::IsTerminal::is_terminal(&std::io::stderr()));
    options.session = args.session;
    let served = match (args.tenant.filter(|_| args.stdio), args.listen) {
        (Some(tenant), None) => tokio.block_on(brain_serve::stdio(
            config,
            runtime,
            &tenant,
            options,
            signals(),
        )),
        (None, Some(addr)) => {
            let mut http = HttpOptions::default();
            http.origins = args.origins;
            http.hosts = args.hosts;
            http.anonymous_tenant = args.anonymous;
            http.trusted_proxies = args.trusted_proxies;
            http.forwarded_header = args.forwarded_header;
            tokio.block_on(async {
                let server = Http::new(config, runtime, journal, options, http)?;
                for notice in server.notices() {
                    eprintln!("note: {notice}");
                }
                let ready = |addr| eprintln!("brain serve: listening on http://{addr}/mcp");
                let stopping = |in_flight| {
                    eprintln!(
                        "brain serve: stopping: {in_flight} call(s) in flight get up to {} s to \
                         finish",
                        brain_serve::DRAIN_BOUND.as_secs()
                    );
                };
                server.listen(addr, ready, signals(), stopping).await
            })
        }
        _ => {
            eprintln!("error: serve needs exactly one of --stdio and --listen ADDR");
            return ExitCode::from(2);
        }
    };
    match served {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(code)) => ExitCode::from(code),
        Err(error @ (ServeError::Io(_) | ServeError::SessionStart(_))) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
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
