//! Bindings on behalf of users (`auth.type` `token_exchange`), through the front ends, against
//! the official Python SDK server as an OAuth resource server (`tests/interop/python_server.py`
//! with `INTROSPECT_ISSUER`: the SDK's `AuthSettings` and a `TokenVerifier` that introspects
//! every request's token at the authorization server and accepts only tokens for itself).
//!
//! serve: alice and carol of one company (tenant `acme`) sign in to serve
//! with JWTs from a real authorization server (`oidc-provider`); serve's `echo` binding exchanges
//! each user's own JWT (RFC 8693) at the same server, for the resource the upstream's protected
//! resource metadata names. Counted on both sides: the upstream sees each user as themselves
//! with brain as the actor and never a user's JWT; one exchange per user; two users writing the
//! same session and call id each get their own call; a static client of serve (no user) is
//! refused and nothing is sent.
//!
//! `brain-harness call --subject-token-env VAR`: the upstream sees the user whose token VAR
//! holds; without the flag the call is refused (a `tool.result`, exit 1) and nothing is sent.
//! `brain-harness drift --live --subject-token-env VAR` lists the server as that user. Two serve
//! replicas on one PostgreSQL exchange a user once between them.

use std::time::Duration;

use brain_runtime::SubjectToken;
use brain_runtime::discover::{DiscoverAuth, DiscoverOptions, discover};
use serde_json::{Value, json};
use tests::oauth::{ALICE, AuthorizationServer, CAROL, EXCHANGE_CLIENT, EXCHANGE_SECRET};
use tests::peers::{Peer, free_port};

mod common;
mod serving;

use serving::*;

const SECRET_VAR: &str = "BRAIN_SERVE_EXCHANGE_SECRET";

/// An authorization server (`env` set) and the Python SDK server introspecting at it.
fn introspecting(env: &[(&str, &str)]) -> (AuthorizationServer, Peer) {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let authorization = AuthorizationServer::start_with(&url, 300, env);
    let upstream = Peer::python_introspecting(port, &authorization.issuer);
    (authorization, upstream)
}

/// The `auth` of a binding on behalf of users, exchanging at `authorization`'s token endpoint
/// (no `resource`: the upstream's metadata names it).
fn exchange_auth(authorization: &AuthorizationServer) -> Value {
    json!({
        "type": "token_exchange",
        "token_endpoint": format!("{}/token", authorization.issuer),
        "client_id": EXCHANGE_CLIENT,
        "client_secret_env": SECRET_VAR,
    })
}

/// The binding of the upstream's `echo` for `tenant`, discovered as the user whose token
/// `subject` is (the library `cargo xtask discover --subject-token-env` runs).
async fn echo_binding(upstream: &Peer, auth: &Value, tenant: &str, subject: &str) -> Value {
    let discovery = discover(&DiscoverOptions {
        url: upstream.url.clone(),
        token: None,
        auth: Some(DiscoverAuth {
            config: serde_json::from_value(auth.clone()).unwrap(),
            secrets: [(SECRET_VAR.to_owned(), EXCHANGE_SECRET.to_owned())].into(),
            tenant: tenant.to_owned(),
            subject: Some(SubjectToken::new(subject)),
            store: None,
            agent: None,
        }),
        timeout: Duration::from_secs(20),
        ca_file: None,
    })
    .await
    .expect("discovered as the user");
    let tool = (discovery.tools.iter())
        .find(|tool| tool["name"] == "echo")
        .expect("the server lists echo");
    json!({"name": "echo", "description": tool["description"], "url": upstream.url,
        "mcp_tool": "echo", "input_schema": tool["inputSchema"], "tenants": [tenant],
        "timeout_seconds": 30, "pin": brain_config::ToolPin::of(tool), "auth": auth})
}

/// serve's config in `dir`: `echo` for tenant `acme`, whose static client is acme's and whose
/// users sign in with JWTs of `authorization` for `resource`.
fn serve_config(
    dir: &std::path::Path,
    authorization: &AuthorizationServer,
    resource: &str,
    echo: Value,
) -> std::path::PathBuf {
    let config = json!({
        "serve": {
            "clients": [{"tenant": "acme", "token_env": "BRAIN_SERVE_TOKEN_ACME"}],
            "authorization": {"issuer": authorization.issuer, "resource": resource,
                "tenant_claim": "tenant"},
        },
        "tools": [echo],
    });
    let path = dir.join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// Whom the upstream's `echo` calls came from: `(sub, act)` in order.
fn identities(upstream: &Peer) -> Vec<(String, String)> {
    let stats = upstream.stats();
    (stats["identities"].as_array().expect("identities").iter())
        .map(|seen| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&seen["sub"]), text(&seen["act"]))
        })
        .collect()
}

