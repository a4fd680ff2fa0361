//! On behalf of users: a binding whose `auth` is `token_exchange` exchanges each caller's own
//! token (RFC 8693) at a real authorization server (`oidc-provider` with the grant registered,
//! `tests/interop/oauth_server.mjs`) and calls the test server — which introspects every request
//! — with the issued token. Counted on both sides: the server sees each user (`sub`) and brain
//! (`act.sub`), never a user's own token; the authorization server counts one exchange per user
//! while the issued token lives; a call without a user token, or one the authorization server
//! refuses, is not sent.

use std::time::Duration;

use brain_config::HostConfig;
use brain_runtime::{CallRequest, Reason, Runtime, Scope, SubjectToken, ToolResult};
use serde_json::{Value, json};
use tests::client::{config, text};
use tests::oauth::{ALICE, BOB, CAROL, EXCHANGE_CLIENT, EXCHANGE_SECRET, servers_with};
use tests::server::{Stats, TestServer};

const SECRET_VAR: &str = "BRAIN_EXCHANGE_TEST_CLIENT_SECRET";
/// The key the replicas seal the shared tokens with.
const STATE_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// Every test-server tool on behalf of users, exchanging at `token_endpoint`, at 2026-07-28.
fn exchange_config(server: &TestServer, token_endpoint: &str) -> HostConfig {
    let auth = exchange_auth(token_endpoint);
    config(&server.url, |_, binding| {
        binding["auth"] = auth.clone();
        binding["protocol_version"] = json!("2026-07-28");
    })
}

/// The `auth` of a binding on behalf of users, exchanging at `token_endpoint`.
fn exchange_auth(token_endpoint: &str) -> Value {
    json!({
        "type": "token_exchange",
        "token_endpoint": token_endpoint,
        "client_id": EXCHANGE_CLIENT,
        "client_secret_env": SECRET_VAR,
    })
}

fn runtime(config: &HostConfig) -> Runtime {
    Runtime::builder(config)
        .env(|var| (var == SECRET_VAR).then(|| EXCHANGE_SECRET.to_owned()))
        .build()
        .unwrap()
}

/// `echo` as tenant `local`, with the caller's token when there is one.
async fn echo(runtime: &Runtime, message: &str, subject: Option<SubjectToken>) -> ToolResult {
    let scope = Scope {
        tenant_id: "local".into(),
        session_id: "session-1".into(),
    };
    let mut request = CallRequest::new("echo", scope, json!({ "message": message }));
    if let Some(subject) = subject {
        request = request.with_subject_token(subject);
    }
    runtime.call(request).result().await
}

