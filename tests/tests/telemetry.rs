//! The runtime's spans as a host that installs OpenTelemetry sees them, on every transport: the
//! host's own span is the parent (the current span, without `CallRequest::parent`), the
//! 2026-07-28 call carries its trace context in `_meta` with no session phases, and a stdio
//! call names its program. Exported over OTLP/HTTP to a collector in this process.

use std::time::Duration;

use brain_runtime::Runtime;
use opentelemetry::trace::TracerProvider as _;
use serde_json::{Value, json};
use tests::client::{config, request};
use tests::otlp::{Collector, Span, tracer_provider};
use tests::process::test_server_binary;
use tests::server::{Faults, TestServer};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

fn attribute<'a>(span: &'a Span, key: &str) -> &'a Value {
    span.attributes.get(key).unwrap_or(&Value::Null)
}

/// The children of `parent`, by name.
fn children<'a>(spans: &'a [Span], parent: &Span) -> Vec<&'a str> {
    let mut names: Vec<&str> = spans
        .iter()
        .filter(|span| span.parent_span_id == parent.span_id)
        .map(|span| span.name.as_str())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transport_makes_the_same_spans_under_the_hosts_span() {
    let collector = Collector::start().await.unwrap();
    let provider = tracer_provider(&collector.endpoint, Duration::from_secs(10)).unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("host")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let server = TestServer::start(Faults::default()).await.unwrap();
    let stdio = vec![
        json!(test_server_binary().display().to_string()),
        json!("--stdio"),
    ];
    let config = config(&server.url, |name, binding| match name {
        "echo_meta" => {}
        "echo" => binding["protocol_version"] = json!("2026-07-28"),
        "weather" => {
            binding.as_object_mut().unwrap().remove("url");
            binding["command"] = json!(stdio);
        }
        _ => {}
    });
    let runtime = Runtime::new(&config).unwrap();

    // The host's span is current; the calls are made inside it.
    let turn = tracing::info_span!("agent turn");
    let (session, stateless, pipe) = async {
        let session = runtime.call(request("echo_meta", json!({}))).result().await;
        let stateless = runtime
            .call(request("echo", json!({"message": "hi"})))
            .result()
            .await;
        let pipe = runtime
            .call(request("weather", json!({"city": "Lyon"})))
            .result()
            .await;
        (session, stateless, pipe)
    }
    .instrument(turn.clone())
    .await;
    drop(turn);
    runtime.wait_for_cleanup().await;
    for result in [&session, &stateless, &pipe] {
        assert!(!result.is_error, "{result:?}");
    }
    tokio::task::spawn_blocking(move || provider.force_flush().unwrap())
        .await
        .unwrap();
    let spans = collector.spans();

    let turn = spans
        .iter()
        .find(|s| s.name == "agent turn")
        .expect("the host's span");
    assert_eq!(
        children(&spans, turn),
        [
            "tools/call echo",
            "tools/call echo_meta",
            "tools/call weather"
        ],
        "{spans:#?}"
    );
    let span = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name}: {spans:#?}"))
    };

    // Session: initialize, the tools/list that verifies the pin (the runtime's first call to
    // the server), tools/call, session close; the server saw the tools/call span.
    let echo_meta = span("tools/call echo_meta");
    assert_eq!(
        children(&spans, echo_meta),
        ["initialize", "session close", "tools/call", "tools/list"]
    );
    let seen = &session.structured_content.as_ref().unwrap()["meta"]["traceparent"];
    let request_span = spans
        .iter()
        .find(|s| s.name == "tools/call" && s.parent_span_id == echo_meta.span_id)
        .unwrap();
    assert_eq!(
        seen,
        &json!(format!(
            "00-{}-{}-01",
            request_span.trace_id, request_span.span_id
        ))
    );

    // 2026-07-28: the verifying tools/list, one request, no session.
    let echo = span("tools/call echo");
    assert_eq!(children(&spans, echo), ["tools/call", "tools/list"]);
    assert_eq!(attribute(echo, "mcp.protocol.version"), "2026-07-28");
    assert_eq!(attribute(echo, "mcp.session.id"), &Value::Null);

    // stdio: the program, over a pipe.
    let weather = span("tools/call weather");
    assert_eq!(
        children(&spans, weather),
        ["initialize", "session close", "tools/call", "tools/list"]
    );
    assert_eq!(attribute(weather, "network.transport"), "pipe");
    assert_eq!(
        attribute(weather, "process.executable.name"),
        "brain-test-server"
    );
    assert_eq!(attribute(weather, "server.address"), &Value::Null);
}
