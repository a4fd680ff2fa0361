//! What a call tells a tracing backend, by the OpenTelemetry semantic conventions for MCP: a
//! CLIENT span per call named `tools/call {binding}`, child spans for its phases (`initialize`,
//! `tools/call`, `session close`), progress as span events, the `mcp.client.operation.duration`
//! histogram and a counter of calls by outcome, and the W3C trace context in `params._meta` of
//! `initialize` and `tools/call` (SEP-414).
//!
//! brain installs nothing: spans go through `tracing` (a host that installs
//! tracing-opentelemetry's layer gets them as OpenTelemetry spans, and its trace context in
//! `_meta`), metrics through the `opentelemetry` API's global meter provider as it is when the
//! runtime is built. Without either, the spans are disabled and the instruments do nothing.
//!
//! Recorded: the binding, the tenant, the call id, the revision, the session id, the server's
//! address or program, the JSON-RPC id, the outcome. Never recorded: arguments, results,
//! progress messages, tokens, headers.

use std::time::Duration;

use brain_config::{BindingKind, ToolBinding};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::event::ToolResult;

/// The instrumentation scope of brain's metrics.
pub(crate) const METER: &str = "brain-runtime";

/// The conventions' bucket boundaries for MCP operation durations, in seconds.
const DURATION_BOUNDARIES: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// A runtime's metric instruments, made from the global meter provider when it is built.
pub(crate) struct Instruments {
    /// `mcp.client.operation.duration`: a call from its start to its result, in seconds.
    duration: Histogram<f64>,
    /// `brain.client.calls`: calls by binding and outcome.
    calls: Counter<u64>,
    /// `brain.limit.refusals`: calls a limit refused, by binding, limit and reason.
    limit_refusals: Counter<u64>,
    /// `brain.limit.wait.duration`: how long calls waited for a token or a slot.
    limit_wait: Histogram<f64>,
    /// `brain.tool.drift`: changes to pinned tools seen, once per change.
    drifts: Counter<u64>,
}

impl Instruments {
    pub(crate) fn new() -> Self {
        let meter = opentelemetry::global::meter(METER);
        Instruments {
            duration: meter
                .f64_histogram("mcp.client.operation.duration")
                .with_unit("s")
                .with_description(
                    "The duration of the MCP request as observed on the sender from the time \
                     it was sent until the response was received",
                )
                .with_boundaries(DURATION_BOUNDARIES.to_vec())
                .build(),
            calls: meter
                .u64_counter("brain.client.calls")
                .with_unit("{call}")
                .with_description(
                    "Calls by binding and outcome: ok, error, unknown_outcome (the tool may \
                     have run), refused (by the gate, before any I/O)",
                )
                .build(),
            limit_refusals: meter
                .u64_counter("brain.limit.refusals")
                .with_unit("{call}")
                .with_description(
                    "Calls refused by a limit before anything was sent, by binding, limit \
                     (brain.limit: rate or concurrent; the bucket's scope in \
                     brain.limit.scope: binding or tenant) and reason (brain.limit.reason: \
                     over, when the call would not wait; wait_expired, when its wait ran out)",
                )
                .build(),
            limit_wait: meter
                .f64_histogram("brain.limit.wait.duration")
                .with_unit("s")
                .with_description(
                    "How long calls with wait_seconds waited for a token or a slot, admitted or not",
                )
                .with_boundaries(DURATION_BOUNDARIES.to_vec())
                .build(),
            drifts: meter
                .u64_counter("brain.tool.drift")
                .with_unit("{change}")
                .with_description(
                    "Changes to pinned tools a verified listing showed, once per change, by \
                     binding and action (brain.drift.action: refused, or warned when only the \
                     tool's texts changed)",
                )
                .build(),
        }
    }

    /// A change to a pinned tool, seen for the first time.
    pub(crate) fn drifted(&self, binding: &str, refused: bool) {
        self.drifts.add(
            1,
            &[
                KeyValue::new("gen_ai.tool.name", binding.to_owned()),
                KeyValue::new(
                    "brain.drift.action",
                    if refused { "refused" } else { "warned" },
                ),
            ],
        );
    }

    /// A call a limit refused: one count per bucket that refused it.
    pub(crate) fn limited(
        &self,
        binding: &str,
        refusals: &[crate::limits::Exceeded],
        waited: bool,
    ) {
        for refusal in refusals {
            let limit = match refusal.limit {
                crate::limits::Limit::Rate { .. } => "rate",
                crate::limits::Limit::Concurrent(_) => "concurrent",
            };
            let scope = if refusal.bucket.contains(":tenant/") {
                "tenant"
            } else {
                "binding"
            };
            self.limit_refusals.add(
                1,
                &[
                    KeyValue::new("gen_ai.tool.name", binding.to_owned()),
                    KeyValue::new("brain.limit", limit),
                    KeyValue::new("brain.limit.scope", scope),
                    KeyValue::new(
                        "brain.limit.reason",
                        if waited { "wait_expired" } else { "over" },
                    ),
                ],
            );
        }
    }

