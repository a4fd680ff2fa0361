//! Bindings on behalf of users (`auth.type` `token_exchange`), through the front ends.
//!
//! serve: alice and carol of one company (tenant `acme`) sign in to serve
//! with JWTs from a real authorization server (`oidc-provider`); serve's `echo` binding exchanges
//! each user's own JWT (RFC 8693) at the same server and calls the test server, which
//! introspects every request. Counted on both sides: the upstream sees each user as themselves
//! with brain as the actor and never a user's JWT; one exchange per user; two users writing the
//! same session and call id each get their own call; a static client of serve (no user) is
//! refused and nothing is sent.
//!
//! `brain-harness call --subject-token-env VAR`: the upstream sees the user whose token VAR
//! holds; without the flag the call is refused (a `tool.result`, exit 1) and nothing is sent.

use serde_json::{Value, json};
use tests::oauth::{ALICE, CAROL, EXCHANGE_CLIENT, EXCHANGE_SECRET, servers_with};
use tests::server::Stats;

mod common;
mod serving;

use serving::*;

const SECRET_VAR: &str = "BRAIN_SERVE_EXCHANGE_SECRET";

#[test]
fn users_reach_the_upstream_as_themselves_through_serve() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let (authorization, upstream) =
        tokio.block_on(servers_with(300, &[], &[("BRAIN_TEST_AS_JWT", "1")]));
    let (port, resource) = free_resource();
    let mut echo = tests::server::bindings_json(&upstream.url, |_, _| {})
        .into_iter()
        .find(|binding| binding["name"] == "echo")
        .expect("the test server has echo");
    echo["tenants"] = json!(["acme"]);
    echo["protocol_version"] = json!("2026-07-28");
    echo["auth"] = json!({
        "type": "token_exchange",
        "token_endpoint": format!("{}/token", authorization.issuer),
        "client_id": EXCHANGE_CLIENT,
        "client_secret_env": SECRET_VAR,
    });
    let config = json!({
        "serve": {
            "clients": [{"tenant": "acme", "token_env": "BRAIN_SERVE_TOKEN_ACME"}],
            "authorization": {"issuer": authorization.issuer, "resource": resource,
                "tenant_claim": "tenant"},
        },
        "tools": [echo],
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
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
    let alice = tokio.block_on(authorization.user_token(&resource, ALICE));
    let carol = tokio.block_on(authorization.user_token(&resource, CAROL));
    assert_eq!(alice.split('.').count(), 3, "a JWT");

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
    let identities = upstream.stats.identities.lock().unwrap().clone();
    assert_eq!(identities.len(), 40, "each call ran once");
    for user in [ALICE, CAROL] {
        let theirs = identities
            .iter()
            .filter(|seen| {
                seen.subject.as_deref() == Some(user)
                    && seen.actor.as_deref() == Some(EXCHANGE_CLIENT)
            })
            .count();
        assert_eq!(
            theirs, 20,
            "{user} reached the upstream as {user}, brain acting"
        );
    }
    assert!(
        identities
            .iter()
            .all(|seen| seen.token != alice && seen.token != carol),
        "no user's own token reached the upstream"
    );
    let stats = tokio.block_on(authorization.stats());
    assert_eq!(stats["exchanges"][ALICE], json!(1), "{stats}");
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
    let identities = upstream.stats.identities.lock().unwrap().clone();
    assert_eq!(identities.len(), 42, "both calls ran");
    assert_eq!(identities[41].subject.as_deref(), Some(CAROL));

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
    assert_eq!(Stats::get(&upstream.stats.calls), 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_calls_as_the_user_whose_token_it_is_given() {
    let (authorization, upstream) = servers_with(300, &[], &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("{}/token", authorization.issuer);
    let config = common::write_config(dir.path(), &upstream.url, |binding| {
        binding["protocol_version"] = json!("2026-07-28");
        binding["auth"] = json!({
            "type": "token_exchange",
            "token_endpoint": endpoint,
            "client_id": EXCHANGE_CLIENT,
            "client_secret_env": SECRET_VAR,
        });
    });
    let alice = authorization
        .user_token("http://127.0.0.1:9/brain", ALICE)
        .await;
    let call = |extra: &'static [&'static str]| {
        let config = config.clone();
        let alice = alice.clone();
        async move {
            let mut args = vec!["--config", config.as_str(), "call", "--tenant", "local"];
            args.extend_from_slice(extra);
            args.extend(["echo", r#"{"message": "hello"}"#]);
            common::harness(
                &args,
                &[
                    (SECRET_VAR, EXCHANGE_SECRET),
                    ("ALICE_TOKEN", alice.as_str()),
                ],
            )
            .await
        }
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
    let identities = upstream.stats.identities.lock().unwrap().clone();
    assert_eq!(identities.len(), 1, "{identities:?}");
    assert_eq!(identities[0].subject.as_deref(), Some(ALICE));
    assert_eq!(identities[0].actor.as_deref(), Some(EXCHANGE_CLIENT));
    assert_ne!(identities[0].token, alice);

    let output = call(&["--json"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("user_credential_required"), "{stdout}");
    let output = call(&["--subject-token-env", "NOT_SET_ANYWHERE"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(common::stderr(&output).contains("NOT_SET_ANYWHERE is not set"));
    assert_eq!(
        Stats::get(&upstream.stats.calls),
        1,
        "nothing else was sent"
    );
}
