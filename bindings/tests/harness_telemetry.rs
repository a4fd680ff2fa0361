//! brain-harness exporting OpenTelemetry as a user runs it: the real binary against the test
//! server on loopback, exporting to an OTLP/HTTP collector in this process that decodes what
//! arrives (and to one that never answers).

use std::collections::BTreeMap;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::otlp::{Collector, Silent, Span};
use tests::server::{Faults, TestServer};

mod common;

use common::{harness, stderr, write_config};

fn result(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{e}: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn attribute<'a>(span: &'a Span, key: &str) -> &'a Value {
    span.attributes.get(key).unwrap_or(&Value::Null)
}

/// The spans of one trace, by name (each name once).
fn by_name(spans: &[Span], trace_id: &str) -> BTreeMap<String, Span> {
    spans
        .iter()
        .filter(|span| span.trace_id == trace_id)
        .map(|span| (span.name.clone(), span.clone()))
        .collect()
}

#[tokio::test]
async fn a_call_is_a_client_span_with_phases_metrics_and_its_trace_context_on_the_wire() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let collector = Collector::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "agent-host"),
    ];
    let call = |tool: &'static str, args: &'static str, tenant: &'static str, id: &'static str| {
        let config = config.clone();
        async move {
            harness(
                &[
                    "--config",
                    &config,
                    "call",
                    "--tenant",
                    tenant,
                    "--call-id",
                    id,
                    tool,
                    args,
                ],
                &env,
            )
            .await
        }
    };

    // echo_meta: the server returns the `_meta` it received.
    let output = call("echo_meta", "{}", "local", "meta-1").await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let seen = result(&output)["structured_content"]["meta"].clone();
    let traceparent = seen["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("{seen}"));
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!((parts[0], parts[3]), ("00", "01"), "{traceparent}");
    let (trace_id, parent_id) = (parts[1], parts[2]);

    // A call with arguments and a result that must never be recorded, and progress.
    let output = call(
        "echo",
        r#"{"message": "personal-data-in-arguments"}"#,
        "local",
        "echo-1",
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let output = call("progress", r#"{"steps": 3}"#, "local", "progress-1").await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // Refused by the gate: a span and a counter, no I/O.
    let output = call("echo", r#"{"message": "x"}"#, "intruder", "refused-1").await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");

    let spans = collector.spans();
    let trace = by_name(&spans, trace_id);
    let names: Vec<&String> = trace.keys().collect();
    assert_eq!(
        names,
        [
            "brain-harness call echo_meta",
            "initialize",
            "session close",
            "tools/call",
            "tools/call echo_meta",
            "tools/list"
        ],
        "{spans:#?}"
    );
    let root = &trace["brain-harness call echo_meta"];
    let client = &trace["tools/call echo_meta"];
    assert_eq!(root.parent_span_id, "", "the harness's span is the root");
    assert_eq!(root.service.as_deref(), Some("agent-host"));
    assert_eq!(client.parent_span_id, root.span_id);
    assert_eq!(client.kind, 3, "a CLIENT span");
    for phase in ["initialize", "tools/call", "session close"] {
        assert_eq!(trace[phase].parent_span_id, client.span_id, "{phase}");
    }
    // The server continues the trace from the `tools/call` request's own span.
    assert_eq!(trace["tools/call"].span_id, parent_id);
    let port = url::Url::parse(&server.url).unwrap().port().unwrap();
    let session = attribute(client, "mcp.session.id")
        .as_str()
        .unwrap_or_default();
    assert!(!session.is_empty(), "{client:#?}");
    for (key, value) in [
        ("mcp.method.name", json!("tools/call")),
        ("gen_ai.operation.name", json!("execute_tool")),
        ("gen_ai.tool.name", json!("echo_meta")),
        ("mcp.protocol.version", json!("2025-11-25")),
        ("jsonrpc.request.id", json!("1")),
        ("server.address", json!("127.0.0.1")),
        ("server.port", json!(port)),
        ("network.transport", json!("tcp")),
        ("brain.tenant_id", json!("local")),
        ("brain.call_id", json!("meta-1")),
        ("brain.unknown_outcome", json!(false)),
        ("brain.binding.kind", json!("mcp")),
    ] {
        assert_eq!(attribute(client, key), &value, "{key}: {client:#?}");
    }
    assert_eq!(attribute(client, "error.type"), &Value::Null);
    assert_eq!(
        attribute(&trace["initialize"], "mcp.method.name"),
        "initialize"
    );

    // Progress: three events on the call's span, numbers only.
    let request = spans
        .iter()
        .find(|span| span.name == "tools/call progress")
        .expect("the progress call's span");
    let events: Vec<&Value> = request
        .events
        .iter()
        .filter(|(name, _)| name == "progress")
        .map(|(_, attributes)| &attributes["progress"])
        .collect();
    assert_eq!(
        events,
        [&json!(1.0), &json!(2.0), &json!(3.0)],
        "{request:#?}"
    );
    assert!(
        request
            .events
            .iter()
            .all(|(_, a)| !a.contains_key("message")),
        "progress messages are not recorded: {request:#?}"
    );

    // The refused call.
    let refused = spans
        .iter()
        .find(|span| attribute(span, "brain.call_id") == "refused-1")
        .expect("the refused call's span");
    assert_eq!(attribute(refused, "error.type"), "refused");
    assert_eq!(refused.status, 2, "status error");

    // Never arguments or results.
    let everything = format!("{spans:?}");
    assert!(
        !everything.contains("personal-data-in-arguments"),
        "{everything}"
    );

    // Metrics: the duration histogram and the calls counter (one process per call: each
    // exported its own).
    let points = collector.points();
    let durations: Vec<_> = points
        .iter()
        .filter(|p| p.metric == "mcp.client.operation.duration")
        .collect();
    let echo_meta = durations
        .iter()
        .find(|p| p.attributes.get("gen_ai.tool.name") == Some(&json!("echo_meta")))
        .unwrap_or_else(|| panic!("{points:#?}"));
    assert_eq!(echo_meta.unit, "s");
    assert_eq!(echo_meta.count, 1.0);
    assert!(
        echo_meta.sum.is_some_and(|s| s > 0.0 && s < 30.0),
        "{echo_meta:?}"
    );
    for (key, value) in [
        ("mcp.method.name", json!("tools/call")),
        ("gen_ai.operation.name", json!("execute_tool")),
        ("mcp.protocol.version", json!("2025-11-25")),
        ("server.address", json!("127.0.0.1")),
        ("server.port", json!(port)),
    ] {
        assert_eq!(
            echo_meta.attributes.get(key),
            Some(&value),
            "{key}: {echo_meta:?}"
        );
    }
    let count = |outcome: &str| -> f64 {
        points
            .iter()
            .filter(|p| {
                p.metric == "brain.client.calls"
                    && p.attributes.get("brain.outcome") == Some(&json!(outcome))
            })
            .map(|p| p.count)
            .sum()
    };
    assert_eq!((count("ok"), count("refused")), (3.0, 1.0), "{points:#?}");
}

#[tokio::test]
async fn an_otlp_protocol_the_harness_does_not_speak_is_named() {
    let output = harness(
        &["tools"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = stderr(&output);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported")
            && stderr.contains("port (usually 4318)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_collector_that_never_answers_costs_the_call_nothing() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let silent = Silent::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url, |_| {});
    let started = Instant::now();
    let output = harness(
        &[
            "--config",
            &config,
            "call",
            "--tenant",
            "local",
            "echo",
            r#"{"message": "hi"}"#,
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", silent.endpoint.as_str()),
            // The exporter would wait this long for each export.
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
        ],
    )
    .await;
    let elapsed = started.elapsed();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(result(&output)["is_error"], json!(false));
    // The connection the harness opened is accepted here once this test's task runs again.
    let tried = async {
        while silent.accepted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), tried)
        .await
        .expect("the harness tried to export");
    // The call and the exit wait at most the flush bound (0.5 s) for the collector, never the
    // exporter's 60 s.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
}
