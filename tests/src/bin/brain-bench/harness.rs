//! The measuring machinery the targets share: drivers (brain, the floors, the SDK clients),
//! measurements, comparisons in interleaved rounds, and the targets' rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use brain_config::HostConfig;
use brain_runtime::{CallRequest, Runtime, Scope};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tests::process::ServerProcess;

/// How much to measure.
pub(crate) struct Plan {
    pub(crate) rounds: usize,
    pub(crate) calls_c1: usize,
    pub(crate) calls_c32: usize,
    pub(crate) sdk_calls: usize,
}

impl Plan {
    /// Calls a round at `concurrency` (1 or 32).
    pub(crate) fn calls(&self, concurrency: usize) -> usize {
        if concurrency == 1 {
            self.calls_c1
        } else {
            self.calls_c32
        }
    }
}

/// Whether this is a smoke run (`--smoke`): every row once, with tiny counts, to prove that each
/// still runs; its figures mean nothing.
pub(crate) static SMOKE: AtomicBool = AtomicBool::new(false);

/// `n` (calls, sessions, records), or in a smoke run a hundredth of it (at least 2).
pub(crate) fn scaled(n: usize) -> usize {
    if SMOKE.load(Ordering::Relaxed) {
        (n / 100).max(2)
    } else {
        n
    }
}

/// Whether brain's spans go to the OpenTelemetry layer (P8 switches it per side).
pub(crate) static TRACING: AtomicBool = AtomicBool::new(false);

/// One row of the targets table.
pub(crate) struct Target {
    pub(crate) id: &'static str,
    pub(crate) what: String,
    pub(crate) measured: String,
    pub(crate) target: String,
    /// `None`: not measured here (never counted as met), or an information row.
    pub(crate) met: Option<bool>,
    /// An information row, without a target.
    pub(crate) info: bool,
    /// A ratio's spread across its rounds ([`Target::ratio_of`]).
    pub(crate) spread: Option<Spread>,
}

/// The lowest and highest of a ratio's rounds' own ratios (each round of one side against the
/// round run beside it), and whether a miss is within them.
#[derive(Clone, Copy)]
pub(crate) struct Spread {
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// Missed, but a round reached the target: the machine's noise, not a regression shown.
    pub(crate) noise: bool,
}

impl Target {
    pub(crate) fn ratio(id: &'static str, what: String, ratio: f64, at_least: f64) -> Target {
        Target {
            id,
            what,
            measured: format!("{ratio:.2}x"),
            target: format!(">= {at_least}x"),
            met: Some(ratio >= at_least),
            info: false,
            spread: None,
        }
    }

    /// A ratio target of two sides' interleaved rounds (`a` against `b`): the ratio of their
    /// median rates, with the spread of the rounds' own ratios, so that a miss the spread reaches
    /// across reads as the machine's noise and one outside it does not.
    pub(crate) fn ratio_of(
        id: &'static str,
        what: String,
        a: &Rounds,
        b: &Rounds,
        at_least: f64,
    ) -> Target {
        let rounds: Vec<f64> = a.0.iter().zip(&b.0).map(|(a, b)| a.rate / b.rate).collect();
        let low = rounds.iter().copied().fold(f64::INFINITY, f64::min);
        let high = rounds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let target = Target::ratio(id, what, a.median_rate() / b.median_rate(), at_least);
        Target {
            spread: (!rounds.is_empty()).then_some(Spread {
                low,
                high,
                noise: target.met == Some(false) && high >= at_least,
            }),
            ..target
        }
    }

    /// A ratio shown for information: no target, never counted.
    pub(crate) fn info(id: &'static str, what: String, ratio: f64) -> Target {
        Target {
            id,
            what,
            measured: format!("{ratio:.2}x"),
            target: "info".into(),
            met: None,
            info: true,
            spread: None,
        }
    }

    /// A value shown for information, in `unit`: no target, never counted.
    pub(crate) fn value(id: &'static str, what: String, value: f64, unit: &str) -> Target {
        Target {
            id,
            what,
            measured: format!("{value:.1} {unit}"),
            target: "info".into(),
            met: None,
            info: true,
            spread: None,
        }
    }

