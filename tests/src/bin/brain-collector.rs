//! brain-collector: an OTLP/HTTP (protobuf) collector on loopback that prints every trace it
//! receives as a tree of spans, with their attributes and events. For trying brain's
//! OpenTelemetry output without installing a collector (docs/src/guides/observability.md); any
//! OTLP/HTTP collector takes the same output.
//!
//! ```text
//! brain-collector [--port 4318]
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Parser;
use tests::otlp::{Collector, Span};

/// Prints the traces sent to http://127.0.0.1:PORT/v1/traces.
#[derive(Parser)]
struct Args {
    /// The loopback port to listen on (4318 is OTLP/HTTP's).
    #[arg(long, default_value_t = 4318)]
    port: u16,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let collector = match Collector::bind(&format!("127.0.0.1:{}", args.port)).await {
        Ok(collector) => collector,
        Err(error) => {
            eprintln!("error: cannot listen on 127.0.0.1:{}: {error}", args.port);
            return std::process::ExitCode::from(2);
        }
    };
    eprintln!(
        "listening: OTEL_EXPORTER_OTLP_ENDPOINT={} (Ctrl-C to stop)",
        collector.endpoint
    );
    let (mut seen, mut seen_metrics) = (0, 0);
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return std::process::ExitCode::SUCCESS,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        let (spans, now) = collector.spans_from(seen);
        seen = now;
        print_trees(&spans);
        let (points, now) = collector.points_from(seen_metrics);
        seen_metrics = now;
        for point in points {
            let attributes: Vec<String> = point
                .attributes
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect();
            let sum = point
                .sum
                .map(|sum| format!(" sum {sum:.6}"))
                .unwrap_or_default();
            println!(
                "metric {} {{{}}} count {}{sum} {}",
                point.metric,
                attributes.join(", "),
                point.count,
                point.unit
            );
        }
    }
}

/// Each trace's spans as a tree, parents before children, siblings by start time.
fn print_trees(spans: &[Span]) {
    let mut traces: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for span in spans {
        traces.entry(&span.trace_id).or_default().push(span);
    }
    for (trace, mut spans) in traces {
        spans.sort_by_key(|span| span.start_ns);
        let service = spans
            .iter()
            .find_map(|span| span.service.as_deref())
            .unwrap_or("?");
        println!("trace {trace} ({service})");
        let ids: Vec<&str> = spans.iter().map(|span| span.span_id.as_str()).collect();
        for span in &spans {
            // Roots here: no parent, or a parent not in this export.
            if !ids.contains(&span.parent_span_id.as_str()) {
                print_span(span, &spans, 1);
            }
        }
    }
}

fn print_span(span: &Span, all: &[&Span], depth: usize) {
    let kind = match span.kind {
        1 => "internal",
        2 => "server",
        3 => "client",
        _ => "span",
    };
    let millis = span.end_ns.saturating_sub(span.start_ns) as f64 / 1e6;
    let status = if span.status == 2 { " ERROR" } else { "" };
    let indent = "  ".repeat(depth);
    println!("{indent}{} [{kind}] {millis:.3} ms{status}", span.name);
    for (key, value) in &span.attributes {
        println!("{indent}    {key} = {value}");
    }
    for (name, attributes) in &span.events {
        let attributes: Vec<String> = attributes
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        println!("{indent}    event {name} {}", attributes.join(" "));
    }
    for child in all
        .iter()
        .filter(|child| child.parent_span_id == span.span_id)
    {
        print_span(child, all, depth + 1);
    }
}
