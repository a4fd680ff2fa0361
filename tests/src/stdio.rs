//! The fault-injecting test server in stdio mode (`brain-test-server --stdio`): the same tools,
//! served by rmcp over the process's stdin and stdout, behind a line-level layer that injects the
//! faults that apply to stdio and records what arrives in a stats file (one line per event,
//! appended), so that a test can count across the processes brain starts.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a stdio server writes to its own stdout and stderr

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::server::{Faults, Stats, TestTools};

/// Faults a stdio server can inject, chosen on its command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StdioFaults {
    /// Append one line per event here: `initialize` (and `offered REVISION`), `tools/call`
    /// (and `call-id ID`, its progress token, when it has one), `cancelled`, `answer`,
    /// `child PID`, `exit`.
    #[arg(long)]
    pub stats_file: Option<PathBuf>,
    /// Exit (status 3) when initialize arrives, without answering it.
    #[arg(long)]
    pub exit_on_initialize: bool,
    /// Write a line that is not JSON instead of answering initialize.
    #[arg(long)]
    pub garbage_on_initialize: bool,
    /// Read `tools/call` (it is counted), then exit with status 1.
    #[arg(long)]
    pub crash_after_call: bool,
    /// Read `tools/call`, then write a line that is not JSON (and never answer).
    #[arg(long)]
    pub garbage_after_call: bool,
    /// Read `tools/call`, then write a line of this many bytes with no end (and never answer).
    #[arg(long)]
    pub huge_line: Option<u64>,
    /// Read `tools/call`, then never answer.
    #[arg(long)]
    pub hang: bool,
    /// Do not exit when stdin closes (the client must signal the process).
    #[arg(long)]
    pub ignore_stdin_close: bool,
    /// Ignore SIGTERM (the client must SIGKILL the process).
    #[arg(long)]
    pub ignore_term: bool,
    /// Write this many bytes to stderr when `tools/call` arrives, before answering it: a client
    /// that does not drain stderr never gets the answer.
    #[arg(long)]
    pub stderr_flood: Option<u64>,
    /// Write this line to stderr when a tool call arrives (`$VAR` is replaced by the value of
    /// the environment variable VAR).
    #[arg(long)]
    pub stderr_line: Option<String>,
    /// Start a child process (`sleep 300`) in the server's process group, and record its pid.
    #[arg(long)]
    pub spawn_child: bool,
}

impl StdioFaults {
    fn record(&self, event: &str) {
        if let Some(path) = &self.stats_file
            && let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            // One write per event: concurrent servers append to the same file, and O_APPEND
            // keeps a single write whole.
            let _ = file.write_all(format!("{event}\n").as_bytes());
        }
    }
}

/// Counts the events of `kind` in a stats file written by stdio servers.
pub fn count(stats_file: &std::path::Path, kind: &str) -> usize {
    std::fs::read_to_string(stats_file)
        .unwrap_or_default()
        .lines()
        .filter(|line| *line == kind)
        .count()
}

/// The `tools/call` count per call id (each `call-id ID` line) in a stats file written by
/// stdio servers.
pub fn count_by_id(stats_file: &std::path::Path) -> std::collections::HashMap<String, usize> {
    let mut counts = std::collections::HashMap::new();
    for line in std::fs::read_to_string(stats_file)
        .unwrap_or_default()
        .lines()
    {
        if let Some(id) = line.strip_prefix("call-id ") {
            *counts.entry(id.to_owned()).or_default() += 1;
        }
    }
    counts
}

/// The pids of the children stdio servers recorded in a stats file.
pub fn children(stats_file: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(stats_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("child ")?.parse().ok())
        .collect()
}

