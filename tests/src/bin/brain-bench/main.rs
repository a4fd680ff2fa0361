//! brain-bench: the performance targets listed in the bench reference, docs/src/reference/bench.md, "Performance: `cargo
//! xtask bench`" (P1', P2, P3', P4, P5', P6, P7, P8, P9, …, P15; the naive rmcp ratio as information),
//! measured side by side in one run against servers it starts on loopback. `cargo xtask bench
//! [--quick] [--require-sdks]` builds it in release mode and runs it.
//!
//! Comparisons run in interleaved rounds (A then B, B then A, ...) and report the median round;
//! the per-scenario table pools the latencies of every round. Baselines: a naive client on plain
//! rmcp with its defaults (initialize, call, DELETE per call); the floor, a plain HTTP POST of the
//! same JSON to the same server process; the same server with Nagle on; and, when present, the
//! official TypeScript and Python SDK clients (tests/interop/bench_client.*), a new session each.
//!
//! stdio (S1–S3): the test server as a process (`brain-test-server --stdio`, release): a
//! `prewarm: 1` binding against `prewarm: 0` (calls spaced by an agent's think time, so that a
//! spare can be ready); brain with `prewarm: 0` against the SDKs' stdio clients, a fresh process
//! per call on every side; 100 concurrent stdio calls (RSS, and no process left afterwards).
//!
//! HTTP tools (H1): brain calling the test server's HTTP tool `/tools/echo` against the floor, a
//! plain POST of the same arguments with the same headers to the same endpoint.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use brain_config::HostConfig;
use brain_runtime::journal::{Claim, Durability, Journal, Key};
use brain_runtime::{CallRequest, Runtime};
use clap::Parser;
use report::{Results, Verdict, isolated};
use serde_json::{Value, json};
use tests::process::{ServerProcess, children, memory_mb};

mod audit;
mod exchange;
mod harness;
mod limits;
mod model_apis;
mod pins;
mod policies;
mod report;
mod sandbox;
mod serve;
mod tls;

use harness::{
    Driver, Measure, Plan, Rounds, SMOKE, Sdk, TRACING, Target, compare, echo_config, measure,
    scaled, scope, start_server, stdio_config, test_server_binary,
};

