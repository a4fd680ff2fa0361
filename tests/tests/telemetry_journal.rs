//! The call span's `brain.journal.state`, and the journal's record of the call's trace id, as a
//! host that installs OpenTelemetry sees them (its own binary: it installs the global
//! subscriber).

use std::time::Duration;

use brain_runtime::Runtime;
use brain_runtime::journal::{Filter, Journal};
use opentelemetry::trace::TracerProvider as _;
use serde_json::{Value, json};
use tests::client::{config, request};
use tests::otlp::{Collector, tracer_provider};
use tests::server::{Faults, TestServer};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_span_says_what_the_journal_made_of_the_call() {
    let collector = Collector::start().await.unwrap();
    let provider = tracer_provider(&collector.endpoint, Duration::from_secs(10)).unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("host")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let server = TestServer::start(Faults::default()).await.unwrap();
    let journal = Journal::memory();
    let runtime = Runtime::builder(&config(&server.url, |_, _| {}))
        .journal(journal.clone())
        .build()
        .unwrap();
    let mut states = Vec::new();
    for (turn, message) in [("first", "hi"), ("retry", "hi"), ("reuse", "other")] {
        let span = tracing::info_span!("agent turn", turn);
        let result = async {
            runtime
                .call(request("echo", json!({ "message": message })))
                .result()
                .await
        }
        .instrument(span)
        .await;
        // The outcome is recorded off the caller's path: a retry that came before it would
        // wait for it, and its span would say `in_progress_elsewhere`.
        runtime.wait_for_cleanup().await;
        states.push((turn, result.replayed, result.is_error));
    }
    assert_eq!(
        states,
        [
            ("first", false, false),
            ("retry", true, false),
            ("reuse", false, true)
        ]
    );
    runtime.wait_for_cleanup().await;
    tokio::task::spawn_blocking(move || provider.force_flush().unwrap())
        .await
        .unwrap();
    let spans = collector.spans();
    let call_of = |turn: &str| {
        let parent = spans
            .iter()
            .find(|s| s.name == "agent turn" && s.attributes.get("turn") == Some(&json!(turn)))
            .unwrap_or_else(|| panic!("{turn}: {spans:#?}"));
        spans
            .iter()
            .find(|s| s.name == "tools/call echo" && s.parent_span_id == parent.span_id)
            .unwrap_or_else(|| panic!("{turn}: {spans:#?}"))
    };
    let state = |turn: &str| {
        call_of(turn)
            .attributes
            .get("brain.journal.state")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(state("first"), json!("new"));
    assert_eq!(state("retry"), json!("replayed"));
    assert_eq!(state("reuse"), json!("conflict"));
    let error_type = |turn: &str| call_of(turn).attributes.get("error.type").cloned();
    assert_eq!(error_type("first"), None);
    assert_eq!(error_type("retry"), None);
    assert_eq!(error_type("reuse"), Some(json!("refused")));
    // The journal keeps the trace id of the call that was sent.
    let first = call_of("first");
    let entries = journal.list(&Filter::default()).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0].trace_id.as_deref(),
        Some(first.trace_id.as_str())
    );
}