    /// A target that could not be measured here.
    pub(crate) fn not_measured(id: &'static str, what: String, target: &str) -> Target {
        Target {
            id,
            what,
            measured: "-".into(),
            target: target.to_owned(),
            met: None,
            info: false,
            spread: None,
        }
    }

    pub(crate) fn below(
        id: &'static str,
        what: &str,
        value: f64,
        unit: &str,
        limit: f64,
    ) -> Target {
        Target {
            id,
            what: what.to_owned(),
            measured: format!("{value:.1} {unit}"),
            target: format!("< {limit} {unit}"),
            met: Some(value < limit),
            info: false,
            spread: None,
        }
    }

    /// [`Target::below`] of a value that may not be measurable here (`None`: not measured).
    pub(crate) fn below_measured(
        id: &'static str,
        what: &str,
        value: Option<f64>,
        unit: &str,
        limit: f64,
    ) -> Target {
        match value {
            Some(value) => Target::below(id, what, value, unit, limit),
            None => Target {
                id,
                what: what.to_owned(),
                measured: "-".into(),
                target: format!("< {limit} {unit}"),
                met: None,
                info: false,
                spread: None,
            },
        }
    }
}

/// A `brain-test-server` process built next to this binary; killed when dropped.
pub(crate) fn start_server(flags: &[&str]) -> anyhow::Result<ServerProcess> {
    ServerProcess::start_sibling(flags).context("cannot start brain-test-server")
}

/// A client making `echo` calls.
pub(crate) enum Driver {
    Brain(Runtime),
    /// brain, each call as the next of `tenants` tenants (`t0`, `t1`, …) in turn (P14).
    Tenants {
        runtime: Runtime,
        tenants: usize,
        next: AtomicUsize,
    },
    /// brain, each call by the next of `runtimes` (one per user) in turn (P15).
    Users {
        runtimes: Vec<Runtime>,
        next: AtomicUsize,
    },
    /// brain with its spans sent to the OpenTelemetry layer (`on`) or not (P8).
    Traced {
        runtime: Runtime,
        on: bool,
    },
    Naive {
        url: String,
    },
    Floor(Floor),
    /// A session's three requests as raw POSTs (P1').
    SessionFloor(Floor),
}

/// The floor: the same `tools/call` JSON that brain sends at 2026-07-28, POSTed with a pooled
/// reqwest client.
pub(crate) struct Floor {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    pub(crate) body: Vec<u8>,
    pub(crate) headers: Vec<(&'static str, &'static str)>,
}

impl Floor {
    /// One session's three POSTs (see [`Driver::session_floor`]).
    pub(crate) async fn session(&self) -> anyhow::Result<()> {
        let post = |body: Vec<u8>, session: Option<&str>| {
            let mut request = self
                .http
                .post(&self.url)
                .header("content-type", "application/json");
            for (name, value) in &self.headers {
                request = request.header(*name, *value);
            }
            if let Some(session) = session {
                request = request
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-11-25");
            }
            request.body(body).send()
        };
        let initialize = serde_json::to_vec(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "floor", "version": "0"}}
        }))?;
        let response = post(initialize, None).await?;
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .context("initialize: no session")?
            .to_owned();
        let body = response.bytes().await?;
        if !body.windows(15).any(|w| w == b"protocolVersion") {
            bail!(
                "session floor: initialize answered {}",
                String::from_utf8_lossy(&body)
            );
        }
        let initialized =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        let response = post(initialized, Some(&session)).await?;
        if !response.status().is_success() {
            bail!("session floor: initialized got HTTP {}", response.status());
        }
        response.bytes().await?;
        let response = post(self.body.clone(), Some(&session)).await?;
        let body = response.bytes().await?;
        if !body.windows(5).any(|w| w == b"hello") {
            bail!(
                "session floor: tools/call answered {}",
                String::from_utf8_lossy(&body)
            );
        }
        let (http, url) = (self.http.clone(), self.url.clone());
        tokio::spawn(async move {
            let _ = http
                .delete(url)
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25")
                .send()
                .await;
        });
        Ok(())
    }
}

