//! The fault-injecting MCP test server as a process: prints its URL on the first line of stdout,
//! then serves until killed.

#![allow(clippy::print_stdout)]

use clap::Parser;
use tests::server::{Faults, TestServer};

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
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    let faults = Faults {
        require_token: args.require_token,
        initialize_500: args.initialize_500,
        nagle: args.nagle,
        extra_tools: args.extra_tools,
        page_size: args.page_size,
        drifted: args.drifted,
        ..Faults::default()
    };
    let server = TestServer::serve(listener, faults)?;
    println!("{}", server.url);
    std::future::pending::<()>().await;
    Ok(())
}
