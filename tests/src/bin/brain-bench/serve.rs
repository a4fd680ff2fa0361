//! P10: `brain-harness serve` against calling the same upstream directly — the same client
//! (brain's runtime, 2026-07-28 on both sides), the same `echo` calls — against the Python SDK
//! server and the fast test server; CPU per call of each process; and serve's memory: per idle
//! session (beside what the test server, the same rmcp server side, holds) and with 1,000 calls
//! in flight.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use brain_runtime::{CallRequest, Runtime};
use serde_json::{Value, json};

use crate::harness::{Driver, Plan, Target, compare, echo_config, measure, python_peer, scope};
use crate::tls::cpu_seconds_of;

/// The bearer token the bench's serve clients use.
const TOKEN: &str = "brain-bench-serve-token-0123456789";
/// serve's budget per idle 2025 session, set from what the test server (rmcp's same server side)
/// was measured to hold (see the bench reference).
const IDLE_SESSION_BUDGET_KB: f64 = 64.0;
/// serve's RSS with 1,000 calls in flight.
const IN_FLIGHT_BUDGET_MB: f64 = 60.0;
/// Through serve against directly, the fast test server upstream at c = 32.
const FAST_UPSTREAM_RATIO: f64 = 0.6;
/// serve's own CPU per call at c = 32, against the fast test server.
const SERVE_CPU_BUDGET_US: f64 = 200.0;

