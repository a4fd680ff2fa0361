//! The harness's OpenTelemetry export: OTLP over HTTP (protobuf) when the standard variables ask
//! for it, nothing when they do not.
//!
//! - Traces when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
//!   metrics when `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set
//!   (`OTEL_EXPORTER_OTLP_ENDPOINT` gets `/v1/traces` and `/v1/metrics` appended; a signal's own
//!   variable is used as it is). `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT` and
//!   their per-signal forms are read by the exporter. Only `http/protobuf` is built in: another
//!   `OTEL_EXPORTER_OTLP_PROTOCOL` gets a warning on stderr.
//! - The resource: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`; `service.name` is
//!   `brain-harness` when neither names one.
//! - Spans are batched and exported on the SDK's own thread: a call never waits for the
//!   collector. At exit the harness flushes them, waiting at most [`FLUSH_BOUND`] (0.25 s after
//!   a signal, to keep its promise to exit within 2 s): a collector that is down or never
//!   answers costs the process that much, never the call.

#![allow(clippy::print_stderr)]

use std::sync::mpsc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// How long the harness waits at exit for its spans and metrics to reach the collector.
pub(crate) const FLUSH_BOUND: Duration = Duration::from_millis(500);
/// The same after Ctrl-C or SIGTERM, when the process has promised to exit within 2 s and has
/// already spent up to 1.5 s telling the server.
pub(crate) const INTERRUPTED_FLUSH_BOUND: Duration = Duration::from_millis(250);

/// The spans the OpenTelemetry layer exports: brain's own (the runtime's call spans, serve's
/// server spans and the harness's root span), at `info`.
const EXPORTED: &str = "brain_runtime=info,brain_serve=info,bindings=info";

/// What was installed; [`Telemetry::shut_down`] flushes it.
pub(crate) struct Telemetry {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
}

fn set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|value| !value.is_empty())
}

/// Installs the `tracing` subscriber (the `RUST_LOG` logs to stderr when set, the OpenTelemetry
/// layer when traces are exported) and the global meter provider when metrics are. Call it
/// before the runtime is built (its instruments come from the global meter provider) and
/// outside any tokio runtime.
pub(crate) fn install(log: bool, ansi: bool) -> Telemetry {
    let traces_wanted =
        set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let metrics_wanted =
        set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    if traces_wanted || metrics_wanted {
        // reqwest is built without a default TLS provider: an https collector gets ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        for var in [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        ] {
            if let Ok(protocol) = std::env::var(var)
                && !protocol.is_empty()
                && protocol != "http/protobuf"
            {
                eprintln!(
                    "warning: {var}={protocol} is not supported: brain-harness exports OTLP over \
                     HTTP with protobuf only; point the endpoint at the collector's OTLP/HTTP \
                     port (usually 4318)"
                );
            }
        }
    }
    let resource = resource();
    let traces = traces_wanted
        .then(|| {
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .build()
                .map_err(|error| eprintln!("warning: traces are not exported: {error}"))
                .ok()
        })
        .flatten()
        .map(|exporter| {
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource.clone())
                .build()
        });
    let metrics = metrics_wanted
        .then(|| {
            opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .build()
                .map_err(|error| eprintln!("warning: metrics are not exported: {error}"))
                .ok()
        })
        .flatten()
        .map(|exporter| {
            let provider = SdkMeterProvider::builder()
                .with_reader(PeriodicReader::builder(exporter).build())
                .with_resource(resource)
                .build();
            opentelemetry::global::set_meter_provider(provider.clone());
            provider
        });
    let logs = log.then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_filter(tracing_subscriber::EnvFilter::from_default_env())
    });
    let spans = traces.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("brain-harness"))
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_location(false)
            .with_target(false)
            .with_filter(
                EXPORTED
                    .parse::<tracing_subscriber::filter::Targets>()
                    .expect("a valid filter"),
            )
    });
    if logs.is_some() || spans.is_some() {
        let _ = tracing_subscriber::registry()
            .with(logs)
            .with(spans)
            .try_init();
    }
    Telemetry { traces, metrics }
}

/// `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, with `service.name` `brain-harness` when
/// neither names one.
fn resource() -> Resource {
    let named = set("OTEL_SERVICE_NAME")
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|attributes| {
            attributes
                .split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name("brain-harness").build()
    }
}

impl Telemetry {
    /// Exports what is left, waiting at most `bound` ([`FLUSH_BOUND`], or
    /// [`INTERRUPTED_FLUSH_BOUND`] after a signal).
    pub(crate) fn shut_down(self, bound: Duration) {
        if self.traces.is_none() && self.metrics.is_none() {
            return;
        }
        let (done, finished) = mpsc::channel();
        let flushing = std::thread::spawn(move || {
            if let Some(traces) = self.traces {
                let _ = traces.shutdown_with_timeout(bound);
            }
            if let Some(metrics) = self.metrics {
                let _ = metrics.shutdown();
            }
            let _ = done.send(());
        });
        if finished.recv_timeout(bound).is_ok() {
            let _ = flushing.join();
        }
    }
}
