//! What the `serve` tests share: serve as a process, the SDK clients, raw HTTP, the servers
//! upstream.

#![allow(dead_code, unreachable_pub)] // each test file uses some of it
#![allow(clippy::print_stderr)]

pub mod hostile;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tests::peers::{Peer, discover};

pub const ACME: &str = "acme-token-0123456789abcdef0123456789";
pub const GLOBEX: &str = "globex-token-9876543210fedcba9876543210";

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A config with `echo`, `progress` and `slow` of the Python SDK server: `progress` for acme
/// only, the others for acme and globex; each tenant a client with a token.
pub fn config(dir: &Path, peer: &Peer, serve_patch: impl Fn(&mut Value)) -> String {
    let discovery = discover(&peer.url);
    let binding = |name: &str, tenants: &[&str]| {
        let tool = discovery
            .tools
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap_or_else(|| panic!("the server lists {name}"));
        json!({"name": name, "description": tool["description"], "url": peer.url,
            "mcp_tool": name, "input_schema": tool["inputSchema"], "tenants": tenants,
            "timeout_seconds": 30, "pin": brain_config::ToolPin::of(tool)})
    };
    let mut serve = json!({"clients": [
        {"tenant": "acme", "token_env": "BRAIN_SERVE_TOKEN_ACME"},
        {"tenant": "globex", "token_env": "BRAIN_SERVE_TOKEN_GLOBEX"},
    ]});
    serve_patch(&mut serve);
    let config = json!({"serve": serve, "tools": [
        binding("echo", &["acme", "globex"]),
        binding("progress", &["acme"]),
        binding("slow", &["acme", "globex"]),
    ]});
    let path = dir.join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

/// `serve --listen 127.0.0.1:0`, killed when dropped; its stderr kept.
pub struct Serving {
    pub child: Child,
    pub url: String,
    stderr: Arc<Mutex<String>>,
}

impl Serving {
    pub fn start(config: &str, state: &str, env: &[(&str, &str)]) -> Serving {
        Serving::start_at("127.0.0.1:0", config, state, env)
    }

    pub fn start_at(listen: &str, config: &str, state: &str, env: &[(&str, &str)]) -> Serving {
        Serving::start_with(&[], listen, config, state, env, &[])
    }

    /// [`Serving::start_at`] run through `wrapper` (e.g. `prlimit --nofile=256:256 --`), with
    /// `extra` after `serve`'s own arguments.
    pub fn start_with(
        wrapper: &[&str],
        listen: &str,
        config: &str,
        state: &str,
        env: &[(&str, &str)],
        extra: &[&str],
    ) -> Serving {
        let harness = env!("CARGO_BIN_EXE_brain-harness");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(harness);
                command
            }
            None => Command::new(harness),
        };
        let mut child = command
            .args([
                "--config", config, "--state", state, "serve", "--listen", listen,
            ])
            .args(extra)
            .env("BRAIN_SERVE_TOKEN_ACME", ACME)
            .env("BRAIN_SERVE_TOKEN_GLOBEX", GLOBEX)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("brain-harness runs");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, url) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap());
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("brain serve: listening on ") {
                    let _ = found.send(url.to_owned());
                }
                let mut kept = kept.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        let url = url
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("serve did not listen: {}", stderr.lock().unwrap()));
        Serving { child, url, stderr }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// `host:port`.
    pub fn authority(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The revision each client mode negotiates with serve.
pub fn revision(mode: &str) -> &'static str {
    if mode == "legacy" {
        "2025-11-25"
    } else {
        "2026-07-28"
    }
}

/// Runs the Python SDK client on `plan`; one JSON value per line it printed after the first,
/// which must name the revision its mode negotiates.
pub fn client(plan: Value) -> Vec<Value> {
    let interop = workspace().join("tests/interop");
    let output = Command::new(interop.join(".venv/bin/python"))
        .arg(interop.join("serve_client.py"))
        .arg(plan.to_string())
        .output()
        .expect("tests/interop/setup.sh installed .venv");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let first = lines.remove(0);
    let mode = plan["mode"].as_str().unwrap();
    assert_eq!(first["protocol_version"], json!(revision(mode)), "{mode}");
    lines
}

pub fn names(listed: &Value) -> Vec<&str> {
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect()
}

pub fn outcome(line: &Value) -> &Value {
    &line["result"]["_meta"]["brain.dev/outcome"]
}

