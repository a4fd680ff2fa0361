//! The fault-injecting MCP test server as a process (with the HTTP and SSE tool endpoints under
//! `/tools`): prints its MCP URL on the first line of stdout, then serves until killed; or, with
//! `--stdio`, serves on stdin and stdout until stdin closes.

#![allow(clippy::print_stdout)]

use clap::Parser;
use tests::server::{Faults, Resume, TestServer};
use tests::stdio::StdioFaults;

/// Serves the test tools over Streamable HTTP on loopback.
#[derive(Parser)]
struct Args {
    /// Port on 127.0.0.1 (0: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Require this bearer token on every request.
    #[arg(long)]
    require_token: Option<String>,
    /// Answer initialize with HTTP 500.
    #[arg(long)]
    initialize_500: bool,
    /// Leave Nagle's algorithm on.
    #[arg(long)]
    nagle: bool,
    /// Offer this many more generated tools.
    #[arg(long, default_value_t = 0)]
    extra_tools: usize,
    /// List tools in pages of this size.
    #[arg(long)]
    page_size: Option<usize>,
    /// Serve a changed `echo` (drift).
    #[arg(long)]
    drifted: bool,
    /// Answer initialize with a JSON-RPC error.
    #[arg(long)]
    initialize_rpc_error: bool,
    /// Answer `tools/call` with this HTTP status.
    #[arg(long)]
    call_status: Option<u16>,
    /// Drop the connection before reading `tools/call`.
    #[arg(long)]
    drop_before_call: bool,
    /// Read `tools/call`, then drop the connection.
    #[arg(long)]
    drop_after_call: bool,
    /// Read `tools/call`, then never answer.
    #[arg(long)]
    stall_call: bool,
    /// Answer `tools/call` with malformed JSON.
    #[arg(long)]
    malformed_call: bool,
    /// Answer `tools/call` with a truncated SSE stream.
    #[arg(long)]
    truncated_call: bool,
    /// Answer `tools/call` with JSON-RPC error -32601.
    #[arg(long)]
    call_method_not_found: bool,
    /// Answer `tools/call` with HTTP 429 and `Retry-After: SECONDS`.
    #[arg(long, value_name = "SECONDS")]
    call_429_after: Option<u64>,
    /// Answer `tools/call` with JSON-RPC error -32023 and `data.retryAfterMs`.
    #[arg(long, value_name = "MS")]
    call_32023_after: Option<u64>,
    /// Close `tools/call` streams after a priming event with this `retry` (ms).
    #[arg(long)]
    close_call_stream: Option<u64>,
    /// Refuse the GET that would resume a closed stream.
    #[arg(long)]
    refuse_resume: bool,
    /// Require OAuth access tokens of this authorization server (`tests/interop/oauth_server.mjs`),
    /// introspected as its `mcp-server` client; the protected resource metadata names it.
    #[arg(long, value_name = "ISSUER")]
    oauth_issuer: Option<String>,
    /// With `--oauth-issuer`: a tool whose calls also need scope `mcp:admin` (repeatable).
    #[arg(long, value_name = "TOOL", requires = "oauth_issuer")]
    oauth_admin_tool: Vec<String>,
    /// Serve over stdio (stdin and stdout) instead of HTTP.
    #[arg(long)]
    stdio: bool,
    /// Serve over TLS (HTTP/2 and HTTP/1.1 by ALPN) with a certificate of a CA made now, whose
    /// certificate is written to DIR/ca.pem; the server's to DIR/cert.pem and DIR/key.pem.
    #[arg(long, value_name = "DIR")]
    tls: Option<std::path::PathBuf>,
    /// With `--tls`: offer HTTP/1.1 only.
    #[arg(long, requires = "tls")]
    tls_http1_only: bool,
    /// With `--tls`: HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS.
    #[arg(long, requires = "tls")]
    max_concurrent_streams: Option<u32>,
    #[command(flatten)]
    stdio_faults: StdioFaults,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    // RUST_LOG=h2=debug, say: what the server's libraries say, on stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let stdio = args.stdio;
    let stdio_faults = args.stdio_faults.clone();
    let faults = Faults {
        require_token: args.require_token,
        initialize_500: args.initialize_500,
        nagle: args.nagle,
        extra_tools: args.extra_tools,
        page_size: args.page_size,
        drifted: args.drifted,
        initialize_rpc_error: args.initialize_rpc_error,
        call_status: args.call_status,
        drop_before_call: args.drop_before_call,
        drop_after_call: args.drop_after_call,
        stall_call: args.stall_call,
        malformed_call: args.malformed_call,
        truncated_call: args.truncated_call,
        call_method_not_found: args.call_method_not_found,
        rate_limited: match (args.call_429_after, args.call_32023_after) {
            (Some(seconds), _) => Some(tests::server::RateLimited::Seconds(seconds)),
            (None, Some(ms)) => Some(tests::server::RateLimited::Rpc(ms)),
            (None, None) => None,
        },
        close_call_stream: args.close_call_stream,
        resume: if args.refuse_resume {
            Resume::Refuse
        } else {
            Resume::Answer
        },
        // The key `/tools/sse/inspect` verifies session inspection tokens with: the same
        // variable brain-runtime signs them with.
        session_token_key: std::env::var(brain_runtime::SESSION_TOKEN_KEY_ENV)
            .ok()
            .map(String::into_bytes),
        oauth: args.oauth_issuer.map(|issuer| tests::server::OAuthGuard {
            issuer,
            client_id: tests::oauth::RESOURCE_CLIENT.into(),
            client_secret: tests::oauth::RESOURCE_SECRET.into(),
            scope: "mcp:basic".into(),
            admin_tools: args.oauth_admin_tool,
        }),
        tls: match &args.tls {
            Some(dir) => {
                let ca = tests::tls::TestCa::new();
                ca.write_ca(dir);
                std::fs::write(dir.join("cert.pem"), &ca.cert_pem)?;
                std::fs::write(dir.join("key.pem"), &ca.key_pem)?;
                let mut options = if args.tls_http1_only {
                    tests::tls::TlsOptions::h1()
                } else {
                    tests::tls::TlsOptions::h2()
                };
                options.ca = std::sync::Arc::new(ca);
                options.max_concurrent_streams = args.max_concurrent_streams;
                Some(options)
            }
            None => None,
        },
        ..Faults::default()
    };
    if stdio {
        return tests::stdio::serve(faults, stdio_faults).await;
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    let server = TestServer::serve(listener, faults)?;
    println!("{}", server.url);
    std::future::pending::<()>().await;
    Ok(())
}
