//! A stdio server's process: started with a clean environment in its own process group,
//! spoken to as newline-delimited JSON-RPC on stdin/stdout (each line read under a byte bound),
//! its stderr drained into a bounded tail, and ended — stdin closed, SIGTERM, SIGKILL to the
//! whole group, reaped. Also the session a process starts with (`initialize`), and the spare
//! processes a binding with `prewarm` keeps. Nothing but this module starts or signals a process.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::mcp::INIT_ID;
use crate::outcome::{Fact, Failure};
use crate::revision;

/// Bound on one line of the server's answer to initialize.
const INIT_LIMIT: u64 = 1024 * 1024;
/// How long a server has to exit after its stdin was closed, and again after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How much of the server's stderr is kept for a failure's message (the end of it).
const STDERR_TAIL: usize = 4 * 1024;
/// How long a spare process may take to start and initialize.
const SPARE_START: Duration = Duration::from_secs(30);
/// Bound on one `tools/list` answer.
const LIST_LIMIT: u64 = 64 * 1024 * 1024;
/// The only variables of brain's own environment a server process gets (besides the binding's
/// `env` and `env_from`): a host secret never reaches a server by inheritance.
pub(crate) const INHERITED: &[&str] = &["PATH", "HOME", "LANG"];

/// How a stdio binding's server is started, resolved once when the runtime is built.
pub(crate) struct Launch {
    /// The program and its arguments (never run through a shell).
    pub(crate) command: Vec<String>,
    /// The child's environment beyond [`INHERITED`]: `env` literally, `env_from` resolved.
    pub(crate) env: Vec<(String, String)>,
    /// The `env_from` values, redacted from everything brain reports (stderr tails).
    pub(crate) secrets: Vec<String>,
    pub(crate) cwd: Option<String>,
    /// How the kernel confines the process (`None`: `"sandbox": false`).
    pub(crate) sandbox: Option<brain_config::SandboxRules>,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("command", &self.command)
            .field("cwd", &self.cwd)
            .field("sandbox", &self.sandbox)
            .field("env", &"<redacted>")
            .finish()
    }
}

impl Launch {
    /// `text` with every `env_from` value replaced.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in self.secrets.iter().filter(|s| !s.is_empty()) {
            text = text.replace(secret.as_str(), "[redacted]");
        }
        text
    }

    pub(crate) fn program(&self) -> &str {
        self.command.first().map_or("", String::as_str)
    }
}

/// One server process, used for one call.
pub(crate) struct Process {
    child: tokio::sync::Mutex<Child>,
    /// The process group (the child's pid): the server and whatever it started.
    group: Option<u32>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    stdout: tokio::sync::Mutex<Lines<ChildStdout>>,
    stderr: Arc<Mutex<Tail>>,
    launch: Arc<Launch>,
    /// The revision initialize settled on; `None` on 2026-07-28 (no initialize).
    revision: Mutex<Option<&'static str>>,
    /// The server declared that it runs tool calls as tasks (`tasks.requests.tools.call`).
    tasks: std::sync::atomic::AtomicBool,
    /// The sandbox's private temporary directory, removed with the process.
    _scratch: Option<super::sandbox::Scratch>,
}

impl Process {
    /// The revision `initialize` settled on; `None` on 2026-07-28 (no initialize).
    pub(crate) fn revision(&self) -> Option<&'static str> {
        *lock(&self.revision)
    }

    /// Whether initialize's answer declared that the server runs tool calls as tasks.
    pub(crate) fn tasks(&self) -> bool {
        self.tasks.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Confines `command`'s child as `rules` say; a sandbox brain cannot apply is a failure before
/// anything started (the binding is unreachable, never run unconfined).
fn confined(
    command: &mut Command,
    launch: &Launch,
    rules: &brain_config::SandboxRules,
) -> Result<super::sandbox::Scratch, Failure> {
    let path = (launch.env.iter())
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var("PATH").ok());
    let confinement = super::sandbox::Confinement::prepare(
        &launch.command,
        launch.cwd.as_deref(),
        path.as_deref(),
        rules,
    )
    .map_err(|why| {
        Failure::new(
            Fact::Unreachable,
            format!(
                "the sandbox of the MCP server {:?} cannot be applied, so it was not started: {why}",
                launch.program()
            ),
        )
    })?;
    Ok(super::sandbox::confine(command, confinement))
}