/// The test server's HTTP tool `echo`, on the origin of its MCP endpoint `url`.
pub(crate) fn tool_url(url: &str) -> String {
    url.replace("/mcp", "/tools/echo")
}

pub(crate) fn scope() -> Scope {
    Scope {
        tenant_id: "local".into(),
        session_id: "bench".into(),
    }
}

/// The Python SDK server started, when `tests/interop/setup.sh` installed it; else `None`, and a
/// "not measured" row `id` for `what`.
pub(crate) fn python_peer(
    id: &'static str,
    what: &str,
    targets: &mut Vec<Target>,
) -> Option<tests::peers::Peer> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/.venv/bin/python");
    if python.exists() {
        let peer = tests::peers::Peer::python();
        pin_peer(&peer.url);
        return Some(peer);
    }
    targets.push(Target::not_measured(
        id,
        what.to_owned(),
        "the Python SDK is not installed (tests/interop/setup.sh)",
    ));
    None
}

/// The pins of the tools of servers other than the test server, by URL and tool name, as
/// discovery writes them: the bench's bindings are verified against what was discovered.
static PEER_PINS: std::sync::Mutex<BTreeMap<String, BTreeMap<String, Value>>> =
    std::sync::Mutex::new(BTreeMap::new());

/// Discovers the server at `url` (on a thread of its own: the caller may be on the runtime)
/// and keeps its tools' pins for [`echo_config`].
pub(crate) fn pin_peer(url: &str) {
    let owned = url.to_owned();
    let discovery = std::thread::spawn(move || tests::peers::discover(&owned))
        .join()
        .unwrap_or_else(|_| panic!("discovery at {url} failed"));
    let pins = (discovery.tools.iter())
        .filter_map(|tool| {
            let name = tool["name"].as_str()?.to_owned();
            Some((
                name,
                serde_json::to_value(brain_config::ToolPin::of(tool)).ok()?,
            ))
        })
        .collect();
    PEER_PINS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(url.to_owned(), pins);
}

/// A binding of `tool` at `url`, its input schema as the test server lists it (an SDK server's
/// `echo` lists the same), so that `brain-harness serve`, which lists its bindings' schemas, lists
/// exactly what the binding's pin was taken from: a client of serve pinned to the test server's
/// tool sees no drift.
pub(crate) fn echo_config(url: &str, revision: &str, tool: &str) -> anyhow::Result<HostConfig> {
    let listed = tests::server::tool_list()
        .into_iter()
        .find(|listed| listed.name == tool)
        .with_context(|| format!("the test server has no tool {tool}"))?;
    let schema = Value::Object((*listed.input_schema).clone());
    let text = json!({"tools": [{
        "name": tool, "description": "Benchmark tool.", "input_schema": schema,
        "url": url, "mcp_tool": tool, "tenants": ["local"], "protocol_version": revision,
        "pin": peer_pin(url, tool).unwrap_or_else(|| tests::server::pin(tool)),
        "timeout_seconds": 120, "max_output_bytes": 1_048_576
    }]})
    .to_string();
    brain_config::parse(text.as_bytes(), "bench.json").map_err(|e| anyhow::anyhow!("{e}"))
}

/// The pin discovered for `tool` at `url`, when that server is not the test server.
fn peer_pin(url: &str, tool: &str) -> Option<Value> {
    let pins = PEER_PINS.lock().unwrap_or_else(|p| p.into_inner());
    pins.get(url)?.get(tool).cloned()
}

impl Driver {
    pub(crate) fn brain(url: &str, revision: &str) -> anyhow::Result<Driver> {
        Ok(Driver::Brain(Runtime::new(&echo_config(
            url, revision, "echo",
        )?)?))
    }

    pub(crate) fn floor(url: &str) -> anyhow::Result<Driver> {
        Driver::floor_with(url, reqwest::Client::builder().tcp_nodelay(true).build()?)
    }

