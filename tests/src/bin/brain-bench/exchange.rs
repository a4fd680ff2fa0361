//! P15: on behalf of users against the binding's own credential — the same `echo` calls through
//! one `brain-harness serve`, two users (alice and carol, JWTs of the authorization server)
//! calling in turn, to two bindings of the Python SDK server as an OAuth resource server (it
//! introspects every request's token at the authorization server): `echo`, which exchanges each
//! user's token (RFC 8693; cached, one exchange per user for the whole run), and `echo_own`,
//! whose client-credentials token serves every user. oidc-provider with the grant registered
//! (`tests/interop/oauth_server.mjs`); c = 32.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use anyhow::Context;
use brain_runtime::Runtime;
use serde_json::{Value, json};
use tests::oauth::{ALICE, AuthorizationServer, CAROL, EXCHANGE_CLIENT, EXCHANGE_SECRET};
use tests::oauth::{SERVICE_CLIENT, SERVICE_SECRET};
use tests::peers::{Peer, free_port};

use crate::harness::{Driver, Plan, Target, compare, echo_config, python_peer};
use crate::serve::Serving;

const WHAT: &str = "on behalf of users (token exchange, cached) vs the binding's own credential, through serve, \
     Python SDK server introspecting, 2 users, c=32";

/// P15's rows.
pub(crate) async fn targets(plan: &Plan, targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let interop = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("interop");
    if !interop
        .join("node_modules/oidc-provider/package.json")
        .exists()
    {
        targets.push(Target::not_measured(
            "P15",
            WHAT.to_owned(),
            "oidc-provider is not installed (tests/interop/setup.sh)",
        ));
        return Ok(());
    }
    // The plain Python SDK server's `echo`: the pin of the introspecting one's (the same script).
    let Some(plain) = python_peer("P15", WHAT, targets) else {
        return Ok(());
    };
    let port = free_port();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let mut binding: Value =
        serde_json::to_value(echo_config(&plain.url, "2026-07-28", "echo")?)?["tools"][0].take();
    drop(plain);
    let authorization = {
        let url = upstream_url.clone();
        tokio::task::spawn_blocking(move || {
            let env = [
                ("BRAIN_TEST_AS_JWT", "1"),
                ("BRAIN_TEST_AS_OPAQUE_RESOURCE", url.as_str()),
            ];
            AuthorizationServer::start_with(&url, 3600, &env)
        })
        .await?
    };
    let issuer = authorization.issuer.clone();
    let upstream =
        tokio::task::spawn_blocking(move || Peer::python_introspecting(port, &issuer)).await?;

    binding["url"] = json!(upstream.url);
    binding["tenants"] = json!(["acme"]);
    let mut own = binding.clone();
    binding["auth"] = json!({"type": "token_exchange",
        "token_endpoint": format!("{}/token", authorization.issuer),
        "client_id": EXCHANGE_CLIENT, "client_secret_env": "BRAIN_BENCH_EXCHANGE_SECRET"});
    own["name"] = json!("echo_own");
    own["auth"] = json!({"type": "client_credentials", "client_id": SERVICE_CLIENT,
        "client_secret_env": "BRAIN_BENCH_SERVICE_SECRET"});
    let serve_port = free_port();
    let resource = format!("http://127.0.0.1:{serve_port}/mcp");
    let config = json!({
        "serve": {
            "clients": [{"tenant": "acme", "token_env": "BRAIN_BENCH_SERVE_TOKEN"}],
            "authorization": {"issuer": authorization.issuer, "resource": resource,
                "tenant_claim": "tenant"},
        },
        "tools": [binding, own],
    });
    let serving = Serving::start_with(
        config,
        serve_port,
        &[],
        &[
            ("BRAIN_BENCH_EXCHANGE_SECRET", EXCHANGE_SECRET),
            ("BRAIN_BENCH_SERVICE_SECRET", SERVICE_SECRET),
        ],
    )?;
    let mut users = Vec::new();
    for user in [ALICE, CAROL] {
        users.push(authorization.user_token(&resource, user).await);
    }
    let exchanged = Arc::new(clients(&serving.url, "echo", &users)?);
    let own = Arc::new(clients(&serving.url, "echo_own", &users)?);
    eprintln!("P15: {WHAT}...");
    let calls = plan.calls(32);
    let (with, without) = compare(&exchanged, &own, calls, 32, plan.rounds).await?;
    targets.push(Target::ratio_of(
        "P15",
        WHAT.to_owned(),
        &with,
        &without,
        0.9,
    ));
    // Cached: one exchange per user for the whole run, counted at the authorization server.
    let stats = authorization.stats().await;
    let exchanges: u64 = [ALICE, CAROL]
        .iter()
        .map(|user| stats["exchanges"][user].as_u64().unwrap_or(0))
        .sum();
    anyhow::ensure!(
        exchanges == 2,
        "P15: {exchanges} exchanges at the authorization server for 2 users: {stats}"
    );
    targets.push(Target::value(
        "P15",
        "exchanges at the authorization server over the run, 2 users".to_owned(),
        exchanges as f64,
        "",
    ));
    Ok(())
}

/// A client runtime per user, each calling serve's `tool` with the user's JWT, in turn.
fn clients(serve: &str, tool: &str, users: &[String]) -> anyhow::Result<Driver> {
    let runtimes = (users.iter())
        .map(|token| {
            let config = json!({"tools": [{
                "name": "echo", "description": "Benchmark tool.", "url": serve,
                "mcp_tool": tool, "tenants": ["local"], "protocol_version": "2026-07-28",
                "token_env": "BRAIN_BENCH_USER_TOKEN", "timeout_seconds": 120,
                "input_schema": {"type": "object", "properties": {"message": {"type": "string"}},
                    "required": ["message"]},
            }]});
            let config = brain_config::parse(config.to_string().as_bytes(), "bench.json")
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let token = token.clone();
            Runtime::builder(&config)
                .env(move |var| (var == "BRAIN_BENCH_USER_TOKEN").then(|| token.clone()))
                .build()
                .context("a client of serve")
        })
        .collect::<anyhow::Result<Vec<Runtime>>>()?;
    Ok(Driver::Users {
        runtimes,
        next: AtomicUsize::new(0),
    })
}
