//! `brain-harness serve`, tried as a host would: the official Python SDK client (mcp 2.3.0,
//! `tests/interop/serve_client.py`) over stdio and Streamable HTTP, at both eras (`legacy`: the
//! initialize handshake and a 2025-11-25 session; `auto`: `server/discover` and 2026-07-28), the
//! TypeScript SDK client and the Inspector CLI, through serve to the official Python SDK server,
//! whose own counter says what reached it. Its lifecycle (cancellation, crashes, replicas,
//! signals, telemetry): `serve_lifecycle.rs`.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};
use tests::peers::Peer;

mod serving;

use serving::*;

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
        // Another tenant's tool reads as a tool that does not exist.
        assert_eq!(
            lines[2]["data"]["reason"],
            json!("unknown_tool"),
            "{}",
            lines[2]
        );
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
        assert_eq!(outcome(refused[0])["error_type"], json!("limited"));
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
    let (port, resource) = free_resource();
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
    // A session is its client's: globex cannot use acme's.
    let (_, head, _) = post(&authority, &[("Authorization", &globex)]);
    let session = session_id(&head);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let (status, _, body) = post_body(
        &authority,
        &[("Authorization", &acme), ("Mcp-Session-Id", &session)],
        &ping,
    );
    assert_eq!(status, 404, "{body}");
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

/// The bindings compiled in declare `serve` clients; with none of their variables set, serve
/// refuses to start instead of answering 401 to everyone.
#[test]
fn serve_without_a_usable_client_refuses_to_start() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .args(["--state", "memory:", "serve", "--listen", "127.0.0.1:0"])
        .env_remove("BRAIN_SERVE_TOKEN_LOCAL")
        .env_remove("BRAIN_SERVE_TOKEN_STAGING")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no client could authenticate"), "{stderr}");
    assert!(stderr.contains("BRAIN_SERVE_TOKEN_LOCAL"), "{stderr}");
    // --anonymous-tenant is for loopback only.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .args([
            "--state",
            "memory:",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--anonymous-tenant",
            "local",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("loopback"));
}

/// At 2026-07-28, `tools/list` says its cache is private (lists differ per tenant) and kept for
/// five minutes (it changes only with a restart), and
/// `server/discover` offers tools without `listChanged`.
#[test]
fn stateless_lists_are_private_and_never_change() {
    let peer = Peer::python();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &peer, |_| {});
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start(&config, &state, &[]);
    let authority = serving.authority();
    let bearer = format!("Bearer {ACME}");
    let request = |method: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let (status, _, body) = post_body(
            &authority,
            &[
                ("Authorization", &bearer),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", method),
            ],
            &body,
        );
        assert_eq!(status, 200, "{body}");
        let data = body
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap_or(&body);
        serde_json::from_str::<Value>(data).unwrap()["result"].clone()
    };
    let listed = request("tools/list");
    assert_eq!(listed["cacheScope"], json!("private"), "{listed}");
    assert_eq!(listed["ttlMs"], json!(300_000), "{listed}");
    assert_eq!(names(&listed), ["echo", "progress", "slow"]);
    assert!(
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("execution").is_none())
    );
    let discovered = request("server/discover");
    assert!(
        discovered["capabilities"]["tools"]
            .get("listChanged")
            .is_none(),
        "{discovered}"
    );
}

/// serve applies the bindings' limits to its clients' calls: over the rate, a call is refused
/// before anything is sent, its `brain.dev/outcome` saying `limited` and when the next token
/// comes; a retried call id is replayed without a token; another tenant has its own bucket.
#[test]
fn limits_apply_to_clients_calls() {
    let peer = Peer::python();
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &peer, |_| {});
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    host["tools"][0]["limits"] = json!({"calls": 1, "per_seconds": 60});
    std::fs::write(&path, host.to_string()).unwrap();
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let serving = Serving::start(&path, &state, &[]);
    let echo = |id: &str| json!({"call": "echo", "arguments": {"message": id}, "meta": {"brain.dev/call_id": id}});
    let lines = client(json!({"url": serving.url, "token": ACME, "mode": "auto",
        "steps": [echo("l1"), echo("l2"), echo("l1")]}));
    assert_eq!(text(&lines[0]), "l1", "{}", lines[0]);
    let refused = outcome(&lines[1]);
    assert_eq!(lines[1]["result"]["isError"], json!(true), "{}", lines[1]);
    assert_eq!(refused["error_type"], json!("limited"), "{refused}");
    assert_eq!(refused["unknown_outcome"], json!(false), "{refused}");
    let ms = refused["retry_after_ms"].as_u64().unwrap_or(0);
    assert!((59_000..=60_000).contains(&ms), "{refused}");
    assert_eq!(outcome(&lines[2])["replayed"], json!(true), "{}", lines[2]);
    let lines = client(json!({"url": serving.url, "token": GLOBEX, "mode": "auto",
        "steps": [echo("g1")]}));
    assert_eq!(text(&lines[0]), "g1", "{}", lines[0]);
    assert_eq!(peer.tool_calls(), 2, "acme's first and globex's");
}
