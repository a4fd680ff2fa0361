//! The `brain-harness` command line (DESIGN.md §4):
//!
//! ```text
//! brain-harness [--config PATH] tools
//! brain-harness [--config PATH] call --tenant T [--session S] [--call-id C] [--json] TOOL [ARGS_JSON | -]
//! ```
//!
//! Events go to stdout as JSON Lines with `--json` or when stdout is not a terminal; on a
//! terminal, a progress bar and a readable result. Exit 0 for a non-error result, 1 for an error
//! result, 2 for usage or config errors, 130 after SIGINT (Ctrl-C) and 143 after SIGTERM: the
//! call is cancelled, its `tool.result` printed (`unknown_outcome: true` when `tools/call` had
//! been sent), and the process exits within 2 s, having waited at most 1.5 s for the server to
//! be told. A binding whose `token_env` variable is not set
//! does not stop the harness: calls to it are refused before any I/O, and `tools` marks it.
//! `RUST_LOG` (e.g. `RUST_LOG=brain_runtime=debug`) turns on logs, to stderr; tokens never
//! appear in them.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use brain_config::{ConfigError, HostConfig};
use brain_runtime::{CallRequest, ContentBlock, Event, Runtime, Scope, ToolResult};
use clap::{Parser, Subcommand};
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

/// Calls the tools of a brain host config.
#[derive(Parser)]
#[command(name = "brain-harness", version)]
struct Cli {
    /// A host config to use instead of the bindings compiled in; validated at start.
    #[arg(long, value_name = "PATH", global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the bindings.
    Tools,
    /// Call a tool and print its events.
    Call {
        /// The calling session's tenant (checked against the binding's `tenants`).
        #[arg(long)]
        tenant: String,
        /// The calling session's id.
        #[arg(long, default_value = "harness")]
        session: String,
        /// The call's id (default: a new UUID).
        #[arg(long)]
        call_id: Option<String>,
        /// Print events as JSON Lines even on a terminal.
        #[arg(long)]
        json: bool,
        /// The binding's name.
        tool: String,
        /// The arguments as a JSON object, or `-` to read them from stdin.
        #[arg(default_value = "{}")]
        args: String,
    },
}

/// Runs the harness; returns its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init();
    }
    let config = match load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Tools => match runtime(&config) {
            Ok(runtime) => {
                list(&config, &runtime);
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Call {
            tenant,
            session,
            call_id,
            json,
            tool,
            args,
        } => {
            let arguments = match arguments(&args) {
                Ok(arguments) => arguments,
                Err(message) => {
                    eprintln!("error: {message}");
                    return ExitCode::from(2);
                }
            };
            let runtime = match runtime(&config) {
                Ok(runtime) => runtime,
                Err(code) => return code,
            };
            let request = CallRequest {
                tool,
                scope: Scope {
                    tenant_id: tenant,
                    session_id: session,
                },
                call_id,
                arguments,
            };
            let json = json || !std::io::stdout().is_terminal();
            let tokio = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime starts");
            let (result, interrupted) = tokio.block_on(call(&runtime, request, json));
            match interrupted {
                Some(signal) => ExitCode::from(signal.exit_code()),
                None if result.is_error => ExitCode::FAILURE,
                None => ExitCode::SUCCESS,
            }
        }
    }
}

/// The config from `--config` (validated with every rule), or the bindings compiled in.
fn load(path: Option<&std::path::Path>) -> Result<HostConfig, String> {
    let loaded = match path {
        Some(path) => brain_config::load_file(path),
        None => Ok(crate::generated::host_config()),
    };
    loaded.map_err(|error| match error {
        ConfigError::Invalid(diagnostics) => diagnostics.to_string(),
        other => format!("error: {other}"),
    })
}

fn arguments(text: &str) -> Result<Value, String> {
    let text = if text == "-" {
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|error| format!("cannot read the arguments from stdin: {error}"))?;
        input
    } else {
        text.to_owned()
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(Value::Object(map)),
        Ok(_) => Err("the arguments must be a JSON object, e.g. '{\"query\": \"rust\"}'".into()),
        Err(error) => Err(format!("the arguments are not JSON: {error}")),
    }
}

