//! The soak's call ids sent again, with the journal on (SQLite): a share retried after their
//! first result, a share whose first call is dropped at a random moment and then retried; and
//! each server's count of `tools/call` per call id.
//!
//! A retry of a call the journal recorded (a success, a tool error, a failure after the call
//! may have run) is answered from the journal: the same `(is_error, unknown_outcome)`, the same
//! text, `replayed`, and nothing reaches the server. A retry of a call that failed before
//! anything could have run ([`not_sent`](super::plan::not_sent)) is sent again, afresh, and ends
//! the same way. So a server counts each call id exactly as often as it counts one call of its
//! kind, twice for a not-sent failure the server counts that was retried; a killed call's id at
//! most that.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use brain_runtime::{Call, CallRequest, ContentBlock, Event, Runtime, ToolResult};
use futures_util::StreamExt;
use serde_json::Value;

use super::plan::{Extra, Flags, OK, TIMEOUT_SECONDS, UNKNOWN};

/// How long a call may take: its timeout plus 5 s.
pub(crate) const BOUND: Duration = Duration::from_secs(TIMEOUT_SECONDS + 5);

/// The results a call's stream ended with; `None` when it did not end within [`BOUND`].
pub(crate) async fn results(mut call: Call) -> Option<Vec<ToolResult>> {
    let mut results = Vec::new();
    tokio::time::timeout(BOUND, async {
        while let Some(event) = call.next().await {
            if let Event::Result(result) = event {
                results.push(result);
            }
        }
    })
    .await
    .ok()?;
    Some(results)
}

/// `(is_error, unknown_outcome)`.
pub(crate) fn flags(result: &ToolResult) -> Flags {
    (result.is_error, result.unknown_outcome)
}

/// The result's text blocks, joined.
fn text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn shown(result: &ToolResult) -> String {
    text(result).chars().take(200).collect()
}

/// What is wrong with the result of a call that must end with `expected` (and, a success,
/// say `says`); `None` when nothing is.
pub(crate) fn judge(result: &ToolResult, expected: Flags, says: &str) -> Option<String> {
    let got = flags(result);
    if got != expected {
        Some(format!(
            "ended with (is_error, unknown_outcome) = {got:?}, not {expected:?}: {}",
            shown(result)
        ))
    } else if got == OK && !text(result).contains(says) {
        Some(format!("succeeded without {says:?}: {}", shown(result)))
    } else {
        None
    }
}

/// One call id as the soak sends it.
pub(crate) struct Sending<'a> {
    pub(crate) runtime: &'a Runtime,
    pub(crate) request: CallRequest,
    pub(crate) index: usize,
    /// Its kind's name, and its row in the tables.
    pub(crate) name: &'static str,
    pub(crate) row: usize,
    /// The flags it must end with, and what a success says.
    pub(crate) expected: Flags,
    pub(crate) says: &'static str,
    /// Whether its kind fails before anything could have run (a retry is sent again).
    pub(crate) not_sent: bool,
}

/// The figures per row (kind): retried, of them replayed and sent again; killed, of them
/// replayed and not (sent afresh, or failed), and killed calls whose result came before the
/// drop.
pub(crate) struct Figures(Mutex<Vec<[usize; 7]>>);

const RETRIED: usize = 0;
const KILLED: usize = 3;
const ENDED_BEFORE_DROP: usize = 6;

impl Figures {
    pub(crate) fn new(rows: usize) -> Figures {
        Figures(Mutex::new(vec![[0; 7]; rows]))
    }

    fn add(&self, row: usize, column: usize) {
        self.0.lock().unwrap_or_else(|p| p.into_inner())[row][column] += 1;
    }

    /// A retry's result, counted under `column` (`RETRIED` or `KILLED`).
    fn count(&self, row: usize, column: usize, result: &ToolResult) {
        self.add(row, column);
        self.add(row, column + if result.replayed { 1 } else { 2 });
    }

    /// Prints the table (the rows with a retry or a kill), then the totals.
    pub(crate) fn print(&self, names: &[&str]) {
        let rows = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        println!(
            "{:<26} {:>7} {:>9} {:>7} {:>7} {:>9} {:>7} {:>13}",
            "journal: sent again",
            "retried",
            "replayed",
            "fresh",
            "killed",
            "replayed",
            "fresh",
            "ended before"
        );
        let mut total = [0; 7];
        for (name, row) in names.iter().zip(&rows) {
            for (sum, n) in total.iter_mut().zip(row) {
                *sum += n;
            }
            if row[RETRIED] + row[KILLED] > 0 {
                let [a, b, c, d, e, f, g] = row;
                println!("{name:<26} {a:>7} {b:>9} {c:>7} {d:>7} {e:>9} {f:>7} {g:>13}");
            }
        }
        let [a, b, c, d, e, f, g] = total;
        println!(
            "journal: {a} retries ({b} replayed, {c} sent again afresh); {d} calls killed \
             mid-call and retried ({e} replayed, {f} not: sent afresh, or failed; {g} had their \
             result before the drop)"
        );
    }
}

