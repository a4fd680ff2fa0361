//! Third-party MCP servers (none written by this project) as processes on a free loopback port:
//! the official Python SDK (`mcp==2.3.0`, serving our script `tests/interop/python_server.py`;
//! `mcp==1.9.4` and `mcp==1.12.4`, serving `tests/interop/python_server_v1.py`, for MCP 2025-03-26
//! and 2025-06-18), the official TypeScript SDK (`@modelcontextprotocol/sdk@1.32.2`, serving our
//! script `tests/interop/ts_server.mjs`) and `@modelcontextprotocol/server-everything@2026.8.31`
//! (bound to 127.0.0.1, with an empty environment). `tests/interop/setup.sh` installs them all; `cargo xtask ci` runs
//! it.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A peer server process, killed when dropped.
#[derive(Debug)]
pub struct Peer {
    child: Child,
    /// Its MCP endpoint.
    pub url: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop")
}

/// A free loopback port (for a peer whose URL must be known before it starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

fn require(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run tests/interop/setup.sh (cargo xtask ci does)",
        path.display()
    );
    path
}

impl Peer {
    /// The Python SDK server.
    pub fn python() -> Peer {
        Peer::python_listing_kept(0)
    }

    /// [`Peer::python`], its 2026-07-28 `tools/list` saying `"ttlMs": ttl_ms` (0: the SDK's
    /// default).
    pub fn python_listing_kept(ttl_ms: u64) -> Peer {
        let port = free_port();
        Peer::python_with(port, ("LIST_TTL_MS", &ttl_ms.to_string()))
    }

    /// The Python SDK server on `port`, with the one variable `var` set.
    fn python_with(port: u16, var: (&str, &str)) -> Peer {
        let dir = interop_dir();
        let python = require(dir.join(".venv/bin/python"));
        let mut command = Command::new(python);
        command
            .arg(dir.join("python_server.py"))
            .arg(port.to_string())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env(var.0, var.1);
        Peer::start(command, port)
    }

    /// The Python SDK server as an OAuth resource server on `port` (see [`free_port`]): every
    /// request's bearer token introspected at the authorization server `issuer` (as its client
    /// `mcp-server`), its audience `http://127.0.0.1:PORT/mcp`. Its [`Peer::stats`] add
    /// `identities` (`sub` and `act` of each `echo` call's token) and `tokens` (those it was shown).
    pub fn python_introspecting(port: u16, issuer: &str) -> Peer {
        Peer::python_with(port, ("INTROSPECT_ISSUER", issuer))
    }

    /// The Python SDK server behind Hypercorn over TLS (HTTP/2 and HTTP/1.1 by ALPN), with the
    /// certificate and key of `ca` (written to `dir`): `https://127.0.0.1:PORT/mcp`.
    pub fn python_tls(ca: &crate::tls::TestCa, dir: &Path) -> Peer {
        let interop = interop_dir();
        let python = require(interop.join(".venv/bin/python"));
        let (cert, key) = (dir.join("peer-cert.pem"), dir.join("peer-key.pem"));
        std::fs::write(&cert, &ca.cert_pem).expect("write the certificate");
        std::fs::write(&key, &ca.key_pem).expect("write the key");
        let port = free_port();
        let mut command = Command::new(python);
        command
            .arg(interop.join("python_server.py"))
            .arg(port.to_string())
            .arg("--tls")
            .arg(cert)
            .arg(key)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        let mut peer = Peer::start(command, port);
        peer.url = format!("https://127.0.0.1:{port}/mcp");
        peer
    }

    /// An older Python SDK release serving `interop/python_server_v1.py`: `"1.9"` (mcp 1.9.4,
    /// MCP 2025-03-26; it serves `/mcp/`, and answers `/mcp` with a redirect brain does not
    /// follow) or `"1.12"` (mcp 1.12.4, MCP 2025-06-18; `/mcp`).
    pub fn python_v1(release: &str) -> Peer {
        let dir = interop_dir();
        let python = require(dir.join(format!(".venv-mcp{release}/bin/python")));
        let port = free_port();
        let mut command = Command::new(python);
        command
            .arg(dir.join("python_server_v1.py"))
            .arg(port.to_string())
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        let mut peer = Peer::start(command, port);
        if release == "1.9" {
            peer.url.push('/');
        }
        peer
    }

    /// The TypeScript SDK server `tests/interop/ts_server.mjs` (sessions, 2025-11-25; its
    /// `POST /drift` changes a tool).
    pub fn typescript() -> Peer {
        let dir = interop_dir();
        require(dir.join("node_modules/@modelcontextprotocol/sdk/package.json"));
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg(dir.join("ts_server.mjs"))
            .arg(port.to_string())
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        Peer::start(command, port)
    }

