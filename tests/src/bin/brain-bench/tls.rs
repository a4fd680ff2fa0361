//! T1–T4: brain over HTTPS. The test server runs as a process of its own over TLS (a CA made by
//! the run), offering HTTP/2 and HTTP/1.1 by ALPN, or HTTP/1.1 only.
//!
//! - T1: brain against the raw floor over HTTPS — the same requests as raw POSTs with a pooled
//!   reqwest client (c connections over HTTP/1.1 at concurrency c, one over HTTP/2), same server
//!   — at c=1 and c=32, over HTTP/2 and HTTP/1.1, at 2026-07-28 and 2025-11-25;
//! - T2: 1,000 calls in flight over HTTP/2 (RSS of a fresh process), and P5' over HTTP/1.1 with
//!   the TypeScript and Python SDK clients holding the same 1,000 calls beside it;
//! - T3: 10,000 calls in flight over HTTP/2 at 2026-07-28: RSS, errors, file descriptors left;
//!   memory per call at 100, 1,000 and 10,000;
//! - T4: the client process's CPU time per call (user + system, from the OS, over warm calls)
//!   for brain and the SDK clients, the same calls (a session each, 2025-11-25) over TLS.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use brain_runtime::{CallRequest, Runtime};
use serde_json::{Value, json};

use super::harness::{
    Driver, Measure, Plan, Sdk, Target, compare, echo_config, measure, scaled, scope, start_server,
};

/// A TLS test server process and the CA file its clients trust.
pub(super) struct TlsServer {
    pub(super) server: tests::process::ServerProcess,
    pub(super) ca_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl TlsServer {
    /// Starts one: HTTP/2 and HTTP/1.1 by ALPN, or HTTP/1.1 only; HTTP/2 streams allowed at once.
    pub(super) fn start(http2: bool, max_streams: u32) -> anyhow::Result<TlsServer> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().to_str().context("a UTF-8 temp dir")?.to_owned();
        let streams = max_streams.to_string();
        let mut flags = vec!["--tls", path.as_str(), "--max-concurrent-streams", &streams];
        if !http2 {
            flags.push("--tls-http1-only");
        }
        let server = start_server(&flags)?;
        Ok(TlsServer {
            server,
            ca_file: dir.path().join("ca.pem"),
            _dir: dir,
        })
    }

    pub(super) fn url(&self) -> &str {
        &self.server.url
    }

    /// A pooled reqwest client trusting the CA (HTTP/2 when ALPN chooses it).
    pub(super) fn raw_client(&self) -> anyhow::Result<reqwest::Client> {
        let ca = reqwest::Certificate::from_pem(&std::fs::read(&self.ca_file)?)?;
        Ok(reqwest::Client::builder()
            .tcp_nodelay(true)
            .add_root_certificate(ca)
            .build()?)
    }

    /// brain with the binding's `ca_file` naming the CA.
    pub(super) fn brain(&self, revision: &str, tool: &str) -> anyhow::Result<Runtime> {
        let config = trusting(
            echo_config(self.url(), revision, tool)?,
            Some(&self.ca_file),
        )?;
        Ok(Runtime::new(&config)?)
    }
}

/// T1: brain vs the raw floor over HTTPS.
pub(super) async fn ratios(
    plan: &Plan,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    for (http2, label) in [(true, "HTTP/2"), (false, "HTTP/1.1")] {
        let server = TlsServer::start(http2, 1000)?;
        for revision in ["2026-07-28", "2025-11-25"] {
            let brain = Arc::new(Driver::Brain(server.brain(revision, "echo")?));
            let floor = Arc::new(if revision == "2026-07-28" {
                Driver::floor_with(server.url(), server.raw_client()?)?
            } else {
                Driver::session_floor_with(server.url(), server.raw_client()?)?
            });
            for concurrency in [1, 32] {
                let calls = plan.calls(concurrency);
                eprintln!("T1: HTTPS, {label}, {revision}, c={concurrency}...");
                let (ours, raw) = compare(&brain, &floor, calls, concurrency, plan.rounds).await?;
                targets.push(Target::ratio_of(
                    "T1",
                    format!("HTTPS {label}, {revision}: brain vs raw floor, c={concurrency}"),
                    &ours,
                    &raw,
                    0.85,
                ));
                scenarios.push((
                    format!("brain, HTTPS {label} ({revision})"),
                    concurrency,
                    ours.pooled(),
                ));
                scenarios.push((
                    format!("floor: raw HTTPS {label} ({revision})"),
                    concurrency,
                    raw.pooled(),
                ));
            }
        }
    }
    Ok(())
}

