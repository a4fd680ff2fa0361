//! The stdio transport: an installed MCP server run as a child process, a fresh process per call
//! (for stdio, the process is the session; `stdio/process.rs` owns processes and pipes). Open:
//! a spare process, or a new one initialized; write: `tools/call` as one line on stdin; read:
//! stdout line by line under a byte bound, server requests answered on stdin (not on
//! 2026-07-28); clean up: the process ended and reaped, and the binding's spares refilled.
//!
//! Discovery's `--command` lists a stdio server's tools here too ([`list_tools`]).

mod process;
mod sandbox;

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tracing::Span;

use crate::call::{
    CONTROL_TIMEOUT, CallState, Exchange, Incoming, MAX_HEARD, Reading, Round, Transport,
};
use crate::http::HttpClient;
use crate::outcome::{Fact, Failure};
use crate::pins::Pins;
use crate::revision;
use crate::tool::Tool;

pub(crate) use process::{Launch, Spares};
use process::{LineError, Process, open};

/// A stdio binding: how its server starts, and its spare processes (`prewarm`).
pub(crate) struct StdioServer {
    pub(crate) launch: Arc<Launch>,
    pub(crate) spares: Option<Arc<Spares>>,
    /// The revision the binding pins, if any.
    pub(crate) pinned: Option<String>,
    /// The tool's name on the server (what verification looks for in `tools/list`).
    pub(crate) tool_name: String,
}

impl StdioServer {
    /// Starts the spares that are missing, in the background; each is verified against
    /// `tool`'s pin (`pins`) once listed, before it is handed to a call.
    pub(crate) fn refill(&self, tool: &Arc<Tool>, pins: &Arc<Pins>) {
        if let Some(spares) = &self.spares {
            spares.refill(
                &self.launch,
                self.pinned.as_deref(),
                &self.tool_name,
                tool,
                pins,
            );
        }
    }
}

/// The stdio transport for one call; holds the call's process so that the cleanup finds it
/// whatever ended the exchange.
pub(crate) struct Stdio {
    server: Arc<StdioServer>,
    process: Mutex<Option<Arc<Process>>>,
    /// The verdict on what a spare's server listed at prewarm.
    verdict: Mutex<Option<Result<(), Failure>>>,
    /// The runtime's verification state (a new spare is verified at prewarm).
    pins: Arc<Pins>,
}

impl Stdio {
    pub(crate) fn new(server: Arc<StdioServer>, pins: Arc<Pins>) -> Self {
        Stdio {
            server,
            process: Mutex::new(None),
            verdict: Mutex::new(None),
            pins,
        }
    }

    fn keep(&self, process: &Arc<Process>) {
        *self.process.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(process));
    }
}

impl Transport for Stdio {
    type Opened = Arc<Process>;
    type Reading = StdioReading;

    /// A spare process when the binding keeps some (verified at prewarm), else a new one,
    /// initialized.
    async fn open(&self, call: &Exchange<'_>) -> Result<Arc<Process>, Failure> {
        let spare = self.server.spares.as_ref().and_then(|spares| spares.take());
        let process = match spare {
            Some(spare) => {
                self.keep(&spare.process);
                *self.verdict.lock().unwrap_or_else(|p| p.into_inner()) = Some(spare.verdict);
                spare.process
            }
            None => {
                let process = Process::spawn(&self.server.launch)?;
                self.keep(&process);
                let opening =
                    crate::telemetry::phase("initialize", Some(crate::mcp::INIT_ID), call.span);
                open(&process, call.tool.binding.pinned_revision(), &opening).await?;
                process
            }
        };
        call.state().revision = Some(process.revision().unwrap_or(revision::STATELESS));
        // At 2026-07-28 the server decides, call by call, whether to run one as a task.
        if call.tool.binding.runs_as_task() && process.revision().is_some() && !process.tasks() {
            return Err(Failure::new(
                Fact::SetupFailed,
                "the server no longer declares that it runs tool calls as tasks \
                 (`tasks.requests.tools.call`), and the binding calls its tool as one; \
                 tools/call was not sent: re-run `cargo xtask discover`",
            ));
        }
        Ok(process)
    }

    /// The verdict on what the spare listed at prewarm (taken off the call's path), else on
    /// what the call's own process lists now (one round trip after `initialize`).
    async fn verify(&self, call: &Exchange<'_>, process: &Arc<Process>) -> Result<(), Failure> {
        let spare = self
            .verdict
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let listed = match spare {
            Some(verdict) => return verdict,
            None => {
                let _listing = crate::telemetry::phase("tools/list", None, call.span);
                let tools = process::list(process).await.map_err(|why| {
                    Failure::new(
                        Fact::SetupFailed,
                        format!(
                            "the server's tools/list could not be taken to verify {:?} against \
                             its pin ({why}); tools/call was not sent",
                            call.tool.binding.name
                        ),
                    )
                })?;
                process::named(tools, &self.server.tool_name)
            }
        };
        let listed: Vec<&Value> = listed.iter().collect();
        call.pins.verdict(call.tool, &listed)
    }