    /// The floor, its POSTs sent with `http`.
    pub(crate) fn floor_with(url: &str, http: reqwest::Client) -> anyhow::Result<Driver> {
        let message = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"message": "hello"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "brain", "version": "0.1.0"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "progressToken": "bench",
                    "brain.dev/scope": {"tenant_id": "local", "session_id": "bench", "call_id": "bench"}
                }
            }
        });
        Ok(Driver::Floor(Floor {
            http,
            url: url.to_owned(),
            body: serde_json::to_vec(&message)?,
            headers: vec![
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
            ],
        }))
    }

    /// brain calling the HTTP tool `echo` (the test server's `/tools/echo`).
    pub(crate) fn http_tool(url: &str) -> anyhow::Result<Driver> {
        let text = json!({"tools": [{
            "name": "echo", "description": "Benchmark HTTP tool.",
            "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
            "url": tool_url(url), "tenants": ["local"], "timeout_seconds": 120
        }]})
        .to_string();
        let config = brain_config::parse(text.as_bytes(), "bench.json")
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Driver::Brain(Runtime::new(&config)?))
    }

    /// The floor of an HTTP tool call: the same POST brain sends (arguments, scope headers,
    /// idempotency key), with a pooled reqwest client.
    pub(crate) fn http_tool_floor(url: &str) -> anyhow::Result<Driver> {
        Ok(Driver::Floor(Floor {
            http: reqwest::Client::builder().tcp_nodelay(true).build()?,
            url: tool_url(url),
            body: serde_json::to_vec(&json!({"message": "hello"}))?,
            headers: vec![
                ("accept", "application/json, text/event-stream"),
                ("brain-tenant-id", "local"),
                ("brain-session-id", "bench"),
                ("brain-call-id", "bench"),
                ("idempotency-key", "bench"),
            ],
        }))
    }

    pub(crate) async fn brain_call(runtime: &Runtime) -> anyhow::Result<()> {
        let result = runtime
            .call(CallRequest::new(
                "echo",
                scope(),
                json!({"message": "hello"}),
            ))
            .result()
            .await;
        if result.is_error {
            bail!("brain: {:?}", result.content);
        }
        Ok(())
    }

    /// The floor of a fresh 2025-11-25 session: initialize, `notifications/initialized` and
    /// `tools/call` as three raw POSTs with a pooled client; the session's DELETE is sent off
    /// the measured path, as brain sends its own.
    pub(crate) fn session_floor(url: &str) -> anyhow::Result<Driver> {
        Driver::session_floor_with(url, reqwest::Client::builder().tcp_nodelay(true).build()?)
    }

    /// The session floor, its POSTs sent with `http`.
    pub(crate) fn session_floor_with(url: &str, http: reqwest::Client) -> anyhow::Result<Driver> {
        let call = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"message": "hello"},
                "_meta": {
                    "progressToken": "bench",
                    "brain.dev/scope": {"tenant_id": "local", "session_id": "bench", "call_id": "bench"}
                }
            }
        });
        Ok(Driver::SessionFloor(Floor {
            http,
            url: url.to_owned(),
            body: serde_json::to_vec(&call)?,
            headers: vec![("accept", "application/json, text/event-stream")],
        }))
    }

    pub(crate) async fn call(&self) -> anyhow::Result<()> {
        match self {
            Driver::Traced { runtime, on } => {
                TRACING.store(*on, Ordering::Relaxed);
                return Driver::brain_call(runtime).await;
            }
            Driver::SessionFloor(floor) => return floor.session().await,
            Driver::Brain(runtime) => return Driver::brain_call(runtime).await,
            Driver::Users { runtimes, next } => {
                let n = next.fetch_add(1, Ordering::Relaxed) % runtimes.len();
                return Driver::brain_call(&runtimes[n]).await;
            }
            Driver::Tenants {
                runtime,
                tenants,
                next,
            } => {
                let n = next.fetch_add(1, Ordering::Relaxed) % tenants;
                let scope = Scope {
                    tenant_id: format!("t{n}"),
                    session_id: "bench".into(),
                };
                let request = CallRequest::new("echo", scope, json!({"message": "hello"}));
                let result = runtime.call(request).result().await;
                if result.is_error {
                    bail!("brain: {:?}", result.content);
                }
                return Ok(());
            }
            _ => {}
        }
        match self {
            Driver::Brain(_)
            | Driver::Users { .. }
            | Driver::Tenants { .. }
            | Driver::Traced { .. }
            | Driver::SessionFloor(_) => {}
            Driver::Naive { url } => {
                let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                let client = ().serve(transport).await?;
                let arguments = json!({"message": "hello"});
                let params = CallToolRequestParams::new("echo")
                    .with_arguments(arguments.as_object().cloned().unwrap_or_default());
                let result = client.call_tool(params).await?;
                if result.is_error == Some(true) {
                    bail!("rmcp: {result:?}");
                }
                client.cancel().await?;
            }
            Driver::Floor(floor) => {
                let mut request = floor
                    .http
                    .post(&floor.url)
                    .header("content-type", "application/json");
                for (name, value) in &floor.headers {
                    request = request.header(*name, *value);
                }
                let response = request.body(floor.body.clone()).send().await?;
                if !response.status().is_success() {
                    bail!("floor: HTTP {}", response.status());
                }
                let body = response.bytes().await?;
                if !body.windows(5).any(|w| w == b"hello") {
                    bail!(
                        "floor: unexpected answer {}",
                        String::from_utf8_lossy(&body)
                    );
                }
            }
        }
        Ok(())
    }
}