/// The exchanges the authorization server made for `user`.
async fn exchanges(stats: &Value, user: &str) -> u64 {
    stats["exchanges"][user].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_reaches_the_server_as_themselves_with_one_exchange_each() {
    let (authorization, server) = servers_with(300, &[], &[]).await;
    let endpoint = format!("{}/token", authorization.issuer);
    let runtime = runtime(&exchange_config(&server, &endpoint));
    // The users' own tokens, for brain (another resource than the server's).
    let brain = "http://127.0.0.1:9/brain";
    let alice = authorization.user_token(brain, ALICE).await;
    let bob = authorization.user_token(brain, BOB).await;
    let verified =
        |token: &str, user: &str| SubjectToken::verified(token, &authorization.issuer, user);
    // 20 calls each, interleaved and concurrent.
    let calls = (0..40).map(|i| {
        let (token, user) = if i % 2 == 0 {
            (&alice, ALICE)
        } else {
            (&bob, BOB)
        };
        let runtime = &runtime;
        let subject = verified(token, user);
        async move {
            (
                user,
                echo(runtime, &format!("{user} {i}"), Some(subject)).await,
            )
        }
    });
    for (user, result) in futures_util::future::join_all(calls).await {
        assert!(!result.is_error, "{user}: {result:?}");
        assert!(text(&result).starts_with(user), "{result:?}");
    }
    let identities = server.stats.identities.lock().unwrap().clone();
    assert_eq!(identities.len(), 40, "every call ran once: {identities:?}");
    for user in [ALICE, BOB] {
        let theirs: Vec<_> = identities
            .iter()
            .filter(|seen| seen.subject.as_deref() == Some(user))
            .collect();
        assert_eq!(
            theirs.len(),
            20,
            "{user}'s calls reached the server as {user}"
        );
        assert!(
            theirs
                .iter()
                .all(|seen| seen.actor.as_deref() == Some(EXCHANGE_CLIENT)),
            "brain acts for {user}: {theirs:?}"
        );
    }
    assert!(
        identities
            .iter()
            .all(|seen| seen.token != alice && seen.token != bob),
        "a user's own token never reaches the server"
    );
    // alice signs in again (a new token): the issued token is still valid, so no exchange.
    let renewed = authorization.user_token(brain, ALICE).await;
    assert_ne!(renewed, alice);
    let again = echo(&runtime, "alice again", Some(verified(&renewed, ALICE))).await;
    assert!(!again.is_error, "{again:?}");
    let stats = authorization.stats().await;
    assert_eq!(exchanges(&stats, ALICE).await, 1, "{stats}");
    assert_eq!(exchanges(&stats, BOB).await, 1, "{stats}");
    assert_eq!(Stats::get(&server.stats.calls), 41);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_user_token_or_with_one_refused_nothing_is_sent() {
    let (authorization, server) =
        servers_with(300, &[], &[("BRAIN_TEST_AS_EXCHANGE_DENY", CAROL)]).await;
    let endpoint = format!("{}/token", authorization.issuer);
    let runtime = runtime(&exchange_config(&server, &endpoint));

    let anonymous = echo(&runtime, "who am I", None).await;
    assert!(
        anonymous.is_error && !anonymous.unknown_outcome,
        "{anonymous:?}"
    );
    assert_eq!(
        anonymous.reason,
        Some(Reason::UserCredentialRequired),
        "{anonymous:?}"
    );
    assert!(text(&anonymous).contains("no user token"), "{anonymous:?}");

    let carol = authorization
        .user_token("http://127.0.0.1:9/brain", CAROL)
        .await;
    let refused = echo(&runtime, "as carol", Some(SubjectToken::new(carol.clone()))).await;
    assert!(refused.is_error && !refused.unknown_outcome, "{refused:?}");
    assert!(text(&refused).contains("invalid_grant"), "{refused:?}");
    assert!(
        !text(&refused).contains(&carol),
        "the user's token is never in a message"
    );

    let forged = echo(&runtime, "forged", Some(SubjectToken::new("not-a-token"))).await;
    assert!(forged.is_error && !forged.unknown_outcome, "{forged:?}");

    // The authorization server stopped: refused, not sent.
    drop(authorization);
    let alone = echo(&runtime, "no AS", Some(SubjectToken::new("whatever"))).await;
    assert!(alone.is_error && !alone.unknown_outcome, "{alone:?}");

    assert_eq!(
        Stats::get(&server.stats.calls),
        0,
        "no call reached the tool"
    );
    assert!(server.stats.identities.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_is_exchanged_again_once_the_issued_token_is_due() {
    // Tokens live 6 s: the issued one is renewed once 2 s of it remain.
    let (authorization, server) = servers_with(6, &[], &[]).await;
    let endpoint = format!("{}/token", authorization.issuer);
    let runtime = runtime(&exchange_config(&server, &endpoint));
    let brain = "http://127.0.0.1:9/brain";
    let issuer = authorization.issuer.clone();
    let as_alice = |token: &str| SubjectToken::verified(token, &issuer, ALICE);
    let first = authorization.user_token(brain, ALICE).await;
    for i in 0..5 {
        let result = echo(&runtime, &format!("early {i}"), Some(as_alice(&first))).await;
        assert!(!result.is_error, "{result:?}");
    }
    // A new token of the same user (a new `jti`) does not force an exchange while the issued
    // token is valid.
    let second = authorization.user_token(brain, ALICE).await;
    let result = echo(&runtime, "new jti", Some(as_alice(&second))).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(exchanges(&authorization.stats().await, ALICE).await, 1);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let third = authorization.user_token(brain, ALICE).await;
    let result = echo(&runtime, "late", Some(as_alice(&third))).await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(exchanges(&authorization.stats().await, ALICE).await, 2);
    assert_eq!(Stats::get(&server.stats.calls), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_on_one_postgres_exchange_a_user_once() {
    let (authorization, server) = servers_with(300, &[], &[]).await;
    let cluster = tokio::task::spawn_blocking(tests::postgres::Cluster::start)
        .await
        .unwrap();
    let endpoint = format!("{}/token", authorization.issuer);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    let tools = tests::server::bindings_json(&server.url, |_, binding| {
        binding["protocol_version"] = json!("2026-07-28");
        binding["auth"] = exchange_auth(&endpoint);
    });
    std::fs::write(&path, json!({ "tools": tools }).to_string()).unwrap();
    let alice = authorization
        .user_token("http://127.0.0.1:9/brain", ALICE)
        .await;
    // Four processes, 16 calls each at once, the same user: the first calls arrive together.
    tests::oauth::four_replicas(
        env!("CARGO_BIN_EXE_brain-replica"),
        &[path.to_str().unwrap(), &cluster.url, "echo", "16", "1", "0"],
        &[
            (SECRET_VAR, EXCHANGE_SECRET),
            ("BRAIN_STATE_KEY", STATE_KEY),
            ("BRAIN_REPLICA_SUBJECT_TOKEN", &alice),
        ],
    )
    .await;
    let stats = authorization.stats().await;
    assert_eq!(
        exchanges(&stats, ALICE).await,
        1,
        "one exchange across replicas: {stats}"
    );
    let identities = server.stats.identities.lock().unwrap().clone();
    assert_eq!(identities.len(), 64);
    assert!(
        identities
            .iter()
            .all(|seen| seen.subject.as_deref() == Some(ALICE))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issued_token_the_upstream_refuses_is_exchanged_once_more() {
    let (authorization, server) = servers_with(300, &[], &[]).await;
    let endpoint = format!("{}/token", authorization.issuer);
    let runtime = runtime(&exchange_config(&server, &endpoint));
    let alice = authorization
        .user_token("http://127.0.0.1:9/brain", ALICE)
        .await;
    let as_alice = || SubjectToken::verified(&alice, &authorization.issuer, ALICE);
    let first = echo(&runtime, "first", Some(as_alice())).await;
    assert!(!first.is_error, "{first:?}");
    let issued = server.stats.identities.lock().unwrap()[0].token.clone();
    // The issued token revoked: the upstream's introspection now says inactive, and answers 401.
    authorization
        .revoke_as(&issued, EXCHANGE_CLIENT, Some(EXCHANGE_SECRET))
        .await;
    let second = echo(&runtime, "second", Some(as_alice())).await;
    assert!(!second.is_error, "{second:?}");
    assert_eq!(text(&second), "second");
    assert_eq!(exchanges(&authorization.stats().await, ALICE).await, 2);
    let identities = server.stats.identities.lock().unwrap().clone();
    assert_eq!(identities.len(), 2, "the tool ran once per call");
    assert_ne!(identities[1].token, issued, "a new issued token");
    assert!(
        Stats::get(&server.stats.refused) >= 1,
        "the revoked token was refused"
    );
    assert_eq!(Stats::get(&server.stats.calls), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_see_whom_brain_will_ask_for_before_any_exchange() {
    let (authorization, server) = servers_with(300, &[], &[]).await;
    let endpoint = format!("{}/token", authorization.issuer);
    let dir = tempfile::tempdir().unwrap();
    let policies = format!(
        "@id(\"all\")\npermit (principal, action, resource);\n\
         @id(\"not-bob\")\n@reason(\"bob may not act upstream\")\n\
         forbid (principal, action, resource)\n\
         when {{ context.upstream.subject == \"{}|{BOB}\" \
         && context.upstream.actor == \"{EXCHANGE_CLIENT}\" }};\n",
        authorization.issuer
    );
    std::fs::write(dir.path().join("calls.cedar"), policies).unwrap();
    let tools = tests::server::bindings_json(&server.url, |_, binding| {
        binding["protocol_version"] = json!("2026-07-28");
        binding["auth"] = exchange_auth(&endpoint);
    });
    let path = dir.path().join("host.json");
    let host = json!({"policies": {"files": ["calls.cedar"]}, "tools": tools});
    std::fs::write(&path, host.to_string()).unwrap();
    let config = brain_config::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let runtime = runtime(&config);
    let brain = "http://127.0.0.1:9/brain";
    let issuer = authorization.issuer.clone();
    let alice = authorization.user_token(brain, ALICE).await;
    let bob = authorization.user_token(brain, BOB).await;
    let allowed = echo(
        &runtime,
        "alice",
        Some(SubjectToken::verified(&alice, &issuer, ALICE)),
    )
    .await;
    assert!(!allowed.is_error, "{allowed:?}");
    let denied = echo(
        &runtime,
        "bob",
        Some(SubjectToken::verified(&bob, &issuer, BOB)),
    )
    .await;
    assert!(denied.is_error && !denied.unknown_outcome, "{denied:?}");
    assert!(text(&denied).contains("not-bob"), "{denied:?}");
    let stats = authorization.stats().await;
    assert_eq!(
        exchanges(&stats, BOB).await,
        0,
        "a denied call never reaches the AS: {stats}"
    );
    assert_eq!(Stats::get(&server.stats.calls), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_call_is_their_own_in_the_journal_and_the_audit_chain() {
    use brain_runtime::journal::{Durability, Journal};
    let (authorization, server) = servers_with(300, &[], &[]).await;
    let endpoint = format!("{}/token", authorization.issuer);
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal)
        .unwrap()
        .audit(brain_runtime::audit::AuditSettings::default());
    let config = exchange_config(&server, &endpoint);
    let runtime = Runtime::builder(&config)
        .env(|var| (var == SECRET_VAR).then(|| EXCHANGE_SECRET.to_owned()))
        .journal(journal.clone())
        .build()
        .unwrap();
    let brain = "http://127.0.0.1:9/brain";
    let alice = authorization.user_token(brain, ALICE).await;
    let bob = authorization.user_token(brain, BOB).await;
    // The Rust API's tokens, which brain has not verified: keyed by their digests.
    let call = |token: &str| {
        let scope = Scope {
            tenant_id: "local".into(),
            session_id: "shared".into(),
        };
        let request = CallRequest::new("echo", scope, json!({ "message": "mine" }))
            .with_call_id("same-id")
            .with_subject_token(SubjectToken::new(token));
        runtime.call(request).result()
    };
    let first = call(&alice).await;
    assert!(!first.is_error, "{first:?}");
    // bob under alice's call id is not answered from alice's result, and nothing is sent.
    let theirs = call(&bob).await;
    assert!(theirs.is_error && !theirs.unknown_outcome, "{theirs:?}");
    assert_eq!(
        theirs.kind,
        Some(brain_runtime::OutcomeKind::JournalConflict),
        "{theirs:?}"
    );
    // alice's retry is answered from her journaled result.
    let again = call(&alice).await;
    assert_eq!(text(&again), "mine", "{again:?}");
    runtime.wait_for_cleanup().await;
    assert_eq!(Stats::get(&server.stats.calls), 1, "the tool ran once");

    let records = journal
        .store()
        .audit_records("local", 1, 1000)
        .await
        .unwrap();
    let claimed: Vec<Value> = (records.iter())
        .map(|r| serde_json::from_str::<Value>(&r.record).unwrap())
        .filter(|record| record["kind"] == "claimed")
        .collect();
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(
        claimed[0]["subject"],
        json!(SubjectToken::new(alice.as_str()).subject()),
        "whom brain asked a token for"
    );
    assert_eq!(claimed[0]["actor"], json!(EXCHANGE_CLIENT));
    let issued = server.stats.identities.lock().unwrap()[0].token.clone();
    for record in &records {
        for token in [&alice, &bob, &issued] {
            assert!(
                !record.record.contains(token.as_str()),
                "no token in the chain"
            );
        }
    }
}