    /// Writes the round's `tools/call` as one line.
    async fn write(
        &self,
        call: &Exchange<'_>,
        process: &Arc<Process>,
        round: &Round,
    ) -> Result<StdioReading, Failure> {
        let session = process.revision().is_some();
        let meta = if session {
            Map::new()
        } else {
            crate::mcp::stateless_meta()
        };
        let span = call.round_span(round);
        let request = call.tools_call(meta, round, &span);
        if let Err(error) = process.send(&request).await {
            // Not written: the server cannot have read a whole request.
            return Err(Failure::new(
                Fact::NotWritten {
                    round: round.number,
                },
                format!(
                    "could not write tools/call to the MCP server: {error}{}",
                    process.report().await
                ),
            ));
        }
        Ok(StdioReading {
            process: Arc::clone(process),
            answers: session,
            _span: span,
        })
    }

    /// Writes a request of the call's task as one line and reads stdout to its answer (other
    /// messages passed over), within the binding's byte bound.
    async fn request(
        &self,
        call: &Exchange<'_>,
        process: &Arc<Process>,
        message: &Value,
        heard: &mut Vec<Value>,
    ) -> Result<Value, Failure> {
        let method = message["method"].as_str().unwrap_or("a task request");
        if let Err(error) = process.send(message).await {
            return Err(Failure::broken(format!(
                "could not write {method} to the MCP server: {error}{}; the task was created, \
                 and the tool may have run",
                process.report().await
            )));
        }
        loop {
            match process.receive(call.tool.raw_limit()).await {
                Ok(answer)
                    if answer.get("method").is_none() && answer.get("id") == message.get("id") =>
                {
                    return Ok(answer);
                }
                Ok(note) if note.get("id").is_none() && heard.len() < MAX_HEARD => {
                    heard.push(note);
                }
                Ok(_) => {}
                Err(error) => {
                    return Err(Failure::broken(format!(
                        "{error} before {method} was answered{}; the task was created, and \
                         the tool may have run",
                        process.report().await
                    )));
                }
            }
        }
    }

    /// Ends the call's process (cancelling an unanswered call first), then — for a binding with
    /// `prewarm` — starts the spares that are missing: off the call's path, so that starting a
    /// process never competes with a call for the CPU.
    async fn clean_up(self, _: HttpClient, tool: Arc<Tool>, state: CallState) {
        let process = self
            .process
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(process) = process {
            if let Some(task) = &state.task {
                // The task ends with the process anyway; the server hears why first.
                let cancel = crate::mcp::task_request(99, "tasks/cancel", task, state.revision);
                let _ = tokio::time::timeout(CONTROL_TIMEOUT, process.send(&cancel)).await;
            }
            let unanswered = (state.call_sent && !state.answered).then_some(state.request_id);
            process.shut_down(unanswered).await;
        }
        self.server.refill(&tool, &self.pins);
    }
}

/// A round's answer on the server's stdout; the way back is its stdin (2026-07-28 has none:
/// input requests travel in `input_required` results).
pub(crate) struct StdioReading {
    process: Arc<Process>,
    answers: bool,
    /// The round's `tools/call` span, open while the round is read.
    _span: Span,
}

impl Reading for StdioReading {
    async fn next(&mut self, call: &Exchange<'_>) -> Result<Incoming, Failure> {
        match self.process.receive(call.tool.raw_limit()).await {
            Ok(message) => Ok(Incoming::Message(message)),
            Err(LineError::TooLong(_)) => Err(Failure::broken(format!(
                "the server wrote a line longer than max_output_bytes ({}) allows; brain \
                 stopped reading it",
                call.tool.binding.max_output_bytes
            ))),
            Err(error) => Err(Failure::broken(format!(
                "{error} after tools/call was written{}; the tool may have run",
                self.process.report().await
            ))),
        }
    }

    async fn answer(&mut self, _: &Exchange<'_>, message: &Value) -> bool {
        self.answers && self.process.send(message).await.is_ok()
    }
}

/// Discovery on a stdio server: a process started as a call's would be, a session opened (any
/// revision brain speaks; 2026-07-28 when the server refuses sessions), every page of
/// `tools/list`, then the process shut down. Returns the revision, whether the server runs tool
/// calls as tasks, and the tools.
pub(crate) async fn list_tools(launch: Launch) -> Result<(&'static str, bool, Vec<Value>), String> {
    let launch = Arc::new(launch);
    let process = Process::spawn(&launch).map_err(|failure| failure.message)?;
    let listed = async {
        open(&process, None, &Span::none())
            .await
            .map_err(|failure| failure.message)?;
        let tools = process::list(&process).await?;
        let revision = process.revision().unwrap_or(revision::STATELESS);
        Ok::<_, String>((revision, process.tasks(), tools))
    };
    let listed = match listed.await {
        Ok(listed) => Ok(listed),
        Err(message) => Err(format!("{message}{}", process.report().await)),
    };
    process.shut_down(None).await;
    listed
}