/// Serves the test tools on stdin/stdout until stdin closes.
pub async fn serve(faults: Faults, stdio: StdioFaults) -> std::io::Result<()> {
    let stdio = Arc::new(stdio);
    if stdio.ignore_term {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::spawn(async move { while term.recv().await.is_some() {} });
    }
    if stdio.spawn_child {
        let child = std::process::Command::new("sleep").arg("300").spawn()?;
        stdio.record(&format!("child {}", child.id()));
    }
    let faults = Faults {
        stdio: true,
        ..faults
    };
    let tools = TestTools::new(Arc::new(Stats::default()), &faults);
    // rmcp reads what the layer passes on, and writes straight to stdout.
    let (to_rmcp, rmcp_in) = tokio::io::duplex(1024 * 1024);
    let layer = tokio::spawn(pass_on(Arc::clone(&stdio), to_rmcp));
    let service = tools
        .serve((rmcp_in, tokio::io::stdout()))
        .await
        .map_err(std::io::Error::other);
    let service = match service {
        Ok(service) => service,
        // initialize never completed: the layer decided (a fault) or stdin closed.
        Err(_) => {
            let _ = layer.await;
            return Ok(());
        }
    };
    let _ = service.waiting().await;
    stdio.record("exit");
    if stdio.ignore_stdin_close {
        std::future::pending::<()>().await;
    }
    Ok(())
}

/// Reads stdin line by line, records and injects faults, and passes the rest on to rmcp.
async fn pass_on(stdio: Arc<StdioFaults>, mut to_rmcp: tokio::io::DuplexStream) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Value = serde_json::from_str(&line).unwrap_or_default();
        let method = message.get("method").and_then(Value::as_str);
        match method {
            Some("initialize") => {
                stdio.record("initialize");
                let offered = message["params"]["protocolVersion"]
                    .as_str()
                    .unwrap_or("none");
                stdio.record(&format!("offered {offered}"));
                if stdio.exit_on_initialize {
                    eprintln!("test server: exiting on initialize (fault)");
                    std::process::exit(3);
                }
                if stdio.garbage_on_initialize {
                    println!("this is not JSON-RPC");
                    continue;
                }
            }
            Some("tools/call") => {
                stdio.record("tools/call");
                if let Some(id) = crate::server::progress_token(&message) {
                    stdio.record(&format!("call-id {id}"));
                }
                if message["params"]["name"] == "chatty" {
                    // On its own thread: the layer goes on reading (and recording) the answers.
                    let messages = crate::server::chatty_messages(&message);
                    std::thread::spawn(move || {
                        let mut out = std::io::stdout().lock();
                        for message in messages {
                            if writeln!(out, "{message}").is_err() {
                                return;
                            }
                        }
                        let _ = out.flush();
                    });
                    continue;
                }
                if let Some(line) = &stdio.stderr_line {
                    eprintln!("{}", expand(line));
                }
                if let Some(bytes) = stdio.stderr_flood {
                    write_bytes(&mut std::io::stderr().lock(), b'e', bytes);
                }
                if stdio.crash_after_call {
                    eprintln!("test server: crashing after tools/call (fault)");
                    std::process::exit(1);
                }
                if stdio.garbage_after_call {
                    println!("this is not JSON-RPC");
                    continue;
                }
                if let Some(bytes) = stdio.huge_line {
                    write_bytes(&mut std::io::stdout().lock(), b'x', bytes);
                    continue;
                }
                if stdio.hang {
                    continue;
                }
            }
            Some("notifications/cancelled") => stdio.record("cancelled"),
            None if message.get("id").is_some() => {
                stdio.record("answer");
                let id = message["id"].as_str().unwrap_or_default();
                if id.starts_with(crate::server::CHATTY_PING) {
                    continue;
                }
            }
            _ => {}
        }
        if to_rmcp.write_all(line.as_bytes()).await.is_err()
            || to_rmcp.write_all(b"\n").await.is_err()
        {
            break;
        }
    }
    // stdin closed: so is rmcp's input (it then ends the service; `serve` decides what next).
    drop(to_rmcp);
}

/// Writes `count` bytes `byte` (blocking), stopping early when the reader is gone.
fn write_bytes(out: &mut impl Write, byte: u8, count: u64) {
    let chunk = vec![byte; 64 * 1024];
    let mut left = count;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if out.write_all(&chunk[..n]).is_err() {
            return;
        }
        left -= n as u64;
    }
    let _ = out.flush();
}

/// `$VAR` in `text` replaced by the variable's value.
fn expand(text: &str) -> String {
    text.split(' ')
        .map(|word| match word.strip_prefix('$') {
            Some(var) => std::env::var(var).unwrap_or_default(),
            None => word.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}