/// A `brain-harness serve --listen` process, killed when dropped.
pub(crate) struct Serving {
    child: Child,
    pub(crate) url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    /// serve in front of `tool` at `upstream` (2026-07-28), journaling to SQLite, for tenant
    /// `local` with a bearer token (and anonymous loopback requests when `anonymous`).
    fn start(upstream: &str, tool: &str, anonymous: bool) -> anyhow::Result<Serving> {
        let mut config: Value = serde_json::to_value(echo_config(upstream, "2026-07-28", tool)?)?;
        config["serve"] = json!({
            "clients": [{"tenant": "local", "token_env": "BRAIN_BENCH_SERVE_TOKEN"}],
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let anonymous = if anonymous {
            &["--anonymous-tenant", "local"][..]
        } else {
            &[]
        };
        Serving::start_with(config, port, anonymous, &[])
    }

    /// serve with `config` (its `serve` section's limits raised for the bench) on `port`,
    /// with `flags` and `env`, journaling to SQLite; its static client's token is [`TOKEN`].
    pub(crate) fn start_with(
        mut config: Value,
        port: u16,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Serving> {
        let dir = tempfile::tempdir()?;
        let serve = config["serve"].as_object_mut().context("a serve section")?;
        for (limit, value) in [
            ("concurrent_calls_per_client", 4096),
            ("concurrent_calls", 4096),
            ("sessions_per_client", 4096),
            ("max_sessions", 4096),
            // The bench is one source on loopback, holding 1,000 calls (and sessions) at once.
            ("max_connections", 4096),
            ("connections_per_source", 4096),
        ] {
            serve.insert(limit.into(), value.into());
        }
        let path = dir.path().join("host.json");
        std::fs::write(&path, config.to_string())?;
        let harness = std::env::current_exe()?
            .parent()
            .context("brain-bench has a directory")?
            .join("brain-harness");
        let mut command = Command::new(&harness);
        command
            .arg("--config")
            .arg(&path)
            .arg("--state")
            .arg(format!("sqlite:{}", dir.path().join("state.db").display()))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(flags)
            .env("BRAIN_BENCH_SERVE_TOKEN", TOKEN)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", harness.display()))?;
        if !tests::process::wait_for_listener(port, Duration::from_secs(30)) {
            bail!("brain-harness serve did not listen");
        }
        Ok(Serving {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            _dir: dir,
        })
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// brain's runtime calling `tool` through this serve, with the token.
    fn client(&self, tool: &str) -> anyhow::Result<Runtime> {
        let mut config: Value = serde_json::to_value(echo_config(&self.url, "2026-07-28", tool)?)?;
        config["tools"][0]["token_env"] = json!("BRAIN_BENCH_SERVE_TOKEN");
        let config = brain_config::parse(config.to_string().as_bytes(), "bench.json")
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Runtime::builder(&config)
            .env(|var| (var == "BRAIN_BENCH_SERVE_TOKEN").then(|| TOKEN.to_owned()))
            .build()?)
    }
}

/// P10 and serve's memory.
pub(crate) async fn targets(
    plan: &Plan,
    test_server: &str,
    test_server_pid: u32,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    if let Some(peer) = python_peer("P10", "serve vs direct, Python SDK server", targets) {
        ratios(plan, "Python SDK server", &peer.url, targets, None).await?;
    }
    let pid = test_server_pid.to_string();
    ratios(plan, "test server", test_server, targets, Some(&pid)).await?;
    idle_sessions(test_server, &pid, targets).await?;
    in_flight(test_server, &pid, targets).await?;
    Ok(())
}

/// Through serve against directly, at c = 1 and 32 (c = 1 shown), with each process's CPU per
/// call against the test server.
async fn ratios(
    plan: &Plan,
    name: &str,
    upstream: &str,
    targets: &mut Vec<Target>,
    upstream_pid: Option<&str>,
) -> anyhow::Result<()> {
    let serving = Serving::start(upstream, "echo", false)?;
    let via = Arc::new(Driver::Brain(serving.client("echo")?));
    let direct = Arc::new(Driver::brain(upstream, "2026-07-28")?);
    for concurrency in [1, 32] {
        eprintln!("P10: serve vs direct, {name}, c={concurrency}...");
        let calls = plan.calls(concurrency);
        let (through, without) = compare(&via, &direct, calls, concurrency, plan.rounds).await?;
        let what = format!("serve vs direct, {name}, 2026-07-28, c={concurrency}");
        let ratio = through.median_rate() / without.median_rate();
        targets.push(match (concurrency, upstream_pid) {
            (32, None) => Target::ratio_of("P10", what, &through, &without, 0.9),
            (32, Some(_)) => Target::ratio_of("P10", what, &through, &without, FAST_UPSTREAM_RATIO),
            _ => Target::info("P10", what, ratio),
        });
        if concurrency == 1 {
            let added = through.pooled().p50.as_secs_f64() - without.pooled().p50.as_secs_f64();
            targets.push(Target::value(
                "P10",
                format!("p50 serve adds, {name}, c=1"),
                added * 1000.0,
                "ms",
            ));
        }
    }
    if let Some(upstream_pid) = upstream_pid {
        // CPU per call of each process, the same calls through serve.
        let calls = plan.calls(32);
        let serve_pid = serving.pid();
        let before = [
            cpu_seconds_of("self"),
            cpu_seconds_of(&serve_pid),
            cpu_seconds_of(upstream_pid),
        ];
        measure(&via, calls, 32).await?;
        for (i, process) in ["client (brain runtime)", "serve", "upstream test server"]
            .into_iter()
            .enumerate()
        {
            let pid = ["self", serve_pid.as_str(), upstream_pid][i];
            let used = cpu_seconds_of(pid) - before[i];
            let what = format!("CPU per call through serve, {process}, c=32");
            let per_call = used * 1e6 / calls as f64;
            targets.push(if process == "serve" {
                Target::below("P10", &what, per_call, "µs", SERVE_CPU_BUDGET_US)
            } else {
                Target::value("P10", what, per_call, "µs")
            });
        }
    }
    Ok(())
}

/// RSS growth per idle 2025-11-25 session: the test server's (rmcp's server side alone), then
/// serve's against its budget.
async fn idle_sessions(
    test_server: &str,
    test_server_pid: &str,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    let sessions = crate::harness::scaled(1000);
    eprintln!("P10: {sessions} idle sessions on the test server and on serve...");
    let http = reqwest::Client::new();
    let open = |url: String, token: Option<&'static str>| {
        let http = http.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}});
            let mut request = http
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .json(&body);
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await?;
            if !response.status().is_success() || response.headers().get("mcp-session-id").is_none()
            {
                bail!("initialize at {url}: {}", response.status());
            }
            response.bytes().await?;
            anyhow::Ok(())
        }
    };
    let per_session = |pid: &str, before: Option<f64>| {
        let after = tests::process::memory_mb_of(pid, "VmRSS:");
        after
            .zip(before)
            .map(|(after, before)| (after - before) * 1024.0 / sessions as f64)
    };
    let before = tests::process::memory_mb_of(test_server_pid, "VmRSS:");
    for _ in 0..sessions {
        open(test_server.to_owned(), None).await?;
    }
    let rmcp = per_session(test_server_pid, before);
    let serving = Serving::start(test_server, "echo", false)?;
    let pid = serving.pid();
    open(serving.url.clone(), Some(TOKEN)).await?;
    let before = tests::process::memory_mb_of(&pid, "VmRSS:");
    for _ in 0..sessions {
        open(serving.url.clone(), Some(TOKEN)).await?;
    }
    let ours = per_session(&pid, before);
    if let Some(rmcp) = rmcp {
        targets.push(Target::value(
            "P10",
            "test server (rmcp server side): RSS per idle session".into(),
            rmcp,
            "KB",
        ));
    }
    targets.push(Target::below_measured(
        "P10",
        "serve: RSS per idle session (1,000 sessions)",
        ours,
        "KB",
        IDLE_SESSION_BUDGET_KB,
    ));
    Ok(())
}

