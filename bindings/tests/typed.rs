//! Typed calls through the generated bindings: `runtime.call_typed(ToolCall::…(…Args { … }))`.

use bindings::generated::{ToolCall, echo::EchoArgs, host_config, long_task::LongTaskArgs};
use brain_runtime::{Event, Runtime, Scope};
use futures_util::StreamExt;
use tests::server::{Faults, TestServer};

fn scope() -> Scope {
    Scope {
        tenant_id: "local".into(),
        session_id: "typed".into(),
    }
}

#[tokio::test]
async fn typed_calls_reach_the_server() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let mut config = host_config();
    for binding in &mut config.tools {
        if binding.url.is_some() {
            binding.url = Some(server.url.clone());
        }
        if let Some(command) = &mut binding.command {
            command[0] = tests::process::test_server_binary().display().to_string();
        }
    }
    let runtime = Runtime::new(&config).unwrap();

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