/// The runtime; an unset token variable refuses calls to its bindings only (before any I/O).
fn runtime(config: &HostConfig) -> Result<Runtime, ExitCode> {
    Runtime::builder(config)
        .allow_missing_tokens()
        .build()
        .map_err(|error| {
            eprintln!("error: {error}");
            ExitCode::from(2)
        })
}

fn list(config: &HostConfig, runtime: &Runtime) {
    for binding in &config.tools {
        let unset = runtime
            .unavailable(&binding.name)
            .map(|why| format!(" (unavailable: {why}, calls are refused)"))
            .unwrap_or_default();
        let (kind, server) = match (&binding.url, &binding.command) {
            (Some(url), _) => (binding.kind().as_str(), url.clone()),
            (None, Some(command)) => ("stdio", command.join(" ")),
            (None, None) => (binding.kind().as_str(), String::new()),
        };
        println!(
            "{:<24} {:<5} {} [{}] {}{unset}",
            binding.name,
            kind,
            server,
            binding.tenants.join(","),
            binding.description
        );
    }
}

/// A signal that interrupted a call.
#[derive(Clone, Copy)]
enum Interrupt {
    Int,
    Term,
}

impl Interrupt {
    /// 128 + the signal's number, as shells report it.
    fn exit_code(self) -> u8 {
        match self {
            Interrupt::Int => 130,
            Interrupt::Term => 143,
        }
    }
}

/// How long the harness waits, after the result, for the call's cleanup (the cancellation and
/// the session's close) to reach the server.
const CLEANUP_BOUND: Duration = Duration::from_millis(1500);

/// Runs the call and prints its events; SIGINT or SIGTERM cancels it (the result still comes,
/// and is printed). Returns the result, and the signal if one came.
async fn call(
    runtime: &Runtime,
    request: CallRequest,
    json: bool,
) -> (ToolResult, Option<Interrupt>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigint = signal(SignalKind::interrupt()).expect("SIGINT can be handled");
    let mut sigterm = signal(SignalKind::terminate()).expect("SIGTERM can be handled");
    let mut interrupted = None;
    let mut call = runtime.call(request);
    let bar = (!json).then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {pos}/{len} {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(call.call_id().to_owned());
        bar
    });
    loop {
        let event = tokio::select! {
            event = call.next() => event,
            _ = sigint.recv(), if interrupted.is_none() => {
                interrupted = Some(Interrupt::Int);
                call.cancel();
                continue;
            }
            _ = sigterm.recv(), if interrupted.is_none() => {
                interrupted = Some(Interrupt::Term);
                call.cancel();
                continue;
            }
        };
        let Some(event) = event else { break };
        if json {
            println!(
                "{}",
                serde_json::to_string(&event).expect("events serialize")
            );
        }
        match event {
            Event::Progress(progress) => {
                if let Some(bar) = &bar {
                    if let Some(total) = progress.total {
                        bar.set_length(total as u64);
                    }
                    bar.set_position(progress.progress as u64);
                    bar.set_message(progress.message.unwrap_or_default());
                }
            }
            Event::Result(result) => {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                    print_readable(&result);
                }
                let _ = tokio::time::timeout(CLEANUP_BOUND, runtime.wait_for_cleanup()).await;
                return (result, interrupted);
            }
        }
    }
    // The runtime always ends a call with its result; should its task ever die, say so.
    let result = ToolResult {
        call_id: call.call_id().to_owned(),
        is_error: true,
        unknown_outcome: true,
        content: vec![ContentBlock::text("the call ended without a result")],
        structured_content: None,
    };
    if json {
        let event = Event::Result(result.clone());
        println!(
            "{}",
            serde_json::to_string(&event).expect("events serialize")
        );
    }
    (result, interrupted)
}

fn print_readable(result: &ToolResult) {
    let status = match (result.is_error, result.unknown_outcome) {
        (false, _) => "ok".to_owned(),
        (true, false) => "error (the tool did not run, or reported the error itself)".to_owned(),
        (true, true) => {
            "error, unknown outcome: the tool may have run; check before retrying".to_owned()
        }
    };
    println!("{} {status}", result.call_id);
    for block in &result.content {
        match block {
            ContentBlock::Text { text } => println!("{text}"),
            ContentBlock::Image { data, mime_type } => {
                println!("[image {mime_type}, {} bytes base64]", data.len());
            }
        }
    }
}
