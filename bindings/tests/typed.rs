//! Typed calls through the generated bindings: `runtime.call_typed(ToolCall::…(…Args { … }))`.

use bindings::generated::session_claims::{SessionClaimsArgs, SessionClaimsOutput};
use bindings::generated::webhook_echo::WebhookEchoArgs;
use bindings::generated::{ToolCall, echo::EchoArgs, host_config, long_task::LongTaskArgs};
use brain_runtime::{Event, Runtime, Scope};
use futures_util::StreamExt;
use tests::server::{Faults, TestServer};

const KEY: &str = "typed-session-token-key-0123456789abcdef";

/// The test server, with the session token key the runtime signs with.
async fn server() -> TestServer {
    TestServer::start(Faults {
        session_token_key: Some(KEY.as_bytes().to_vec()),
        ..Faults::default()
    })
    .await
    .unwrap()
}

/// The compiled-in bindings, pointed at `server`: MCP bindings at its MCP endpoint, HTTP and SSE
/// tools at its tool endpoints, stdio bindings at the test server binary.
fn runtime(server: &TestServer) -> Runtime {
    let mut config = host_config();
    let origin = server.url.trim_end_matches("/mcp");
    for binding in &mut config.tools {
        let kind = binding.kind();
        if let Some(url) = &mut binding.url {
            *url = match kind {
                brain_config::BindingKind::Mcp => server.url.clone(),
                _ => format!("{origin}{}", &url[url.find("/tools/").unwrap()..]),
            };
        }
        if let Some(command) = &mut binding.command {
            command[0] = tests::process::test_server_binary().display().to_string();
        }
    }
    Runtime::builder(&config)
        .env(|var| (var == brain_runtime::SESSION_TOKEN_KEY_ENV).then(|| KEY.to_owned()))
        .build()
        .unwrap()
}

fn scope() -> Scope {
    Scope {
        tenant_id: "local".into(),
        session_id: "typed".into(),
    }
}

#[tokio::test]
async fn typed_calls_reach_the_server() {
    let server = server().await;
    let runtime = runtime(&server);

    let call = ToolCall::Echo(EchoArgs {
        message: "typed hello".into(),
    });
    let result = runtime.call_typed(&call, scope(), None).result().await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(
        result.content,
        [brain_runtime::ContentBlock::text("typed hello")]
    );

    let call = ToolCall::LongTask(LongTaskArgs {
        steps: std::num::NonZeroU64::new(3).unwrap(),
        delay_ms: None,
    });
    let events: Vec<Event> = runtime
        .call_typed(&call, scope(), Some("typed-1".into()))
        .collect()
        .await;
    assert_eq!(events.len(), 4, "{events:?}");

    // JSON from a model: validated against the schema first, then typed.
    let call = ToolCall::parse("echo", serde_json::json!({"message": "parsed"})).unwrap();
    let result = runtime.call_typed(&call, scope(), None).result().await;
    assert_eq!(
        result.content,
        [brain_runtime::ContentBlock::text("parsed")]
    );
    assert_eq!(tests::server::Stats::get(&server.stats.calls), 3);
}

#[tokio::test]
async fn typed_calls_to_http_and_sse_tools() {
    let server = server().await;
    let runtime = runtime(&server);
    let call = ToolCall::WebhookEcho(WebhookEchoArgs {
        message: "typed webhook".into(),
    });
    let result = runtime
        .call_typed(&call, scope(), Some("typed-h".into()))
        .result()
        .await;
    assert!(!result.is_error, "{result:?}");
    let brain_runtime::ContentBlock::Text { text } = &result.content[0] else {
        panic!("{result:?}")
    };
    let body: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(body["arguments"]["message"], "typed webhook");
    assert_eq!(body["headers"]["idempotency-key"], "typed-h");

    // The SSE tool's structured output, typed by the generated output type.
    let call = ToolCall::SessionClaims(SessionClaimsArgs(serde_json::Map::new()));
    let events: Vec<Event> = runtime
        .call_typed(&call, scope(), Some("typed-s".into()))
        .collect()
        .await;
    assert_eq!(
        events.len(),
        3,
        "two progress events and the result: {events:?}"
    );
    let Some(Event::Result(result)) = events.last() else {
        panic!("{events:?}")
    };
    let claims: SessionClaimsOutput =
        serde_json::from_value(result.structured_content.clone().unwrap()).unwrap();
    assert_eq!(
        (claims.tenant_id.as_str(), claims.session_id.as_str()),
        ("local", "typed")
    );
    assert_eq!(
        (claims.call_id.as_str(), claims.tool.as_str()),
        ("typed-s", "session_claims")
    );
    assert_eq!(tests::server::Stats::get(&server.tools.requests), 2);
}

/// A typed call goes through the gate's id checks too: a call id or session with a control
/// character, or over 256 bytes, is refused and nothing reaches the server.
#[tokio::test]
async fn typed_calls_with_hostile_ids_are_refused_before_the_server() {
    let server = server().await;
    let runtime = runtime(&server);
    let call = ToolCall::Echo(EchoArgs {
        message: "typed hello".into(),
    });
    let ansi = Some("c1\u{1b}[2K\u{1b}[1A".to_owned());
    let hostile = Scope {
        tenant_id: "local".into(),
        session_id: "s\u{85}1".into(),
    };
    let long = Some("a".repeat(brain_runtime::MAX_ID_BYTES + 1));
    for (scope, id, field) in [
        (scope(), ansi, "call id"),
        (hostile, None, "session"),
        (scope(), long, "call id"),
    ] {
        let result = runtime.call_typed(&call, scope, id).result().await;
        assert!(result.is_error && !result.unknown_outcome, "{result:?}");
        assert_eq!(
            result.kind,
            Some(brain_runtime::OutcomeKind::Refused),
            "{result:?}"
        );
        let text = format!("{:?}", result.content);
        assert!(text.contains(&format!("the {field} \\\"")), "{text}");
    }
    assert_eq!(tests::server::Stats::get(&server.stats.calls), 0);
    runtime.wait_for_cleanup().await;
}
