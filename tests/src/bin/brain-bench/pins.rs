//! P13: pins enforced at run time, against the same calls with verification off
//! (`__bench::without_pin_verification`, a baseline no host can configure).
//!
//! - The Python SDK server at 2025-11-25 (no cache hint: brain keeps a listing for its default
//!   TTL) and at 2026-07-28 saying `ttlMs: 60000`: ≥ 0.95× at c = 32; c = 1 reported. At
//!   2026-07-28 with the SDK's default `ttlMs: 0` every call is verified by a listing sent after
//!   it arrived (shared by the calls that wait together): reported, the price of the server's
//!   "do not reuse".
//! - The fast test server at 2026-07-28 (`ttlMs` a minute): what a kept listing costs a call.
//! - stdio: with a spare (listed at prewarm, off the call's path), calls 20 ms apart, within
//!   5 %; without one, the call's own `tools/list` round trip, reported.
//! - A corpus-size listing (the codegen corpus's 192 tools) parsed, indexed and every binding
//!   checked against its pin: under 5 ms; three times as many tools reported.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brain_config::HostConfig;
use brain_runtime::{__bench, Runtime};
use serde_json::{Value, json};

use crate::harness::{Driver, Measure, Plan, Rounds, Target, compare, echo_config, python_peer};

/// P13's rows.
pub(crate) async fn targets(
    plan: &Plan,
    test_server: &str,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    digest(targets)?;
    if let Some(peer) = python_peer("P13", "pins enforced vs off, Python SDK server", targets) {
        for (revision, hint) in [
            ("2025-11-25", "no cache hint"),
            ("2026-07-28", "the SDK's ttlMs 0"),
        ] {
            let what = format!("Python SDK server, {revision}, {hint}");
            ratios(plan, &what, &peer.url, revision, plan.sdk_calls, targets).await?;
        }
        drop(peer);
        // The same server saying its list may be kept a minute (`cache_hints`).
        let kept = tests::peers::Peer::python_listing_kept(60_000);
        crate::harness::pin_peer(&kept.url);
        let what = "Python SDK server, 2026-07-28, ttlMs 60000";
        ratios(plan, what, &kept.url, "2026-07-28", plan.sdk_calls, targets).await?;
    }
    ratios(
        plan,
        "test server, 2026-07-28",
        test_server,
        "2026-07-28",
        plan.calls_c32,
        targets,
    )
    .await?;
    stdio(plan, targets, scenarios).await
}

fn runtimes(config: &HostConfig) -> anyhow::Result<(Arc<Driver>, Arc<Driver>)> {
    let on = Runtime::builder(config).build()?;
    let off = __bench::without_pin_verification(Runtime::builder(config)).build()?;
    Ok((Arc::new(Driver::Brain(on)), Arc::new(Driver::Brain(off))))
}

/// Pins enforced against off, the same `echo` calls to `url` at `revision`.
async fn ratios(
    plan: &Plan,
    what: &str,
    url: &str,
    revision: &str,
    calls: usize,
    targets: &mut Vec<Target>,
) -> anyhow::Result<()> {
    let (on, off) = runtimes(&echo_config(url, revision, "echo")?)?;
    for concurrency in [1, 32] {
        eprintln!("P13: pins enforced vs off, {what}, c={concurrency}...");
        let (with, without) = compare(&on, &off, calls, concurrency, plan.rounds).await?;
        let ratio = with.median_rate() / without.median_rate();
        let row = format!(
            "pins enforced vs off, {what}, c={concurrency} (p50 {:.2} vs {:.2} ms)",
            ms(with.pooled().p50),
            ms(without.pooled().p50)
        );
        // Under ttlMs 0 each call waits for a listing sent after it arrived: the server's
        // own price for forbidding reuse, reported.
        let target = what.starts_with("Python") && !what.ends_with("ttlMs 0");
        targets.push(if concurrency == 32 && target {
            Target::ratio_of("P13", row, &with, &without, 0.95)
        } else {
            Target::info("P13", row, ratio)
        });
    }
    Ok(())
}

