//! S4: the stdio sandbox's cost — a trivial stdio call (`brain-test-server --stdio`, `echo`)
//! under the default sandbox against `"sandbox": false`, calls 20 ms apart, in interleaved
//! rounds: the p50 the sandbox adds with a spare (`prewarm: 1`: the confinement is applied
//! before the call) and without (a process started, confined and initialized per call).

use std::sync::Arc;
use std::time::Duration;

use brain_config::Sandbox;
use brain_runtime::Runtime;

use crate::harness::{Driver, Plan, Target, spaced_rounds, stdio_config};

/// The most the sandbox may add to a call's p50, in ms: with a spare, and without.
const BUDGET_MS: [(u64, f64); 2] = [(1, 2.0), (0, 5.0)];

/// S4's rows.
pub(crate) async fn targets(plan: &Plan, targets: &mut Vec<Target>) -> anyhow::Result<()> {
    let think = Duration::from_millis(20);
    let calls = plan.sdk_calls.min(100);
    for (prewarm, budget) in BUDGET_MS {
        eprintln!("S4: the stdio sandbox on vs off, prewarm {prewarm}...");
        let driver = |sandbox: bool| -> anyhow::Result<Arc<Driver>> {
            let mut config = stdio_config("echo", prewarm)?;
            config.tools[0].sandbox = Some(Sandbox::Enabled(sandbox));
            Ok(Arc::new(Driver::Brain(Runtime::new(&config)?)))
        };
        let (on, off) = (driver(true)?, driver(false)?);
        let (with, without) = spaced_rounds(&on, &off, calls, think, plan.rounds).await?;
        let (with, without) = (with.pooled().p50, without.pooled().p50);
        let added = (with.as_secs_f64() - without.as_secs_f64()) * 1e3;
        targets.push(Target::below(
            "S4",
            &format!(
                "p50 the sandbox adds to a stdio call, prewarm {prewarm} ({:.2} vs {:.2} ms)",
                with.as_secs_f64() * 1e3,
                without.as_secs_f64() * 1e3
            ),
            added,
            "ms",
            budget,
        ));
    }
    Ok(())
}
