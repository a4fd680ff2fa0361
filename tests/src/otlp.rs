//! An OTLP/HTTP collector in the tests' process: it decodes what an exporter sends to
//! `/v1/traces` and `/v1/metrics` (protobuf), keeps it, and answers as a collector does. And a
//! collector that is down in the worst way: it accepts connections and never answers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use prost::Message;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};

/// One span as the collector received it.
#[derive(Debug, Clone)]
pub struct Span {
    /// The span's name.
    pub name: String,
    /// Hex, as in `traceparent`.
    pub trace_id: String,
    /// Hex.
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// The OTLP `SpanKind` number: 1 internal, 3 client.
    pub kind: i32,
    /// Its attributes.
    pub attributes: BTreeMap<String, Value>,
    /// Each event's name and attributes.
    pub events: Vec<(String, BTreeMap<String, Value>)>,
    /// The OTLP status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
    /// `service.name` of the resource it came with.
    pub service: Option<String>,
    /// Start and end, in nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
}

/// One data point of a metric: its attributes and its value (a sum's value, or a histogram's
/// count and sum).
#[derive(Debug, Clone)]
pub struct Point {
    /// The metric's name.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// The point's attributes.
    pub attributes: BTreeMap<String, Value>,
    /// A sum's value; a histogram's count.
    pub count: f64,
    /// A histogram's sum.
    pub sum: Option<f64>,
}

/// The request bodies received, decoded when asked for (receiving stays cheap: the bench's
/// collector shares the machine with what it measures).
#[derive(Default)]
struct Received {
    traces: Vec<Bytes>,
    metrics: Vec<Bytes>,
}

/// A collector on a free loopback port, stopped when dropped.
pub struct Collector {
    /// `http://127.0.0.1:PORT`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    received: Arc<Mutex<Received>>,
    _stop: DropGuard,
}

fn lock(received: &Mutex<Received>) -> std::sync::MutexGuard<'_, Received> {
    received
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An empty export response: everything was accepted.
fn accepted() -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
    )
}

async fn traces(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> impl IntoResponse {
    lock(&received).traces.push(body);
    accepted()
}

async fn metrics(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> impl IntoResponse {
    lock(&received).metrics.push(body);
    accepted()
}

impl Collector {
    /// Starts the collector on a free loopback port.
    pub async fn start() -> std::io::Result<Collector> {
        Collector::bind("127.0.0.1:0").await
    }

    /// Starts the collector on `address`.
    pub async fn bind(address: &str) -> std::io::Result<Collector> {
        let listener = TcpListener::bind(address).await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Received::default()));
        let app = axum::Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .with_state(received.clone());
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await;
        });
        Ok(Collector {
            endpoint,
            received,
            _stop: stop.drop_guard(),
        })
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans_from(0).0
    }

    /// The spans of the exports received after the first `seen`, and how many exports there
    /// are now.
    pub fn spans_from(&self, seen: usize) -> (Vec<Span>, usize) {
        let (requests, count) =
            decoded::<ExportTraceServiceRequest>(&lock(&self.received).traces, seen);
        let mut spans = Vec::new();
        for request in requests {
            for resource in &request.resource_spans {
                let service = resource.resource.as_ref().and_then(|resource| {
                    attributes(&resource.attributes)
                        .get("service.name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
                for scope in &resource.scope_spans {
                    for span in &scope.spans {
                        spans.push(Span {
                            name: span.name.clone(),
                            trace_id: hex(&span.trace_id),
                            span_id: hex(&span.span_id),
                            parent_span_id: hex(&span.parent_span_id),
                            kind: span.kind,
                            attributes: attributes(&span.attributes),
                            events: span
                                .events
                                .iter()
                                .map(|event| (event.name.clone(), attributes(&event.attributes)))
                                .collect(),
                            status: span.status.as_ref().map_or(0, |status| status.code),
                            service: service.clone(),
                            start_ns: span.start_time_unix_nano,
                            end_ns: span.end_time_unix_nano,
                        });
                    }
                }
            }
        }
        (spans, count)
    }

    /// Every data point of every metric received so far.
    pub fn points(&self) -> Vec<Point> {
        self.points_from(0).0
    }

    /// The data points of the exports received after the first `seen`, and how many exports
    /// there are now.
    pub fn points_from(&self, seen: usize) -> (Vec<Point>, usize) {
        let (requests, count) =
            decoded::<ExportMetricsServiceRequest>(&lock(&self.received).metrics, seen);
        let mut points = Vec::new();
        for request in requests {
            for resource in &request.resource_metrics {
                for scope in &resource.scope_metrics {
                    for metric in &scope.metrics {
                        let point = |attributes: &[KeyValue], count: f64, sum: Option<f64>| Point {
                            metric: metric.name.clone(),
                            unit: metric.unit.clone(),
                            attributes: self::attributes(attributes),
                            count,
                            sum,
                        };
                        match &metric.data {
                            Some(metric::Data::Sum(data)) => {
                                for p in &data.data_points {
                                    let value = match p.value {
                                        Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(v)) => v as f64,
                                        Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsDouble(v)) => v,
                                        None => 0.0,
                                    };
                                    points.push(point(&p.attributes, value, None));
                                }
                            }
                            Some(metric::Data::Histogram(data)) => {
                                for p in &data.data_points {
                                    points.push(point(&p.attributes, p.count as f64, p.sum));
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        (points, count)
    }
}

/// The export requests among `bodies` after the first `seen`, and how many bodies there are.
fn decoded<M: Message + Default>(bodies: &[Bytes], seen: usize) -> (Vec<M>, usize) {
    let requests = bodies
        .iter()
        .skip(seen)
        .map(|body| M::decode(body.clone()).expect("an OTLP export"))
        .collect();
    (requests, bodies.len())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, Value> {
    list.iter()
        .map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, any)))
        .collect()
}

fn any(value: &AnyValue) -> Value {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(array)) => {
            Value::Array(array.values.iter().map(any).collect())
        }
        Some(any_value::Value::KvlistValue(list)) => {
            json!(attributes(&list.values))
        }
        Some(any_value::Value::BytesValue(bytes)) => json!(hex(bytes)),
        _ => Value::Null,
    }
}

/// A host's span pipeline to the collector at `endpoint` (`http://HOST:PORT`): OTLP/HTTP
/// protobuf, batched on the SDK's thread, each export given up after `timeout`. Installs ring
/// as rustls's provider if none is (the exporter's reqwest brings none).
pub fn tracer_provider(
    endpoint: &str,
    timeout: std::time::Duration,
) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    use opentelemetry_otlp::WithExportConfig;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{endpoint}/v1/traces"))
        .with_timeout(timeout)
        .build()?;
    Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build())
}

/// A collector that accepts connections, reads nothing and never answers; stopped when dropped.
pub struct Silent {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// How many connections it accepted.
    pub accepted: Arc<std::sync::atomic::AtomicUsize>,
    _stop: DropGuard,
}

impl Silent {
    /// Starts the silent collector.
    pub async fn start() -> std::io::Result<Silent> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = accepted.clone();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                tokio::select! {
                    () = stopped.cancelled() => return,
                    accepted = listener.accept() => {
                        if let Ok((stream, _)) = accepted {
                            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            held.push(stream);
                        }
                    }
                }
            }
        });
        Ok(Silent {
            endpoint,
            accepted,
            _stop: stop.drop_guard(),
        })
    }
}
