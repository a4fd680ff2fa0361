//! The soak's plan: its servers — the HTTP kinds (an MCP server each), the stdio kinds (a
//! binding each, a process per call) and the HTTP and SSE tool kinds (an endpoint each), with
//! the `(is_error, unknown_outcome)` each call must end with — and, from the seed, where each
//! call goes and whether its call id is sent again.

use std::time::Duration;

use serde_json::{Value, json};

/// The timeout of every binding (the stalled server's calls end by it).
pub(crate) const TIMEOUT_SECONDS: u64 = 2;

/// One server: its faults (as `brain-test-server` flags) and how many `tools/call` a call
/// routed to it adds to its count, per revision.
pub(crate) struct Kind {
    pub(crate) name: &'static str,
    pub(crate) flags: &'static [&'static str],
    pub(crate) counted_session: usize,
    pub(crate) counted_stateless: usize,
    /// The `(is_error, unknown_outcome)` a call must end with over a session (and over stdio).
    pub(crate) session: Flags,
    /// The same at 2026-07-28.
    pub(crate) stateless: Flags,
}

/// The chatty server's kind: its calls go to the test server's `chatty` tool, 100 progress
/// notifications and (over a session, where brain answers them) 3 pings before the result.
pub(crate) const CHATTY: &str = "chatty";

/// The tool error's kind: its calls go to the test server's `fail` tool, which answers
/// `isError: true` — a completed call (with [`KNOWN`]'s flags, yet a retry replays it).
pub(crate) const TOOL_ERROR: &str = "tool error";

/// `(is_error, unknown_outcome)`.
pub(crate) type Flags = (bool, bool);
pub(crate) const OK: Flags = (false, false);
/// Refused or rejected before the tool ran.
pub(crate) const KNOWN: Flags = (true, false);
/// The tool may have run.
pub(crate) const UNKNOWN: Flags = (true, true);

/// The HTTP servers: two healthy ones first (echo, and [`CHATTY`]), then one per fault (the
/// last: [`TOOL_ERROR`]).
pub(crate) const KINDS: &[Kind] = &[
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
    Kind {
        name: TOOL_ERROR,
        flags: &[],
        counted_session: 1,
        counted_stateless: 1,
        session: KNOWN,
        stateless: KNOWN,
    },
];

/// Whether a call of kind `name` that must end with `flags` failed before anything could have
/// run, so that the journal records it as not sent and a retry sends it again: refused at
/// `initialize` (over a session; at 2026-07-28 there is none), `404` to `tools/call`, a stdio
/// server gone at `initialize`. A `-32601` and the tool's own error are [`KNOWN`] too, yet
/// answers to a call the server took in: recorded, and replayed like everything else.
pub(crate) fn not_sent(name: &str, flags: Flags) -> bool {
    flags == KNOWN
        && matches!(
            name,
            "initialize 500" | "tools/call 404" | "stdio exit on initialize"
        )
}

/// The stdio servers: healthy first, then one per stdio fault; how many `tools/call` a call adds
/// to the kind's count.
pub(crate) const STDIO_KINDS: &[Kind] = &[
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
pub(crate) struct ToolKind {
    pub(crate) name: &'static str,
    pub(crate) path: &'static str,
    pub(crate) transport: &'static str,
    pub(crate) arguments: fn() -> Value,
    /// The `(is_error, unknown_outcome)` a call must end with (docs/src/guides/http-tools.md).
    pub(crate) expect: Flags,
}

/// The HTTP and SSE tools: healthy first, then one per fault.
pub(crate) const TOOL_KINDS: &[ToolKind] = &[
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
pub(crate) enum Route {
    /// An HTTP server of [`KINDS`], at 2026-07-28 or over a session.
    Http { server: usize, stateless: bool },
    /// A stdio binding of [`STDIO_KINDS`].
    Stdio(usize),
    /// An HTTP or SSE tool of [`TOOL_KINDS`].
    Tool(usize),
}

/// What the soak does with a call id besides its first call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extra {
    /// Nothing: one call.
    Once,
    /// Sent again with the same arguments after its first result.
    Retry,
    /// Its first call dropped (cancelled) this long after it started, then sent again.
    Kill(Duration),
}

/// The share of faulty calls retried, as a multiple of the share of healthy ones: enough that
/// every fault kind is retried in a short soak.
const FAULTY_RETRIES: f64 = 5.0;

/// The longest a killed call runs before it is dropped: the drop lands anywhere from before
/// `initialize` to after the result.
const MAX_KILL_MICROS: f64 = 20_000.0;

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

/// The healthy kinds at the head of each table: two MCP servers over HTTP (echo, and the
/// chatty server), one stdio server, two tools (HTTP and SSE).
const HEALTHY_HTTP: usize = 2;
const HEALTHY_STDIO: usize = 1;
const HEALTHY_TOOLS: usize = 2;

/// For each of `calls` calls, from `seed`: its server (a faulty one with probability
/// `fault_rate`) and revision; a share `stdio_share` to stdio bindings, a share `tool_share`
/// to HTTP and SSE tools, the rest to MCP servers over HTTP.
pub(crate) fn routes(
    calls: usize,
    seed: u64,
    stdio_share: f64,
    tool_share: f64,
    fault_rate: f64,
) -> Vec<Route> {
    let mut rng = Rng(seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..calls)
        .map(|_| {
            let pick = rng.next();
            let stdio = pick < stdio_share;
            let tool = !stdio && pick < stdio_share + tool_share;
            let (healthy, kinds) = match (stdio, tool) {
                (true, _) => (HEALTHY_STDIO, STDIO_KINDS.len()),
                (false, true) => (HEALTHY_TOOLS, TOOL_KINDS.len()),
                (false, false) => (HEALTHY_HTTP, KINDS.len()),
            };
            let server = if rng.next() < fault_rate {
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
        .collect()
}

/// Whether a call's route goes to a faulty server.
fn faulty(route: Route) -> bool {
    match route {
        Route::Http { server, .. } => server >= HEALTHY_HTTP,
        Route::Stdio(server) => server >= HEALTHY_STDIO,
        Route::Tool(server) => server >= HEALTHY_TOOLS,
    }
}

/// For each call of `plan`, from `seed` (its own sequence: the routes do not change): killed
/// with probability `kill_share`, else retried with probability `retry_share` (a faulty call's
/// [`FAULTY_RETRIES`] times that).
pub(crate) fn extras(plan: &[Route], seed: u64, retry_share: f64, kill_share: f64) -> Vec<Extra> {
    let mut rng = Rng(seed.max(1).wrapping_mul(0xd1b5_4a32_d192_ed03) | 1);
    plan.iter()
        .map(|&route| {
            let (kill, retry, delay) = (rng.next(), rng.next(), rng.next());
            let retry_share = if faulty(route) {
                (retry_share * FAULTY_RETRIES).min(1.0)
            } else {
                retry_share
            };
            if kill < kill_share {
                Extra::Kill(Duration::from_micros((delay * MAX_KILL_MICROS) as u64))
            } else if retry < retry_share {
                Extra::Retry
            } else {
                Extra::Once
            }
        })
        .collect()
}