/// stdio (`brain-test-server --stdio`): with a spare, calls 20 ms apart; without, back to back.
async fn stdio(
    plan: &Plan,
    targets: &mut Vec<Target>,
    scenarios: &mut Vec<(String, usize, Measure)>,
) -> anyhow::Result<()> {
    let calls = plan.sdk_calls.min(100);
    for prewarm in [1, 0] {
        let (on, off) = runtimes(&crate::harness::stdio_config("echo", prewarm)?)?;
        let think = Duration::from_millis(if prewarm > 0 { 20 } else { 0 });
        crate::harness::spaced(&on, 5, think).await?;
        crate::harness::spaced(&off, 5, think).await?;
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for round in 0..plan.rounds {
            if round % 2 == 0 {
                with.push(crate::harness::spaced(&on, calls, think).await?);
                without.push(crate::harness::spaced(&off, calls, think).await?);
            } else {
                without.push(crate::harness::spaced(&off, calls, think).await?);
                with.push(crate::harness::spaced(&on, calls, think).await?);
            }
        }
        let (with, without) = (Rounds(with), Rounds(without));
        let (with_p50, without_p50) = (with.pooled().p50, without.pooled().p50);
        let ratio = with.median_rate() / without.median_rate();
        if prewarm > 0 {
            targets.push(Target::ratio_of(
                "P13",
                format!(
                    "stdio with a spare, pins enforced vs off, calls 20 ms apart (p50 {:.2} vs \
                     {:.2} ms)",
                    ms(with_p50),
                    ms(without_p50)
                ),
                &with,
                &without,
                0.95,
            ));
        } else {
            targets.push(Target::value(
                "P13",
                format!(
                    "stdio without a spare: the call's own tools/list round trip (p50 {:.2} vs \
                     {:.2} ms; {ratio:.2}x)",
                    ms(with_p50),
                    ms(without_p50)
                ),
                ms(with_p50.saturating_sub(without_p50)),
                "ms",
            ));
        }
        let spare = if prewarm > 0 { "a spare" } else { "no spare" };
        scenarios.push((
            format!("brain, stdio, {spare}, pins enforced"),
            1,
            with.pooled(),
        ));
        scenarios.push((
            format!("brain, stdio, {spare}, pins off"),
            1,
            without.pooled(),
        ));
    }
    Ok(())
}

/// A listing of the codegen corpus's tools (`copies` times, renamed), as one server's
/// `tools/list` result, and a config binding each of them under its pin.
fn corpus_listing(copies: usize) -> anyhow::Result<(HostConfig, Vec<u8>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../brain-codegen/corpus/host.json");
    let corpus: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    let bindings = corpus["tools"].as_array().cloned().unwrap_or_default();
    let (mut tools, mut pinned) = (Vec::new(), Vec::new());
    for copy in 0..copies {
        for binding in &bindings {
            let name = format!("{}_{copy}", binding["name"].as_str().unwrap_or_default());
            let mut tool = json!({
                "name": name,
                "description": binding["description"],
                "inputSchema": binding["input_schema"],
            });
            for (field, key) in [
                ("output_schema", "outputSchema"),
                ("annotations", "annotations"),
                ("execution", "execution"),
            ] {
                if let Some(value) = binding.get(field) {
                    tool[key] = value.clone();
                }
            }
            pinned.push(json!({
                "name": name,
                "description": binding["description"],
                "input_schema": binding["input_schema"],
                "url": "http://127.0.0.1:9/mcp",
                "mcp_tool": name,
                "protocol_version": "2026-07-28",
                "tenants": ["local"],
                "pin": brain_config::ToolPin::of(&tool),
            }));
            tools.push(tool);
        }
    }
    let config = brain_config::parse(
        json!({ "tools": pinned }).to_string().as_bytes(),
        "corpus.json",
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((config, serde_json::to_vec(&json!({ "tools": tools }))?))
}

/// A corpus-size listing verified: parsed, indexed, every binding checked (p50 of 50).
fn digest(targets: &mut Vec<Target>) -> anyhow::Result<()> {
    for copies in [1, 3] {
        let (config, listing) = corpus_listing(copies)?;
        let runtime = Runtime::new(&config)?;
        let mut times = Vec::new();
        for _ in 0..50 {
            let started = Instant::now();
            let passed = __bench::verify_listing(&runtime, &listing)?;
            times.push(started.elapsed());
            if passed != config.tools.len() {
                anyhow::bail!(
                    "P13: {passed} of {} corpus bindings passed",
                    config.tools.len()
                );
            }
        }
        times.sort();
        let what = format!(
            "a listing of {} tools ({} KB) verified: parsed, indexed, every binding checked",
            config.tools.len(),
            listing.len() / 1024
        );
        // The corpus is the target; three times its size is shown beside it.
        targets.push(if copies == 1 {
            Target::below("P13", &what, ms(times[25]), "ms", 5.0)
        } else {
            Target::value("P13", what, ms(times[25]), "ms")
        });
    }
    Ok(())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