/// Calls per second and latency percentiles of one run or of several pooled.
#[derive(Clone)]
pub(crate) struct Measure {
    pub(crate) rate: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) latencies: Vec<Duration>,
}

impl Measure {
    pub(crate) fn new(calls: usize, elapsed: Duration, mut latencies: Vec<Duration>) -> Measure {
        latencies.sort();
        let at = |q: f64| {
            latencies
                .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or_default()
        };
        Measure {
            rate: calls as f64 / elapsed.as_secs_f64(),
            p50: at(0.5),
            p99: at(0.99),
            latencies,
        }
    }
}

/// The rounds of one side of a comparison.
pub(crate) struct Rounds(pub(crate) Vec<Measure>);

impl Rounds {
    pub(crate) fn median_rate(&self) -> f64 {
        let mut rates: Vec<f64> = self.0.iter().map(|m| m.rate).collect();
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    }

    /// Every round's latencies together; the rate is the median round's.
    pub(crate) fn pooled(&self) -> Measure {
        let latencies: Vec<Duration> = self.0.iter().flat_map(|m| m.latencies.clone()).collect();
        let mut measure = Measure::new(latencies.len(), Duration::from_secs(1), latencies);
        measure.rate = self.median_rate();
        measure
    }
}

/// `calls` calls, `concurrency` at a time.
pub(crate) async fn measure(
    driver: &Arc<Driver>,
    calls: usize,
    concurrency: usize,
) -> anyhow::Result<Measure> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let driver = Arc::clone(driver);
        let next = Arc::clone(&next);
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let started = Instant::now();
                driver.call().await?;
                latencies.push(started.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(calls);
    for worker in workers {
        latencies.extend(worker.await??);
    }
    Ok(Measure::new(calls, started.elapsed(), latencies))
}

/// A and B in interleaved rounds, after a warm-up of each.
pub(crate) async fn compare(
    a: &Arc<Driver>,
    b: &Arc<Driver>,
    calls: usize,
    concurrency: usize,
    rounds: usize,
) -> anyhow::Result<(Rounds, Rounds)> {
    measure(a, calls / 10 + concurrency, concurrency).await?;
    measure(b, calls / 10 + concurrency, concurrency).await?;
    alternating(rounds, |first| {
        measure(if first { a } else { b }, calls, concurrency)
    })
    .await
}

/// `rounds` rounds of `run(true)` (the first side) and `run(false)` (the second), the order
/// alternating round by round, so that neither side always runs on a warmer machine.
async fn alternating<F, Fut>(rounds: usize, mut run: F) -> anyhow::Result<(Rounds, Rounds)>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = anyhow::Result<Measure>>,
{
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for side in order {
            let measured = run(side).await?;
            if side {
                first.push(measured)
            } else {
                second.push(measured)
            }
        }
    }
    Ok((Rounds(first), Rounds(second)))
}

/// The official SDK clients, run as processes of their own.
#[derive(Clone, Copy)]
pub(crate) enum Sdk {
    TypeScript,
    Python,
}

