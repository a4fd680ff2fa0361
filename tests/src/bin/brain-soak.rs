//! brain-soak: many calls through one runtime against test servers (separate processes), a share
//! of them with random faults, both protocol revisions over HTTP (where a healthy call goes to
//! an echoing server or to a chatty one: 100 progress notifications, and 3 pings over a
//! session, before its result; a faulty one may also go to the `fail` tool, a tool error), and
//! a share to stdio bindings (`brain-test-server --stdio`, a process per call, healthy or with a
//! stdio fault) and a share to HTTP and SSE tools (the test server's `/tools` endpoints, healthy
//! or faulty, one server each). The runtime keeps a journal (SQLite, in a temporary directory),
//! and a share of the call ids is sent again: retried after their first result (a faulty call
//! more often, so that every fault kind is), or killed — the first call dropped at a random
//! moment — and retried. `cargo xtask soak` builds and runs it.
//!
//! Asserts: no panic anywhere (a panic hook counts the runtime's tasks too), no hang (every call
//! ends within its timeout plus 5 s), every call answered with exactly one `tool.result` whose
//! `(is_error, unknown_outcome)` is what its server's fault must produce (and a healthy result
//! says what the tool said); every retry answered with exactly one `tool.result`: the first's,
//! `replayed`, unless the first failed before anything could have run (then sent again, afresh,
//! and ended the same way); a killed call's retry replayed (what the first ended with, or
//! unknown) or, when the first was not sent, sent afresh and ended as its kind ends; anonymous
//! RSS flat (`RssAnon`: the heap, not the pages of the journal's SQLite file that its memory map
//! brings in as the file grows; at most 0.5 KiB per call of growth from the second quarter of the
//! calls to the last: a 1 KiB-per-call leak shows), this process's open file descriptors back to the starting count
//! once the runtime is dropped, each server's `tools/call` count equal to the calls that
//! reached it (stdio servers count in a stats file per kind; tool endpoints count the requests
//! that reached them), and per call id: each reached its server exactly as often as one call
//! of its kind does (once for a healthy call, never again when retried; a retried not-sent
//! failure twice when the server counts it), a killed call's id at most that, and no server
//! counted an id not sent to it; no server process left once the runtime is dropped.
//! Prints the figures (the retries and kills per kind among them); the last line is a one-line
//! summary; exit 1 on any violation.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use brain_runtime::journal::{Durability, Journal};
use brain_runtime::{CallRequest, Runtime, Scope, ToolResult};
use clap::Parser;
use serde_json::{Value, json};
use tests::process::{ServerProcess, children, memory_mb};

#[path = "brain-soak/journal.rs"]
mod journal;
#[path = "brain-soak/plan.rs"]
mod plan;

use journal::{Figures, Sending};
use plan::{
    CHATTY, Extra, KINDS, Route, STDIO_KINDS, TIMEOUT_SECONDS, TOOL_ERROR, TOOL_KINDS, UNKNOWN,
};

/// Soak the runtime with random faults.
#[derive(Parser)]
struct Args {
    /// Calls to make.
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Share of calls sent to a faulty server.
    #[arg(long, default_value_t = 0.1)]
    fault_rate: f64,
    /// Share of calls made to stdio bindings (their own share of faults: `fault_rate`).
    #[arg(long, default_value_t = 0.2)]
    stdio_share: f64,
    /// Share of calls made to HTTP and SSE tools (their own share of faults: `fault_rate`).
    #[arg(long, default_value_t = 0.2)]
    tool_share: f64,
    /// Seed of the fault choice (and of the retries and kills).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Share of call ids sent again after their first result (a faulty call's: five times
    /// that), to be replayed from the journal.
    #[arg(long, default_value_t = 0.1)]
    retry_share: f64,
    /// Share of calls dropped at a random moment, their call id then sent again.
    #[arg(long, default_value_t = 0.02)]
    kill_share: f64,
    /// Expect the wrong flags of the kind with this name (its healthy ones become "unknown"):
    /// a stand-in for a broken classification, which the soak must report (its own test).
    #[arg(long, value_name = "KIND")]
    mislabel: Option<String>,
}

/// RSS growth allowed per call between the second quarter and the last: below the 1 KiB per
/// call a leak of one small allocation per call would show.
const MAX_GROWTH_PER_CALL_KIB: f64 = 0.5;

