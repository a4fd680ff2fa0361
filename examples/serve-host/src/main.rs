//! serve-host: brain-serve mounted in a host's own service (see README.md). The host's axum app
//! has a route of its own (`/healthz`) and brain's MCP endpoint (`/mcp`, `/ready`) merged in;
//! an MCP client (rmcp's) authenticates with the client token of `host.json`, lists the tools,
//! calls `echo`, and reads what `_meta["brain.dev/outcome"]` says of a refusal.

#![allow(clippy::print_stdout)]

use brain_runtime::Runtime;
use brain_serve::{Http, HttpOptions, Options};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// The variable `host.json`'s client reads its token from.
const TOKEN_VAR: &str = "SERVE_HOST_TOKEN";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/host.json").to_owned());
    let config = brain_config::load_file(path.as_ref())?;
    let token = std::env::var(TOKEN_VAR)
        .map_err(|_| format!("set {TOKEN_VAR} to the client's token (any secret string)"))?;

    // brain's server, mounted beside the host's own route; the host owns the listener.
    let runtime = Runtime::new(&config)?;
    let brain = Http::new(
        &config,
        runtime,
        None,
        Options::default(),
        HttpOptions::default(),
    )?;
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .merge(brain.router().await?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    println!("host: serving /healthz and brain's /mcp at http://{addr}");

    // An MCP client of the host, as an agent platform's would be (its HTTP client needs a TLS
    // provider, even for http://).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .auth_header(token);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await?;
    let tools = client.list_tools(None).await?;
    let names: Vec<&str> = tools.tools.iter().map(|tool| tool.name.as_ref()).collect();
    println!("tools/list: {names:?}");

    let echoed = call(
        &client,
        json!({"name": "echo", "arguments": {"message": "hello"},
        "_meta": {"brain.dev/call_id": "serve-host-1"}}),
    )
    .await?;
    println!("echo: {}", echoed["content"][0]["text"]);
    if echoed["isError"] != json!(false) {
        return Err(format!("echo failed: {echoed}").into());
    }

    // A refusal says why in `_meta["brain.dev/outcome"].reason`: nothing was sent.
    let refused = call(
        &client,
        json!({"name": "echo", "arguments": {"message": 7}}),
    )
    .await?;
    let outcome = &refused["_meta"]["brain.dev/outcome"];
    println!(
        "echo with a number: {} ({})",
        outcome["error_type"], outcome["reason"]
    );
    if outcome["reason"] != json!("invalid_arguments") {
        return Err(format!("the refusal named no reason: {refused}").into());
    }

    client.cancel().await?;
    brain.close();
    let _ = stop.send(());
    server.await??;
    Ok(())
}

/// Calls a tool through the host, the result as JSON (its `_meta` included).
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    params: Value,
) -> Result<Value, Box<dyn std::error::Error>> {
    let params: CallToolRequestParams = serde_json::from_value(params)?;
    Ok(serde_json::to_value(client.call_tool(params).await?)?)
}