/// Measures the performance targets listed in the bench reference, docs/src/reference/bench.md; exits 1 when one is missed.
#[derive(Parser)]
struct Args {
    /// Fewer rounds and calls (under 3 minutes).
    #[arg(long)]
    quick: bool,
    /// Every row once with tiny counts (a hundredth), to prove each still runs: exits 2 when a
    /// group fails, never for a target (a smoke run's figures mean nothing).
    #[arg(long, conflicts_with = "quick")]
    smoke: bool,
    /// Also write the results (every row, each group in error, the summary) as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Measure only the HTTP tool target (H1).
    #[arg(long)]
    only_http_tools: bool,
    /// Measure only the OpenTelemetry target (P8).
    #[arg(long)]
    only_telemetry: bool,
    /// Measure only the call journal's target (P9).
    #[arg(long)]
    only_journal: bool,
    /// Measure only the model API definitions' targets (M1, M2).
    #[arg(long)]
    only_model_apis: bool,
    /// Measure only `brain-harness serve`'s targets (P10).
    #[arg(long)]
    only_serve: bool,
    /// Measure only the limits' targets (P11).
    #[arg(long)]
    only_limits: bool,
    /// Measure only the policies' targets (P12).
    #[arg(long)]
    only_policies: bool,
    /// Measure only the pins' targets (P13).
    #[arg(long)]
    only_pins: bool,
    /// Measure only the audit chain's targets (P14).
    #[arg(long)]
    only_audit: bool,
    /// Measure only the target of bindings on behalf of users (P15).
    #[arg(long)]
    only_exchange: bool,
    /// Measure only the stdio sandbox's target (S4).
    #[arg(long)]
    only_sandbox: bool,
    /// For a profiler: only make CALLS calls with one client (`brain-2025`, `brain-otel`
    /// (2025-11-25 with OpenTelemetry on), `brain-2026`, `brain-2026-postgres` (with a throwaway
    /// PostgreSQL cluster's journal), `brain-2026-sqlite` (with the SQLite
    /// journal), `brain-2026-memory` (with the memory journal), `floor`, `session-floor`,
    /// `brain-2026@URL` (at another server's URL, tenant `local`)),
    /// CONCURRENCY at a time, and print their rate.
    #[arg(long, value_names = ["CLIENT", "CALLS", "CONCURRENCY"], num_args = 3)]
    profile: Option<Vec<String>>,
    /// Internal (P5'): make the memory measurements against the test server at URL in this
    /// fresh process and print them as JSON.
    #[arg(long, value_name = "URL", hide = true)]
    memory_probe: Option<String>,
    /// Internal (T2, T3): hold N slow calls in flight against URL at REVISION in this fresh
    /// process and print what they cost as JSON.
    #[arg(long, value_names = ["URL", "REVISION", "N"], num_args = 3, hide = true)]
    in_flight_probe: Option<Vec<String>>,
    /// Internal: the CA file of the in-flight probe's TLS server.
    #[arg(long, hide = true)]
    probe_ca_file: Option<PathBuf>,
    /// Measure only the HTTPS targets (T1–T4).
    #[arg(long)]
    only_tls: bool,
    /// Fail when an SDK client is not installed (tests/interop/setup.sh), instead of reporting
    /// its targets as not measured; `cargo xtask ci` sets it. A client that is installed and
    /// fails to run is always an error.
    #[arg(long)]
    require_sdks: bool,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // 10,000 calls in flight (T3), and the HTTP/1.1 rows' connections, need descriptors.
    if let Err(error) = brain_runtime::raise_open_file_limit() {
        eprintln!("the open-file limit stays as it was: {error}");
    }
    // For the baselines' reqwest clients (brain's own client brings its provider).
    let _ = rustls::crypto::ring::default_provider().install_default();
    match run(&args).await {
        Ok(verdict) => std::process::ExitCode::from(verdict.exit_code()),
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Measures every target (or the ones an `--only-*` flag names, or one `--profile` or probe);
/// how the run ended. Each group of rows runs isolated: one that fails leaves an error row and
/// the next is measured; the table and the summary are printed (and `--json` written) at the end
/// whatever happened.
async fn run(args: &Args) -> anyhow::Result<Verdict> {
    if args.smoke {
        SMOKE.store(true, Ordering::Relaxed);
    }
    let plan = if args.smoke {
        Plan {
            rounds: 1,
            calls_c1: 10,
            calls_c32: 64,
            sdk_calls: 4,
        }
    } else if args.quick {
        Plan {
            rounds: 3,
            calls_c1: 600,
            calls_c32: 1000,
            sdk_calls: 60,
        }
    } else {
        Plan {
            rounds: 7,
            calls_c1: 600,
            calls_c32: 3000,
            sdk_calls: 200,
        }
    };
    if let Some(probe) = &args.in_flight_probe {
        let calls: usize = probe[2].parse().context("--in-flight-probe: N")?;
        let report =
            tls::in_flight_probe(&probe[0], &probe[1], calls, args.probe_ca_file.as_deref())
                .await?;
        println!("{report}");
        return Ok(Verdict::Met);
    }
    let server = start_server(&[])?;
    if let Some(url) = &args.memory_probe {
        let (in_flight, added, baseline) = memory_probe(url).await?;
        println!(
            "{}",
            json!({"in_flight_mb": in_flight, "added_mb": added, "baseline_mb": baseline})
        );
        return Ok(Verdict::Met);
    }
    if let Some(profile) = &args.profile {
        return Ok(if profile_one(profile, &server.url).await? {
            Verdict::Met
        } else {
            Verdict::Missed
        });
    }
    let results = groups(args, &plan, &server).await;
    results.print();
    if let Some(path) = &args.json {
        results.write_json(path)?;
    }
    Ok(match results.verdict() {
        // A smoke run proves that every row runs; its figures mean nothing.
        Verdict::Missed if args.smoke => Verdict::Met,
        verdict => verdict,
    })
}

/// Runs one group of rows when `$wanted`, isolated, and settles it in `$results`.
macro_rules! group {
    ($results:ident, $wanted:expr, $ids:literal, $what:literal, $body:block) => {
        if $wanted {
            let cause = isolated(async $body).await;
            $results.settle($ids, $what, cause);
        }
    };
}

/// Every group of rows (or the ones an `--only-*` flag names), in the reference's order; the
/// telemetry group last, as it installs a global tracing subscriber and meter provider.
async fn groups(args: &Args, plan: &Plan, server: &ServerProcess) -> Results {
    let every = !(args.only_http_tools
        || args.only_telemetry
        || args.only_journal
        || args.only_model_apis
        || args.only_serve
        || args.only_limits
        || args.only_policies
        || args.only_pins
        || args.only_audit
        || args.only_exchange
        || args.only_sandbox
        || args.only_tls);
    let url = server.url.as_str();
    let mut r = Results::default();
    group!(r, args.only_http_tools, "H1", "HTTP tools", {
        for concurrency in [1, 32] {
            http_tools(url, plan, concurrency, &mut r.targets, &mut r.scenarios).await?;
        }
        Ok(())
    });
    group!(
        r,
        every,
        "P1–P7",
        "brain's clients, the floors and the SDKs",
        { clients(args, plan, url, &mut r.targets, &mut r.scenarios).await }
    );
    group!(r, every || args.only_tls, "T1", "HTTPS ratios", {
        tls::ratios(plan, &mut r.targets, &mut r.scenarios).await
    });
    group!(r, every || args.only_tls, "T4", "HTTPS CPU per call", {
        tls::cpu(args.require_sdks, &mut r.targets).await
    });
    group!(r, every, "S1–S3", "stdio bindings", {
        let (targets, scenarios) = stdio(plan, args.require_sdks).await?;
        r.targets.extend(targets);
        r.scenarios.extend(scenarios);
        Ok(())
    });
    group!(r, every || args.only_sandbox, "S4", "the stdio sandbox", {
        sandbox::targets(plan, &mut r.targets).await
    });
    group!(r, every, "P6", "per-call work", {
        r.targets.push(per_call_work(url, plan.rounds)?);
        Ok(())
    });
    group!(r, every, "P5'", "memory per call in flight", {
        r.targets.extend(memory(url).await?);
        Ok(())
    });
    group!(
        r,
        every || args.only_tls,
        "T2–T3",
        "HTTPS memory in flight",
        { tls::memory(args.require_sdks, &mut r.targets).await }
    );
    group!(r, every, "P4", "discovery and codegen", {
        r.targets.extend(discovery_and_codegen(plan.rounds).await?);
        Ok(())
    });
    group!(r, every || args.only_journal, "P9", "the call journal", {
        journal(url, plan, &mut r.targets, &mut r.scenarios).await
    });
    group!(
        r,
        every || args.only_model_apis,
        "M1–M2",
        "model API definitions",
        { model_apis::targets(&mut r.targets) }
    );
    group!(r, every || args.only_serve, "P10", "brain-harness serve", {
        serve::targets(plan, url, server.pid(), &mut r.targets).await
    });
    group!(r, every || args.only_limits, "P11", "limits", {
        limits::targets(plan, url, &mut r.targets).await
    });
    group!(r, every || args.only_policies, "P12", "policies", {
        policies::targets(plan, url, &mut r.targets).await
    });
    group!(r, every || args.only_pins, "P13", "pins", {
        pins::targets(plan, url, &mut r.targets, &mut r.scenarios).await
    });
    group!(r, every || args.only_audit, "P14", "the audit chain", {
        audit::targets(plan, &mut r.targets).await
    });
    group!(
        r,
        every || args.only_exchange,
        "P15",
        "on behalf of users",
        { exchange::targets(plan, &mut r.targets).await }
    );
    group!(r, every || args.only_telemetry, "P8", "OpenTelemetry", {
        telemetry(url, plan, &mut r.targets, &mut r.scenarios).await
    });
    r
}

/// `--profile CLIENT CALLS CONCURRENCY`: one client's calls against the test server at
/// `server_url` (for a profiler), with its rate and the connections the server accepted.
async fn profile_one(profile: &[String], server_url: &str) -> anyhow::Result<bool> {
    let mut _telemetry = None;
    // Stopped when the profile ends.
    let mut _cluster = None;
    let mut _state_dir = None;
    if profile[0] == "brain-otel" {
        _telemetry = Some(install_telemetry().await?);
        TRACING.store(true, Ordering::Relaxed);
    }
    let driver = match profile[0].as_str() {
        "brain-otel" => Driver::brain(server_url, "2025-11-25")?,
        "brain-2025" => Driver::brain(server_url, "2025-11-25")?,
        "brain-2026" => Driver::brain(server_url, "2026-07-28")?,
        "brain-2026-sqlite" => {
            let dir = _state_dir.insert(tempfile::tempdir()?);
            let journal = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal)?;
            let config = echo_config(server_url, "2026-07-28", "echo")?;
            Driver::Brain(Runtime::builder(&config).journal(journal).build()?)
        }
        "brain-2026-memory" => {
            let config = echo_config(server_url, "2026-07-28", "echo")?;
            Driver::Brain(
                Runtime::builder(&config)
                    .journal(Journal::memory())
                    .build()?,
            )
        }
        "brain-2026-postgres" => {
            let cluster = _cluster.insert(tests::postgres::Cluster::start());
            let journal = Journal::postgres(&cluster.url).await?;
            let config = echo_config(server_url, "2026-07-28", "echo")?;
            Driver::Brain(Runtime::builder(&config).journal(journal).build()?)
        }
        "floor" => Driver::floor(server_url)?,
        "session-floor" => Driver::session_floor(server_url)?,
        // brain at 2026-07-28 against another server, e.g. `brain-harness serve
        // --anonymous-tenant local` in front of a test server.
        other if other.starts_with("brain-2026@") => {
            Driver::brain(&other["brain-2026@".len()..], "2026-07-28")?
        }
        other => bail!("--profile: unknown client {other}"),
    };
    let calls: usize = profile[1].parse().context("--profile: CALLS")?;
    let concurrency: usize = profile[2].parse().context("--profile: CONCURRENCY")?;
    let measured = measure(&Arc::new(driver), calls, concurrency).await?;
    let stats: Value = reqwest::get(server_url.replace("/mcp", "/stats"))
        .await?
        .json()
        .await?;
    eprintln!(
        "{:.0} calls/s; the server accepted {} connections",
        measured.rate, stats["accepted"]
    );
    Ok(true)
}

/// P1, P1', P2, P3' and the SDKs' P7 at concurrency 1 and 32: brain's clients (2025-11-25
/// sessions, against a Nagle-on server too, 2026-07-28) against naive rmcp, the raw HTTP floors,
/// the HTTP tools and the SDKs' clients, on the test server at `server_url`.
async fn clients(
    args: &Args,
    plan: &Plan,
    server_url: &str,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    let nagle = start_server(&["--nagle"])?;
    let brain_2025 = Arc::new(Driver::brain(server_url, "2025-11-25")?);
    let brain_2025_nagle = Arc::new(Driver::brain(&nagle.url, "2025-11-25")?);
    let brain_2026 = Arc::new(Driver::brain(server_url, "2026-07-28")?);
    let naive = Arc::new(Driver::Naive {
        url: server_url.to_owned(),
    });
    let floor = Arc::new(Driver::floor(server_url)?);
    let session_floor = Arc::new(Driver::session_floor(server_url)?);

    for concurrency in [1, 32] {
        let calls = plan.calls(concurrency);
        eprintln!("measuring at concurrency {concurrency} ({calls} calls a round)...");
        let (brain, three) =
            compare(&brain_2025, &session_floor, calls, concurrency, plan.rounds).await?;
        targets.push(Target::ratio_of(
            "P1'",
            format!("fresh session per call (2025-11-25) vs its 3 raw POSTs, c={concurrency}"),
            &brain,
            &three,
            0.9,
        ));
        let (brain_vs_rmcp, rmcp) =
            compare(&brain_2025, &naive, calls, concurrency, plan.rounds).await?;
        targets.push(Target::info(
            "P1",
            format!("fresh session per call (2025-11-25) vs naive rmcp, c={concurrency}"),
            brain_vs_rmcp.median_rate() / rmcp.median_rate(),
        ));
        let (on, off) = compare(
            &brain_2025_nagle,
            &brain_2025,
            calls,
            concurrency,
            plan.rounds,
        )
        .await?;
        targets.push(Target::ratio_of(
            "P2",
            format!("server with Nagle on vs TCP_NODELAY, c={concurrency}"),
            &on,
            &off,
            0.8,
        ));
        let (stateless, raw) =
            compare(&brain_2026, &floor, calls, concurrency, plan.rounds).await?;
        targets.push(Target::ratio_of(
            "P3'",
            format!("2026-07-28 binding vs raw HTTP POST floor, c={concurrency}"),
            &stateless,
            &raw,
            0.85,
        ));
        for (name, rounds) in [
            ("brain, session per call (2025-11-25)", &brain),
            ("brain, Nagle-on server (2025-11-25)", &on),
            ("brain, stateless (2026-07-28)", &stateless),
            ("naive rmcp client (session per call)", &rmcp),
            ("floor: raw HTTP POST", &raw),
            ("floor: 3 raw POSTs (a session's)", &three),
        ] {
            scenarios.push((name.into(), concurrency, rounds.pooled()));
        }
        http_tools(server_url, plan, concurrency, targets, scenarios).await?;
        for sdk in [Sdk::TypeScript, Sdk::Python] {
            sdk_clients(
                sdk,
                &brain_2025,
                server_url,
                plan,
                concurrency,
                args.require_sdks,
                targets,
                scenarios,
            )
            .await?;
        }
    }
    Ok(())
}

/// P7: brain (a fresh 2025-11-25 session per call) against an SDK's client (a new session per
/// call too) on the same server, same work, in interleaved rounds.
#[allow(clippy::too_many_arguments)]
async fn sdk_clients(
    sdk: Sdk,
    brain: &Arc<Driver>,
    url: &str,
    plan: &Plan,
    concurrency: usize,
    require: bool,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    let at_least = match sdk {
        Sdk::TypeScript => 10.0,
        Sdk::Python => 30.0,
    };
    let what = format!(
        "brain vs {} client, same server, c={concurrency}",
        sdk.short()
    );
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..plan.rounds {
        if round % 2 == 0 {
            ours.push(measure(brain, plan.calls(concurrency), concurrency).await?);
        }
        match sdk_measure(sdk, url, plan.sdk_calls, concurrency, require)? {
            Some(measure) => theirs.push(measure),
            None => {
                targets.push(Target::not_measured("P7", what, &format!(">= {at_least}x")));
                return Ok(());
            }
        }
        if round % 2 == 1 {
            ours.push(measure(brain, plan.calls(concurrency), concurrency).await?);
        }
    }
    let (ours, theirs) = (Rounds(ours), Rounds(theirs));
    targets.push(Target::ratio_of("P7", what, &ours, &theirs, at_least));
    scenarios.push((sdk.label().into(), concurrency, theirs.pooled()));
    Ok(())
}

/// An SDK client's run; `None` when it is not installed (an error when `require`d). A client
/// that is installed and fails is an error.
fn sdk_measure(
    sdk: Sdk,
    target: &str,
    calls: usize,
    concurrency: usize,
    require: bool,
) -> anyhow::Result<Option<Measure>> {
    match sdk.measure(target, calls, concurrency) {
        Ok(Some(measure)) => Ok(Some(measure)),
        Ok(None) if require => bail!(
            "{} is not installed (run tests/interop/setup.sh)",
            sdk.label()
        ),
        Ok(None) => {
            eprintln!("{}: not installed (tests/interop/setup.sh)", sdk.label());
            Ok(None)
        }
        Err(error) => Err(error.context(format!("{} on {target}", sdk.label()))),
    }
}

/// P8: calls with OpenTelemetry on (spans exported in batches and metrics every second, over
/// OTLP/HTTP to a collector in this process) against the same calls with it off.
async fn telemetry(
    url: &str,
    plan: &Plan,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    // Built before the meter provider is installed: its instruments do nothing.
    let off = Arc::new(Driver::Traced {
        runtime: Runtime::new(&echo_config(url, "2025-11-25", "echo")?)?,
        on: false,
    });
    let (collector, traces, meters) = install_telemetry().await?;
    let on = Arc::new(Driver::Traced {
        runtime: Runtime::new(&echo_config(url, "2025-11-25", "echo")?)?,
        on: true,
    });
    let mut traced_calls = 0;
    for concurrency in [1, 32] {
        let calls = plan.calls(concurrency);
        let (with, without) = compare(&on, &off, calls, concurrency, plan.rounds).await?;
        traced_calls += calls * plan.rounds + calls / 10 + concurrency;
        targets.push(Target::ratio_of(
            "P8",
            format!("OpenTelemetry on (OTLP to a local collector) vs off, c={concurrency}"),
            &with,
            &without,
            0.9,
        ));
        scenarios.push((
            "brain, OpenTelemetry on (2025-11-25)".into(),
            concurrency,
            with.pooled(),
        ));
        scenarios.push((
            "brain, OpenTelemetry off (2025-11-25)".into(),
            concurrency,
            without.pooled(),
        ));
    }
    TRACING.store(false, Ordering::Relaxed);
    tokio::task::spawn_blocking(move || {
        let _ = traces.force_flush();
        let _ = meters.force_flush();
    })
    .await?;
    let received = collector
        .spans()
        .iter()
        .filter(|span| span.name == "tools/call echo")
        .count();
    let timed = collector
        .points()
        .iter()
        .filter(|point| point.metric == "mcp.client.operation.duration")
        .map(|point| point.count)
        .fold(0.0, f64::max);
    if received == 0 || timed < 1.0 {
        bail!("P8 is not measured: the collector received no call span or no duration");
    }
    eprintln!(
        "P8: the collector received {received} call spans of {traced_calls} traced calls (the \
         batch exporter drops what does not fit its queue) and {timed} timed calls"
    );
    Ok(())
}

/// OpenTelemetry as a host installs it: spans exported in batches and metrics every second,
/// over OTLP/HTTP to a collector in this process; brain's spans reach the layer while
/// [`TRACING`] is set.
async fn install_telemetry() -> anyhow::Result<(
    tests::otlp::Collector,
    opentelemetry_sdk::trace::SdkTracerProvider,
    opentelemetry_sdk::metrics::SdkMeterProvider,
)> {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig;
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;

    let collector = tests::otlp::Collector::start().await?;
    let traces = tests::otlp::tracer_provider(&collector.endpoint, Duration::from_secs(10))?;
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/metrics", collector.endpoint))
        .build()?;
    let meters = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(
            opentelemetry_sdk::metrics::PeriodicReader::builder(metrics)
                .with_interval(Duration::from_secs(1))
                .build(),
        )
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());
    let layer = tracing_opentelemetry::layer()
        .with_tracer(traces.tracer("brain-bench"))
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false)
        .with_target(false)
        .with_filter(tracing_subscriber::filter::dynamic_filter_fn(|_, _| {
            TRACING.load(Ordering::Relaxed)
        }));
    tracing_subscriber::registry().with(layer).try_init()?;
    Ok((collector, traces, meters))
}