    /// How long a call waited for its limits (`admitted`: whether it then went on).
    pub(crate) fn limit_waited(&self, binding: &str, waited: Duration, admitted: bool) {
        self.limit_wait.record(
            waited.as_secs_f64(),
            &[
                KeyValue::new("gen_ai.tool.name", binding.to_owned()),
                KeyValue::new("brain.limit.admitted", admitted),
            ],
        );
    }

    /// A call the gate refused: counted, never timed (no operation took place).
    pub(crate) fn refused(&self, binding: &str) {
        self.calls.add(
            1,
            &[
                KeyValue::new("gen_ai.tool.name", binding.to_owned()),
                KeyValue::new("brain.outcome", "refused"),
            ],
        );
    }

    /// A call that ran: its duration and its outcome.
    pub(crate) fn ended(
        &self,
        peer: &Peer,
        revision: Option<&'static str>,
        error_type: Option<&'static str>,
        result: &ToolResult,
        elapsed: Duration,
    ) {
        let mut attributes = Vec::with_capacity(peer.metric_attributes.len() + 2);
        attributes.extend_from_slice(&peer.metric_attributes);
        if let Some(revision) = revision {
            attributes.push(KeyValue::new("mcp.protocol.version", revision));
        }
        if let Some(error_type) = error_type {
            attributes.push(KeyValue::new("error.type", error_type));
        }
        self.duration.record(elapsed.as_secs_f64(), &attributes);
        self.calls.add(
            1,
            &[
                peer.tool_name.clone(),
                KeyValue::new("brain.outcome", outcome(result)),
            ],
        );
    }
}

/// `ok`, `error` or `unknown_outcome`: what the counter says of a call that ran.
fn outcome(result: &ToolResult) -> &'static str {
    match (result.is_error, result.unknown_outcome) {
        (false, _) => "ok",
        (true, false) => "error",
        (true, true) => "unknown_outcome",
    }
}

/// Where a binding's calls go, as the conventions name it: worked out once per binding.
pub(crate) struct Peer {
    /// `server.address`: the URL's host.
    address: Option<String>,
    /// `server.port`: the URL's port, or its scheme's.
    port: Option<u16>,
    /// `process.executable.name`: a stdio server's program.
    program: Option<String>,
    /// `network.transport`: `tcp` over HTTP, `pipe` for a stdio server.
    transport: &'static str,
    /// `brain.binding.kind`.
    kind: &'static str,
    /// The attributes every duration of this binding carries (tool, method, operation,
    /// transport, address, port), made once: a call only adds its revision and error type.
    metric_attributes: Vec<KeyValue>,
    /// `gen_ai.tool.name`, for the calls counter.
    tool_name: KeyValue,
}

