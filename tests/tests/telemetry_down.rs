//! A host exporting brain's spans to a collector that accepts connections and never answers:
//! the calls go on as if it were not there. The exporter would wait 60 s for each batch; 2,000
//! calls at 32 at a time (8,000 spans, more than the batch queue holds) finish long before one
//! export could, all of them ok.

use std::time::{Duration, Instant};

use brain_runtime::Runtime;
use opentelemetry::trace::TracerProvider as _;
use serde_json::json;
use tests::client::{config, request};
use tests::otlp::{Silent, tracer_provider};
use tests::server::{Faults, TestServer};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_never_wait_for_a_collector_that_never_answers() {
    let silent = Silent::start().await.unwrap();
    // The exporter would wait this long for each export.
    let provider = tracer_provider(&silent.endpoint, Duration::from_secs(60)).unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("host")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let server = TestServer::start(Faults::default()).await.unwrap();
    let runtime = Runtime::new(&config(&server.url, |_, _| {})).unwrap();
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..32 {
        let runtime = runtime.clone();
        workers.push(tokio::spawn(
            async move {
                let mut failed = 0;
                for _ in 0..2000 / 32 {
                    let result = runtime
                        .call(request("echo", json!({"message": "hi"})))
                        .result()
                        .await;
                    failed += usize::from(result.is_error);
                }
                failed
            }
            .instrument(tracing::info_span!("agent", worker)),
        ));
    }
    let mut failed = 0;
    for worker in workers {
        failed += worker.await.unwrap();
    }
    let took = started.elapsed();
    assert_eq!(failed, 0);
    // Exported or not, the batch went to the silent collector.
    let tried = async {
        while silent.accepted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), tried)
        .await
        .expect("the exporter tried to reach the collector");
    // One export alone would have held a blocked call for 60 s.
    assert!(took < Duration::from_secs(30), "{took:?}");
    runtime.wait_for_cleanup().await;
}