impl Sdk {
    pub(crate) fn short(self) -> &'static str {
        match self {
            Sdk::TypeScript => "TypeScript SDK",
            Sdk::Python => "Python SDK",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Sdk::TypeScript => "TypeScript SDK client (session per call)",
            Sdk::Python => "Python SDK client (session per call)",
        }
    }

    /// `None` when the SDK is not installed.
    pub(crate) fn measure(
        self,
        url: &str,
        calls: usize,
        concurrency: usize,
    ) -> anyhow::Result<Option<Measure>> {
        let Some(report) = self.run(url, calls, concurrency, "", &[])? else {
            return Ok(None);
        };
        let latencies: Vec<Duration> = report["latencies_ms"]
            .as_array()
            .context("no latencies")?
            .iter()
            .filter_map(Value::as_f64)
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
            .collect();
        let elapsed = Duration::from_secs_f64(report["elapsed_ms"].as_f64().unwrap_or(1.0) / 1e3);
        Ok(Some(Measure::new(latencies.len(), elapsed, latencies)))
    }

    /// Runs the SDK's bench client (`mode`: see tests/interop/bench_client.*) with `env`; its
    /// report, or `None` when the SDK is not installed.
    pub(crate) fn run(
        self,
        url: &str,
        calls: usize,
        concurrency: usize,
        mode: &str,
        env: &[(&str, &Path)],
    ) -> anyhow::Result<Option<Value>> {
        let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop");
        let (program, script, ready) = match self {
            Sdk::TypeScript => (
                PathBuf::from("node"),
                interop.join("bench_client.mjs"),
                interop.join("node_modules/@modelcontextprotocol/sdk/package.json"),
            ),
            Sdk::Python => (
                interop.join(".venv/bin/python"),
                interop.join("bench_client.py"),
                interop.join(".venv/bin/python"),
            ),
        };
        if !ready.exists() {
            return Ok(None);
        }
        let mut command = Command::new(program);
        command
            .arg(script)
            .args([url, &calls.to_string(), &concurrency.to_string()]);
        if !mode.is_empty() {
            command.arg(mode);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output()?;
        if !output.status.success() {
            bail!("{}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(Some(serde_json::from_slice(&output.stdout)?))
    }
}

/// The release `brain-test-server` beside this binary.
pub(crate) fn test_server_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(exe.parent().context("no parent")?.join("brain-test-server"))
}

/// A binding of `tool` on `brain-test-server --stdio` (2025-11-25) with `prewarm` spares.
pub(crate) fn stdio_config(tool: &str, prewarm: u64) -> anyhow::Result<HostConfig> {
    let server = test_server_binary()?.display().to_string();
    let mut config = echo_config("http://unused.invalid/mcp", "2025-11-25", tool)?;
    let binding = &mut config.tools[0];
    binding.url = None;
    binding.command = Some(vec![server, "--stdio".into()]);
    binding.prewarm = (prewarm > 0).then_some(prewarm);
    brain_config::validate(&config)
        .is_empty()
        .then_some(config)
        .context("the stdio bench config is invalid")
}

/// `a` and `b` warmed up (5 calls each), then `calls` spaced calls of each per round, the order
/// alternating round by round.
pub(crate) async fn spaced_rounds(
    a: &Arc<Driver>,
    b: &Arc<Driver>,
    calls: usize,
    think: Duration,
    rounds: usize,
) -> anyhow::Result<(Rounds, Rounds)> {
    spaced(a, 5, think).await?;
    spaced(b, 5, think).await?;
    alternating(rounds, |first| {
        spaced(if first { a } else { b }, calls, think)
    })
    .await
}

/// `calls` calls one after another, `think` apart; the rate is calls per second of calling
/// (the think time left out).
pub(crate) async fn spaced(
    driver: &Arc<Driver>,
    calls: usize,
    think: Duration,
) -> anyhow::Result<Measure> {
    let mut latencies = Vec::with_capacity(calls);
    for _ in 0..calls {
        tokio::time::sleep(think).await;
        let started = Instant::now();
        driver.call().await?;
        latencies.push(started.elapsed());
    }
    let calling: Duration = latencies.iter().sum();
    Ok(Measure::new(calls, calling, latencies))
}