/// What [`in_flight_probe`] measured, as JSON.
async fn probe(
    url: &str,
    ca_file: Option<&Path>,
    revision: &str,
    calls: usize,
) -> anyhow::Result<Value> {
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command.args(["--in-flight-probe", url, revision, &calls.to_string()]);
    if let Some(path) = ca_file {
        command.arg("--probe-ca-file").arg(path);
    }
    let output = command.output().await?;
    if !output.status.success() {
        bail!(
            "the in-flight probe ({calls} calls) failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// How long the probe's `slow` calls last: long enough for all of them to be in flight at once.
fn slow_seconds(calls: usize) -> f64 {
    if calls >= 5000 { 30.0 } else { 8.0 }
}

/// T2 and T3 (and the SDK clients beside P5').
pub(super) async fn memory(require_sdks: bool, targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let h2 = TlsServer::start(true, 20_000)?;
    eprintln!("T2: 1,000 calls in flight over HTTP/2...");
    let t2 = probe(h2.url(), Some(&h2.ca_file), "2025-11-25", scaled(1000)).await?;
    targets.push(Target::below_measured(
        "T2",
        "1,000 in-flight calls over HTTPS/HTTP/2 (2025-11-25): RSS",
        t2["rss_mb"].as_f64(),
        "MB",
        30.0,
    ));
    mapped_files(targets, "T2", &t2);
    let mut per_call = Vec::new();
    let most = scaled(10_000);
    for calls in [scaled(100), scaled(1000), most] {
        eprintln!("T3: {calls} calls in flight over HTTP/2 (2026-07-28)...");
        let report = probe(h2.url(), Some(&h2.ca_file), "2026-07-28", calls).await?;
        let rss = report["rss_mb"].as_f64();
        let added_kb = report["added_mb"]
            .as_f64()
            .map(|mb| mb * 1000.0 / calls as f64);
        per_call.push((calls, added_kb, report["cpu_us_per_call"].as_f64()));
        if calls == most {
            let errors = report["errors"].as_u64().unwrap_or(u64::MAX);
            let fds_left = report["fds_left"].as_i64().unwrap_or(i64::MAX);
            let clean = errors == 0 && fds_left <= 0;
            targets.push(Target::below_measured(
                "T3",
                "10,000 in-flight calls over HTTPS/HTTP/2 (2026-07-28): RSS",
                rss.filter(|_| clean),
                "MB",
                150.0,
            ));
            mapped_files(targets, "T3", &report);
            targets.push(Target::below_measured(
                "T3",
                "  same: calls that failed",
                Some(errors as f64),
                "",
                0.5,
            ));
            targets.push(Target::below_measured(
                "T3",
                "  same: file descriptors left open after the calls",
                Some(fds_left.max(0) as f64),
                "",
                0.5,
            ));
        }
    }
    for (calls, kb, cpu) in per_call {
        targets.push(Target::value(
            "T3",
            format!("  {calls} in flight: RSS added per call"),
            kb.unwrap_or(f64::NAN),
            "KB",
        ));
        if let Some(cpu) = cpu {
            targets.push(Target::value(
                "T3",
                format!("  {calls} in flight: client CPU per call"),
                cpu,
                "us",
            ));
        }
    }
    // Beside P5' (brain over plain HTTP/1.1, 2025-11-25): the SDK clients holding the same
    // 1,000 slow calls in flight against the same kind of server.
    let plain = start_server(&[])?;
    for sdk in [Sdk::TypeScript, Sdk::Python] {
        eprintln!("P5': {} holding 1,000 calls in flight...", sdk.short());
        let what = format!(
            "1,000 in-flight slow calls: RSS of the {} client",
            sdk.short()
        );
        match sdk.run(&plain.url, scaled(1000), scaled(1000), "inflight:8", &[])? {
            Some(report) => targets.push(Target::value(
                "P5'",
                what,
                report["rss_mb"].as_f64().unwrap_or(f64::NAN),
                "MB",
            )),
            None if require_sdks => {
                bail!("{} is not installed (tests/interop/setup.sh)", sdk.label())
            }
            None => targets.push(Target::not_measured("P5'", what, "info")),
        }
    }
    Ok(())
}

/// Beside an in-flight RSS row: how much of it is mapped files (`RssFile`: the probe's own
/// program code, paged in by what ran, the same with no call in flight), so that a reader can tell
/// the program's size from what the calls hold.
fn mapped_files(targets: &mut Vec<Target>, id: &'static str, report: &Value) {
    if let Some(files) = report["file_mb"].as_f64() {
        targets.push(Target::value(
            id,
            "  same: of which mapped files (the program's code)".into(),
            files,
            "MB",
        ));
    }
}

/// The probe, in a fresh process: `calls` `slow` calls in flight at once against `url`; prints
/// JSON with the RSS then, the RSS they added, failed calls, the file descriptors left open once
/// they ended, and the CPU time per call.
pub(super) async fn in_flight_probe(
    url: &str,
    revision: &str,
    calls: usize,
    ca_file: Option<&Path>,
) -> anyhow::Result<Value> {
    let seconds = slow_seconds(calls);
    let runtime = Runtime::new(&trusting(echo_config(url, revision, "slow")?, ca_file)?)?;
    let stats = match ca_file {
        Some(path) => reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(path)?)?)
            .build()?,
        None => reqwest::Client::new(),
    };
    let running = || async {
        let stats: Value = stats
            .get(url.replace("/mcp", "/stats"))
            .send()
            .await?
            .json()
            .await?;
        anyhow::Ok(stats["running"].as_u64().unwrap_or_default() as usize)
    };
    // A first call opens the connection and TLS session, as in a host that has been running.
    let warm = runtime
        .call(request("slow", json!({"seconds": 0}), "warm"))
        .result()
        .await;
    if warm.is_error {
        bail!("the warm-up call failed: {:?}", warm.content);
    }
    runtime.wait_for_cleanup().await;
    let fds_before = open_fds();
    let baseline = tests::process::memory_mb("VmRSS:");
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let pending: Vec<_> = (0..calls)
        .map(|i| {
            runtime.call(request(
                "slow",
                json!({"seconds": seconds}),
                &format!("slow-{i}"),
            ))
        })
        .collect();
    let deadline = started + Duration::from_secs_f64(seconds * 0.8);
    let mut seen = 0;
    while Instant::now() < deadline {
        seen = running().await?;
        if seen >= calls {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if seen < calls {
        let results = futures_util::future::join_all(pending.into_iter().map(|c| c.result())).await;
        let failed: Vec<_> = results.iter().filter(|result| result.is_error).collect();
        bail!(
            "the server ran {seen} of the {calls} calls at once; not measured ({} failed, the \
             first: {:?})",
            failed.len(),
            failed.first().map(|result| &result.content)
        );
    }
    let in_flight = tests::process::memory_mb("VmRSS:");
    let files = tests::process::memory_mb("RssFile:");
    let results = futures_util::future::join_all(pending.into_iter().map(|c| c.result())).await;
    let cpu = cpu_seconds() - cpu_before;
    let errors = results.iter().filter(|result| result.is_error).count();
    runtime.wait_for_cleanup().await;
    drop(runtime);
    drop(stats);
    // Let the pool's connection close (it was dropped with the runtime).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fds_left = open_fds() as i64 - fds_before as i64;
    Ok(json!({
        "rss_mb": in_flight,
        // The part of it that is mapped files: the program's own code, not the calls.
        "file_mb": files,
        "added_mb": in_flight.zip(baseline).map(|(now, before)| now - before),
        "errors": errors,
        "fds_left": fds_left,
        // The clock counts 10 ms ticks: below 0.2 s in all, the figure would be noise.
        "cpu_us_per_call": (cpu >= 0.2).then(|| cpu * 1e6 / calls as f64),
    }))
}

/// T4: CPU time per call of brain and of the SDK clients, the same calls over TLS.
pub(super) async fn cpu(require_sdks: bool, targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let server = TlsServer::start(true, 1000)?;
    let (warm, calls) = (200, 2000);
    let brain = Arc::new(Driver::Brain(server.brain("2025-11-25", "echo")?));
    measure(&brain, warm, 1).await?;
    let before = cpu_seconds();
    measure(&brain, calls, 1).await?;
    let ours = (cpu_seconds() - before) * 1e6 / calls as f64;
    targets.push(Target::value(
        "T4",
        "brain: client CPU per call over HTTPS (session per call, 2025-11-25)".into(),
        ours,
        "us",
    ));
    for (sdk, at_most) in [(Sdk::TypeScript, 10.0), (Sdk::Python, 20.0)] {
        let what = format!(
            "{}'s CPU per call / brain's, same calls over HTTPS",
            sdk.short()
        );
        let env: [(&str, &Path); 2] = [
            ("NODE_EXTRA_CA_CERTS", &server.ca_file),
            ("SSL_CERT_FILE", &server.ca_file),
        ];
        let sdk_calls = 300;
        eprintln!("T4: {} CPU per call...", sdk.short());
        match sdk.run(server.url(), sdk_calls, 1, "cpu:50", &env)? {
            Some(report) => {
                let theirs = report["cpu_us_per_call"].as_f64().unwrap_or(f64::NAN);
                // At most 1/N of theirs: their CPU per call at least N times brain's.
                targets.push(Target::ratio("T4", what, theirs / ours, at_most));
                targets.push(Target::value(
                    "T4",
                    format!("  {}: client CPU per call", sdk.short()),
                    theirs,
                    "us",
                ));
            }
            None if require_sdks => {
                bail!("{} is not installed (tests/interop/setup.sh)", sdk.label())
            }
            None => targets.push(Target::not_measured("T4", what, &format!(">= {at_most}x"))),
        }
    }
    Ok(())
}

/// `config` with every binding's `ca_file` naming `ca_file` (when there is one).
fn trusting(
    mut config: brain_config::HostConfig,
    ca_file: Option<&Path>,
) -> anyhow::Result<brain_config::HostConfig> {
    if let Some(path) = ca_file {
        let path = path.to_str().context("a UTF-8 CA file path")?;
        for binding in &mut config.tools {
            binding.ca_file = Some(path.to_owned());
        }
    }
    Ok(config)
}

fn request(tool: &str, arguments: Value, call_id: &str) -> CallRequest {
    CallRequest::new(tool, scope(), arguments).with_call_id(call_id)
}

/// This process's CPU time (user + system, every thread, ended ones included), from
/// `/proc/self/stat` in USER_HZ ticks (100 a second on Linux).
pub(super) fn cpu_seconds() -> f64 {
    cpu_seconds_of("self")
}

/// The CPU time of the process `pid` (`self` for this one), as [`cpu_seconds`].
pub(super) fn cpu_seconds_of(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}