impl Process {
    /// Spawns the server: a clean environment, its own process group, piped stdio, stderr
    /// drained continuously into a bounded tail.
    pub(crate) fn spawn(launch: &Arc<Launch>) -> Result<Arc<Process>, Failure> {
        let mut command = Command::new(launch.program());
        command.args(launch.command.iter().skip(1)).env_clear();
        for name in INHERITED {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(launch.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &launch.cwd {
            command.current_dir(cwd);
        }
        let scratch = match &launch.sandbox {
            Some(rules) => Some(confined(&mut command, launch, rules)?),
            None => None,
        };
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|error| {
            let hint = match error.kind() {
                std::io::ErrorKind::NotFound => {
                    " (not found: install it, or write its absolute path in `command`)"
                }
                std::io::ErrorKind::PermissionDenied => {
                    " (permission denied: is it executable, and readable under its sandbox? The \
                     sandbox's installation rules are in the stdio guide's \"Sandbox\")"
                }
                _ => "",
            };
            Failure::new(
                Fact::Unreachable,
                format!(
                    "could not start the MCP server {:?}: {error}{hint}{}",
                    launch.program(),
                    launch
                        .cwd
                        .as_ref()
                        .map(|cwd| format!(" in {cwd:?}"))
                        .unwrap_or_default()
                ),
            )
        })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = Arc::new(Mutex::new(Tail::default()));
        if let Some(pipe) = child.stderr.take() {
            tokio::spawn(drain(pipe, Arc::clone(&stderr)));
        }
        Ok(Arc::new(Process {
            group: child.id(),
            child: tokio::sync::Mutex::new(child),
            stdin: tokio::sync::Mutex::new(stdin),
            stdout: tokio::sync::Mutex::new(Lines::new(stdout)),
            stderr,
            launch: Arc::clone(launch),
            revision: Mutex::new(None),
            tasks: std::sync::atomic::AtomicBool::new(false),
            _scratch: scratch,
        }))
    }

    /// Writes one JSON-RPC message as a line.
    pub(crate) async fn send(&self, message: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).expect("a message serializes");
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        pipe.write_all(&line).await?;
        pipe.flush().await
    }

    /// The next JSON-RPC message on stdout, within `limit` bytes.
    pub(crate) async fn receive(&self, limit: u64) -> Result<Value, LineError> {
        let mut stdout = self.stdout.lock().await;
        loop {
            let line = stdout.next(limit).await?;
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            let message = serde_json::from_slice(text).map_err(|error| {
                let shown = String::from_utf8_lossy(&text[..text.len().min(120)]).into_owned();
                LineError::Garbage(format!("{error}, in {:?}", self.launch.redact(&shown)))
            })?;
            return crate::wire::within_message_limit(message, text.len())
                .map_err(LineError::Oversized);
        }
    }

    /// What a failure adds about the process: how it exited (if it did) and the end of its
    /// stderr, with every `env_from` value redacted.
    pub(crate) async fn report(&self) -> String {
        // A process that closed stdout is usually exiting: give it a moment to be reaped.
        let status = {
            let mut child = self.child.lock().await;
            match tokio::time::timeout(Duration::from_millis(100), child.wait()).await {
                Ok(Ok(status)) => format!(" (the server {})", exit_text(status)),
                _ => String::new(),
            }
        };
        // Let the drain take in what the process wrote last.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let tail = lock(&self.stderr).text();
        let tail = self.launch.redact(tail.trim());
        if tail.is_empty() {
            status
        } else {
            format!("{status}; its stderr ended with: {tail}")
        }
    }

