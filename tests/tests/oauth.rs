//! OAuth against a real authorization server (`oidc-provider`, `tests::oauth`) and the test
//! server guarding `/mcp` with its tokens (introspected on every request): tokens from a
//! server's `401`, cached; step-up; refresh before expiry under 64 concurrent calls, one refresh
//! request; a `401` on `tools/call` itself re-authorizes once and the tool runs once; a revoked
//! authorization fails clearly, without a loop; users alice and bob log in through one client
//! and get JWTs naming each their own tenant.
#![allow(clippy::print_stderr)] // the authorization server's counts, printed for the record

use std::sync::Arc;
use std::time::Duration;

use brain_config::HostConfig;
use brain_runtime::auth::{MemoryTokenStore, TokenStore};
use brain_runtime::{Runtime, RuntimeBuilder};
use serde_json::{Value, json};
use tests::client::{call, config, text};
use tests::oauth::{
    ALICE, AuthorizationServer, BOB, Browser, SERVICE_CLIENT, SERVICE_SECRET, USER_CLIENT,
    jwt_claims, servers,
};
use tests::server::{Stats, TestServer};

const SECRET_VAR: &str = "BRAIN_OAUTH_TEST_CLIENT_SECRET";

/// Every test-server tool with `auth`, pinned to `revision`.
fn oauth_config(server: &TestServer, auth: Value, revision: &str) -> HostConfig {
    config(&server.url, |_, binding| {
        binding["auth"] = auth.clone();
        binding["protocol_version"] = json!(revision);
    })
}

fn service_auth() -> Value {
    json!({"type": "client_credentials", "client_id": SERVICE_CLIENT, "client_secret_env": SECRET_VAR})
}

fn user_auth() -> Value {
    json!({"type": "authorization_code", "client_id": USER_CLIENT})
}

fn builder(config: &HostConfig) -> RuntimeBuilder<'_> {
    Runtime::builder(config).env(|var| (var == SECRET_VAR).then(|| SERVICE_SECRET.to_owned()))
}

/// A runtime whose user-delegated tokens live in a memory store, obtained through a browser that
/// approves at once.
fn user_runtime(config: &HostConfig) -> (Runtime, Arc<MemoryTokenStore>) {
    let store = Arc::new(MemoryTokenStore::default());
    let runtime = builder(config)
        .token_store(store.clone())
        .user_agent(Arc::new(Browser))
        .build()
        .unwrap();
    (runtime, store)
}