/// Sends the call id again after its first result `first`: replayed with the same flags and
/// text, or (a not-sent kind) sent again and ended the same way.
pub(crate) async fn retry(
    sending: &Sending<'_>,
    first: &ToolResult,
    figures: &Figures,
) -> Vec<String> {
    let (index, name) = (sending.index, sending.name);
    let Some(results) = results(sending.runtime.call(sending.request.clone())).await else {
        return vec![format!(
            "retry of call {index} ({name}) did not end within {BOUND:?}"
        )];
    };
    let [result] = &results[..] else {
        return vec![format!(
            "retry of call {index} ({name}) ended with {} results",
            results.len()
        )];
    };
    figures.count(sending.row, RETRIED, result);
    let mut problems = Vec::new();
    if sending.not_sent && result.replayed {
        problems.push(format!(
            "retry of call {index} ({name}) was replayed: the first failed before it was sent, \
             so the retry sends it again"
        ));
    } else if !sending.not_sent && !result.replayed {
        problems.push(format!(
            "retry of call {index} ({name}) was sent again, not replayed (the first ended with \
             {:?})",
            flags(first)
        ));
    }
    if flags(result) != flags(first) {
        problems.push(format!(
            "retry of call {index} ({name}) ended with {:?}, the first with {:?}: {}",
            flags(result),
            flags(first),
            shown(result)
        ));
    } else if result.replayed && text(result) != text(first) {
        problems.push(format!(
            "retry of call {index} ({name}) was replayed with other text than the first's: {}",
            shown(result)
        ));
    }
    problems
}

/// Starts the call, drops it after `delay` (dropping cancels it), and sends its id again: one
/// result, replayed (what the first ended with, or unknown: it was cancelled after it was
/// sent), or sent afresh (the first was not sent) and ended as its kind ends. The retry's
/// result, for the outcome table, and the problems.
pub(crate) async fn kill(
    sending: &Sending<'_>,
    delay: Duration,
    figures: &Figures,
) -> (Option<ToolResult>, Vec<String>) {
    let (index, name) = (sending.index, sending.name);
    let mut call = sending.runtime.call(sending.request.clone());
    let ended = tokio::time::timeout(delay, async {
        while let Some(event) = call.next().await {
            if matches!(event, Event::Result(_)) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    drop(call);
    if ended {
        figures.add(sending.row, ENDED_BEFORE_DROP);
    }
    let Some(mut results) = results(sending.runtime.call(sending.request.clone())).await else {
        return (
            None,
            vec![format!(
                "retry of killed call {index} ({name}) did not end within {BOUND:?}"
            )],
        );
    };
    if results.len() != 1 {
        return (
            None,
            vec![format!(
                "retry of killed call {index} ({name}) ended with {} results",
                results.len()
            )],
        );
    }
    let result = results.remove(0);
    figures.count(sending.row, KILLED, &result);
    let problem = if result.replayed {
        let got = flags(&result);
        (got != sending.expected && got != UNKNOWN).then(|| {
            format!(
                "retry of killed call {index} ({name}) was replayed with {got:?}, neither \
                 {:?} nor {UNKNOWN:?}: {}",
                sending.expected,
                shown(&result)
            )
        })
    } else {
        judge(&result, sending.expected, sending.says).map(|problem| {
            format!("retry of killed call {index} ({name}), not replayed, {problem}")
        })
    };
    (Some(result), problem.into_iter().collect())
}

/// How many `tools/call` a server may count for one call id of a kind whose call it counts
/// `counted` times: exactly that, twice that for a retried not-sent call, and for a killed call
/// at most what a retried one may. `(count, exact)`.
pub(crate) fn allowed(extra: Extra, counted: usize, not_sent: bool) -> (usize, bool) {
    let twice = if not_sent { 2 } else { 1 };
    match extra {
        Extra::Once => (counted, true),
        Extra::Retry => (counted * twice, true),
        Extra::Kill(_) => (counted * twice, false),
    }
}

/// The counts per call id in a `/stats?by_id=1` object.
pub(crate) fn by_id(counts: &Value) -> HashMap<String, usize> {
    counts
        .as_object()
        .map(|counts| {
            counts
                .iter()
                .map(|(id, n)| (id.clone(), n.as_u64().unwrap_or_default() as usize))
                .collect()
        })
        .unwrap_or_default()
}

/// The most violations told one by one per server; the rest are counted.
const SHOWN: usize = 5;

/// Checks server `server`'s counts per call id (`counts`) against the call ids routed to it
/// (`calls`: each index with its [`allowed`] count), and that it counted no other id. Returns
/// the total the server must have counted (a killed call's id adds what was counted for it).
pub(crate) fn check_ids(
    server: &str,
    counts: &HashMap<String, usize>,
    calls: &[(usize, (usize, bool))],
    violations: &mut Vec<String>,
) -> usize {
    let mut total = 0;
    let mut wrong = Vec::new();
    for &(index, (allowed, exact)) in calls {
        let id = format!("soak-{index}");
        let counted = counts.get(&id).copied().unwrap_or(0);
        if (exact && counted != allowed) || counted > allowed {
            let bound = if exact { "" } else { "at most " };
            wrong.push(format!(
                "{server}: call id {id} reached the server {counted} times, not {bound}{allowed}"
            ));
        }
        total += if exact { allowed } else { counted };
    }
    let mut ids: Vec<&String> = counts.keys().collect();
    ids.sort();
    let routed: std::collections::HashSet<String> = calls
        .iter()
        .map(|(index, _)| format!("soak-{index}"))
        .collect();
    for id in ids.into_iter().filter(|id| !routed.contains(*id)) {
        wrong.push(format!(
            "{server}: counted call id {id} ({} times), which was not sent to it",
            counts[id]
        ));
    }
    let more = wrong.len().saturating_sub(SHOWN);
    violations.extend(wrong.into_iter().take(SHOWN));
    if more > 0 {
        violations.push(format!("{server}: {more} more call ids counted wrongly"));
    }
    total
}