impl Peer {
    pub(crate) fn of(binding: &ToolBinding) -> Self {
        let url = binding
            .url
            .as_deref()
            .and_then(|url| url::Url::parse(url).ok());
        let program = binding.command.as_ref().and_then(|command| {
            let program = command.first()?;
            let name = std::path::Path::new(program).file_name()?;
            Some(name.to_string_lossy().into_owned())
        });
        let address: Option<String> = url.as_ref().and_then(|url| url.host_str()).map(|host| {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned()
        });
        let port = url.as_ref().and_then(url::Url::port_or_known_default);
        let transport = if program.is_some() { "pipe" } else { "tcp" };
        // Reference-counted, so that a call's copy of them allocates no strings.
        let shared =
            |text: &str| opentelemetry::StringValue::from(std::sync::Arc::<str>::from(text));
        let tool_name = KeyValue::new("gen_ai.tool.name", shared(&binding.name));
        let mut metric_attributes = vec![tool_name.clone()];
        if binding.kind() == BindingKind::Mcp {
            metric_attributes.push(KeyValue::new("mcp.method.name", "tools/call"));
        }
        metric_attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        metric_attributes.push(KeyValue::new("network.transport", transport));
        if let Some(address) = &address {
            metric_attributes.push(KeyValue::new("server.address", shared(address)));
        }
        if let Some(port) = port {
            metric_attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        Peer {
            address,
            port,
            transport,
            program,
            kind: match binding.kind() {
                BindingKind::Mcp => "mcp",
                BindingKind::Http => "http",
                BindingKind::Sse => "sse",
            },
            metric_attributes,
            tool_name,
        }
    }
}

/// The CLIENT span of one call, a child of `parent` (the caller's span). Its outcome is
/// recorded by [`record_outcome`].
pub(crate) fn call_span(
    parent: &Span,
    binding: &ToolBinding,
    peer: &Peer,
    call_id: &str,
    tenant: &str,
) -> Span {
    let mcp = binding.kind() == BindingKind::Mcp;
    let span = tracing::info_span!(
        parent: parent,
        "tools/call",
        otel.name = format!("tools/call {}", binding.name),
        otel.kind = "client",
        otel.status_code = Empty,
        mcp.method.name = mcp.then_some("tools/call"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = binding.name.as_str(),
        mcp.protocol.version = Empty,
        mcp.session.id = Empty,
        jsonrpc.request.id = Empty,
        server.address = peer.address.as_deref(),
        server.port = peer.port.map(i64::from),
        process.executable.name = peer.program.as_deref(),
        network.transport = peer.transport,
        error.type = Empty,
        brain.tenant_id = tenant,
        brain.call_id = call_id,
        brain.unknown_outcome = Empty,
        brain.binding.kind = peer.kind,
        brain.journal.state = Empty,
    );
    span
}

/// The trace id of `span`, when it has a valid span context (hex, as `traceparent` carries
/// it).
pub(crate) fn trace_id(span: &Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span = context.span();
    let span_context = span.span_context();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// The span of a call the gate refused (no I/O took place): a CLIENT span with `error.type`
/// `error_type` (the classifier's `refused`), ended at once.
pub(crate) fn refused_span(
    parent: &Span,
    name: &str,
    call_id: &str,
    tenant: &str,
    error_type: &'static str,
) {
    let _span = tracing::info_span!(
        parent: parent,
        "tools/call",
        otel.name = format!("tools/call {name}"),
        otel.kind = "client",
        otel.status_code = "error",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        error.type = error_type,
        brain.tenant_id = tenant,
        brain.call_id = call_id,
        brain.unknown_outcome = false,
    );
}

/// Records a call's end on its span: revision, session, request id, outcome, status.
pub(crate) fn record_outcome(
    span: &Span,
    revision: Option<&'static str>,
    session_id: Option<&str>,
    request_id: Option<u64>,
    error_type: Option<&'static str>,
    result: &ToolResult,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(revision) = revision {
        span.record("mcp.protocol.version", revision);
    }
    if let Some(session_id) = session_id {
        span.record("mcp.session.id", session_id);
    }
    if let Some(request_id) = request_id {
        span.record("jsonrpc.request.id", request_id.to_string());
    }
    span.record("brain.unknown_outcome", result.unknown_outcome);
    if let Some(error_type) = error_type {
        span.record("error.type", error_type);
        span.record("otel.status_code", "error");
    }
}

/// The span of one phase of a call (`initialize`, `tools/call`, `session close`), a child of
/// `call` (the call's span). Spans here are never entered: parents are named, so that a call's
/// many polls cost nothing.
pub(crate) fn phase(name: &'static str, request_id: Option<u64>, call: &Span) -> Span {
    tracing::info_span!(
        parent: call,
        "phase",
        otel.name = name,
        otel.kind = "client",
        mcp.method.name = (name != "session close").then_some(name),
        jsonrpc.request.id = request_id.map(|id| id.to_string()),
    )
}

/// A progress notification, as an event of the call's span (progress and total only: the
/// message may say anything).
pub(crate) fn progress(call: &Span, progress: f64, total: Option<f64>) {
    tracing::info!(parent: call, progress, total, "progress");
}

/// Puts the W3C trace context of `span` (the request's) into `meta` (`traceparent`, and
/// `tracestate` when there is one), so that a server continues the trace; nothing when there is
/// no valid span context (no OpenTelemetry layer installed, or the span is disabled).
pub(crate) fn inject(meta: &mut Map<String, Value>, span: &Span) {
    if span.is_disabled() {
        return;
    }
    let context = span.context();
    let span = context.span();
    let span_context = span.span_context();
    if !span_context.is_valid() {
        return;
    }
    meta.insert(
        "traceparent".into(),
        Value::String(format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )),
    );
    let state = span_context.trace_state().header();
    if !state.is_empty() {
        meta.insert("tracestate".into(), Value::String(state));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(json: Value) -> ToolBinding {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_peer_is_the_urls_host_and_port_or_the_program() {
        let http = Peer::of(&binding(serde_json::json!({
            "name": "a", "description": "d", "url": "http://[::1]:8080/mcp", "mcp_tool": "a",
            "tenants": ["t"], "input_schema": {"type": "object"}
        })));
        assert_eq!(http.address.as_deref(), Some("::1"));
        assert_eq!(http.port, Some(8080));
        assert_eq!(http.transport, "tcp");
        let https = Peer::of(&binding(serde_json::json!({
            "name": "a", "description": "d", "url": "https://tools.example.com/mcp", "mcp_tool": "a",
            "tenants": ["t"], "input_schema": {"type": "object"}
        })));
        assert_eq!(https.port, Some(443));
        let stdio = Peer::of(&binding(serde_json::json!({
            "name": "a", "description": "d", "command": ["/usr/bin/python3", "-m", "server"], "mcp_tool": "a",
            "tenants": ["t"], "input_schema": {"type": "object"}
        })));
        assert_eq!(stdio.program.as_deref(), Some("python3"));
        assert_eq!(stdio.address, None);
        assert_eq!(stdio.transport, "pipe");
    }

    #[test]
    fn without_an_opentelemetry_layer_no_trace_context_is_sent() {
        let mut meta = Map::new();
        inject(&mut meta, &Span::current());
        assert!(meta.is_empty(), "{meta:?}");
    }
}
