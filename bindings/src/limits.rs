//! `brain-harness limits`: the config's buckets as the state store has them now — tokens left
//! and when the next comes for a rate, slots in use for a quota.

// The harness's output: the table or JSON Lines on stdout.
#![allow(clippy::print_stdout)]

use brain_config::HostConfig;
use brain_runtime::journal::Journal;
use brain_runtime::limits::{Limit, tokens};
use serde_json::json;

use crate::output::{self, text};

/// Prints the buckets of `config` (only `tenant`'s, when given) as `journal`'s store has them,
/// as a table or JSON Lines.
pub(crate) async fn show(
    config: &HostConfig,
    journal: &Journal,
    tenant: Option<&str>,
    json: bool,
) -> Result<(), String> {
    let buckets = brain_runtime::limits::buckets(config, tenant);
    let names: Vec<String> = buckets.iter().map(|b| b.name.clone()).collect();
    let usage = journal
        .usage(&names)
        .await
        .map_err(|error| format!("cannot read the limits: {error}"))?;
    if buckets.is_empty() && !json {
        println!("no limits: no binding has `limits` and there are no `tenant_limits`");
        return Ok(());
    }
    if !json {
        println!("{:<48} {:<22} NOW", "BUCKET", "LIMIT");
    }
    for (bucket, usage) in buckets.iter().zip(&usage) {
        let line = match bucket.limit {
            Limit::Rate { calls, per_ms } => {
                let (left, next) = tokens(bucket.limit, usage.state, usage.now_us);
                if json {
                    output::json_text(&json!({"bucket": bucket.name, "limit": "rate",
                        "calls": calls, "per_seconds": per_ms / 1000, "tokens": left,
                        "next_token_ms": next}))
                } else {
                    let next = next
                        .map(|ms| format!(", next in {:.1}s", ms as f64 / 1000.0))
                        .unwrap_or_default();
                    format!(
                        "{:<48} {:<22} {left} left{next}",
                        text(&bucket.name),
                        format!("{calls} per {}s", per_ms / 1000)
                    )
                }
            }
            Limit::Concurrent(slots) => {
                let held = usage.state.held;
                if json {
                    output::json_text(&json!({"bucket": bucket.name, "limit": "concurrent",
                        "concurrent": slots, "running": held}))
                } else {
                    format!(
                        "{:<48} {:<22} {held} running",
                        text(&bucket.name),
                        format!("{slots} at once")
                    )
                }
            }
        };
        println!("{line}");
    }
    Ok(())
}
