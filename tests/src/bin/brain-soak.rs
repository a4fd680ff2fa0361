//! brain-soak: many calls through one runtime against test servers (separate processes), a share
//! of them with random faults, both protocol revisions over HTTP (where a healthy call goes to
//! an echoing server or to a chatty one: 100 progress notifications, and 3 pings over a
//! session, before its result), and a share to stdio bindings
//! (`brain-test-server --stdio`, a process per call, healthy or with a stdio fault) and a share to
//! HTTP and SSE tools (the test server's `/tools` endpoints, healthy or faulty, one server each).
//! `cargo xtask soak` builds and runs it.
//!
//! Asserts: no panic anywhere (a panic hook counts the runtime's tasks too), no hang (every call
//! ends within its timeout plus 5 s), every call answered with exactly one `tool.result` whose
//! `(is_error, unknown_outcome)` is what its server's fault must produce (and a healthy result
//! says what the tool said), RSS flat (at most 0.5 KiB per call of growth from the second
//! quarter of the calls to the last: a 1 KiB-per-call leak shows), this process's open file descriptors back to the starting count once the
//! runtime is dropped, each server's `tools/call` count equal to the calls that reached it (stdio
//! servers count in a stats file per kind; tool endpoints count the requests that reached them),
//! and no server process left once the runtime is dropped.
//! Prints the figures; the last line is a one-line summary; exit 1 on any violation.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use brain_runtime::{CallRequest, Event, Runtime, Scope};
use clap::Parser;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tests::process::{ServerProcess, children, memory_mb};

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
    /// Seed of the fault choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
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

/// One server: its faults (as `brain-test-server` flags) and how many `tools/call` a call
/// routed to it adds to its count, per revision.
struct Kind {
    name: &'static str,
    flags: &'static [&'static str],
    counted_session: usize,
    counted_stateless: usize,
    /// The `(is_error, unknown_outcome)` a call must end with over a session (and over stdio).
    session: Flags,
    /// The same at 2026-07-28.
    stateless: Flags,
}

/// The chatty server's kind: its calls go to the test server's `chatty` tool, 100 progress
/// notifications and (over a session, where brain answers them) 3 pings before the result.
const CHATTY: &str = "chatty";

/// `(is_error, unknown_outcome)`.
type Flags = (bool, bool);
const OK: Flags = (false, false);
/// Refused or rejected before the tool ran.
const KNOWN: Flags = (true, false);
/// The tool may have run.
const UNKNOWN: Flags = (true, true);