/// 1,000 `slow` calls in flight through serve: serve's RSS, every call answered, and the memory
/// per call in flight of serve (its MCP server side and brain's client side together).
async fn in_flight(
    test_server: &str,
    test_server_pid: &str,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    let calls = crate::harness::scaled(1000);
    eprintln!("P10: {calls} calls in flight through serve...");
    let serving = Serving::start(test_server, "slow", false)?;
    let pid = serving.pid();
    let client = serving.client("slow")?;
    let call = |i: usize, seconds: f64| {
        client.call(
            CallRequest::new("slow", scope(), json!({"seconds": seconds}))
                .with_call_id(format!("in-flight-{i}")),
        )
    };
    let warm_up = call(calls, 0.0).result().await;
    if warm_up.is_error {
        bail!(
            "the warm-up call through serve failed: {:?}",
            warm_up.content
        );
    }
    let before = tests::process::memory_mb_of(&pid, "VmRSS:");
    let upstream_before = tests::process::memory_mb_of(test_server_pid, "VmRSS:");
    let stats = test_server.replace("/mcp", "/stats");
    let http = reqwest::Client::new();
    let started = Instant::now();
    let pending: Vec<_> = (0..calls).map(|i| call(i, 8.0)).collect();
    let mut running = 0;
    while started.elapsed() < Duration::from_secs(6) && running < calls {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let snapshot: Value = http.get(&stats).send().await?.json().await?;
        running = snapshot["running"].as_u64().unwrap_or_default() as usize;
    }
    let during = tests::process::memory_mb_of(&pid, "VmRSS:");
    let during_files = tests::process::memory_mb_of(&pid, "RssFile:");
    let upstream_during = tests::process::memory_mb_of(test_server_pid, "VmRSS:");
    let results = futures_util::future::join_all(pending.into_iter().map(|c| c.result())).await;
    let failed = results.iter().filter(|result| result.is_error).count();
    if running < calls || failed > 0 {
        bail!("{running} of {calls} calls ran at once through serve; {failed} failed");
    }
    targets.push(Target::below_measured(
        "P10",
        "serve: RSS with 1,000 calls in flight (all answered)",
        during,
        "MB",
        IN_FLIGHT_BUDGET_MB,
    ));
    if let Some(files) = during_files {
        targets.push(Target::value(
            "P10",
            "  same: of which mapped files (serve's code)".into(),
            files,
            "MB",
        ));
    }
    if let Some(per_call) = during
        .zip(before)
        .map(|(d, b)| (d - b) * 1024.0 / calls as f64)
    {
        targets.push(Target::value(
            "P10",
            "serve: memory per call in flight (server side + brain's client side)".into(),
            per_call,
            "KB",
        ));
    }
    if let Some(per_call) = upstream_during
        .zip(upstream_before)
        .map(|(d, b)| (d - b) * 1024.0 / calls as f64)
    {
        targets.push(Target::value(
            "P10",
            "test server (rmcp server side, 2026-07-28): memory per call in flight".into(),
            per_call,
            "KB",
        ));
    }
    client.wait_for_cleanup().await;
    Ok(())
}
