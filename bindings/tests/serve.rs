//! `brain-harness serve`, tried as a host would: the official Python SDK client (mcp 2.3.0,
//! `tests/interop/serve_client.py`) over stdio and Streamable HTTP, at both eras (`legacy`: the
//! initialize handshake and a 2025-11-25 session; `auto`: `server/discover` and 2026-07-28),
//! through serve to the official Python SDK server, whose own counter says what reached it.

#![allow(clippy::print_stderr)] // what serve logged, printed when a test fails

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tests::peers::{Peer, discover};

const ACME: &str = "acme-token-0123456789";
const GLOBEX: &str = "globex-token-9876543210";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A config with `echo`, `progress` and `slow` of the Python SDK server: `progress` for acme
/// only, the others for acme and globex; each tenant a client with a token.
fn config(dir: &Path, peer: &Peer, serve_patch: impl Fn(&mut Value)) -> String {
    let discovery = discover(&peer.url);
    let binding = |name: &str, tenants: &[&str]| {
        let tool = discovery
            .tools
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap_or_else(|| panic!("the server lists {name}"));
        json!({"name": name, "description": tool["description"], "url": peer.url,
            "mcp_tool": name, "input_schema": tool["inputSchema"], "tenants": tenants,
            "timeout_seconds": 30})
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
struct Serving {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Serving {
    fn start(config: &str, state: &str, env: &[(&str, &str)]) -> Serving {
        Serving::start_at("127.0.0.1:0", config, state, env)
    }

    fn start_at(listen: &str, config: &str, state: &str, env: &[(&str, &str)]) -> Serving {
        let mut child = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args([
                "--config", config, "--state", state, "serve", "--listen", listen,
            ])
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

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// `host:port`.
    fn authority(&self) -> String {
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
fn revision(mode: &str) -> &'static str {
    if mode == "legacy" {
        "2025-11-25"
    } else {
        "2026-07-28"
    }
}

/// Runs the Python SDK client on `plan`; one JSON value per line it printed after the first,
/// which must name the revision its mode negotiates.
fn client(plan: Value) -> Vec<Value> {
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

fn names(listed: &Value) -> Vec<&str> {
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect()
}

fn outcome(line: &Value) -> &Value {
    &line["result"]["_meta"]["brain.dev/outcome"]
}

fn text(line: &Value) -> &str {
    line["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// An `initialize` POST to serve with `headers`: (status, response head, body).
fn post(authority: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    post_body(authority, headers, &body)
}

/// A POST of `body` to serve with `headers`: (status, response head, body).
fn post_body(authority: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
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
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

/// stdio, at both eras: the tenant's tools, a call, its replay (the server counts one), progress
/// relayed in order with the client's token, an unknown tool.
#[test]
fn stdio_serves_one_tenant_with_the_journal_at_both_eras() {
    let peer = Peer::python();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &peer, |_| {});
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let mut expected_calls = 0;
    for mode in ["legacy", "auto"] {
        let command = json!([
            env!("CARGO_BIN_EXE_brain-harness"),
            "--config",
            config,
            "--state",
            state,
            "serve",
            "--stdio",
            "--tenant",
            "globex"
        ]);
        let call_id = format!("stdio-{mode}");
        let lines = client(json!({"command": command, "mode": mode, "steps": [
            {"list": true},
            {"call": "echo", "arguments": {"message": "hi"}, "meta": {"brain.dev/call_id": call_id}},
            {"call": "echo", "arguments": {"message": "hi"}, "meta": {"brain.dev/call_id": call_id}},
            {"call": "progress", "arguments": {"steps": 2}},
            {"call": "nope", "arguments": {}},
        ]}));
        assert_eq!(names(&lines[0]), ["echo", "slow"], "{mode}: {}", lines[0]);
        assert_eq!(text(&lines[1]), "hi", "{mode}: {}", lines[1]);
        assert_eq!(outcome(&lines[1])["replayed"], json!(false), "{}", lines[1]);
        assert_eq!(outcome(&lines[1])["call_id"], json!(call_id));
        assert_eq!(outcome(&lines[2])["replayed"], json!(true), "{}", lines[2]);
        assert_eq!(lines[2]["result"]["content"], lines[1]["result"]["content"]);
        // Another tenant's tool answers exactly as one that does not exist.
        assert_eq!(lines[3]["code"], json!(-32602), "{}", lines[3]);
        assert_eq!(lines[4]["code"], json!(-32602), "{}", lines[4]);
        assert_eq!(
            lines[3]["error"].as_str().unwrap().replace("progress", "X"),
            lines[4]["error"].as_str().unwrap().replace("nope", "X"),
        );
        expected_calls += 1;
        assert_eq!(peer.tool_calls(), expected_calls, "{mode}");
    }
}

/// HTTP: tokens name tenants; a missing or wrong token is 401, a foreign Origin 403; each
/// tenant sees and calls only its own tools; one tenant's call id is not another's; progress is
/// relayed; a retry is replayed at both eras; the concurrency bound refuses with nothing sent;
/// no token reaches the log, even at trace level.
#[test]
fn http_serves_each_client_its_tenant() {
    let peer = Peer::python();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &peer, |serve| {
        serve["concurrent_calls_per_client"] = json!(1);
    });
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start(&config, &state, &[("RUST_LOG", "trace")]);
    let authority = serving.authority();

    let (status, head, _) = post(&authority, &[]);
    assert_eq!(status, 401, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{head}"
    );
    let (status, _, _) = post(&authority, &[("Authorization", "Bearer not-a-token")]);
    assert_eq!(status, 401);
    let (status, _, _) = post(&authority, &[("Authorization", "Bearer ")]);
    assert_eq!(status, 401);
    let bearer = format!("Bearer {ACME}");
    let (status, _, body) = post(
        &authority,
        &[
            ("Authorization", &bearer),
            ("Origin", "https://evil.example.com"),
        ],
    );
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = post(
        &authority,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://localhost:5173"),
        ],
    );
    assert_eq!(status, 200, "{body}");

    let mut upstream = 0;
    for mode in ["legacy", "auto"] {
        let acme = |steps: Value| {
            client(json!({"url": serving.url, "token": ACME, "mode": mode, "steps": steps}))
        };
        let globex = |steps: Value| {
            client(json!({"url": serving.url, "token": GLOBEX, "mode": mode, "steps": steps}))
        };
        let shared = format!("shared-{mode}");
        let lines = acme(json!([
            {"list": true},
            {"call": "echo", "arguments": {"message": "from acme"}, "meta": {"brain.dev/call_id": shared}},
            {"call": "echo", "arguments": {"message": "from acme"}, "meta": {"brain.dev/call_id": shared}},
            {"call": "progress", "arguments": {"steps": 3}, "progress": true},
        ]));
        assert_eq!(names(&lines[0]), ["echo", "progress", "slow"], "{mode}");
        assert_eq!(text(&lines[1]), "from acme", "{}", lines[1]);
        assert_eq!(outcome(&lines[2])["replayed"], json!(true), "{}", lines[2]);
        assert_eq!(text(&lines[3]), "done 3 steps", "{}", lines[3]);
        let progress: Vec<f64> = lines[3]["progress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_f64().unwrap())
            .collect();
        assert_eq!(progress, [1.0, 2.0, 3.0], "{}", lines[3]);
        upstream += 2;
        assert_eq!(peer.tool_calls(), upstream, "{mode}");

        // globex: its own tools; acme's call id is its own call, acme's tool does not exist.
        let lines = globex(json!([
            {"list": true},
            {"call": "echo", "arguments": {"message": "from globex"}, "meta": {"brain.dev/call_id": shared, "brain.dev/scope": {"tenant_id": "acme"}}},
            {"call": "progress", "arguments": {"steps": 1}},
        ]));
        assert_eq!(names(&lines[0]), ["echo", "slow"], "{mode}");
        assert_eq!(text(&lines[1]), "from globex", "{}", lines[1]);
        assert_eq!(outcome(&lines[1])["replayed"], json!(false), "{}", lines[1]);
        assert_eq!(lines[2]["code"], json!(-32602), "{}", lines[2]);
        upstream += 1;
        assert_eq!(peer.tool_calls(), upstream, "{mode}");

        // One call in flight per client: the second is refused, nothing sent.
        let lines = acme(json!([{"parallel": [
            {"call": "slow", "arguments": {"seconds": 1.5}},
            {"call": "slow", "arguments": {"seconds": 1.5}},
        ]}]));
        let refused: Vec<&Value> = lines
            .iter()
            .filter(|l| l["result"]["isError"] == json!(true))
            .collect();
        assert_eq!(refused.len(), 1, "{lines:?}");
        assert_eq!(outcome(refused[0])["error_type"], json!("refused"));
        assert_eq!(outcome(refused[0])["unknown_outcome"], json!(false));
        assert!(
            text(refused[0]).contains("concurrent_calls_per_client"),
            "{}",
            refused[0]
        );
        upstream += 1;
        assert_eq!(peer.tool_calls(), upstream, "{mode}");
    }
    let log = serving.stderr();
    for token in [ACME, GLOBEX] {
        assert!(!log.contains(token), "a token reached the log");
    }
    let calls = log
        .lines()
        .filter(|line| line.contains("\"event\":\"tools/call\""))
        .count();
    // acme's three, globex's echo (its unknown tool is a protocol error), the bounded two.
    assert_eq!(calls, 2 * 6, "one line per call");
}

/// brain as an OAuth resource server: JWT access tokens of the repository's oidc-provider
/// authorization server (`BRAIN_TEST_AS_JWT=1`), each naming its tenant in a claim; no static
/// client at all. A 401 names the protected resource metadata, which names the issuer; a token
/// whose signature was altered is refused; each token's tenant sees its own tools.
#[test]
fn http_serves_oauth_clients_by_the_tenant_of_their_jwt() {
    use tests::oauth::{
        AuthorizationServer, GLOBEX_CLIENT, GLOBEX_SECRET, SERVICE_CLIENT, SERVICE_SECRET,
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let authorization =
        AuthorizationServer::start_with(&resource, 300, &[("BRAIN_TEST_AS_JWT", "1")]);
    let peer = Peer::python();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &peer, |serve| {
        *serve = json!({"authorization": {"issuer": authorization.issuer,
            "resource": resource, "tenant_claim": "tenant"}});
    });
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start_at(&format!("127.0.0.1:{port}"), &config, &state, &[]);
    let authority = serving.authority();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let acme =
        tokio.block_on(authorization.client_credentials(SERVICE_CLIENT, SERVICE_SECRET, &resource));
    let globex =
        tokio.block_on(authorization.client_credentials(GLOBEX_CLIENT, GLOBEX_SECRET, &resource));
    assert_eq!(acme.split('.').count(), 3, "a JWT");

    let (status, head, _) = post(&authority, &[]);
    assert_eq!(status, 401);
    let metadata = format!("http://{authority}/.well-known/oauth-protected-resource/mcp");
    assert!(
        head.contains(&format!("resource_metadata=\"{metadata}\"")),
        "{head}"
    );
    let get = |path: &str| {
        let mut stream = TcpStream::connect(&authority).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        serde_json::from_str::<Value>(response.split_once("\r\n\r\n").unwrap().1).unwrap()
    };
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let document = get(path);
        assert_eq!(document["resource"], json!(resource));
        assert_eq!(
            document["authorization_servers"],
            json!([authorization.issuer])
        );
    }
    let mut altered = acme.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    let (status, head, _) = post(
        &authority,
        &[("Authorization", &format!("Bearer {altered}"))],
    );
    assert_eq!(status, 401, "{head}");
    assert!(head.contains("error=\"invalid_token\""), "{head}");

    for mode in ["legacy", "auto"] {
        let lines = client(
            json!({"url": serving.url, "token": acme, "mode": mode, "steps": [
                {"list": true},
                {"call": "echo", "arguments": {"message": "jwt"}},
            ]}),
        );
        assert_eq!(names(&lines[0]), ["echo", "progress", "slow"], "{mode}");
        assert_eq!(text(&lines[1]), "jwt", "{}", lines[1]);
        let lines = client(
            json!({"url": serving.url, "token": globex, "mode": mode, "steps": [
                {"list": true},
                {"call": "progress", "arguments": {"steps": 1}},
            ]}),
        );
        assert_eq!(names(&lines[0]), ["echo", "slow"], "{mode}");
        assert_eq!(lines[1]["code"], json!(-32602), "{}", lines[1]);
    }
    assert_eq!(peer.tool_calls(), 2);
    let log = serving.stderr();
    assert!(
        !log.contains(&acme) && !log.contains(&globex),
        "a token reached the log"
    );
}

/// The fault-injecting test server and a config for its tools (acme and globex), served.
fn test_server(tokio: &tokio::runtime::Runtime) -> tests::server::TestServer {
    tokio
        .block_on(tests::server::TestServer::start(
            tests::server::Faults::default(),
        ))
        .unwrap()
}

fn test_server_config(dir: &Path, url: &str) -> String {
    let tools = tests::server::bindings_json(url, |_, binding| {
        binding["tenants"] = json!(["acme", "globex"]);
    });
    let config = json!({"serve": {"clients": [
        {"tenant": "acme", "token_env": "BRAIN_SERVE_TOKEN_ACME"},
        {"tenant": "globex", "token_env": "BRAIN_SERVE_TOKEN_GLOBEX"},
    ]}, "tools": tools});
    let path = dir.join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

/// The Python SDK client on `plan`, not waited for.
fn spawn_client(plan: &Value) -> Child {
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
fn wait_for(counter: &std::sync::atomic::AtomicUsize, at_least: usize, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while tests::server::Stats::get(counter) < at_least {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client's cancellation reaches the upstream server: `notifications/cancelled` at a 2025
/// session, and at 2026-07-28 a closed response stream (the client gone). At 2025 a dropped
/// connection is not a cancel: the call finishes into the journal, and the retry gets its answer.
#[test]
fn cancellation_is_relayed_and_a_dropped_2025_connection_is_not_one() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = test_server(&tokio);
    let stats = &server.stats;
    let dir = tempfile::tempdir().unwrap();
    let config = test_server_config(dir.path(), &server.url);
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start(&config, &state, &[]);

    // notifications/cancelled, at both eras of the client.
    for (n, mode) in ["legacy", "auto"].into_iter().enumerate() {
        let lines = client(
            json!({"url": serving.url, "token": ACME, "mode": mode, "steps": [
                {"call": "slow", "arguments": {"seconds": 5}, "cancel_after": 0.5},
                {"sleep": 0.5},
            ]}),
        );
        assert_eq!(lines[0], json!({"cancelled": true}), "{mode}");
        wait_for(
            &stats.cancelled_runs,
            n + 1,
            "the upstream run's cancellation",
        );
    }
    assert_eq!(tests::server::Stats::get(&stats.calls), 2);

    // 2026-07-28: the client goes away mid-call; its closed stream cancels the call.
    let plan = json!({"url": serving.url, "token": ACME, "mode": "auto", "steps": [
        {"call": "slow", "arguments": {"seconds": 5}, "meta": {"brain.dev/call_id": "gone-auto"}},
    ]});
    let mut gone = spawn_client(&plan);
    wait_for(&stats.calls, 3, "the call");
    std::thread::sleep(Duration::from_millis(200));
    gone.kill().unwrap();
    gone.wait().unwrap();
    wait_for(
        &stats.cancelled_runs,
        3,
        "the cancellation of a call whose stream closed",
    );

    // 2025: the client goes away mid-call; the call runs to its end, and the retry is answered
    // from the journal.
    let plan = json!({"url": serving.url, "token": ACME, "mode": "legacy", "steps": [
        {"call": "slow", "arguments": {"seconds": 1.5}, "meta": {"brain.dev/call_id": "gone-legacy"}},
    ]});
    let mut gone = spawn_client(&plan);
    wait_for(&stats.calls, 4, "the call");
    std::thread::sleep(Duration::from_millis(200));
    gone.kill().unwrap();
    gone.wait().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        tests::server::Stats::get(&stats.cancelled_runs),
        3,
        "not a cancel"
    );
    let lines = client(
        json!({"url": serving.url, "token": ACME, "mode": "legacy", "steps": [
            {"call": "slow", "arguments": {"seconds": 1.5}, "meta": {"brain.dev/call_id": "gone-legacy"}},
        ]}),
    );
    assert_eq!(outcome(&lines[0])["replayed"], json!(true), "{}", lines[0]);
    assert_eq!(lines[0]["result"]["isError"], json!(false), "{}", lines[0]);
    assert_eq!(tests::server::Stats::get(&stats.calls), 4);
}

/// A serve process SIGKILLed while a call runs: the retry, through a new serve on the same
/// state, is answered "unknown outcome" and nothing is sent again.
#[test]
fn after_a_sigkilled_serve_the_retry_is_unknown_and_not_sent() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = test_server(&tokio);
    let stats = &server.stats;
    let dir = tempfile::tempdir().unwrap();
    let config = test_server_config(dir.path(), &server.url);
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    for (n, mode) in ["legacy", "auto"].into_iter().enumerate() {
        let serving = Serving::start(&config, &state, &[]);
        let call_id = format!("killed-{mode}");
        let step = json!({"call": "slow", "arguments": {"seconds": 30},
            "meta": {"brain.dev/call_id": call_id}});
        let mut client_process = spawn_client(
            &json!({"url": serving.url, "token": ACME, "mode": mode, "steps": [step]}),
        );
        wait_for(&stats.calls, n + 1, "the call");
        drop(serving); // SIGKILL
        let _ = client_process.kill();
        let _ = client_process.wait();
        let serving = Serving::start(&config, &state, &[]);
        let lines =
            client(json!({"url": serving.url, "token": ACME, "mode": mode, "steps": [step]}));
        let outcome = outcome(&lines[0]);
        assert_eq!(
            outcome["unknown_outcome"],
            json!(true),
            "{mode}: {}",
            lines[0]
        );
        assert_eq!(outcome["call_id"], json!(call_id));
        assert_eq!(lines[0]["result"]["isError"], json!(true));
        assert_eq!(
            tests::server::Stats::get(&stats.calls),
            n + 1,
            "{mode}: sent once"
        );
    }
}

/// Two serve processes on one PostgreSQL, as two replicas behind a load balancer: a call id
/// sent through one while it runs, retried through the other, is waited for and answered from
/// the journal; the server counts one call per call id, at both eras.
#[test]
fn two_serve_replicas_on_one_postgresql_send_each_call_id_once() {
    let cluster = tests::postgres::Cluster::start();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = test_server(&tokio);
    let stats = &server.stats;
    let dir = tempfile::tempdir().unwrap();
    let config = test_server_config(dir.path(), &server.url);
    let one = Serving::start(&config, &cluster.url, &[]);
    let two = Serving::start(&config, &cluster.url, &[]);
    for (n, mode) in ["legacy", "auto"].into_iter().enumerate() {
        let step = json!({"call": "slow", "arguments": {"seconds": 1.5},
            "meta": {"brain.dev/call_id": format!("replicas-{mode}")}});
        let plan = |serving: &Serving| json!({"url": serving.url, "token": ACME, "mode": mode, "steps": [step]});
        let mut first = spawn_client(&plan(&one));
        wait_for(&stats.calls, n + 1, "the call");
        // The retry through the other replica waits for the call in progress there.
        let lines = client(plan(&two));
        assert_eq!(text(&lines[0]), "slept", "{mode}: {}", lines[0]);
        assert_eq!(outcome(&lines[0])["replayed"], json!(true), "{}", lines[0]);
        let lines = client(plan(&one));
        assert_eq!(outcome(&lines[0])["replayed"], json!(true), "{}", lines[0]);
        first.wait().unwrap();
        assert_eq!(
            tests::server::Stats::get(&stats.calls),
            n + 1,
            "{mode}: sent once"
        );
    }
}

/// SIGTERM: serve stops taking calls, lets the call in flight finish and answer, and exits 143.
#[test]
fn sigterm_lets_the_call_in_flight_finish() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = test_server(&tokio);
    let dir = tempfile::tempdir().unwrap();
    let config = test_server_config(dir.path(), &server.url);
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let mut serving = Serving::start(&config, &state, &[]);
    // The tools listed first: the SDK lists them after a call otherwise (for their output
    // schemas), and the server is gone by then.
    let plan = json!({"url": serving.url, "token": ACME, "mode": "legacy", "terminate": false,
        "steps": [{"list": true}, {"call": "slow", "arguments": {"seconds": 1.5}}]});
    let caller =
        std::thread::spawn(move || std::panic::catch_unwind(|| client(plan)).map_err(|_| ()));
    wait_for(&server.stats.calls, 1, "the call");
    let started = std::time::Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &serving.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let lines = caller.join().unwrap();
    let lines = lines.unwrap_or_else(|()| panic!("serve said: {}", serving.stderr()));
    assert_eq!(text(&lines[1]), "slept", "{}", lines[1]);
    let exit = serving.child.wait().unwrap();
    assert_eq!(exit.code(), Some(143), "{}", serving.stderr());
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(
        serving.stderr().contains("1 call(s) in flight"),
        "{}",
        serving.stderr()
    );
}

/// The bounds that are HTTP answers: the request body (413), one client's sessions (429, the
/// other client unaffected); and `/ready`, which needs no token and names nothing secret.
#[test]
fn http_bounds_sessions_and_body_size_and_answers_ready() {
    let peer = Peer::python();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &peer, |serve| {
        serve["sessions_per_client"] = json!(2);
        serve["max_request_bytes"] = json!(2048);
    });
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start(&config, &state, &[]);
    let authority = serving.authority();
    let acme = format!("Bearer {ACME}");
    let globex = format!("Bearer {GLOBEX}");
    for _ in 0..2 {
        assert_eq!(post(&authority, &[("Authorization", &acme)]).0, 200);
    }
    let (status, _, body) = post(&authority, &[("Authorization", &acme)]);
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("sessions_per_client"), "{body}");
    assert_eq!(post(&authority, &[("Authorization", &globex)]).0, 200);
    let large = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"padding": "x".repeat(4096)}})
    .to_string();
    let (status, _, _) = post_body(&authority, &[("Authorization", &globex)], &large);
    assert_eq!(status, 413);

    let mut stream = TcpStream::connect(&authority).unwrap();
    write!(
        stream,
        "GET /ready HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body: Value = serde_json::from_str(response.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body, json!({"ready": true, "state": "sqlite"}));
    assert_eq!(peer.tool_calls(), 0, "nothing went upstream");
}

/// A Node program under `tests/interop`: (success, stdout, stderr).
fn node(args: &[&str], cwd: &Path) -> (bool, String, String) {
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

/// The TypeScript SDK client (1.32.2) and the MCP Inspector CLI (1.0.3): each lists its
/// tenant's tools and calls one; a retried call id is replayed.
#[test]
fn the_typescript_sdk_client_and_the_inspector_cli_use_serve() {
    let peer = Peer::python();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &peer, |_| {});
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start(&config, &state, &[]);
    let interop = workspace().join("tests/interop");

    let plan = json!({"url": serving.url, "token": GLOBEX, "steps": [
        {"list": true},
        {"call": "echo", "arguments": {"message": "ts"}, "meta": {"brain.dev/call_id": "ts-1"}},
        {"call": "echo", "arguments": {"message": "ts"}, "meta": {"brain.dev/call_id": "ts-1"}},
        {"call": "progress", "arguments": {"steps": 1}},
    ]});
    let (ok, stdout, stderr) = node(&["serve_client.mjs", &plan.to_string()], &interop);
    assert!(ok, "{stdout}{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["protocol_version"], json!("2025-11-25"));
    assert_eq!(names(&lines[1]), ["echo", "slow"]);
    assert_eq!(text(&lines[2]), "ts", "{}", lines[2]);
    assert_eq!(outcome(&lines[3])["replayed"], json!(true), "{}", lines[3]);
    assert_eq!(lines[4]["code"], json!(-32602), "{}", lines[4]);
    assert_eq!(peer.tool_calls(), 1);

    // The Inspector CLI finds its own package.json relative to the working directory.
    let inspector = interop.join("node_modules/@modelcontextprotocol/inspector-cli/build");
    let bearer = format!("Authorization: Bearer {ACME}");
    let base = [
        "cli.js",
        "--cli",
        &serving.url,
        "--transport",
        "http",
        "--header",
        &bearer,
    ];
    let (ok, stdout, stderr) = node(
        &[&base[..], &["--method", "tools/list"]].concat(),
        &inspector,
    );
    assert!(ok, "{stdout}{stderr}");
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(names(&listed), ["echo", "progress", "slow"]);
    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-arg",
        "message=inspected",
        "--tool-metadata",
        "brain.dev/call_id=inspector-1",
    ];
    for replayed in [false, true] {
        let (ok, stdout, stderr) = node(&[&base[..], &call[..]].concat(), &inspector);
        assert!(ok, "{stdout}{stderr}");
        let result: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(result["content"][0]["text"], json!("inspected"), "{result}");
        let outcome = &result["_meta"]["brain.dev/outcome"];
        assert_eq!(outcome["call_id"], json!("inspector-1"));
        assert_eq!(outcome["replayed"], json!(replayed), "{result}");
    }
    assert_eq!(peer.tool_calls(), 2);
}

/// OpenTelemetry as for `call`: each client request is a SERVER span that continues the
/// client's trace (its `_meta.traceparent`), and brain's CLIENT span for the upstream call is its
/// child.
#[test]
fn a_served_call_is_a_server_span_in_the_client_s_trace() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = test_server(&tokio);
    let collector = tokio.block_on(tests::otlp::Collector::start()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = test_server_config(dir.path(), &server.url);
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start(
        &config,
        &state,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str())],
    );
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{parent_id}-01");
    let lines = client(
        json!({"url": serving.url, "token": ACME, "mode": "auto", "steps": [
            {"call": "echo", "arguments": {"message": "traced"}, "meta": {"traceparent": traceparent}},
        ]}),
    );
    assert_eq!(text(&lines[0]), "traced", "{}", lines[0]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let spans = loop {
        let spans: Vec<tests::otlp::Span> = collector
            .spans()
            .into_iter()
            .filter(|span| span.trace_id == trace_id)
            .collect();
        if spans
            .iter()
            .any(|s| s.kind == 3 && s.name == "tools/call echo")
        {
            break spans;
        }
        assert!(std::time::Instant::now() < deadline, "no spans arrived");
        std::thread::sleep(Duration::from_millis(100));
    };
    let served = spans
        .iter()
        .find(|span| span.kind == 2)
        .unwrap_or_else(|| panic!("a SERVER span: {spans:#?}"));
    assert_eq!(served.name, "tools/call echo");
    assert_eq!(
        served.parent_span_id, parent_id,
        "the client's span is its parent"
    );
    assert_eq!(served.attributes["brain.tenant_id"], json!("acme"));
    let upstream = spans
        .iter()
        .find(|span| span.kind == 3 && span.name == "tools/call echo")
        .expect("brain's CLIENT span");
    assert_eq!(upstream.parent_span_id, served.span_id, "{spans:#?}");
}