/// H1: brain calling an HTTP tool against the raw POST floor, at `concurrency`.
async fn http_tools(
    url: &str,
    plan: &Plan,
    concurrency: usize,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    let calls = plan.calls(concurrency);
    let brain = Arc::new(Driver::http_tool(url)?);
    let floor = Arc::new(Driver::http_tool_floor(url)?);
    let (tool, raw) = compare(&brain, &floor, calls, concurrency, plan.rounds).await?;
    targets.push(Target::ratio_of(
        "H1",
        format!("HTTP tool call vs raw POST floor, c={concurrency}"),
        &tool,
        &raw,
        0.85,
    ));
    scenarios.push(("brain, HTTP tool".into(), concurrency, tool.pooled()));
    scenarios.push((
        "floor: raw POST to the HTTP tool".into(),
        concurrency,
        raw.pooled(),
    ));
    Ok(())
}

/// S1–S3: stdio bindings.
async fn stdio(
    plan: &Plan,
    require_sdks: bool,
) -> anyhow::Result<(Vec<Target>, Vec<(String, usize, Measure)>)> {
    let mut targets = Vec::new();
    let mut scenarios = Vec::new();
    eprintln!("measuring stdio bindings...");
    // S1: the same calls, 20 ms of think time between them, with and without a spare.
    let warm = Arc::new(Driver::Brain(Runtime::new(&stdio_config("echo", 1)?)?));
    let cold = Arc::new(Driver::Brain(Runtime::new(&stdio_config("echo", 0)?)?));
    let think = Duration::from_millis(20);
    let calls = plan.sdk_calls.min(100);
    let (with, without) = harness::spaced_rounds(&warm, &cold, calls, think, plan.rounds).await?;
    let (with_p50, without_p50) = (with.pooled().p50, without.pooled().p50);
    targets.push(Target::ratio_of(
        "S1",
        format!(
            "stdio prewarm 1 vs 0, calls/s while calling (p50 {:.2} vs {:.2} ms)",
            with_p50.as_secs_f64() * 1e3,
            without_p50.as_secs_f64() * 1e3
        ),
        &with,
        &without,
        3.0,
    ));
    scenarios.push((
        "brain, stdio, prewarm 1 (20 ms apart)".into(),
        1,
        with.pooled(),
    ));
    scenarios.push((
        "brain, stdio, prewarm 0 (20 ms apart)".into(),
        1,
        without.pooled(),
    ));

    // S2: a fresh process per call, back to back, against the SDKs' stdio clients.
    let target = format!("stdio:{}", test_server_binary()?.display());
    for concurrency in [1, 8] {
        let sdk_calls = plan.sdk_calls;
        measure(&cold, sdk_calls / 10 + concurrency, concurrency).await?;
        let mut rounds = Vec::new();
        let mut sdks = Vec::new();
        for sdk in [Sdk::TypeScript, Sdk::Python] {
            rounds.push(measure(&cold, sdk_calls, concurrency).await?);
            if let Some(measure) = sdk_measure(sdk, &target, sdk_calls, concurrency, require_sdks)?
            {
                sdks.push((sdk, measure));
            }
        }
        rounds.push(measure(&cold, sdk_calls, concurrency).await?);
        let brain = Rounds(rounds);
        for (sdk, measure) in sdks {
            targets.push(Target::ratio(
                "S2",
                format!(
                    "stdio, process per call: brain vs {}, c={concurrency}",
                    sdk.short()
                ),
                brain.median_rate() / measure.rate,
                1.0,
            ));
            scenarios.push((
                format!("{} stdio client", sdk.short()),
                concurrency,
                measure,
            ));
        }
        scenarios.push((
            "brain, stdio, prewarm 0".into(),
            concurrency,
            brain.pooled(),
        ));
    }

    // S3: 100 stdio calls at once (each its own process, 2 s long).
    // This process's other children (the HTTP test servers, S1's spare) are not S3's.
    let before = children();
    let slow = Runtime::new(&stdio_config("slow", 0)?)?;
    let calls: Vec<_> = (0..scaled(100))
        .map(|i| {
            slow.call(
                CallRequest::new("slow", scope(), json!({"seconds": 2}))
                    .with_call_id(format!("stdio-{i}")),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let in_flight = memory_mb("VmRSS:");
    let children_in_flight = children().len().saturating_sub(before.len());
    let results = futures_util::future::join_all(calls.into_iter().map(|call| call.result())).await;
    if let Some(failed) = results.iter().find(|result| result.is_error) {
        bail!("a concurrent stdio call failed: {:?}", failed.content);
    }
    slow.wait_for_cleanup().await;
    drop(slow);
    let left: Vec<u32> = children()
        .into_iter()
        .filter(|pid| !before.contains(pid))
        .collect();
    eprintln!(
        "S3: {children_in_flight} server processes during the calls, {} after",
        left.len()
    );
    targets.push(Target::below_measured(
        "S3",
        "100 concurrent stdio calls: RSS of brain's process",
        in_flight,
        "MB",
        150.0,
    ));
    targets.push(Target::below(
        "S3",
        "100 concurrent stdio calls: server processes left afterwards",
        left.len() as f64,
        "procs",
        1.0,
    ));
    Ok((targets, scenarios))
}

/// P4: the runtime's own work per call (gate, message, conversion), no network; median round.
fn per_call_work(url: &str, rounds: usize) -> anyhow::Result<Target> {
    let runtime = Runtime::new(&echo_config(url, "2026-07-28", "echo")?)?;
    let request =
        CallRequest::new("echo", scope(), json!({"message": "hello"})).with_call_id("bench");
    let result = json!({"content": [{"type": "text", "text": "hello"}]});
    let iterations = scaled(20_000);
    let mut per_call = Vec::new();
    for _ in 0..rounds.max(3) {
        let started = Instant::now();
        for _ in 0..iterations {
            let converted = brain_runtime::__bench::per_call_work(&runtime, &request, &result);
            if std::hint::black_box(converted).is_none() {
                bail!("per_call_work refused the call");
            }
        }
        per_call.push(started.elapsed().as_secs_f64() * 1e6 / iterations as f64);
    }
    per_call.sort_by(f64::total_cmp);
    Ok(Target::below(
        "P4",
        "runtime work per call without network (gate, message, conversion)",
        per_call[per_call.len() / 2],
        "us",
        20.0,
    ))
}

/// P5': 1,000 slow calls in flight; a 200 MB response under a 1 MiB limit. Measured in a fresh
/// process (this binary with `--memory-probe`), as a host that makes them would be: what the
/// other measurements left in this process's heap is not brain's.
async fn memory(url: &str) -> anyhow::Result<Vec<Target>> {
    let output = tokio::process::Command::new(std::env::current_exe()?)
        .args(["--memory-probe", url])
        .args(SMOKE.load(Ordering::Relaxed).then_some("--smoke"))
        .output()
        .await?;
    if !output.status.success() {
        bail!(
            "the memory probe failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let report: Value = serde_json::from_slice(&output.stdout)?;
    eprintln!(
        "P5': the probe process's RSS was {:.1} MB before the calls",
        report["baseline_mb"].as_f64().unwrap_or_default()
    );
    Ok(vec![
        Target::below_measured(
            "P5'",
            "1,000 in-flight slow calls over HTTP/1.1: RSS of the process",
            report["in_flight_mb"].as_f64(),
            "MB",
            56.0,
        ),
        Target::below_measured(
            "P5'",
            "200 MB response under a 1 MiB limit: RSS added",
            report["added_mb"].as_f64(),
            "MB",
            8.0,
        ),
    ])
}

/// The measurements of [`memory`]: RSS with 1,000 calls in flight, RSS added by the 200 MB
/// response, and RSS before the calls.
async fn memory_probe(url: &str) -> anyhow::Result<(Option<f64>, Option<f64>, Option<f64>)> {
    let baseline = memory_mb("VmRSS:");
    let slow = Runtime::new(&echo_config(url, "2025-11-25", "slow")?)?;
    let count = scaled(1000);
    let calls: Vec<_> = (0..count)
        .map(|i| {
            slow.call(
                CallRequest::new("slow", scope(), json!({"seconds": 5}))
                    .with_call_id(format!("slow-{i}")),
            )
        })
        .collect();
    // Sampled once the server runs all 1,000 (its own count), so that the RSS is that of 1,000
    // calls in flight, not of whatever concurrency the runtime allowed.
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut running = 0;
    while Instant::now() < deadline {
        running = server_running(url).await?;
        if running >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let in_flight = memory_mb("VmRSS:");
    let running_at_sample = server_running(url).await?;
    if running.min(running_at_sample) < count {
        bail!(
            "P5 is not measured: the server ran {} of the {count} slow calls at once when RSS was \
             sampled",
            running.min(running_at_sample)
        );
    }
    let results = futures_util::future::join_all(calls.into_iter().map(|call| call.result())).await;
    let failed = results.iter().filter(|result| result.is_error).count();
    if failed > 0 {
        bail!(
            "{failed} of the {count} slow calls failed: {:?}",
            results.iter().find(|r| r.is_error)
        );
    }

    let huge = Runtime::new(&echo_config(url, "2025-11-25", "huge")?)?;
    let before = memory_mb("VmRSS:");
    // Reset the peak, so that VmHWM is this call's.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let result = huge
        .call(CallRequest::new(
            "huge",
            scope(),
            json!({"bytes": 200_000_000}),
        ))
        .result()
        .await;
    if !result.unknown_outcome {
        bail!("the 200 MB response was not refused: {:?}", result.content);
    }
    let added = memory_mb("VmHWM:")
        .zip(before)
        .map(|(peak, before)| (peak - before).max(0.0));
    Ok((in_flight, added, baseline))
}

/// How many tool runs the test server at `url` has in progress (its `GET /stats`).
async fn server_running(url: &str) -> anyhow::Result<usize> {
    let stats: Value = reqwest::get(url.replace("/mcp", "/stats"))
        .await?
        .json()
        .await?;
    stats["running"]
        .as_u64()
        .map(|n| n as usize)
        .context("the test server's /stats has no `running`")
}

/// P6: discovery of 128 tools (a server offering them, paginated as it likes), and codegen of
/// 128 bindings; median of the rounds.
async fn discovery_and_codegen(rounds: usize) -> anyhow::Result<Vec<Target>> {
    let server = start_server(&["--extra-tools", "128"])?;
    let options = brain_runtime::discover::DiscoverOptions {
        url: server.url.clone(),
        token: None,
        auth: None,
        timeout: Duration::from_secs(30),
        ca_file: None,
    };
    let mut discovery_times = Vec::new();
    let mut discovery = None;
    for _ in 0..rounds {
        let started = Instant::now();
        discovery = Some(brain_runtime::discover::discover(&options).await?);
        discovery_times.push(started.elapsed().as_secs_f64());
    }
    let discovery = discovery.context("no round")?;
    let settings = brain_config::discovery::BindingSettings {
        timeout_seconds: 300,
        ..tests::peers::local_settings(&server.url, &discovery)
    };
    let tools: Vec<_> = discovery
        .tools
        .iter()
        .filter(|tool| {
            tool["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("generated_"))
        })
        .map(|tool| brain_config::discovery::binding_from_tool(tool, &settings))
        .collect();
    if tools.len() != 128 {
        bail!(
            "the server offered {} generated tools, not 128",
            tools.len()
        );
    }
    let config = HostConfig {
        serve: None,
        tenant_limits: None,
        policies: None,
        approvals: None,
        audit: None,
        model_apis: None,
        schema: None,
        tools,
    };
    let mut codegen_times = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let files =
            brain_codegen::generate(&config, "bench.json").map_err(|e| anyhow::anyhow!("{e}"))?;
        std::hint::black_box(files);
        codegen_times.push(started.elapsed().as_secs_f64());
    }
    discovery_times.sort_by(f64::total_cmp);
    codegen_times.sort_by(f64::total_cmp);
    Ok(vec![
        Target::below(
            "P6",
            "discovery of 128 tools",
            discovery_times[discovery_times.len() / 2] * 1e3,
            "ms",
            500.0,
        ),
        Target::below(
            "P6",
            "codegen of 128 bindings",
            codegen_times[codegen_times.len() / 2] * 1e3,
            "ms",
            2000.0,
        ),
    ])
}

/// brain at `revision` on `url`, journaling in `journal` (or not).
fn journaled(url: &str, revision: &str, journal: Option<Journal>) -> anyhow::Result<Arc<Driver>> {
    let config = echo_config(url, revision, "echo")?;
    let mut builder = Runtime::builder(&config);
    if let Some(journal) = journal {
        builder = builder.journal(journal);
    }
    Ok(Arc::new(Driver::Brain(builder.build()?)))
}

/// P9: the call journal on against off, same calls: the fast test server at 2026-07-28 with
/// SQLite (default durability; `synchronous=FULL` for information) and PostgreSQL (a throwaway
/// cluster started here, durability defaults kept: `fsync` and `synchronous_commit` on), and the
/// Python SDK server (a real server's cost). Beside them, each backend's claim latency and the
/// disk's fsync latency (`pg_test_fsync`).
async fn journal(
    url: &str,
    plan: &Plan,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let off = journaled(url, "2026-07-28", None)?;
    let sqlite = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal)?;
    let sqlite_full = Journal::sqlite(&dir.path().join("full.db"), Durability::Full)?;
    let cluster = tests::postgres::binaries().map(|_| tests::postgres::Cluster::start());
    let postgres = match &cluster {
        Some(cluster) => Some(Journal::postgres(&cluster.url).await?),
        None => None,
    };
    let on_sqlite = journaled(url, "2026-07-28", Some(sqlite.clone()))?;
    let on_full = journaled(url, "2026-07-28", Some(sqlite_full.clone()))?;
    let on_postgres = match &postgres {
        Some(journal) => Some(journaled(url, "2026-07-28", Some(journal.clone()))?),
        None => None,
    };
    for concurrency in [1, 32] {
        let calls = plan.calls(concurrency);
        eprintln!("P9: journal on vs off at concurrency {concurrency}...");
        let (on, without) = compare(&on_sqlite, &off, calls, concurrency, plan.rounds).await?;
        // Information since issue 40: one SQLite transaction per call is the floor against the
        // fast test server (the perf gate guards the claim's instructions instead).
        targets.push(Target::info(
            "P9",
            format!("journal on (SQLite, synchronous=NORMAL) vs off, 2026-07-28, c={concurrency}"),
            on.median_rate() / without.median_rate(),
        ));
        scenarios.push((
            "brain, journal off (2026-07-28)".into(),
            concurrency,
            without.pooled(),
        ));
        scenarios.push(("brain, journal on: SQLite".into(), concurrency, on.pooled()));
        let (full, without) = compare(&on_full, &off, calls, concurrency, plan.rounds).await?;
        targets.push(Target::info(
            "P9",
            format!("journal on (SQLite, synchronous=FULL) vs off, c={concurrency}"),
            full.median_rate() / without.median_rate(),
        ));
        scenarios.push((
            "brain, journal on: SQLite FULL".into(),
            concurrency,
            full.pooled(),
        ));
        let what = format!("journal on (PostgreSQL) vs off, 2026-07-28, c={concurrency}");
        match &on_postgres {
            Some(on_postgres) => {
                let (on, without) =
                    compare(on_postgres, &off, calls, concurrency, plan.rounds).await?;
                let ratio = on.median_rate() / without.median_rate();
                targets.push(Target::info("P9", what, ratio));
                scenarios.push((
                    "brain, journal on: PostgreSQL".into(),
                    concurrency,
                    on.pooled(),
                ));
            }
            None => targets.push(Target::not_measured(
                "P9",
                what,
                "PostgreSQL's server binaries are not installed",
            )),
        }
    }
    journal_python(plan, &sqlite, postgres.as_ref(), targets).await?;
    claim_latency("SQLite", &sqlite).await?;
    claim_latency("SQLite FULL", &sqlite_full).await?;
    if let Some(postgres) = &postgres {
        claim_latency("PostgreSQL", postgres).await?;
    }
    fsync_latency(dir.path());
    drop(cluster);
    Ok(())
}

/// Journal on against off against the Python SDK server (2025-11-25 sessions), when installed.
async fn journal_python(
    plan: &Plan,
    sqlite: &Journal,
    postgres: Option<&Journal>,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    let Some(peer) = harness::python_peer("P9", "journal on vs off, Python SDK server", targets)
    else {
        return Ok(());
    };
    let off = journaled(&peer.url, "2025-11-25", None)?;
    let mut backends = vec![("SQLite", sqlite.clone())];
    if let Some(postgres) = postgres {
        backends.push(("PostgreSQL", postgres.clone()));
    }
    for (name, journal) in backends {
        let on = journaled(&peer.url, "2025-11-25", Some(journal))?;
        for concurrency in [1, 32] {
            let calls = plan.sdk_calls;
            let (with, without) = compare(&on, &off, calls, concurrency, plan.rounds).await?;
            let what = format!("journal on ({name}) vs off, Python SDK server, c={concurrency}");
            targets.push(if concurrency == 32 {
                Target::ratio_of("P9", what, &with, &without, 0.9)
            } else {
                Target::info("P9", what, with.median_rate() / without.median_rate())
            });
        }
    }
    Ok(())
}

/// The claim's own latency (the at-most-once point), one at a time and 32 at once.
async fn claim_latency(name: &str, journal: &Journal) -> anyhow::Result<()> {
    let store = journal.store();
    let owner = format!("bench-{}", unique());
    store.renew(&owner, 600_000, true).await?;
    for concurrency in [1usize, 32] {
        let count = if concurrency == 1 { 300 } else { 1600 };
        let mut latencies = Vec::with_capacity(count);
        let started = Instant::now();
        for batch in 0..count / concurrency {
            let claims: Vec<Claim> = (0..concurrency)
                .map(|i| Claim {
                    key: Key {
                        tenant: "bench".into(),
                        session: owner.clone(),
                        call_id: format!("{concurrency}-{batch}-{i}"),
                    },
                    digest: "sha256:bench".into(),
                    binding: "echo".into(),
                    owner: owner.clone(),
                    timeout_ms: 60_000,
                    trace_id: None,
                    upstream: None,
                })
                .collect();
            let timed = claims.iter().map(|claim| async move {
                let started = Instant::now();
                let claimed = store.claim(claim).await;
                (claimed, started.elapsed())
            });
            for (claimed, latency) in futures_util::future::join_all(timed).await {
                anyhow::ensure!(claimed?, "a fresh key was not claimed");
                latencies.push(latency);
            }
        }
        let measure = Measure::new(latencies.len(), started.elapsed(), latencies);
        eprintln!(
            "P9: {name} claim, c={concurrency}: p50 {:.2} ms, p99 {:.2} ms ({:.0} claims/s)",
            millis(measure.p50),
            millis(measure.p99),
            measure.rate
        );
    }
    // The other two statements of a call: the lookup at admit, the outcome after.
    let record = brain_runtime::journal::Record {
        state: brain_runtime::journal::EntryState::Completed,
        is_error: false,
        unknown_outcome: false,
        result: Some(r#"{"call_id":"x","is_error":false,"unknown_outcome":false,"content":[{"type":"text","text":"hello"}]}"#.into()),
        result_bytes: 100,
        result_digest: String::new(),
    };
    let (mut lookups, mut settles) = (Vec::new(), Vec::new());
    for i in 0..300 {
        let key = Key {
            tenant: "bench".into(),
            session: owner.clone(),
            call_id: format!("1-{i}-0"),
        };
        let started = Instant::now();
        store.lookup(&key).await?;
        lookups.push(started.elapsed());
        let started = Instant::now();
        store.settle(&key, &owner, &record, false).await?;
        settles.push(started.elapsed());
    }
    for (what, latencies) in [("lookup", lookups), ("outcome", settles)] {
        let measure = Measure::new(latencies.len(), Duration::from_secs(1), latencies);
        eprintln!(
            "P9: {name} {what}, c=1: p50 {:.3} ms, p99 {:.3} ms",
            millis(measure.p50),
            millis(measure.p99)
        );
    }
    Ok(())
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn unique() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

/// The disk's fsync latency where the journal's files are, by `pg_test_fsync` (one second per
/// method), when PostgreSQL's binaries are there.
fn fsync_latency(dir: &Path) {
    let Some(bin) = tests::postgres::binaries() else {
        return;
    };
    let file = dir.join("fsync-test");
    let output = Command::new(bin.join("pg_test_fsync"))
        .args(["-s", "1", "-f"])
        .arg(&file)
        .output();
    let Ok(output) = output else { return };
    let text = String::from_utf8_lossy(&output.stdout);
    for line in text
        .lines()
        .filter(|l| l.contains("fdatasync") || l.contains("fsync "))
    {
        if let Some(usecs) = line.split_whitespace().rev().nth(1) {
            eprintln!(
                "P9: pg_test_fsync {} ({usecs} usecs/op)",
                line.trim().split("  ").next().unwrap_or("")
            );
        }
    }
}