/// Panics anywhere in the process (the runtime's own tasks included), counted by a hook.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// A directory of its own for the stdio servers' stats files and the journal; removed when
/// dropped.
struct StatsDir(std::path::PathBuf);

impl StatsDir {
    fn new() -> std::io::Result<StatsDir> {
        let path = std::env::temp_dir().join(format!("brain-soak-{}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(StatsDir(path))
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for StatsDir {
    fn drop(&mut self) {
        if std::env::var_os("SOAK_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        report(info);
    }));
    // For the reqwest client that reads the servers' counters.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(soak(&args)) {
        Ok(violations) if violations.is_empty() => std::process::ExitCode::SUCCESS,
        Ok(_) => std::process::ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// Call `index` (routed by `route`) as the soak sends it: its tool, arguments and expected
/// result (`UNKNOWN` for the kind named `mislabel`).
fn sending<'a>(
    runtime: &'a Runtime,
    route: Route,
    index: usize,
    mislabel: Option<&str>,
) -> Sending<'a> {
    let message = || json!({"message": "soak"});
    let (tool, row, name, arguments, expected, says) = match route {
        Route::Http { server, stateless } => (
            format!("s{server}_{}", if stateless { "2026" } else { "2025" }),
            server,
            KINDS[server].name,
            if KINDS[server].name == CHATTY {
                json!({"progress": 100, "pings": if stateless { 0 } else { 3 }})
            } else {
                message()
            },
            if stateless {
                KINDS[server].stateless
            } else {
                KINDS[server].session
            },
            if KINDS[server].name == CHATTY {
                "chatted: 100 progress"
            } else {
                "soak"
            },
        ),
        Route::Stdio(server) => (
            format!("stdio{server}"),
            KINDS.len() + server,
            STDIO_KINDS[server].name,
            message(),
            STDIO_KINDS[server].session,
            "soak",
        ),
        Route::Tool(server) => (
            format!("tool{server}"),
            KINDS.len() + STDIO_KINDS.len() + server,
            TOOL_KINDS[server].name,
            (TOOL_KINDS[server].arguments)(),
            TOOL_KINDS[server].expect,
            if server == 1 {
                "done after 3 steps"
            } else {
                "soak"
            },
        ),
    };
    Sending {
        runtime,
        request: CallRequest::new(
            tool,
            Scope {
                tenant_id: "soak".into(),
                session_id: "soak".into(),
            },
            arguments,
        )
        .with_call_id(format!("soak-{index}")),
        index,
        name,
        row,
        expected: if mislabel == Some(name) {
            UNKNOWN
        } else {
            expected
        },
        says,
        not_sent: plan::not_sent(name, expected),
    }
}

/// The counter `total` of the server whose `/stats?by_id=1` is at `url`, the count it must
/// show for `calls` (the call ids routed to it, see [`journal::check_ids`]), and what is wrong
/// with its counts per call id (its `{total}_by_id`). A dropped connection's count may land a
/// moment after the client gave up: asks again for up to 5 s until they agree.
async fn server_counts(
    http: &reqwest::Client,
    url: &str,
    total: &str,
    name: &str,
    calls: &[(usize, (usize, bool))],
) -> anyhow::Result<(usize, usize, Vec<String>)> {
    let mut answer = (0, 0, Vec::new());
    for _ in 0..50 {
        let stats: Value = http.get(url).send().await?.json().await?;
        let counted = stats[total].as_u64().unwrap_or_default() as usize;
        let by_id = journal::by_id(&stats[format!("{total}_by_id").as_str()]);
        let mut wrong = Vec::new();
        let expected = journal::check_ids(name, &by_id, calls, &mut wrong);
        let agree = counted == expected && wrong.is_empty();
        answer = (counted, expected, wrong);
        if agree {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(answer)
}

/// Starts the soak's test servers: one per HTTP kind (with its faults), one per tool kind.
fn start_servers() -> anyhow::Result<(Vec<ServerProcess>, Vec<ServerProcess>)> {
    let servers: Vec<ServerProcess> = KINDS
        .iter()
        .map(|kind| ServerProcess::start_sibling(kind.flags))
        .collect::<std::io::Result<_>>()
        .context("cannot start brain-test-server")?;
    let tool_servers: Vec<ServerProcess> = TOOL_KINDS
        .iter()
        .map(|_| ServerProcess::start_sibling(&[]))
        .collect::<std::io::Result<_>>()
        .context("cannot start brain-test-server")?;
    Ok((servers, tool_servers))
}

async fn soak(args: &Args) -> anyhow::Result<Vec<String>> {
    let (servers, tool_servers) = start_servers()?;
    let fds_before = open_fds();
    let stats_dir = StatsDir::new()?;
    let tools = soak_tools(&servers, &tool_servers, &stats_dir)?;
    let children_before = children().len();
    let text = json!({"tools": tools}).to_string();
    let config =
        brain_config::parse(text.as_bytes(), "soak.json").map_err(|e| anyhow::anyhow!("{e}"))?;
    let journal = Journal::sqlite(&stats_dir.path().join("state.db"), Durability::Normal)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let runtime = Runtime::builder(&config).journal(journal).build()?;

    // The plan: for each call, its server and revision, and whether its call id is sent again.
    let (plan, extras) = planned(args);
    let extras = Arc::new(extras);
    let plan = Arc::new(plan);
    let mislabel = Arc::new(args.mislabel.clone());

    let started = Instant::now();
    let rows = KINDS.len() + STDIO_KINDS.len() + TOOL_KINDS.len();
    let tally = Arc::new(Tally {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        violations: Mutex::new(Vec::new()),
        // One row per HTTP kind, then one per stdio kind, then one per tool kind.
        outcomes: Mutex::new(vec![[0usize; 3]; rows]),
        rss: Mutex::new(vec![None::<f64>; 4]),
        figures: Figures::new(rows),
    });
    let mut workers = Vec::new();
    for _ in 0..args.concurrency {
        let lists = (Arc::clone(&plan), Arc::clone(&extras));
        let (mislabel, tally) = (Arc::clone(&mislabel), Arc::clone(&tally));
        workers.push(tokio::spawn(work(
            runtime.clone(),
            lists,
            mislabel,
            tally,
            args.calls,
        )));
    }
    let mut panics = 0;
    for worker in workers {
        if worker.await.is_err() {
            panics += 1;
        }
    }
    let elapsed = started.elapsed();
    let mut violations =
        std::mem::take(&mut *tally.violations.lock().unwrap_or_else(|p| p.into_inner()));
    let panicked = PANICS.load(Ordering::SeqCst);
    if panicked > 0 {
        violations.push(format!("{panicked} panics (the runtime's tasks included)"));
    }
    if panics > 0 {
        violations.push(format!("{panics} workers panicked"));
    }

    // Each server counted exactly the calls that reached it, and each call id as often as its
    // kind allows (once for a healthy call, retried or not).
    let routed = routed(&plan, &extras);
    let outcomes = tally
        .outcomes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let table = check_counts(
        (&servers, &tool_servers),
        &stats_dir,
        &routed,
        &outcomes,
        &mut violations,
    )
    .await?;

    let rss = tally.rss.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let leak_per_call_kib = leak_per_call(args.calls, &rss, &mut violations);
    drop(runtime);
    let (fds_after, children_after) = leftovers(fds_before, children_before, &mut violations).await;

    print_table(&violations, &table, &tally.figures);
    let shown: Vec<String> = rss
        .iter()
        .map(|mb| mb.map_or("-".to_owned(), |mb| format!("{mb:.1}")))
        .collect();
    println!(
        "anonymous RSS by quarter (MB): {} ({}); open fds: {fds_before} before, {fds_after} after; \
         child processes: {children_before} before, {children_after} after",
        shown.join(" "),
        leak_per_call_kib.map_or("growth not measured".to_owned(), |kib| format!(
            "{kib:.2} KiB per call from the second quarter to the last"
        ))
    );
    print_summary(args, &extras, elapsed, violations.len());
    Ok(violations)
}

/// A row of the soak's table: the kind's name, the calls routed to it, the calls its server
/// counted, and their outcomes (ok, error, unknown).
type Row = (&'static str, usize, usize, [usize; 3]);

/// The soak's bindings: an HTTP or SSE tool on each of `tool_servers`, two revisions of a tool
/// on each of `servers`, and a stdio server per stdio kind (counting into `stats_dir`).
fn soak_tools(
    servers: &[ServerProcess],
    tool_servers: &[ServerProcess],
    stats_dir: &StatsDir,
) -> anyhow::Result<Vec<Value>> {
    let mut tools = Vec::new();
    for (index, (kind, server)) in TOOL_KINDS.iter().zip(tool_servers).enumerate() {
        tools.push(json!({
            "name": format!("tool{index}"),
            "description": "An HTTP or SSE tool on a soak server.",
            "input_schema": {"type": "object"},
            "url": server.url.replace("/mcp", &format!("/tools/{}", kind.path)),
            "transport": kind.transport, "tenants": ["soak"], "timeout_seconds": TIMEOUT_SECONDS
        }));
    }
    for (index, server) in servers.iter().enumerate() {
        let (mcp_tool, input_schema) = match KINDS[index].name {
            CHATTY => ("chatty", json!({"type": "object"})),
            TOOL_ERROR => ("fail", json!({"type": "object"})),
            _ => (
                "echo",
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            ),
        };
        for revision in ["2025-11-25", "2026-07-28"] {
            tools.push(json!({
                "name": format!("s{index}_{}", &revision[..4]),
                "description": "A tool on a soak server.",
                "input_schema": input_schema,
                "url": server.url, "mcp_tool": mcp_tool, "tenants": ["soak"],
                "pin": tests::server::pin(mcp_tool),
                "timeout_seconds": TIMEOUT_SECONDS, "protocol_version": revision
            }));
        }
    }
    let server_binary = std::env::current_exe()?
        .parent()
        .context("no parent")?
        .join("brain-test-server");
    for (index, kind) in STDIO_KINDS.iter().enumerate() {
        let mut command = vec![
            server_binary.display().to_string(),
            "--stdio".to_owned(),
            "--stats-file".to_owned(),
            stats_dir
                .path()
                .join(index.to_string())
                .display()
                .to_string(),
        ];
        command.extend(kind.flags.iter().map(|flag| (*flag).to_owned()));
        tools.push(json!({
            "name": format!("stdio{index}"),
            "description": "Echo on a stdio soak server.",
            "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
            "command": command, "mcp_tool": "echo", "tenants": ["soak"],
            "sandbox": {"write": [stats_dir.path()]},
            "pin": tests::server::pin("echo"),
            "timeout_seconds": TIMEOUT_SECONDS, "protocol_version": "2025-11-25"
        }));
    }
    Ok(tools)
}

/// What the workers share: the next planned call to take, how many ended, the violations
/// found, the outcomes by row (ok, error, unknown), the anonymous RSS at each quarter, and the
/// journal's figures.
struct Tally {
    next: AtomicUsize,
    done: AtomicUsize,
    violations: Mutex<Vec<String>>,
    outcomes: Mutex<Vec<[usize; 3]>>,
    rss: Mutex<Vec<Option<f64>>>,
    figures: Figures,
}

/// One worker: takes the next planned call until all `total` are taken, sends it and tallies
/// its result, its problems and, as each quarter of the calls ends, the RSS.
async fn work(
    runtime: Runtime,
    (plan, extras): (Arc<Vec<Route>>, Arc<Vec<Extra>>),
    mislabel: Arc<Option<String>>,
    tally: Arc<Tally>,
    total: usize,
) {
    loop {
        let index = tally.next.fetch_add(1, Ordering::Relaxed);
        if index >= total {
            break;
        }
        let sending = sending(&runtime, plan[index], index, mislabel.as_deref());
        let row = sending.row;
        let (result, problems) = send(&sending, extras[index], &tally.figures).await;
        tally
            .violations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(problems);
        if let Some(result) = result {
            let slot = match journal::flags(&result) {
                (false, _) => 0,
                (true, false) => 1,
                (true, true) => 2,
            };
            tally.outcomes.lock().unwrap_or_else(|p| p.into_inner())[row][slot] += 1;
        }
        let finished = tally.done.fetch_add(1, Ordering::Relaxed) + 1;
        if finished.is_multiple_of((total / 4).max(1)) && finished / (total / 4).max(1) <= 4 {
            tally.rss.lock().unwrap_or_else(|p| p.into_inner())
                [finished / (total / 4).max(1) - 1] = memory_mb("RssAnon:");
        }
    }
}

/// Sends one planned call as its `extra` says (killed then retried, retried, or once): its one
/// result (a killed call's: its retry's), and what was wrong with it.
async fn send(
    sending: &Sending<'_>,
    extra: Extra,
    figures: &Figures,
) -> (Option<ToolResult>, Vec<String>) {
    let (index, name) = (sending.index, sending.name);
    match extra {
        Extra::Kill(delay) => journal::kill(sending, delay, figures).await,
        extra => {
            let call = sending.runtime.call(sending.request.clone());
            match journal::results(call).await {
                None => (
                    None,
                    vec![format!(
                        "call {index} ({name}) did not end within {:?}",
                        journal::BOUND
                    )],
                ),
                Some(mut results) if results.len() == 1 => {
                    let first = results.remove(0);
                    let mut problems: Vec<String> =
                        journal::judge(&first, sending.expected, sending.says)
                            .map(|problem| format!("call {index} ({name}) {problem}"))
                            .into_iter()
                            .collect();
                    if extra == Extra::Retry {
                        problems.extend(journal::retry(sending, &first, figures).await);
                    }
                    (Some(first), problems)
                }
                Some(results) => (
                    None,
                    vec![format!("call {index} ended with {} results", results.len())],
                ),
            }
        }
    }
}

/// The call ids routed to each row (HTTP kinds, then stdio kinds, then tool kinds), with what
/// its server may count of each.
fn routed(plan: &[Route], extras: &[Extra]) -> Vec<Vec<(usize, (usize, bool))>> {
    let rows = KINDS.len() + STDIO_KINDS.len() + TOOL_KINDS.len();
    let mut routed = vec![Vec::new(); rows];
    for (index, route) in plan.iter().enumerate() {
        let (row, name, counted, flags) = match *route {
            Route::Http { server, stateless } => {
                let kind = &KINDS[server];
                if stateless {
                    (server, kind.name, kind.counted_stateless, kind.stateless)
                } else {
                    (server, kind.name, kind.counted_session, kind.session)
                }
            }
            Route::Stdio(server) => {
                let kind = &STDIO_KINDS[server];
                let row = KINDS.len() + server;
                (row, kind.name, kind.counted_session, kind.session)
            }
            Route::Tool(server) => {
                let kind = &TOOL_KINDS[server];
                let row = KINDS.len() + STDIO_KINDS.len() + server;
                (row, kind.name, 1, kind.expect)
            }
        };
        let not_sent = plan::not_sent(name, flags);
        routed[row].push((index, journal::allowed(extras[index], counted, not_sent)));
    }
    routed
}

/// Checks that each server counted exactly the calls that reached it, and each call id as often
/// as its kind allows (`routed`); the table of calls, counts and `outcomes` by row.
async fn check_counts(
    (servers, tool_servers): (&[ServerProcess], &[ServerProcess]),
    stats_dir: &StatsDir,
    routed: &[Vec<(usize, (usize, bool))>],
    outcomes: &[[usize; 3]],
    violations: &mut Vec<String>,
) -> anyhow::Result<Vec<Row>> {
    let http = reqwest::Client::new();
    let mut table = Vec::new();
    for (index, (kind, server)) in KINDS.iter().zip(servers).enumerate() {
        let stats_url = server.url.replace("/mcp", "/stats?by_id=1");
        let calls = &routed[index];
        let (counted, expected, wrong) =
            server_counts(&http, &stats_url, "calls", kind.name, calls).await?;
        violations.extend(wrong);
        if counted != expected {
            violations.push(format!(
                "{}: the server counted {counted} tools/call, {expected} reached it",
                kind.name
            ));
        }
        let outcome = outcomes[index];
        table.push((kind.name, calls.len(), counted, outcome));
    }

    for (index, kind) in STDIO_KINDS.iter().enumerate() {
        let row = KINDS.len() + index;
        let calls = &routed[row];
        let file = stats_dir.path().join(index.to_string());
        let counted = tests::stdio::count(&file, "tools/call");
        let by_id = tests::stdio::count_by_id(&file);
        let expected = journal::check_ids(kind.name, &by_id, calls, violations);
        if counted != expected {
            violations.push(format!(
                "{}: the servers counted {counted} tools/call, {expected} reached them",
                kind.name
            ));
        }
        let outcome = outcomes[row];
        table.push((kind.name, calls.len(), counted, outcome));
    }

    for (index, (kind, server)) in TOOL_KINDS.iter().zip(tool_servers).enumerate() {
        let row = KINDS.len() + STDIO_KINDS.len() + index;
        let calls = &routed[row];
        let stats_url = server.url.replace("/mcp", "/stats?by_id=1");
        let (counted, expected, wrong) =
            server_counts(&http, &stats_url, "tool_requests", kind.name, calls).await?;
        violations.extend(wrong);
        if counted != expected {
            violations.push(format!(
                "{}: the endpoint counted {counted} requests, {expected} were sent",
                kind.name
            ));
        }
        let outcome = outcomes[row];
        table.push((kind.name, calls.len(), counted, outcome));
    }
    Ok(table)
}

/// Waits for the runtime's cleanup to close its file descriptors and shut its stdio servers down
/// (a violation when it does not): the open descriptors and child processes after.
async fn leftovers(
    fds_before: usize,
    children_before: usize,
    violations: &mut Vec<String>,
) -> (usize, usize) {
    // Cleanup (DELETE, cancellation) runs in tasks bounded by 5 s; the pool closes with them.
    let mut fds_after = open_fds();
    for _ in 0..100 {
        if fds_after <= fds_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        fds_after = open_fds();
    }
    // Every stdio server process was shut down with its call.
    let mut children_after = children().len();
    for _ in 0..50 {
        if children_after <= children_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        children_after = children().len();
    }
    if children_after > children_before {
        violations.push(format!(
            "{} stdio server processes left after the runtime was dropped",
            children_after - children_before
        ));
    }
    if fds_after > fds_before {
        violations.push(format!(
            "open file descriptors: {fds_before} before, {fds_after} after"
        ));
    }
    (fds_after, children_after)
}

/// The plan of `args`' calls (each one's server and revision, from the seed) and what else each
/// call does (sent again, or killed and sent again).
fn planned(args: &Args) -> (Vec<Route>, Vec<Extra>) {
    let plan = plan::routes(
        args.calls,
        args.seed,
        args.stdio_share,
        args.tool_share,
        args.fault_rate,
    );
    let extras = plan::extras(&plan, args.seed, args.retry_share, args.kill_share);
    (plan, extras)
}

/// The anonymous RSS's growth per call, in KiB, between the second quarter of the `calls` and
/// the last (`rss`: at each quarter); a violation when it is over the bound.
fn leak_per_call(calls: usize, rss: &[Option<f64>], violations: &mut Vec<String>) -> Option<f64> {
    // Growth against the calls made between the second quarter and the last (the first warms
    // pools and caches up): a leak of 1 KiB per call shows at CI's 2,000 calls.
    let calls_between = (calls / 2).max(1) as f64;
    let leak_per_call_kib = match (rss[1], rss[3]) {
        (Some(second), Some(last)) => Some((last - second) * 1024.0 / calls_between),
        _ => None,
    };
    match leak_per_call_kib {
        Some(kib) if kib > MAX_GROWTH_PER_CALL_KIB => violations.push(format!(
            "anonymous RSS grew {kib:.2} KiB per call between the second quarter and the last (at most \
             {MAX_GROWTH_PER_CALL_KIB} KiB)"
        )),
        Some(_) => {}
        None => println!("RSS not measured (no /proc here)"),
    }
    leak_per_call_kib
}

/// Prints the violations, then the table of calls, counts and outcomes by server, then the
/// journal's `figures`.
fn print_table(violations: &[String], table: &[Row], figures: &Figures) {
    for violation in violations {
        println!("violation: {violation}");
    }
    println!(
        "{:<26} {:>7} {:>9} {:>7} {:>9} {:>9}",
        "server", "calls", "counted", "ok", "error", "unknown"
    );
    for (name, calls, counted, [ok, error, unknown]) in table {
        println!("{name:<26} {calls:>7} {counted:>9} {ok:>7} {error:>9} {unknown:>9}");
    }
    let names: Vec<&str> = table.iter().map(|(name, ..)| *name).collect();
    figures.print(&names);
}

/// Prints the soak's summary line: what `args` asked, the calls retried and killed (`extras`),
/// the time taken and the rate, and how many violations.
fn print_summary(args: &Args, extras: &[Extra], elapsed: Duration, violations: usize) {
    println!(
        "soak: {} calls ({:.0} % stdio, {:.0} % HTTP and SSE tools), concurrency {}, fault rate {}, journal on ({} call ids retried, {} killed and retried), {:.1} s ({:.0} calls/s), {} violations",
        args.calls,
        args.stdio_share * 100.0,
        args.tool_share * 100.0,
        args.concurrency,
        args.fault_rate,
        extras.iter().filter(|e| **e == Extra::Retry).count(),
        extras
            .iter()
            .filter(|e| matches!(e, Extra::Kill(_)))
            .count(),
        elapsed.as_secs_f64(),
        args.calls as f64 / elapsed.as_secs_f64(),
        violations
    );
}