    /// Changes a tool on a peer that serves `POST /drift` (the Python and TypeScript SDK
    /// servers): `refund`'s `amount` becomes a string (`"refund"`), or goes back (`"none"`).
    pub fn drift(&self, change: &str) {
        use std::io::{Read, Write};
        let authority = self.authority();
        let mut stream = TcpStream::connect(&authority).expect("the peer answers");
        let request = format!(
            "POST /drift HTTP/1.0\r\nHost: {authority}\r\nContent-Length: {}\r\n\r\n{change}",
            change.len()
        );
        stream.write_all(request.as_bytes()).expect("a request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("a response");
        assert!(
            response.starts_with("HTTP/1.1 204") || response.starts_with("HTTP/1.0 204"),
            "{response}"
        );
    }

    fn authority(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    /// server-everything over Streamable HTTP.
    pub fn everything() -> Peer {
        let dir = interop_dir();
        let script =
            require(dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"));
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg("-r")
            .arg(dir.join("loopback.cjs"))
            .arg(script)
            .arg("streamableHttp")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PORT", port.to_string());
        Peer::start(command, port)
    }

    /// How many `tools/call` requests reached a Python peer so far (its `GET /stats`, served by
    /// `tests/interop/counting.py` around the SDK's app).
    pub fn tool_calls(&self) -> u64 {
        self.stats()["calls"].as_u64().expect("a count of calls")
    }

    /// A Python peer's `GET /stats` (`tests/interop/counting.py`).
    pub fn stats(&self) -> serde_json::Value {
        use std::io::{Read, Write};
        let authority = self.authority();
        let mut stream = TcpStream::connect(&authority).expect("the peer answers");
        let request = format!("GET /stats HTTP/1.0\r\nHost: {authority}\r\n\r\n");
        stream.write_all(request.as_bytes()).expect("a request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("a response");
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|error| panic!("GET /stats: {error}: {response}"))
    }

    fn start(mut command: Command, port: u16) -> Peer {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the peer starts");
        let peer = Peer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        assert!(
            crate::process::wait_for_listener(port, Duration::from_secs(30)),
            "the peer did not listen on {port}"
        );
        peer
    }
}

/// What discovery (the library functions `cargo xtask discover` uses) finds at the MCP endpoint
/// `url`, on a runtime of its own (for tests that are not async).
pub fn discover(url: &str) -> brain_runtime::discover::Discovery {
    block_on(brain_runtime::discover::discover(
        &brain_runtime::discover::DiscoverOptions {
            url: url.to_owned(),
            token: None,
            auth: None,
            timeout: Duration::from_secs(20),
            ca_file: None,
        },
    ))
    .unwrap_or_else(|error| panic!("discovery at {url}: {error}"))
}

/// Runs `work` to its end on a runtime of its own.
fn block_on<F: Future>(work: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(work)
}

/// What discovery finds on the stdio server `command` starts (as `discover --command`), on a
/// runtime of its own.
pub fn discover_command(command: &[String]) -> brain_runtime::discover::Discovery {
    block_on(brain_runtime::discover::discover_command(
        &brain_runtime::discover::CommandOptions {
            command: command.to_vec(),
            env: Vec::new(),
            secrets: Vec::new(),
            timeout: Duration::from_secs(20),
            // Under the sandbox, the peers' packages and venvs readable.
            sandbox: Some(brain_config::SandboxRules {
                read: vec![interop_dir().display().to_string()],
                ..Default::default()
            }),
        },
    ))
    .unwrap_or_else(|error| panic!("discovery of {command:?}: {error}"))
}

/// The settings `cargo xtask discover --url URL --tenant local --timeout-seconds 20` would bind
/// `discovery`'s tools with (the revision and tasks support it found).
pub fn local_settings(
    url: &str,
    discovery: &brain_runtime::discover::Discovery,
) -> brain_config::discovery::BindingSettings {
    brain_config::discovery::BindingSettings {
        server: brain_config::discovery::Server::Url(url.to_owned()),
        token_env: None,
        tenants: vec!["local".into()],
        timeout_seconds: 20,
        max_output_bytes: brain_config::DEFAULT_MAX_OUTPUT_BYTES,
        protocol_version: discovery.protocol_version.clone(),
        on_input_request: None,
        auth: None,
        server_tasks: discovery.server_tasks,
        ca_file: None,
    }
}