    /// Ends the process: `notifications/cancelled` when the call is unanswered, stdin closed, a
    /// bounded wait, then SIGTERM and SIGKILL to the whole process group; always reaped.
    pub(crate) async fn shut_down(&self, unanswered: Option<u64>) {
        if let Some(request_id) = unanswered {
            let cancelled = crate::mcp::cancelled(request_id);
            let _ = tokio::time::timeout(EXIT_GRACE, self.send(&cancelled)).await;
        }
        // Closing stdin is how MCP asks a stdio server to exit.
        drop(self.stdin.lock().await.take());
        let mut child = self.child.lock().await;
        let exited = tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok();
        // The server's own children are in its group, whether or not it exited: SIGTERM, a
        // grace period if the server itself is still running, then SIGKILL for what is left.
        if let Some(group) = self.group {
            signal_group(group, rustix::process::Signal::TERM);
            if !exited {
                let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
            }
            signal_group(group, rustix::process::Signal::KILL);
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
    }

    /// Whether the process is still running (a spare that died is not used).
    fn alive(&self) -> bool {
        match self.child.try_lock() {
            Ok(mut child) => matches!(child.try_wait(), Ok(None)),
            Err(_) => false,
        }
    }
}

impl Drop for Process {
    /// A process nobody shut down (the runtime dropped mid-call, a spare reaped): the whole
    /// group is killed; tokio reaps the child.
    fn drop(&mut self) {
        if let Some(group) = self.group
            && let Ok(mut child) = self.child.try_lock()
            && matches!(child.try_wait(), Ok(None))
        {
            signal_group(group, rustix::process::Signal::KILL);
        }
    }
}

fn signal_group(group: u32, signal: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(group)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

fn exit_text(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "exited".to_owned(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The end of a stream, at most [`STDERR_TAIL`] bytes.
#[derive(Default)]
struct Tail(VecDeque<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(STDERR_TAIL)..];
        let over = (self.0.len() + bytes.len()).saturating_sub(STDERR_TAIL);
        self.0.drain(..over);
        self.0.extend(bytes);
    }

    fn text(&self) -> String {
        let (a, b) = self.0.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}

/// Reads stderr to its end, keeping only its tail: a chatty server never blocks on a full pipe.
async fn drain(mut pipe: impl AsyncRead + Unpin, tail: Arc<Mutex<Tail>>) {
    let mut buffer = vec![0; 8192];
    while let Ok(read) = pipe.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        lock(&tail).push(&buffer[..read]);
    }
}

/// Why no message could be read from stdout.
#[derive(Debug)]
pub(crate) enum LineError {
    /// The server closed stdout (it exited, most likely).
    Closed,
    /// A line longer than the bound; brain stopped reading it.
    TooLong(u64),
    /// A line that is not JSON.
    Garbage(String),
    /// A notification or server request over the bound for them.
    Oversized(crate::wire::ReadError),
    Io(std::io::Error),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Closed => f.write_str("the server closed its stdout"),
            LineError::TooLong(limit) => {
                write!(f, "the server wrote a line longer than {limit} bytes")
            }
            LineError::Garbage(what) => {
                write!(f, "the server wrote a line that is not JSON-RPC: {what}")
            }
            LineError::Io(error) => write!(f, "reading the server's stdout failed: {error}"),
            LineError::Oversized(error) => error.fmt(f),
        }
    }
}

