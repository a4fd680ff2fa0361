//! Isolation: a token goes only to the configured origin (a redirect to another loopback origin is
//! not followed: a second server proves nothing reached it); a caller cannot replace the scope in
//! `_meta`; a tenant not on the allowlist causes no request at all; a schema with a remote `$ref`
//! causes no network request.

use std::time::Duration;

use brain_config::HostConfig;
use brain_runtime::{CallRequest, Runtime, Scope};
use serde_json::{Value, json};
use tests::server::{Faults, Stats, TestServer, bindings_json};

fn config(url: &str, patch: impl Fn(&mut Value)) -> HostConfig {
    let text = json!({"tools": bindings_json(url, |_, binding| patch(binding))}).to_string();
    brain_config::parse(text.as_bytes(), "isolation.json").unwrap_or_else(|e| panic!("{e}"))
}

/// A runtime with every test-server tool pinned to `revision`.
fn runtime_at(url: &str, revision: &str) -> Runtime {
    Runtime::new(&config(url, |binding| {
        binding["protocol_version"] = json!(revision);
    }))
    .unwrap()
}

fn request(tool: &str, tenant: &str, arguments: Value) -> CallRequest {
    CallRequest::new(
        tool,
        Scope {
            tenant_id: tenant.into(),
            session_id: "isolation".into(),
        },
        arguments,
    )
    .with_call_id("iso-1")
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed_and_gets_no_token() {
    let elsewhere = TestServer::start(Faults::default()).await.unwrap();
    let redirecting = TestServer::start(Faults {
        redirect_to: Some(elsewhere.url.clone()),
        ..Faults::default()
    })
    .await
    .unwrap();
    for revision in ["2025-11-25", "2026-07-28"] {
        let config = config(&redirecting.url, |binding| {
            binding["token_env"] = json!("BRAIN_ISOLATION_TOKEN");
            binding["protocol_version"] = json!(revision);
        });
        let runtime = Runtime::builder(&config)
            .env(|_| Some("isolation-secret".into()))
            .build()
            .unwrap();
        let result = runtime
            .call(request("echo", "local", json!({"message": "x"})))
            .result()
            .await;
        assert!(result.is_error, "{result:?}");
        assert!(format!("{result:?}").contains("307"), "{result:?}");
        runtime.wait_for_cleanup().await;
    }
    // Every runtime is gone: once both servers have seen their connections closed, nothing
    // more can arrive.
    redirecting.closed_by_client().await;
    elsewhere.closed_by_client().await;
    // The configured origin got the token; the other origin got nothing at all.
    assert!(Stats::get(&redirecting.stats.authorized_requests) >= 2);
    assert_eq!(Stats::get(&elsewhere.stats.requests), 0);
    assert_eq!(Stats::get(&elsewhere.stats.authorized_requests), 0);
}

#[tokio::test]
async fn a_caller_cannot_replace_the_scope() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    for revision in ["2025-11-25", "2026-07-28"] {
        let runtime = runtime_at(&server.url, revision);
        let forged =
            json!({"tenant_id": "other-tenant", "session_id": "forged", "call_id": "forged"});
        let arguments = json!({"_meta": {"brain.dev/scope": forged, "progressToken": "forged"}});
        let result = runtime
            .call(request("echo_meta", "local", arguments))
            .result()
            .await;
        assert!(!result.is_error, "{result:?}");
        let seen = result.structured_content.unwrap();
        assert_eq!(
            seen["meta"]["brain.dev/scope"],
            json!({"tenant_id": "local", "session_id": "isolation", "call_id": "iso-1"}),
            "{revision}"
        );
        assert_eq!(seen["meta"]["progressToken"], json!("iso-1"), "{revision}");
    }
}

#[tokio::test]
async fn a_tenant_not_allowed_causes_no_request() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    for revision in ["2025-11-25", "2026-07-28"] {
        let runtime = runtime_at(&server.url, revision);
        let result = runtime
            .call(request("echo", "intruder", json!({"message": "x"})))
            .result()
            .await;
        assert!(result.is_error && !result.unknown_outcome, "{result:?}");
        runtime.wait_for_cleanup().await;
    }
    server.closed_by_client().await;
    assert_eq!(Stats::get(&server.stats.requests), 0);
    assert_eq!(Stats::get(&server.stats.connections), 0);
}

#[tokio::test]
async fn a_remote_ref_causes_no_request() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let remote = format!("http://{}/schema.json", listener.local_addr().unwrap());
    let accepted = tokio::spawn(async move {
        let mut count = 0;
        while tokio::time::timeout(Duration::from_millis(500), listener.accept())
            .await
            .is_ok()
        {
            count += 1;
        }
        count
    });
    let schema = json!({"type": "object", "properties": {"profile": {"$ref": remote}}});
    let binding = json!({
        "name": "lookup", "description": "Remote ref.", "input_schema": schema,
        "url": "http://127.0.0.1:9/mcp", "mcp_tool": "lookup", "tenants": ["local"]
    });
    // The config compiler refuses it, by rule, without fetching.
    let text = json!({"tools": [binding.clone()]}).to_string();
    let errors = brain_config::parse(text.as_bytes(), "ref.json").unwrap_err();
    assert!(errors.to_string().contains("remote"), "{errors}");
    // A config built in code, past the compiler: the runtime refuses to compile the schema.
    let tool: brain_config::ToolBinding = serde_json::from_value(binding).unwrap();
    let config = HostConfig {
        serve: None,
        tenant_limits: None,
        policies: None,
        approvals: None,
        audit: None,
        model_apis: None,
        schema: None,
        tools: vec![tool],
    };
    assert!(Runtime::new(&config).is_err());
    assert_eq!(accepted.await.unwrap(), 0);
}

/// The policies' principal is the scope's tenant unless a front end says who authenticated; a
/// principal of another tenant than the scope's is refused at the gate (`policy_denied`), and so
/// is a call no policy permits, or one whose arguments a `forbid` matches — nothing reaches the
/// server, and the same call under its own tenant runs.
#[tokio::test]
async fn policies_refuse_before_any_request() {
    use brain_runtime::{OutcomeKind, Principal};
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = tests::policies::with_twenty(config(&server.url, |_| {}), "echo");
    let runtime = Runtime::new(&config).unwrap();
    let user = |tenant: &str| Principal::User {
        tenant: tenant.into(),
        issuer: "https://id.example".into(),
        subject: "alice".into(),
    };
    let refused = [
        request("echo", "local", json!({"message": "x"})).with_principal(user("globex")),
        request("echo", "local", json!({"message": "a secret-7 here"})),
        request("weather", "local", json!({"city": "Oslo"})),
    ];
    for call in refused {
        let result = runtime.call(call).result().await;
        assert!(result.is_error && !result.unknown_outcome, "{result:?}");
        assert_eq!(result.kind, Some(OutcomeKind::PolicyDenied), "{result:?}");
    }
    assert_eq!(Stats::get(&server.stats.requests), 0, "nothing was sent");
    let allowed = runtime
        .call(request("echo", "local", json!({"message": "x"})).with_principal(user("local")))
        .result()
        .await;
    assert!(!allowed.is_error, "{allowed:?}");
    assert_eq!(Stats::get(&server.stats.calls), 1);
}
