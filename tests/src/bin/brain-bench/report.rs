//! What a run measured, kept whatever happens: each group of rows runs isolated ([`isolated`]),
//! a group that fails (an error or a panic) leaves an error row in its place, and the table, the
//! summary line and (with `--json`) the same as JSON are written at the end of every run.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::Path;

use futures_util::FutureExt;
use serde_json::{Value, json};

use crate::harness::{Measure, Target};

/// The targets and scenarios measured so far, and the groups that failed.
#[derive(Default)]
pub(crate) struct Results {
    pub(crate) targets: Vec<Target>,
    pub(crate) scenarios: Vec<(String, usize, Measure)>,
    failed: Vec<Failed>,
}

/// A group of rows that did not finish.
struct Failed {
    /// How many targets were measured before it failed: its error row follows them.
    at: usize,
    /// The target ids the group measures, as the bench reference names them.
    ids: &'static str,
    /// What the group measures.
    group: &'static str,
    cause: String,
}

/// How a run ended, as its exit code says.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verdict {
    /// Every counted target met, and no group failed: exit 0.
    Met,
    /// A target missed or not measured, and no group failed: exit 1.
    Missed,
    /// A group failed (its rows say `error: …`): exit 2.
    Failed,
}

impl Verdict {
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Verdict::Met => 0,
            Verdict::Missed => 1,
            Verdict::Failed => 2,
        }
    }
}

/// Runs one group's measurements to its end; its error, or its panic, as text.
pub(crate) async fn isolated(group: impl Future<Output = anyhow::Result<()>>) -> Option<String> {
    match AssertUnwindSafe(group).catch_unwind().await {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(format!("{error:#}")),
        Err(panic) => Some(format!("panicked: {}", panic_text(panic.as_ref()))),
    }
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".to_owned())
}

impl Results {
    /// Records how the group `ids` (`group`) ended: an error row after the rows it measured.
    pub(crate) fn settle(&mut self, ids: &'static str, group: &'static str, cause: Option<String>) {
        if let Some(cause) = cause {
            eprintln!("{ids} ({group}): error: {cause}");
            self.failed.push(Failed {
                at: self.targets.len(),
                ids,
                group,
                cause,
            });
        }
    }

    /// The counts of the summary line: met, missed, not measured, counted, groups failed.
    fn counts(&self) -> Counts {
        let counted: Vec<&Target> = self.targets.iter().filter(|t| !t.info).collect();
        let met = counted.iter().filter(|t| t.met == Some(true)).count();
        let missed = counted.iter().filter(|t| t.met == Some(false)).count();
        let noise = counted
            .iter()
            .filter(|t| t.spread.is_some_and(|s| s.noise))
            .count();
        Counts {
            met,
            missed,
            noise,
            unmeasured: counted.len() - met - missed,
            counted: counted.len(),
            failed: self.failed.len(),
        }
    }

    /// The verdict the exit code gives.
    pub(crate) fn verdict(&self) -> Verdict {
        let counts = self.counts();
        if counts.failed > 0 {
            Verdict::Failed
        } else if counts.missed > 0 || counts.unmeasured > 0 {
            Verdict::Missed
        } else {
            Verdict::Met
        }
    }

    /// Prints the targets (each failed group's error row in its place), the scenarios and the
    /// summary line.
    pub(crate) fn print(&self) {
        println!(
            "\n{:<4} {:<68} {:>12} {:>10}  status",
            "id", "what", "measured", "target"
        );
        let mut failed = self.failed.iter().peekable();
        for (at, target) in self.targets.iter().enumerate() {
            while let Some(group) = failed.next_if(|f| f.at == at) {
                print_failed(group);
            }
            println!(
                "{:<4} {:<68} {:>12} {:>10}  {}",
                target.id,
                target.what,
                target.measured,
                target.target,
                status_line(target)
            );
        }
        failed.for_each(print_failed);
        println!(
            "\n{:<40} {:>3} {:>10} {:>10} {:>10}",
            "scenario", "c", "calls/s", "p50 ms", "p99 ms"
        );
        for (name, concurrency, measure) in &self.scenarios {
            println!(
                "{:<40} {:>3} {:>10.0} {:>10.3} {:>10.3}",
                name,
                concurrency,
                measure.rate,
                measure.p50.as_secs_f64() * 1e3,
                measure.p99.as_secs_f64() * 1e3
            );
        }
        println!("\n{}", self.summary());
    }

    /// The summary line: `targets met: …` and, when a group failed, how many.
    fn summary(&self) -> String {
        let Counts {
            met,
            missed,
            noise,
            unmeasured,
            counted,
            failed,
        } = self.counts();
        let within = if noise > 0 {
            format!(", {noise} of them within their rounds' spread")
        } else {
            String::new()
        };
        let mut line = format!(
            "targets met: {met}/{counted} ({missed} missed{within}, {unmeasured} not measured)"
        );
        if failed > 0 {
            line.push_str(&format!("; {failed} group(s) in error"));
        }
        line
    }