/// Newline-delimited lines, each read within a byte bound: a line longer than the bound is an
/// error as soon as the bound is passed, never buffered whole.
struct Lines<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(reader: R) -> Self {
        Lines {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
        }
    }

    async fn next(&mut self, limit: u64) -> Result<Vec<u8>, LineError> {
        self.line.clear();
        loop {
            let available = self.reader.fill_buf().await.map_err(LineError::Io)?;
            if available.is_empty() {
                return Err(LineError::Closed);
            }
            let (taken, done) = match memchr(available) {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            if (self.line.len() + taken) as u64 > limit.saturating_add(1) {
                return Err(LineError::TooLong(limit));
            }
            self.line.extend_from_slice(&available[..taken]);
            self.reader.consume(taken);
            if done {
                return Ok(std::mem::take(&mut self.line));
            }
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Starts the MCP session on a new process: the binding's pinned revision exactly, or the newest
/// session revision offered and any brain speaks accepted; 2026-07-28 has no initialize. Nothing
/// here is `tools/call`: every failure is `unknown_outcome: false`.
pub(crate) async fn open(
    process: &Process,
    pinned: Option<&str>,
    span: &tracing::Span,
) -> Result<(), Failure> {
    if pinned == Some(revision::STATELESS) {
        return Ok(());
    }
    let offer = pinned.unwrap_or(revision::SESSIONS[0]);
    let setup_failed = async |what: String| {
        Failure::new(
            Fact::SetupFailed,
            format!(
                "the MCP server {:?} failed to start a session: {what}{}",
                process.launch.program(),
                process.report().await
            ),
        )
    };
    let request = crate::mcp::initialize(offer, span);
    if let Err(error) = process.send(&request).await {
        return Err(setup_failed(format!("writing initialize failed: {error}")).await);
    }
    let result = loop {
        let message = match process.receive(INIT_LIMIT).await {
            Ok(message) => message,
            Err(error) => {
                return Err(setup_failed(format!("{error} before initialize was answered")).await);
            }
        };
        if message.get("id") != Some(&json!(INIT_ID)) || message.get("method").is_some() {
            // Logging, or a request of its own before the session exists: not for brain.
            continue;
        }
        if let Some(error) = message.get("error") {
            if pinned.is_none() && crate::mcp::stateless_supported(error) {
                return Ok(());
            }
            return Err(setup_failed(format!(
                "initialize failed: {}",
                crate::mcp::rpc_error_text(error)
            ))
            .await);
        }
        break message.get("result").cloned().unwrap_or_default();
    };
    let offered = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("(none)");
    let revision = revision::accept(pinned, offered).map_err(|why| {
        Failure::new(
            Fact::SetupFailed,
            format!("the MCP server {:?} {why}", process.launch.program()),
        )
    })?;
    *lock(&process.revision) = Some(revision);
    let tasks = result["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object();
    process
        .tasks
        .store(tasks, std::sync::atomic::Ordering::Relaxed);
    if let Err(error) = process.send(&crate::mcp::initialized()).await {
        return Err(
            setup_failed(format!("writing notifications/initialized failed: {error}")).await,
        );
    }
    Ok(())
}

/// Every page of `tools/list` on an opened process (bounded by the caller).
pub(crate) async fn list(process: &Process) -> Result<Vec<Value>, String> {
    let revision = process.revision();
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 1..=1000u64 {
        let id = page + 1;
        let meta = revision.is_none().then(crate::mcp::stateless_meta);
        let request = crate::mcp::tools_list(id, cursor.as_deref(), meta);
        process
            .send(&request)
            .await
            .map_err(|error| format!("writing tools/list failed: {error}"))?;
        let answer = loop {
            let message = process
                .receive(LIST_LIMIT)
                .await
                .map_err(|error| format!("{error} before tools/list was answered"))?;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                break message;
            }
        };
        if let Some(error) = answer.get("error") {
            return Err(format!(
                "the server answered tools/list with {}",
                crate::mcp::rpc_error_text(error)
            ));
        }
        match answer["result"].get("tools") {
            Some(Value::Array(page)) => tools.extend(page.iter().cloned()),
            _ => return Err("the server's tools/list result has no `tools` array".into()),
        }
        match crate::mcp::next_cursor(&answer["result"], cursor.as_deref()) {
            None => return Ok(tools),
            next => cursor = next,
        }
    }
    Err("tools/list did not end after 1000 pages".into())
}

/// The entries of `tools` named `name`.
pub(crate) fn named(tools: Vec<Value>, name: &str) -> Vec<Value> {
    tools
        .into_iter()
        .filter(|tool| tool.get("name").and_then(Value::as_str) == Some(name))
        .collect()
}

/// A spare process, and the verdict on what its server listed under the binding's tool name
/// at prewarm (`pins.rs`).
pub(crate) struct Spare {
    pub(crate) process: Arc<Process>,
    pub(crate) verdict: Result<(), Failure>,
}

/// Spare processes of one binding (`prewarm`), started, initialized and listed (`tools/list`,
/// to verify the binding's pin) before they are needed; each is used for exactly one call, then
/// discarded. A spare whose start or listing fails is not kept, nor started again before the
/// next call.
pub(crate) struct Spares {
    wanted: usize,
    ready: Mutex<Vec<Spare>>,
    /// Spares being started.
    starting: std::sync::atomic::AtomicUsize,
}

impl Spares {
    pub(crate) fn new(wanted: usize) -> Self {
        Spares {
            wanted,
            ready: Mutex::new(Vec::new()),
            starting: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// A live spare, if one is ready (dead ones are discarded on the way).
    pub(crate) fn take(&self) -> Option<Spare> {
        let mut ready = lock(&self.ready);
        while let Some(spare) = ready.pop() {
            if spare.process.alive() {
                return Some(spare);
            }
            let dead = spare.process;
            tokio::spawn(async move { dead.shut_down(None).await });
        }
        None
    }

    /// Starts as many spares as are missing, in the background.
    pub(crate) fn refill(
        self: &Arc<Self>,
        launch: &Arc<Launch>,
        pinned: Option<&str>,
        tool_name: &str,
        tool: &Arc<crate::tool::Tool>,
        pins: &Arc<crate::pins::Pins>,
    ) {
        use std::sync::atomic::Ordering;
        let have = lock(&self.ready).len() + self.starting.load(Ordering::SeqCst);
        for _ in have..self.wanted {
            self.starting.fetch_add(1, Ordering::SeqCst);
            let spares = Arc::clone(self);
            let launch = Arc::clone(launch);
            let pinned = pinned.map(str::to_owned);
            let tool_name = tool_name.to_owned();
            let (tool, pins) = (Arc::clone(tool), Arc::clone(pins));
            tokio::spawn(async move {
                let started = async {
                    let process = Process::spawn(&launch).ok()?;
                    let opened = tokio::time::timeout(SPARE_START, async {
                        open(&process, pinned.as_deref(), &tracing::Span::none())
                            .await
                            .map_err(|failure| failure.message)?;
                        list(&process).await
                    })
                    .await;
                    match opened {
                        Ok(Ok(tools)) => {
                            let listed = named(tools, &tool_name);
                            let listed: Vec<&Value> = listed.iter().collect();
                            let verdict = pins.verdict(&tool, &listed);
                            Some(Spare { process, verdict })
                        }
                        _ => {
                            process.shut_down(None).await;
                            None
                        }
                    }
                };
                let spare = started.await;
                spares.starting.fetch_sub(1, Ordering::SeqCst);
                if let Some(spare) = spare {
                    lock(&spares.ready).push(spare);
                }
            });
        }
    }
}