/// The tokens stored for tenant `local` at `server` (the memory store keeps them unsealed).
async fn stored(
    store: &MemoryTokenStore,
    server: &TestServer,
) -> brain_runtime::auth::StoredTokens {
    let grants = store.list().await.unwrap();
    let grant = grants
        .iter()
        .find(|g| g.key.tenant == "local" && g.written.resource == server.url)
        .expect("a grant of tenant local");
    let row = store.load(&grant.key).await.unwrap().expect("the grant");
    serde_json::from_str(row.written.sealed.as_deref().expect("stored tokens")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_from_the_servers_challenge_then_cached() {
    let (authorization, server) = servers(300, &[]).await;
    let config = oauth_config(&server, service_auth(), "2025-11-25");
    let runtime = builder(&config).build().unwrap();
    for round in 0..3 {
        let result = call(
            &runtime,
            "echo",
            json!({"message": format!("hello {round}")}),
        )
        .await;
        assert!(!result.is_error, "{result:?}");
        assert_eq!(text(&result), format!("hello {round}"));
    }
    assert_eq!(
        authorization.tokens("client_credentials").await,
        1,
        "one token, cached"
    );
    // Only the first request went without a token.
    assert_eq!(Stats::get(&server.stats.refused), 1);
    assert_eq!(Stats::get(&server.stats.refused_calls), 0);
    assert_eq!(Stats::get(&server.stats.calls), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_up_asks_once_for_the_union_of_scopes() {
    // On a session the 401 comes on initialize and the 403 on tools/call; on 2026-07-28 the
    // 401 comes on the tools/list that verifies the pin, and the 403 on tools/call.
    for revision in ["2025-11-25", "2026-07-28"] {
        let (authorization, server) = servers(300, &["echo"]).await;
        let config = oauth_config(&server, service_auth(), revision);
        let runtime = builder(&config).build().unwrap();
        let result = call(&runtime, "echo", json!({"message": "needs admin"})).await;
        assert!(!result.is_error, "{revision}: {result:?}");
        assert_eq!(text(&result), "needs admin");
        // The refusals came before the tool ran; the call ran once, with the stepped-up token.
        let refused_calls = 1;
        assert_eq!(
            Stats::get(&server.stats.refused_calls),
            refused_calls,
            "{revision}"
        );
        assert_eq!(Stats::get(&server.stats.calls), 1, "{revision}");
        assert_eq!(
            authorization.tokens("client_credentials").await,
            2,
            "{revision}"
        );
        let again = call(&runtime, "echo", json!({"message": "again"})).await;
        assert!(!again.is_error, "{again:?}");
        assert_eq!(
            Stats::get(&server.stats.refused_calls),
            refused_calls,
            "{revision}: the new token has the scope"
        );
        assert_eq!(authorization.tokens("client_credentials").await, 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_refresh_before_expiry_once_under_64_concurrent_calls() {
    let (authorization, server) = servers(6, &[]).await;
    let config = oauth_config(&server, user_auth(), "2026-07-28");
    let (runtime, store) = user_runtime(&config);
    let first = call(&runtime, "echo", json!({"message": "first"})).await;
    assert!(!first.is_error, "{first:?}");
    assert_eq!(authorization.tokens("authorization_code").await, 1);
    let before = stored(&store, &server).await;
    assert!(
        before.refresh_token.is_some(),
        "offline_access gave a refresh token"
    );
    // A third of the 6 s lifetime before expiry the token is due: calls from then on refresh it.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let calls = (0..64).map(|i| {
        let runtime = runtime.clone();
        tokio::spawn(
            async move { call(&runtime, "echo", json!({"message": format!("m{i}")})).await },
        )
    });
    for (i, handle) in calls.enumerate() {
        let result = handle.await.unwrap();
        assert!(!result.is_error, "{result:?}");
        assert_eq!(text(&result), format!("m{i}"));
    }
    assert_eq!(
        authorization.tokens("refresh_token").await,
        1,
        "exactly one refresh"
    );
    assert_eq!(authorization.tokens("authorization_code").await, 1);
    let after = stored(&store, &server).await;
    assert_ne!(after.access_token, before.access_token);
    assert_ne!(
        after.refresh_token, before.refresh_token,
        "the refresh token rotated"
    );
    // None of the 64 was refused: the token was fresh before any was sent (the very first
    // 401 came on the tools/list that verified the pin, not on a tools/call).
    assert_eq!(
        Stats::get(&server.stats.refused_calls),
        0,
        "no call was refused"
    );
    assert_eq!(Stats::get(&server.stats.calls), 65);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_on_tools_call_reauthorizes_once_and_the_tool_runs_once() {
    let (authorization, server) = servers(300, &[]).await;
    // 2026-07-28: tools/call is the call's first request.
    let config = oauth_config(&server, user_auth(), "2026-07-28");
    let (runtime, store) = user_runtime(&config);
    let first = call(&runtime, "echo", json!({"message": "first"})).await;
    assert!(!first.is_error, "{first:?}");
    let refused_before = Stats::get(&server.stats.refused_calls);
    // The user's access token is revoked at the authorization server.
    authorization
        .revoke(&stored(&store, &server).await.access_token)
        .await;
    let second = call(&runtime, "echo", json!({"message": "second"})).await;
    assert!(!second.is_error, "{second:?}");
    assert_eq!(text(&second), "second");
    assert_eq!(
        Stats::get(&server.stats.refused_calls),
        refused_before + 1,
        "the first POST of the call was refused before it ran"
    );
    assert_eq!(
        Stats::get(&server.stats.calls),
        2,
        "each call ran exactly once"
    );
    // oidc-provider revokes the whole grant with its access token: the refresh was refused, and
    // the user (who approves at once here) was asked again, once.
    let stats = authorization.stats().await;
    assert_eq!(
        stats["token_errors"]["refresh_token:invalid_grant"],
        json!(1),
        "{stats}"
    );
    assert_eq!(stats["token"]["authorization_code"], json!(2), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_authorization_fails_clearly_without_a_loop() {
    let (authorization, server) = servers(300, &[]).await;
    let config = oauth_config(&server, user_auth(), "2026-07-28");
    let store: Arc<MemoryTokenStore> = Arc::new(MemoryTokenStore::default());
    // Log in as `brain-harness login` does, then call without any way to ask the user again.
    let binding = config.tools.iter().find(|b| b.name == "echo").unwrap();
    let line =
        brain_runtime::auth::login(binding, "local", store.clone(), Arc::new(Browser), |_| None)
            .await
            .unwrap();
    assert!(line.contains("stored tokens for tenant local"), "{line}");
    let runtime = builder(&config).token_store(store.clone()).build().unwrap();
    let ok = call(&runtime, "echo", json!({"message": "ok"})).await;
    assert!(!ok.is_error, "{ok:?}");
    // Revoking the refresh token ends the whole grant.
    authorization
        .revoke(
            stored(&store, &server)
                .await
                .refresh_token
                .as_deref()
                .unwrap(),
        )
        .await;
    let refused = call(&runtime, "echo", json!({"message": "refused"})).await;
    assert!(refused.is_error && !refused.unknown_outcome, "{refused:?}");
    assert!(
        text(&refused).contains("brain-harness login --tenant local echo"),
        "{}",
        text(&refused)
    );
    assert_eq!(
        Stats::get(&server.stats.calls),
        1,
        "the refused call never ran"
    );
    let stats = authorization.stats().await;
    assert_eq!(
        stats["token_errors"]["refresh_token:invalid_grant"],
        json!(1),
        "{stats}"
    );
    // The next call fails at once: nothing is asked of either server.
    let requests = Stats::get(&server.stats.requests);
    let again = call(&runtime, "echo", json!({"message": "again"})).await;
    assert!(again.is_error && !again.unknown_outcome, "{again:?}");
    assert_eq!(Stats::get(&server.stats.requests), requests);
    assert_eq!(
        authorization.stats().await["token_errors"],
        stats["token_errors"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_delegated_binding_without_tokens_asks_for_a_login() {
    let (_authorization, server) = servers(300, &[]).await;
    let config = oauth_config(&server, user_auth(), "2025-11-25");
    let runtime = builder(&config).build().unwrap();
    let result = call(&runtime, "echo", json!({"message": "x"})).await;
    assert!(result.is_error && !result.unknown_outcome, "{result:?}");
    assert!(
        text(&result).contains("brain-harness login --tenant local echo"),
        "{}",
        text(&result)
    );
    assert_eq!(Stats::get(&server.stats.calls), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_refuses_before_any_token_request() {
    let (authorization, server) = servers(300, &[]).await;
    let config = oauth_config(&server, service_auth(), "2025-11-25");
    let runtime = builder(&config).build().unwrap();
    let mut stranger = tests::client::request("echo", json!({"message": "x"}));
    stranger.scope.tenant_id = "stranger".into();
    let refused = runtime.call(stranger).result().await;
    assert!(refused.is_error && !refused.unknown_outcome, "{refused:?}");
    let invalid = call(&runtime, "echo", json!({"message": 7})).await;
    assert!(invalid.is_error && !invalid.unknown_outcome, "{invalid:?}");
    assert_eq!(
        Stats::get(&server.stats.requests),
        0,
        "nothing reached the server"
    );
    assert_eq!(
        authorization.stats().await["token"],
        json!({}),
        "no token was requested"
    );
}

/// The state's key of the PostgreSQL tests (a store other hosts read keeps tokens sealed).
const STATE_KEY: &str = "qDaj0LoVFJmvB1cR1iA3yx7n0T0nKcqNNs2kpoaSWd8=";

/// 4 replica processes (`brain-replica`) on `cluster`'s database, each with its own runtime
/// and connections, started at once: 3 rounds of 16 concurrent calls each, 3.5 s apart (past
/// the expiry of a 3 s token). Each must succeed in every call.
async fn four_replicas(server: &TestServer, auth: Value, cluster: &tests::postgres::Cluster) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    let tools = tests::server::bindings_json(&server.url, |_, binding| {
        binding["auth"] = auth.clone();
        binding["protocol_version"] = json!("2026-07-28");
    });
    std::fs::write(&path, json!({ "tools": tools }).to_string()).unwrap();
    tests::oauth::four_replicas(
        env!("CARGO_BIN_EXE_brain-replica"),
        &[
            path.to_str().unwrap(),
            &cluster.url,
            "echo",
            "16",
            "3",
            "3500",
        ],
        &[(SECRET_VAR, SERVICE_SECRET), ("BRAIN_STATE_KEY", STATE_KEY)],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_on_one_postgres_refresh_a_rotating_grant_once_per_expiry() {
    let (authorization, server) = servers(3, &[]).await;
    let cluster = tokio::task::spawn_blocking(tests::postgres::Cluster::start)
        .await
        .unwrap();
    let config = oauth_config(&server, user_auth(), "2026-07-28");
    let journal = brain_runtime::journal::Journal::postgres(&cluster.url)
        .await
        .unwrap();
    let binding = config.tools.iter().find(|b| b.name == "echo").unwrap();
    brain_runtime::auth::login(
        binding,
        "local",
        journal.grants(),
        Arc::new(Browser),
        |var| (var == "BRAIN_STATE_KEY").then(|| STATE_KEY.to_owned()),
    )
    .await
    .unwrap();
    four_replicas(&server, user_auth(), &cluster).await;
    let stats = authorization.stats().await;
    eprintln!("the authorization server's counts: {stats}");
    assert_eq!(
        stats["token"]["refresh_token"],
        json!(2),
        "one refresh per expiry: {stats}"
    );
    assert_eq!(
        stats["token_errors"],
        json!({}),
        "no invalid_grant: {stats}"
    );
    assert_eq!(stats["token"]["authorization_code"], json!(1), "{stats}");
    assert_eq!(Stats::get(&server.stats.calls), 3 * 4 * 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_on_one_postgres_share_one_client_credentials_token_per_expiry() {
    let (authorization, server) = servers(3, &[]).await;
    let cluster = tokio::task::spawn_blocking(tests::postgres::Cluster::start)
        .await
        .unwrap();
    four_replicas(&server, service_auth(), &cluster).await;
    let stats = authorization.stats().await;
    eprintln!("the authorization server's counts: {stats}");
    // The first round's fetch, then one per expiry: never one per replica.
    assert_eq!(stats["token"]["client_credentials"], json!(3), "{stats}");
    assert_eq!(stats["token_errors"], json!({}), "{stats}");
    assert_eq!(Stats::get(&server.stats.calls), 3 * 4 * 16);
}

/// The state's database gone once the access token has expired: the rotating grant (a login's,
/// not known not to rotate) is not refreshed blind — another process could be spending the
/// same refresh token; the call fails before `tools/call`, saying why, and the authorization
/// server sees no refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_reached_stops_the_refresh_of_a_rotating_grant() {
    let (authorization, server) = servers(2, &[]).await;
    let mut cluster = tokio::task::spawn_blocking(tests::postgres::Cluster::start)
        .await
        .unwrap();
    let config = oauth_config(&server, user_auth(), "2026-07-28");
    let journal = brain_runtime::journal::Journal::postgres(&cluster.url)
        .await
        .unwrap();
    let key = |var: &str| (var == "BRAIN_STATE_KEY").then(|| STATE_KEY.to_owned());
    let binding = config.tools.iter().find(|b| b.name == "echo").unwrap();
    brain_runtime::auth::login(binding, "local", journal.grants(), Arc::new(Browser), key)
        .await
        .unwrap();
    let runtime = Runtime::builder(&config)
        .env(key)
        .token_store(journal.grants())
        .build()
        .unwrap();
    let first = call(&runtime, "echo", json!({"message": "first"})).await;
    assert!(!first.is_error, "{first:?}");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.stop();
        cluster
    })
    .await
    .unwrap();
    let second = call(&runtime, "echo", json!({"message": "second"})).await;
    assert!(second.is_error && !second.unknown_outcome, "{second:?}");
    assert!(
        text(&second).contains("does not refresh a rotating grant it cannot record"),
        "{second:?}"
    );
    assert_eq!(
        authorization.tokens("refresh_token").await,
        0,
        "no refresh sent blind"
    );
    assert_eq!(Stats::get(&server.stats.calls), 1);
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alice_and_bob_log_in_through_one_client_and_their_tokens_name_their_tenants() {
    let resource = "http://127.0.0.1:9/mcp";
    let authorization = tokio::task::spawn_blocking(move || {
        AuthorizationServer::start_with(resource, 300, &[("BRAIN_TEST_AS_JWT", "1")])
    })
    .await
    .unwrap();
    let alice = jwt_claims(&authorization.user_token(resource, ALICE).await);
    let bob = jwt_claims(&authorization.user_token(resource, BOB).await);
    for (claims, user, tenant) in [(&alice, ALICE, "acme"), (&bob, BOB, "globex")] {
        assert_eq!(claims["sub"], json!(user), "{claims}");
        assert_eq!(claims["tenant"], json!(tenant), "{claims}");
        assert_eq!(claims["client_id"], json!(USER_CLIENT), "{claims}");
        assert_eq!(claims["aud"], json!(resource), "{claims}");
        assert_eq!(claims["iss"], json!(authorization.issuer), "{claims}");
    }
    assert_eq!(alice["client_id"], bob["client_id"], "one client for both");
    assert_eq!(authorization.tokens("authorization_code").await, 2);
    // A machine's token still names its client's tenant.
    let machine = jwt_claims(
        &authorization
            .client_credentials(SERVICE_CLIENT, SERVICE_SECRET, resource)
            .await,
    );
    assert_eq!(machine["tenant"], json!("acme"), "{machine}");
    assert_eq!(machine["client_id"], json!(SERVICE_CLIENT), "{machine}");
}