pub fn text(line: &Value) -> &str {
    line["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// An `initialize` POST to serve with `headers`: (status, response head, body).
pub fn post(authority: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    post_body(authority, headers, &body)
}

/// A POST of `body` to serve with `headers`: (status, response head, body).
pub fn post_body(authority: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    exchange(authority, request.as_bytes())
}

/// Raw bytes to serve on a connection of their own, read to its end: (status, head, body).
pub fn exchange(authority: &str, request: &[u8]) -> (u16, String, String) {
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.write_all(request).unwrap();
    read_response(&mut stream)
}

/// A response read to the end of its connection: (status, head, body).
pub fn read_response(stream: &mut TcpStream) -> (u16, String, String) {
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

/// The `Mcp-Session-Id` of a response head.
pub fn session_id(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {head}"))
}

/// The fault-injecting test server and a config for its tools (acme and globex), served.
pub fn test_server(tokio: &tokio::runtime::Runtime) -> tests::server::TestServer {
    tokio
        .block_on(tests::server::TestServer::start(
            tests::server::Faults::default(),
        ))
        .unwrap()
}

pub fn test_server_config(dir: &Path, url: &str) -> String {
    test_server_config_with(dir, url, |_| {}, |_, _| {})
}

/// [`test_server_config`] with its `serve` section and each binding (by name) patched.
pub fn test_server_config_with(
    dir: &Path,
    url: &str,
    serve_patch: impl Fn(&mut Value),
    binding_patch: impl Fn(&str, &mut Value),
) -> String {
    let tools = tests::server::bindings_json(url, |name, binding| {
        binding["tenants"] = json!(["acme", "globex"]);
        binding_patch(name, binding);
    });
    let mut serve = json!({"clients": [
        {"tenant": "acme", "token_env": "BRAIN_SERVE_TOKEN_ACME"},
        {"tenant": "globex", "token_env": "BRAIN_SERVE_TOKEN_GLOBEX"},
    ]});
    serve_patch(&mut serve);
    let config = json!({"serve": serve, "tools": tools});
    let path = dir.join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

/// A free loopback port for serve, and the resource URL serve will have there (for an OAuth
/// resource server, whose tokens name it before serve starts).
pub fn free_resource() -> (u16, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    (port, format!("http://127.0.0.1:{port}/mcp"))
}

/// The Python SDK client on `plan`, not waited for.
pub fn spawn_client(plan: &Value) -> Child {
    let interop = workspace().join("tests/interop");
    Command::new(interop.join(".venv/bin/python"))
        .arg(interop.join("serve_client.py"))
        .arg(plan.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until `counter` reaches `at_least`.
pub fn wait_for(counter: &std::sync::atomic::AtomicUsize, at_least: usize, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while tests::server::Stats::get(counter) < at_least {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Node program under `tests/interop`: (success, stdout, stderr).
pub fn node(args: &[&str], cwd: &Path) -> (bool, String, String) {
    let output = Command::new("node")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("node runs (tests/interop/setup.sh installs the packages)");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The fault-injecting test server (on a runtime of its own), a config for its tools and a
/// SQLite state URL in a new directory.
pub struct Upstream {
    pub server: tests::server::TestServer,
    pub dir: tempfile::TempDir,
    pub config: String,
    pub state: String,
    pub tokio: tokio::runtime::Runtime,
}

pub fn upstream() -> Upstream {
    upstream_with(|_| {}, |_, _| {})
}

/// [`upstream`] with the config's `serve` section and bindings patched (see
/// [`test_server_config_with`]).
pub fn upstream_with(
    serve_patch: impl Fn(&mut Value),
    binding_patch: impl Fn(&str, &mut Value),
) -> Upstream {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = test_server(&tokio);
    let dir = tempfile::tempdir().unwrap();
    let config = test_server_config_with(dir.path(), &server.url, serve_patch, binding_patch);
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    Upstream {
        server,
        dir,
        config,
        state,
        tokio,
    }
}

/// The JSON-RPC message of a response body: JSON, or the first SSE `data:` line that holds one
/// (after the empty priming event); a body that is neither comes back as a JSON string, to be
/// shown.
pub fn json_rpc(body: &str) -> Value {
    serde_json::from_str(body)
        .ok()
        .or_else(|| {
            body.lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .find_map(|data| serde_json::from_str(data).ok())
        })
        .unwrap_or_else(|| Value::String(body.to_owned()))
}

/// A 2025-11-25 session over raw HTTP, opened (`initialize`, `notifications/initialized`) by
/// one client.
pub struct RawSession {
    pub authority: String,
    pub bearer: String,
    pub id: String,
}

impl RawSession {
    pub fn open(authority: &str, token: &str) -> RawSession {
        let bearer = format!("Bearer {token}");
        let (status, head, body) = post(authority, &[("Authorization", &bearer)]);
        assert_eq!(status, 200, "initialize: {head}{body}");
        let session = RawSession {
            authority: authority.to_owned(),
            bearer,
            id: session_id(&head),
        };
        let (status, _, body) =
            session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(status, 202, "notifications/initialized: {body}");
        session
    }

    /// A POST of `message` on the session (as its owner): (status, head, body).
    pub fn send(&self, message: &Value) -> (u16, String, String) {
        post_body(
            &self.authority,
            &[
                ("Authorization", &self.bearer),
                ("Mcp-Session-Id", &self.id),
                ("Mcp-Protocol-Version", "2025-11-25"),
            ],
            &message.to_string(),
        )
    }

    /// A `tools/call` of `tool` with `call_id` in its `_meta`: (status, the JSON-RPC message).
    pub fn call(&self, tool: &str, arguments: Value, call_id: &str) -> (u16, Value) {
        let (status, _, body) = self.send(&json!({"jsonrpc": "2.0", "id": 7,
            "method": "tools/call", "params": {"name": tool, "arguments": arguments,
            "_meta": {"brain.dev/call_id": call_id}}}));
        (status, json_rpc(&body))
    }

    /// A `tools/call` written on a connection of its own, not waited for: the client goes away
    /// when the stream is dropped (at the 2025 revisions, not a cancellation).
    pub fn call_and_leave(&self, tool: &str, arguments: Value, call_id: &str) -> TcpStream {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments,
            "_meta": {"brain.dev/call_id": call_id}}})
        .to_string();
        let authority = &self.authority;
        let mut stream = TcpStream::connect(authority).unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nAuthorization: {}\r\n\
             Mcp-Session-Id: {}\r\nMcp-Protocol-Version: 2025-11-25\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.bearer,
            self.id,
            body.len()
        )
        .unwrap();
        stream
    }

    /// [`RawSession::call`] on a thread of its own.
    pub fn spawn_call(
        &self,
        tool: &str,
        arguments: Value,
        call_id: &str,
    ) -> std::thread::JoinHandle<(u16, Value)> {
        let session = RawSession {
            authority: self.authority.clone(),
            bearer: self.bearer.clone(),
            id: self.id.clone(),
        };
        let (tool, call_id) = (tool.to_owned(), call_id.to_owned());
        std::thread::spawn(move || session.call(&tool, arguments, &call_id))
    }

    /// A `ping` on the session as its owner: the status.
    pub fn ping(&self) -> u16 {
        self.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
            .0
    }

    /// An HTTP DELETE of the session as `token`'s client: (status, the whole response).
    pub fn delete_as(&self, token: &str) -> (u16, String) {
        let authority = &self.authority;
        let mut stream = TcpStream::connect(authority).unwrap();
        write!(
            stream,
            "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\n\
             Mcp-Session-Id: {}\r\nMcp-Protocol-Version: 2025-11-25\r\nConnection: close\r\n\r\n",
            self.id
        )
        .unwrap();
        let (status, head, body) = read_response(&mut stream);
        (status, format!("{head}\r\n\r\n{body}"))
    }
}

/// A keep-alive HTTP/1.1 connection to serve, one request at a time.
pub struct Connection {
    authority: String,
    reader: BufReader<TcpStream>,
}

impl Connection {
    pub fn open(authority: &str) -> Connection {
        let stream = TcpStream::connect(authority).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Connection {
            authority: authority.to_owned(),
            reader: BufReader::new(stream),
        }
    }

    /// `method path` with `headers` and `body` (a `Content-Length` added when there is one):
    /// (status, body). The body read by `Content-Length` or chunked.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.authority);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.reader.get_mut().write_all(request.as_bytes()).unwrap();
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).unwrap();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {status_line:?}"));
        let (mut length, mut chunked) = (0, false);
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.trim().eq_ignore_ascii_case("chunked");
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size).unwrap();
                let size = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length, 0);
            self.reader.read_exact(&mut body).unwrap();
        }
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// A 2026-07-28 stateless `tools/call` of `tool` as `token`, with `call_id` in its `_meta`:
    /// (status, the JSON-RPC message).
    pub fn call(
        &mut self,
        token: &str,
        tool: &str,
        arguments: Value,
        call_id: &str,
    ) -> (u16, Value) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": {
                "brain.dev/call_id": call_id,
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let bearer = format!("Bearer {token}");
        let (status, body) = self.request(
            "POST",
            "/mcp",
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
            &body,
        );
        (status, json_rpc(&body))
    }
}