/// Whether each connection to the upstream carried one user's calls only: the users whose calls
/// each connection carried (by the `sub` of the token each call carried), and how many.
fn users_per_connection(upstream: &Peer) -> Vec<(String, std::collections::BTreeSet<String>)> {
    let stats = upstream.stats();
    let mut connections: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for origin in stats["origins"].as_array().expect("origins") {
        let token = origin["token"].as_str().unwrap_or_default();
        let user = stats["subjects"][token].as_str().unwrap_or("?").to_owned();
        let client = origin["client"].as_str().unwrap_or_default().to_owned();
        connections.entry(client).or_default().insert(user);
    }
    connections.into_iter().collect()
}

/// Whether the upstream was ever shown `token`.
fn shown(upstream: &Peer, token: &str) -> bool {
    (upstream.stats()["tokens"]
        .as_array()
        .expect("tokens")
        .iter())
    .any(|seen| seen == token)
}

#[test]
fn users_reach_the_upstream_as_themselves_through_serve() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let (authorization, upstream) = introspecting(&[("BRAIN_TEST_AS_JWT", "1")]);
    let (port, resource) = free_resource();
    let alice = tokio.block_on(authorization.user_token(&resource, ALICE));
    let carol = tokio.block_on(authorization.user_token(&resource, CAROL));
    assert_eq!(alice.split('.').count(), 3, "a JWT");
    let auth = exchange_auth(&authorization);
    let echo = tokio.block_on(echo_binding(&upstream, &auth, "acme", &alice));
    let dir = tempfile::tempdir().unwrap();
    let path = serve_config(dir.path(), &authorization, &resource, echo);
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start_at(
        &format!("127.0.0.1:{port}"),
        path.to_str().unwrap(),
        &state,
        &[
            (SECRET_VAR, EXCHANGE_SECRET),
            ("BRAIN_SERVE_TOKEN_ACME", ACME),
        ],
    );
    // Discovery exchanged alice's token once, in its own process's memory.
    let before = tokio.block_on(authorization.stats());
    assert_eq!(before["exchanges"][ALICE], json!(1), "{before}");

    let plan = |token: &str, user: &str| {
        let steps: Vec<Value> = (0..20)
            .map(|i| json!({"call": "echo", "arguments": {"message": format!("{user} {i}")}}))
            .collect();
        json!({"url": serving.url, "token": token, "mode": "auto", "steps": steps})
    };
    // The two users at once.
    let (alice_lines, carol_lines) = std::thread::scope(|scope| {
        let alice_plan = plan(&alice, ALICE);
        let carol_plan = plan(&carol, CAROL);
        let a = scope.spawn(move || client(alice_plan));
        let c = scope.spawn(move || client(carol_plan));
        (a.join().unwrap(), c.join().unwrap())
    });
    for (user, lines) in [(ALICE, &alice_lines), (CAROL, &carol_lines)] {
        assert_eq!(lines.len(), 20);
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(text(line), format!("{user} {i}"), "{line}");
        }
    }
    let seen = identities(&upstream);
    assert_eq!(seen.len(), 40, "each call ran once");
    for user in [ALICE, CAROL] {
        let theirs = (seen.iter())
            .filter(|(sub, act)| sub == user && act == EXCHANGE_CLIENT)
            .count();
        assert_eq!(
            theirs, 20,
            "{user} reached the upstream as {user}, brain acting: {seen:?}"
        );
    }
    assert!(
        !shown(&upstream, &alice) && !shown(&upstream, &carol),
        "no user's own token reached the upstream"
    );
    // A connection opened with alice's issued token never carries carol's calls.
    let connections = users_per_connection(&upstream);
    assert!(
        connections.iter().all(|(_, users)| users.len() == 1),
        "{connections:?}"
    );
    let stats = tokio.block_on(authorization.stats());
    assert_eq!(stats["exchanges"][ALICE], json!(2), "serve's one: {stats}");
    assert_eq!(stats["exchanges"][CAROL], json!(1), "{stats}");

    // Two users of one tenant writing the same session and call id: each call is its own
    // (the journal answers neither from the other's), each runs as its user.
    let same = json!({"brain.dev/session_id": "shared", "brain.dev/call_id": "same-id"});
    for (token, user) in [(&alice, ALICE), (&carol, CAROL)] {
        let lines = client(
            json!({"url": serving.url, "token": token, "mode": "auto", "steps": [
                {"call": "echo", "arguments": {"message": format!("{user} again")}, "meta": same},
            ]}),
        );
        assert_eq!(text(&lines[0]), format!("{user} again"), "{}", lines[0]);
    }
    let seen = identities(&upstream);
    assert_eq!(seen.len(), 42, "both calls ran");
    assert_eq!(seen[41].0, CAROL);

    // serve's static client acts for no user: refused, nothing sent.
    let lines = client(
        json!({"url": serving.url, "token": ACME, "mode": "auto", "steps": [
            {"call": "echo", "arguments": {"message": "no user"}},
        ]}),
    );
    assert_eq!(
        outcome(&lines[0])["reason"],
        json!("user_credential_required"),
        "{}",
        lines[0]
    );
    assert_eq!(upstream.tool_calls(), 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_calls_as_the_user_whose_token_it_is_given() {
    let (authorization, upstream) = tokio::task::spawn_blocking(|| introspecting(&[]))
        .await
        .unwrap();
    let alice = authorization
        .user_token("http://127.0.0.1:9/brain", ALICE)
        .await;
    let auth = exchange_auth(&authorization);
    let echo = echo_binding(&upstream, &auth, "local", &alice).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    std::fs::write(&config, json!({"tools": [echo]}).to_string()).unwrap();
    let config = config.display().to_string();
    let harness = |args: Vec<&'static str>| {
        let config = config.clone();
        let alice = alice.clone();
        async move {
            let mut all = vec!["--config", config.as_str()];
            all.extend(args);
            common::harness(
                &all,
                &[
                    (SECRET_VAR, EXCHANGE_SECRET),
                    ("ALICE_TOKEN", alice.as_str()),
                ],
            )
            .await
        }
    };
    let call = |extra: &'static [&'static str]| {
        let mut args = vec!["call", "--tenant", "local"];
        args.extend_from_slice(extra);
        args.extend(["echo", r#"{"message": "hello"}"#]);
        harness(args)
    };
    let output = call(&["--json", "--subject-token-env", "ALICE_TOKEN"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        common::stderr(&output)
    );
    assert!(
        !stdout.contains(&alice),
        "the user's token is never printed"
    );
    assert_eq!(
        identities(&upstream),
        [(ALICE.into(), EXCHANGE_CLIENT.into())]
    );
    assert!(
        !shown(&upstream, &alice),
        "alice's own token stayed with brain"
    );

    let output = call(&["--json"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("user_credential_required"), "{stdout}");
    let output = call(&["--subject-token-env", "NOT_SET_ANYWHERE"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(common::stderr(&output).contains("NOT_SET_ANYWHERE is not set"));
    assert_eq!(upstream.tool_calls(), 1, "nothing else was sent");

    // `drift --live` lists the server as the user; without a user it says what to pass.
    let output = harness(vec![
        "drift",
        "--live",
        "--subject-token-env",
        "ALICE_TOKEN",
    ])
    .await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "no drift: {}{}",
        String::from_utf8_lossy(&output.stdout),
        common::stderr(&output)
    );
    let output = harness(vec!["drift", "--live"]).await;
    assert_ne!(output.status.code(), Some(0));
    assert!(
        common::stderr(&output).contains("--subject-token-env"),
        "{}",
        common::stderr(&output)
    );
}

/// Two serve replicas on one PostgreSQL, behind one resource URL (as a load balancer would
/// front them): alice's calls to both, at once, make one exchange between them.
#[test]
fn two_serve_replicas_on_postgres_exchange_a_user_once() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let (authorization, upstream) = introspecting(&[("BRAIN_TEST_AS_JWT", "1")]);
    let cluster = tests::postgres::Cluster::start();
    let (_, resource) = free_resource();
    let alice = tokio.block_on(authorization.user_token(&resource, ALICE));
    let carol = tokio.block_on(authorization.user_token(&resource, CAROL));
    let auth = exchange_auth(&authorization);
    // Discovered as carol, so that alice's exchanges are the replicas' alone.
    let echo = tokio.block_on(echo_binding(&upstream, &auth, "acme", &carol));
    let dir = tempfile::tempdir().unwrap();
    let path = serve_config(dir.path(), &authorization, &resource, echo);
    let env = [
        (SECRET_VAR, EXCHANGE_SECRET),
        (
            "BRAIN_STATE_KEY",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        ),
    ];
    let replicas: Vec<Serving> = (0..2)
        .map(|_| Serving::start(path.to_str().unwrap(), &cluster.url, &env))
        .collect();
    let plan = |url: &str| {
        let calls: Vec<Value> = (0..10)
            .map(|i| json!({"call": "echo", "arguments": {"message": format!("alice {i}")}}))
            .collect();
        json!({"url": url, "token": alice, "mode": "auto", "steps": [{"parallel": calls}]})
    };
    let lines: Vec<Vec<Value>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (replicas.iter())
            .map(|replica| {
                let plan = plan(&replica.url);
                scope.spawn(move || client(plan))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for line in lines.iter().flatten() {
        assert!(text(line).starts_with("alice "), "{line}");
    }
    let seen = identities(&upstream);
    assert_eq!(
        seen.iter().filter(|(sub, _)| sub == ALICE).count(),
        20,
        "{seen:?}"
    );
    let stats = tokio.block_on(authorization.stats());
    assert_eq!(
        stats["exchanges"][ALICE],
        json!(1),
        "one exchange between the replicas: {stats}"
    );
}