    /// The same results as JSON, for tools.
    pub(crate) fn json(&self) -> Value {
        let counts = self.counts();
        json!({
            "targets": self.targets.iter().map(|t| json!({
                "id": t.id, "what": t.what, "measured": t.measured, "target": t.target,
                "status": status(t),
                "rounds": t.spread.map(|s| json!({"low": s.low, "high": s.high, "noise": s.noise})),
            })).collect::<Vec<_>>(),
            "errors": self.failed.iter().map(|f| json!({
                "ids": f.ids, "group": f.group, "error": f.cause, "after_target": f.at,
            })).collect::<Vec<_>>(),
            "scenarios": self.scenarios.iter().map(|(name, concurrency, m)| json!({
                "scenario": name, "concurrency": concurrency, "calls_per_second": m.rate,
                "p50_ms": m.p50.as_secs_f64() * 1e3, "p99_ms": m.p99.as_secs_f64() * 1e3,
            })).collect::<Vec<_>>(),
            "summary": {
                "met": counts.met, "missed": counts.missed, "not_measured": counts.unmeasured,
                "counted": counts.counted, "groups_in_error": counts.failed,
                "verdict": match self.verdict() {
                    Verdict::Met => "met", Verdict::Missed => "missed", Verdict::Failed => "error",
                },
                "line": self.summary(),
            },
        })
    }

    /// Writes [`Results::json`] to `path`.
    pub(crate) fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(&self.json())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    }
}

struct Counts {
    met: usize,
    missed: usize,
    /// Missed within their rounds' spread.
    noise: usize,
    unmeasured: usize,
    counted: usize,
    failed: usize,
}

fn status(target: &Target) -> &'static str {
    match (target.info, target.met) {
        (true, _) => "info",
        (false, Some(true)) => "met",
        (false, Some(false)) => "missed",
        (false, None) => "not measured",
    }
}

/// The status column: a ratio's verdict with its rounds' spread, and whether a miss is noise.
fn status_line(target: &Target) -> String {
    match target.spread {
        Some(spread) if !target.info => format!(
            "{} (rounds {:.2}–{:.2}x{})",
            status(target),
            spread.low,
            spread.high,
            if spread.noise { ": within, noise" } else { "" }
        ),
        _ => status(target).to_owned(),
    }
}

fn print_failed(failed: &Failed) {
    println!(
        "{:<4} {:<68} {:>12} {:>10}  error: {}",
        failed
            .ids
            .split([',', ' ', '–'])
            .next()
            .unwrap_or(failed.ids),
        failed.group,
        "-",
        "-",
        failed.cause
    );
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::harness::Rounds;

    fn rounds(rates: &[f64]) -> Rounds {
        Rounds(
            rates
                .iter()
                .map(|&rate| Measure {
                    rate,
                    p50: Duration::ZERO,
                    p99: Duration::ZERO,
                    latencies: Vec::new(),
                })
                .collect(),
        )
    }

    /// A miss that one of its rounds reaches across is noise, and says so; one that no round
    /// reaches is a miss; both are misses in the verdict.
    #[test]
    fn a_miss_inside_its_rounds_spread_reads_as_noise() {
        let base = rounds(&[100.0, 100.0, 100.0]);
        let noisy = Target::ratio_of(
            "P9",
            "noisy".into(),
            &rounds(&[85.0, 95.0, 88.0]),
            &base,
            0.9,
        );
        let slow = Target::ratio_of(
            "P9",
            "slow".into(),
            &rounds(&[80.0, 82.0, 84.0]),
            &base,
            0.9,
        );
        assert_eq!(noisy.met, Some(false));
        assert!(noisy.spread.is_some_and(|s| s.noise));
        assert!(slow.spread.is_some_and(|s| !s.noise));
        assert_eq!(
            status_line(&noisy),
            "missed (rounds 0.85–0.95x: within, noise)"
        );
        assert_eq!(status_line(&slow), "missed (rounds 0.80–0.84x)");
        let mut results = Results::default();
        results.targets.extend([noisy, slow]);
        assert_eq!(results.verdict(), Verdict::Missed);
        assert_eq!(
            results.json()["summary"]["line"],
            "targets met: 0/2 (2 missed, 1 of them within their rounds' spread, 0 not measured)"
        );
    }

    fn met(id: &'static str) -> Target {
        Target::ratio(id, format!("{id} row"), 1.0, 0.9)
    }

    /// A group that errors and one that panics leave error rows in their places; the rows
    /// around them are kept, and the verdict is an error, not a miss.
    #[tokio::test]
    async fn a_failed_group_leaves_its_row_and_the_rest_are_kept() {
        let mut results = Results::default();
        results.targets.push(met("P1"));
        let cause = isolated(async { anyhow::bail!("the warm-up call failed") }).await;
        results.settle("P10", "serve", cause);
        let cause = isolated(async {
            panic!("a row panicked");
            #[allow(unreachable_code)]
            Ok(())
        })
        .await;
        results.settle("P11", "limits", cause);
        results.targets.push(met("P12"));
        assert_eq!(results.verdict(), Verdict::Failed);
        let json = results.json();
        assert_eq!(json["targets"].as_array().unwrap().len(), 2);
        assert_eq!(json["errors"][0]["error"], "the warm-up call failed");
        assert_eq!(json["errors"][1]["error"], "panicked: a row panicked");
        assert_eq!(json["errors"][0]["after_target"], 1);
        assert_eq!(
            json["summary"]["line"],
            "targets met: 2/2 (0 missed, 0 not measured); 2 group(s) in error"
        );
        let mut clean = Results::default();
        clean.targets.push(met("P1"));
        assert_eq!(clean.verdict(), Verdict::Met);
        clean
            .targets
            .push(Target::ratio("P2", "slow".into(), 0.5, 0.9));
        assert_eq!(clean.verdict(), Verdict::Missed);
    }
}