/// The HTTP servers: two healthy ones first (echo, and [`CHATTY`]), then one per fault.
const KINDS: &[Kind] = &[
    Kind {
        name: "healthy",
        flags: &[],
        counted_session: 1,
        counted_stateless: 1,
        session: OK,
        stateless: OK,
    },
    Kind {
        name: CHATTY,
        flags: &[],
        counted_session: 1,
        counted_stateless: 1,
        session: OK,
        stateless: OK,
    },
    Kind {
        name: "initialize 500",
        flags: &["--initialize-500"],
        counted_session: 0,
        counted_stateless: 1,
        session: KNOWN,
        stateless: OK,
    },
    Kind {
        name: "tools/call 500",
        flags: &["--call-status", "500"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "tools/call 404",
        flags: &["--call-status", "404"],
        counted_session: 1,
        counted_stateless: 1,
        session: KNOWN,
        stateless: KNOWN,
    },
    Kind {
        name: "dropped before call",
        flags: &["--drop-before-call"],
        counted_session: 0,
        counted_stateless: 0,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "dropped after call",
        flags: &["--drop-after-call"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "stalled",
        flags: &["--stall-call"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "malformed",
        flags: &["--malformed-call"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "truncated",
        flags: &["--truncated-call"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "-32601",
        flags: &["--call-method-not-found"],
        counted_session: 1,
        counted_stateless: 1,
        session: KNOWN,
        stateless: KNOWN,
    },
    Kind {
        name: "stream closed, resumed",
        flags: &["--close-call-stream", "10"],
        counted_session: 1,
        counted_stateless: 1,
        session: OK,
        stateless: UNKNOWN,
    },
    Kind {
        name: "stream closed, refused",
        flags: &["--close-call-stream", "10", "--refuse-resume"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
];

/// The stdio servers: healthy first, then one per stdio fault; how many `tools/call` a call adds
/// to the kind's count.
const STDIO_KINDS: &[Kind] = &[
    Kind {
        name: "stdio healthy",
        flags: &[],
        counted_session: 1,
        counted_stateless: 1,
        session: OK,
        stateless: OK,
    },
    Kind {
        name: "stdio exit on initialize",
        flags: &["--exit-on-initialize"],
        counted_session: 0,
        counted_stateless: 0,
        session: KNOWN,
        stateless: KNOWN,
    },
    Kind {
        name: "stdio crash after call",
        flags: &["--crash-after-call"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "stdio garbage after call",
        flags: &["--garbage-after-call"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
    Kind {
        name: "stdio hung",
        flags: &["--hang"],
        counted_session: 1,
        counted_stateless: 1,
        session: UNKNOWN,
        stateless: UNKNOWN,
    },
];

/// An HTTP or SSE tool: its endpoint on a test server of its own (under `/tools`), its
/// transport and arguments. Every call reaches the endpoint once: each adds 1 to its count.
struct ToolKind {
    name: &'static str,
    path: &'static str,
    transport: &'static str,
    arguments: fn() -> Value,
    /// The `(is_error, unknown_outcome)` a call must end with (README, "HTTP and SSE tools").
    expect: Flags,
}

/// The HTTP and SSE tools: healthy first, then one per fault.
const TOOL_KINDS: &[ToolKind] = &[
    ToolKind {
        name: "http tool healthy",
        path: "echo",
        transport: "http",
        arguments: || json!({"message": "soak"}),
        expect: OK,
    },
    ToolKind {
        name: "sse tool healthy",
        path: "sse/progress",
        transport: "sse",
        arguments: || json!({"steps": 3}),
        expect: OK,
    },
    ToolKind {
        name: "http tool 500",
        path: "status/500",
        transport: "http",
        arguments: || json!({}),
        expect: UNKNOWN,
    },
    ToolKind {
        name: "http tool 429",
        path: "status/429",
        transport: "http",
        arguments: || json!({}),
        expect: UNKNOWN,
    },
    ToolKind {
        name: "http tool dropped",
        path: "drop-after",
        transport: "http",
        arguments: || json!({}),
        expect: UNKNOWN,
    },
    ToolKind {
        name: "http tool stalled",
        path: "stall",
        transport: "http",
        arguments: || json!({}),
        expect: UNKNOWN,
    },
    ToolKind {
        name: "sse tool without result",
        path: "sse/no-result",
        transport: "sse",
        arguments: || json!({}),
        expect: UNKNOWN,
    },
    ToolKind {
        name: "sse tool stalled",
        path: "sse/stall",
        transport: "sse",
        arguments: || json!({}),
        expect: UNKNOWN,
    },
];

/// Where one call goes.
#[derive(Clone, Copy)]
enum Route {
    /// An HTTP server of [`KINDS`], at 2026-07-28 or over a session.
    Http { server: usize, stateless: bool },
    /// A stdio binding of [`STDIO_KINDS`].
    Stdio(usize),
    /// An HTTP or SSE tool of [`TOOL_KINDS`].
    Tool(usize),
}

/// A directory of its own for the stdio servers' stats files; removed when dropped.
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
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The timeout of every binding (the stalled server's calls end by it).
const TIMEOUT_SECONDS: u64 = 2;

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

/// xorshift64*: a reproducible choice of faults.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| dir.count())
        .unwrap_or(0)
}

async fn soak(args: &Args) -> anyhow::Result<Vec<String>> {
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
    let fds_before = open_fds();
    let mut tools = Vec::new();
    for (index, (kind, server)) in TOOL_KINDS.iter().zip(&tool_servers).enumerate() {
        tools.push(json!({
            "name": format!("tool{index}"),
            "description": "An HTTP or SSE tool on a soak server.",
            "input_schema": {"type": "object"},
            "url": server.url.replace("/mcp", &format!("/tools/{}", kind.path)),
            "transport": kind.transport, "tenants": ["soak"], "timeout_seconds": TIMEOUT_SECONDS
        }));
    }
    for (index, server) in servers.iter().enumerate() {
        let (mcp_tool, input_schema) = if KINDS[index].name == CHATTY {
            ("chatty", json!({"type": "object"}))
        } else {
            (
                "echo",
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            )
        };
        for revision in ["2025-11-25", "2026-07-28"] {
            tools.push(json!({
                "name": format!("s{index}_{}", &revision[..4]),
                "description": "A tool on a soak server.",
                "input_schema": input_schema,
                "url": server.url, "mcp_tool": mcp_tool, "tenants": ["soak"],
                "timeout_seconds": TIMEOUT_SECONDS, "protocol_version": revision
            }));
        }
    }
    let stats_dir = StatsDir::new()?;
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
            "timeout_seconds": TIMEOUT_SECONDS, "protocol_version": "2025-11-25"
        }));
    }
    let children_before = children().len();
    let text = json!({"tools": tools}).to_string();
    let config =
        brain_config::parse(text.as_bytes(), "soak.json").map_err(|e| anyhow::anyhow!("{e}"))?;
    let runtime = Runtime::new(&config)?;

    // The plan: for each call, its server and revision.
    let mut rng = Rng(args.seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let plan: Vec<Route> = (0..args.calls)
        .map(|_| {
            let pick = rng.next();
            let stdio = pick < args.stdio_share;
            let tool = !stdio && pick < args.stdio_share + args.tool_share;
            // The tools have two healthy kinds (HTTP and SSE), and so do MCP servers over HTTP
            // (echo, and the chatty server).
            let (healthy, kinds) = match (stdio, tool) {
                (true, _) => (1, STDIO_KINDS.len()),
                (false, true) => (2, TOOL_KINDS.len()),
                (false, false) => (2, KINDS.len()),
            };
            let server = if rng.next() < args.fault_rate {
                healthy + (rng.next() * (kinds - healthy) as f64) as usize % (kinds - healthy)
            } else {
                (rng.next() * healthy as f64) as usize % healthy
            };
            if stdio {
                Route::Stdio(server)
            } else if tool {
                Route::Tool(server)
            } else {
                Route::Http {
                    server,
                    stateless: rng.next() < 0.5,
                }
            }
        })
        .collect();
    let plan = Arc::new(plan);
    let mislabel = Arc::new(args.mislabel.clone());

    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    // One row per HTTP kind, then one per stdio kind, then one per tool kind.
    let outcomes = Arc::new(Mutex::new(vec![
        [0usize; 3];
        KINDS.len()
            + STDIO_KINDS.len()
            + TOOL_KINDS.len()
    ]));
    let rss = Arc::new(Mutex::new(vec![None::<f64>; 4]));
    let mut workers = Vec::new();
    for _ in 0..args.concurrency {
        let (runtime, plan, next, done) = (
            runtime.clone(),
            Arc::clone(&plan),
            Arc::clone(&next),
            Arc::clone(&done),
        );
        let (violations, outcomes, rss, mislabel) = (
            Arc::clone(&violations),
            Arc::clone(&outcomes),
            Arc::clone(&rss),
            Arc::clone(&mislabel),
        );
        let total = args.calls;
        workers.push(tokio::spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total {
                    break;
                }
                let message = || json!({"message": "soak"});
                // Each call's expected flags, and what a healthy result must say.
                let (tool, row, name, arguments, expected, says) = match plan[index] {
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
                let expected = if mislabel.as_deref() == Some(name) {
                    UNKNOWN
                } else {
                    expected
                };
                let mut call = runtime.call(CallRequest {
                    tool,
                    scope: Scope {
                        tenant_id: "soak".into(),
                        session_id: "soak".into(),
                    },
                    call_id: Some(format!("soak-{index}")),
                    arguments,
                    parent: None,
                });
                let bound = Duration::from_secs(TIMEOUT_SECONDS + 5);
                let mut results = Vec::new();
                let ended = tokio::time::timeout(bound, async {
                    while let Some(event) = call.next().await {
                        if let Event::Result(result) = event {
                            results.push(result);
                        }
                    }
                })
                .await;
                let mut violations = violations.lock().unwrap_or_else(|p| p.into_inner());
                if ended.is_err() {
                    violations.push(format!(
                        "call {index} ({name}) did not end within {bound:?}"
                    ));
                } else if results.len() != 1 {
                    violations.push(format!("call {index} ended with {} results", results.len()));
                } else {
                    let result = &results[0];
                    let got = (result.is_error, result.unknown_outcome);
                    let text: String = result
                        .content
                        .iter()
                        .filter_map(|block| match block {
                            brain_runtime::ContentBlock::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    if got != expected {
                        violations.push(format!(
                            "call {index} ({name}) ended with (is_error, unknown_outcome) = \
                             {got:?}, not {expected:?}: {}",
                            text.chars().take(200).collect::<String>()
                        ));
                    } else if got == OK && !text.contains(says) {
                        violations.push(format!(
                            "call {index} ({name}) succeeded without {says:?}: {}",
                            text.chars().take(200).collect::<String>()
                        ));
                    }
                    let slot = match got {
                        (false, _) => 0,
                        (true, false) => 1,
                        (true, true) => 2,
                    };
                    outcomes.lock().unwrap_or_else(|p| p.into_inner())[row][slot] += 1;
                }
                drop(violations);
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if finished % (total / 4).max(1) == 0 && finished / (total / 4).max(1) <= 4 {
                    rss.lock().unwrap_or_else(|p| p.into_inner())
                        [finished / (total / 4).max(1) - 1] = memory_mb("VmRSS:");
                }
            }
        }));
    }
    let mut panics = 0;
    for worker in workers {
        if worker.await.is_err() {
            panics += 1;
        }
    }
    let elapsed = started.elapsed();
    let mut violations = Arc::try_unwrap(violations)
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .unwrap_or_default();
    let panicked = PANICS.load(Ordering::SeqCst);
    if panicked > 0 {
        violations.push(format!("{panicked} panics (the runtime's tasks included)"));
    }
    if panics > 0 {
        violations.push(format!("{panics} workers panicked"));
    }

    // Each server counted exactly the calls that reached it.
    let http = reqwest::Client::new();
    let mut table = Vec::new();
    for (index, (kind, server)) in KINDS.iter().zip(&servers).enumerate() {
        let sent = |to_stateless: bool| {
            plan.iter()
                .filter(|route| {
                    matches!(route, Route::Http { server, stateless }
                        if *server == index && *stateless == to_stateless)
                })
                .count()
        };
        let (sent_session, sent_stateless) = (sent(false), sent(true));
        let expected =
            sent_session * kind.counted_session + sent_stateless * kind.counted_stateless;
        let stats_url = server.url.replace("/mcp", "/stats");
        // A dropped connection's count may land a moment after the client gave up.
        let mut counted = 0;
        for _ in 0..50 {
            let stats: Value = http.get(&stats_url).send().await?.json().await?;
            counted = stats["calls"].as_u64().unwrap_or_default() as usize;
            if counted == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if counted != expected {
            violations.push(format!(
                "{}: the server counted {counted} tools/call, {expected} reached it",
                kind.name
            ));
        }
        let outcome = outcomes.lock().unwrap_or_else(|p| p.into_inner())[index];
        table.push((kind.name, sent_session + sent_stateless, counted, outcome));
    }

    for (index, kind) in STDIO_KINDS.iter().enumerate() {
        let sent = plan
            .iter()
            .filter(|route| matches!(route, Route::Stdio(server) if *server == index))
            .count();
        let expected = sent * kind.counted_session;
        let counted = tests::stdio::count(&stats_dir.path().join(index.to_string()), "tools/call");
        if counted != expected {
            violations.push(format!(
                "{}: the servers counted {counted} tools/call, {expected} reached them",
                kind.name
            ));
        }
        let outcome = outcomes.lock().unwrap_or_else(|p| p.into_inner())[KINDS.len() + index];
        table.push((kind.name, sent, counted, outcome));
    }

    for (index, (kind, server)) in TOOL_KINDS.iter().zip(&tool_servers).enumerate() {
        let sent = plan
            .iter()
            .filter(|route| matches!(route, Route::Tool(server) if *server == index))
            .count();
        let stats_url = server.url.replace("/mcp", "/stats");
        let mut counted = 0;
        for _ in 0..50 {
            let stats: Value = http.get(&stats_url).send().await?.json().await?;
            counted = stats["tool_requests"].as_u64().unwrap_or_default() as usize;
            if counted == sent {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if counted != sent {
            violations.push(format!(
                "{}: the endpoint counted {counted} requests, {sent} were sent",
                kind.name
            ));
        }
        let row = KINDS.len() + STDIO_KINDS.len() + index;
        let outcome = outcomes.lock().unwrap_or_else(|p| p.into_inner())[row];
        table.push((kind.name, sent, counted, outcome));
    }

    let rss = rss.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // Growth against the calls made between the second quarter and the last (the first warms
    // pools and caches up): a leak of 1 KiB per call shows at CI's 2,000 calls.
    let calls_between = (args.calls / 2).max(1) as f64;
    let leak_per_call_kib = match (rss[1], rss[3]) {
        (Some(second), Some(last)) => Some((last - second) * 1024.0 / calls_between),
        _ => None,
    };
    match leak_per_call_kib {
        Some(kib) if kib > MAX_GROWTH_PER_CALL_KIB => violations.push(format!(
            "RSS grew {kib:.2} KiB per call between the second quarter and the last (at most \
             {MAX_GROWTH_PER_CALL_KIB} KiB)"
        )),
        Some(_) => {}
        None => println!("RSS not measured (no /proc here)"),
    }
    drop(runtime);
    drop(http);
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

    for violation in &violations {
        println!("violation: {violation}");
    }
    println!(
        "{:<26} {:>7} {:>9} {:>7} {:>9} {:>9}",
        "server", "calls", "counted", "ok", "error", "unknown"
    );
    for (name, calls, counted, [ok, error, unknown]) in &table {
        println!("{name:<26} {calls:>7} {counted:>9} {ok:>7} {error:>9} {unknown:>9}");
    }
    let shown: Vec<String> = rss
        .iter()
        .map(|mb| mb.map_or("-".to_owned(), |mb| format!("{mb:.1}")))
        .collect();
    println!(
        "RSS by quarter (MB): {} ({}); open fds: {fds_before} before, {fds_after} after; \
         child processes: {children_before} before, {children_after} after",
        shown.join(" "),
        leak_per_call_kib.map_or("growth not measured".to_owned(), |kib| format!(
            "{kib:.2} KiB per call from the second quarter to the last"
        ))
    );
    println!(
        "soak: {} calls ({:.0} % stdio, {:.0} % HTTP and SSE tools), concurrency {}, fault rate {}, {:.1} s ({:.0} calls/s), {} violations",
        args.calls,
        args.stdio_share * 100.0,
        args.tool_share * 100.0,
        args.concurrency,
        args.fault_rate,
        elapsed.as_secs_f64(),
        args.calls as f64 / elapsed.as_secs_f64(),
        violations.len()
    );
    Ok(violations)
}
