//! `brain-harness serve` tried as a hostile client would, over loopback against a real serve
//! process and the fault-injecting test server upstream, counted at that server: sessions owned
//! whatever a header says, caps decided in one step, connections bounded before authentication
//! (the attacker on 127.0.0.2, the client on 127.0.0.1), failed authentications throttled per
//! source, unreadable credentials refused, ids bounded, and nothing internal in what a client
//! reads. Keys and claims: `serve_keys.rs`; sessions' ends: `serve_lifecycle.rs`.

#![allow(clippy::print_stderr)] // the measured figures, for the closing note

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};

mod serving;

use serving::*;

/// The test server's tools for acme and globex, with `serve` patched.
fn hostile_config(dir: &std::path::Path, url: &str, patch: impl Fn(&mut Value)) -> String {
    test_server_config_with(dir, url, patch, |_, _| {})
}

/// Raw bytes to serve: (status, head, body).
fn raw(authority: &str, request: &[u8]) -> (u16, String, String) {
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.write_all(request).unwrap();
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

/// The JSON-RPC message of a response body (JSON, or the first SSE `data:`).
fn message(body: &str) -> Value {
    let data = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(data).unwrap_or(Value::Null)
}

/// A 2026-07-28 `tools/call` of `tool` as `token`, with `meta`: the JSON-RPC result.
fn call(authority: &str, token: &str, tool: &str, arguments: Value, meta: Value) -> Value {
    let mut meta = meta;
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}})
    .to_string();
    let bearer = format!("Bearer {token}");
    let (status, _, body) = post_body(
        authority,
        &[
            ("Authorization", &bearer),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &body,
    );
    assert_eq!(status, 200, "{body}");
    message(&body)["result"].clone()
}

/// The `Mcp-Session-Id` of a response head, if it has one.
fn maybe_session(head: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    })
}

/// A `ping` on `session` as `token`: the status.
fn ping(authority: &str, token: &str, session: &str) -> u16 {
    let bearer = format!("Bearer {token}");
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    post_body(
        authority,
        &[
            ("Authorization", &bearer),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        &body,
    )
    .0
}

/// A DELETE of `session` as `token`: the status.
fn delete(authority: &str, token: &str, session: &str) -> u16 {
    raw(
        authority,
        format!(
            "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\n\
             Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n\
             Connection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .0
}

fn initialize_body(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"}}})
    .to_string()
}

/// An `initialize` body under a header naming another method opens a session only as the body
/// says: owned by its client, counted against its cap, out of another tenant's reach (POST, GET
/// stream, DELETE), at both eras' headers. Was: any number of ownerless sessions.
#[test]
fn header_tricks_never_open_an_ownerless_or_uncounted_session() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["sessions_per_client"] = json!(3);
    });
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let acme = format!("Bearer {ACME}");
    let mut opened = Vec::new();
    let mut refused = 0;
    for version_header in [None, Some("2025-11-25"), Some("2026-07-28")] {
        for method in [None, Some("ping"), Some("tools/list"), Some("Initialize")] {
            let mut headers = vec![("Authorization", acme.as_str())];
            if let Some(version) = version_header {
                headers.push(("MCP-Protocol-Version", version));
            }
            if let Some(method) = method {
                headers.push(("Mcp-Method", method));
            }
            let body = initialize_body(version_header.unwrap_or("2025-11-25"));
            let (status, head, body) = post_body(&authority, &headers, &body);
            match maybe_session(&head) {
                Some(session) => {
                    assert_eq!(status, 200, "{head}{body}");
                    opened.push(session);
                }
                None if status == 429 => refused += 1,
                None => {}
            }
        }
    }
    assert_eq!(opened.len(), 3, "the cap counts every session: {opened:?}");
    assert!(refused > 0, "the sessions over the cap were refused");
    for session in &opened {
        // Another tenant: as if the session did not exist, whatever it does.
        assert_eq!(ping(&authority, GLOBEX, session), 404);
        let (status, _, _) = raw(
            &authority,
            format!(
                "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {GLOBEX}\r\n\
                 Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        assert_eq!(status, 404);
        assert_eq!(delete(&authority, GLOBEX, session), 404);
        assert_eq!(ping(&authority, ACME, session), 200, "still the owner's");
    }
    // The owner's DELETE frees a place under the cap.
    assert!((200..300).contains(&delete(&authority, ACME, &opened[0])));
    let (status, _, _) = post(&authority, &[("Authorization", &acme)]);
    assert_eq!(status, 200);
}

/// 40 simultaneous initializes at `sessions_per_client: 2` open exactly 2. Was: 14 to 23.
#[test]
fn simultaneous_initializes_open_exactly_the_cap() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["sessions_per_client"] = json!(2);
    });
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..40)
            .map(|_| {
                let authority = &authority;
                scope.spawn(move || {
                    let acme = format!("Bearer {ACME}");
                    post(authority, &[("Authorization", &acme)]).0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        2,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        38,
        "{statuses:?}"
    );
}

/// Arbitrary `Mcp-Method`, `MCP-Protocol-Version` and bodies (a property test over one serve,
/// which is stopped with the test): a session is only ever opened with an owner, and another
/// owner never reaches it.
#[test]
fn no_header_and_body_opens_an_ownerless_session() {
    use proptest::test_runner::{Config, TestRunner};
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["sessions_per_client"] = json!(1000);
    });
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let strategy = (
        prop::option::of(prop::sample::select(vec![
            "initialize",
            "Initialize",
            "ping",
            "tools/list",
            "tools/call",
            "INITIALIZE",
            "",
        ])),
        prop::option::of(prop::sample::select(vec![
            "2025-11-25",
            "2025-06-18",
            "2026-07-28",
            "2099-01-01",
            "1999",
        ])),
        prop::sample::select(vec![
            "initialize",
            "ping",
            "tools/list",
            "batch",
            "not-json",
            "duplicate",
        ]),
        prop::sample::select(vec!["2025-11-25", "2026-07-28", "2025-03-26"]),
    );
    let opened = std::cell::Cell::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 128,
        ..Config::default()
    });
    let result = runner.run(
        &strategy,
        |(method, version, body_method, params_version)| {
            let init = initialize_body(params_version);
            let body = match body_method {
                "initialize" => init,
                "batch" => format!("[{init}]"),
                "not-json" => format!("{init}}}"),
                // Two `method` keys: whichever a parser keeps, the answer decides.
                "duplicate" => init.replacen(
                    "\"method\":\"initialize\"",
                    "\"method\":\"ping\",\"method\":\"initialize\"",
                    1,
                ),
                other => json!({"jsonrpc": "2.0", "id": 1, "method": other}).to_string(),
            };
            let acme = format!("Bearer {ACME}");
            let mut headers = vec![("Authorization", acme.as_str())];
            if let Some(version) = version {
                headers.push(("MCP-Protocol-Version", version));
            }
            if let Some(method) = method {
                headers.push(("Mcp-Method", method));
            }
            let (_, head, _) = post_body(&authority, &headers, &body);
            if let Some(session) = maybe_session(&head) {
                opened.set(opened.get() + 1);
                prop_assert_eq!(ping(&authority, GLOBEX, &session), 404);
                prop_assert_eq!(delete(&authority, GLOBEX, &session), 404);
                prop_assert_ne!(ping(&authority, ACME, &session), 404);
                prop_assert!((200..300).contains(&delete(&authority, ACME, &session)));
            }
            Ok(())
        },
    );
    result.unwrap();
    assert!(opened.get() > 0, "some cases opened a session");
}

/// Under a 256-descriptor limit, 300 half-sent requests and 50 silent connections from
/// 127.0.0.2 do not keep the client on 127.0.0.1 out: its `initialize` and `tools/call` succeed
/// within 2 s (5 s in CI), and the attacker's connections are closed at the header-read timeout.
/// Was: all still open 75 s later, and real clients timed out.
#[test]
fn slow_connections_are_bounded_before_authentication() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["header_read_timeout_seconds"] = json!(3);
    });
    let serving = Serving::start_with(
        &["prlimit", "--nofile=256:256", "--"],
        "127.0.0.1:0",
        &config,
        &upstream.state,
        &[],
        &[],
    );
    let authority = serving.authority();
    let addr: std::net::SocketAddr = authority.parse().unwrap();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let attacker = tokio.block_on(async {
        let mut held = Vec::new();
        for n in 0..350 {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            let Ok(Ok(mut stream)) =
                tokio::time::timeout(Duration::from_secs(1), socket.connect(addr)).await
            else {
                continue;
            };
            if n < 300 {
                use tokio::io::AsyncWriteExt;
                let _ = stream
                    .write_all(
                        format!("POST /mcp HTTP/1.1\r\nHost: {authority}\r\nX-Slow").as_bytes(),
                    )
                    .await;
            }
            held.push(stream);
        }
        held
    });
    let bound = if std::env::var_os("CI").is_some() {
        5
    } else {
        2
    };
    let started = Instant::now();
    let acme = format!("Bearer {ACME}");
    let (status, head, body) = post(&authority, &[("Authorization", &acme)]);
    assert_eq!(status, 200, "{head}{body}");
    let result = call(
        &authority,
        ACME,
        "echo",
        json!({"message": "through"}),
        json!({}),
    );
    let took = started.elapsed();
    assert_eq!(result["content"][0]["text"], json!("through"), "{result}");
    assert!(
        took < Duration::from_secs(bound),
        "the client waited {took:?}"
    );
    eprintln!("the client's initialize and tools/call took {took:?} beside the attacker");
    // The attacker's connections end at the header-read timeout (3 s), or sooner at the caps.
    let held = attacker.len();
    assert!(held >= 300, "the attacker held {held} connections");
    let closed = tokio.block_on(async {
        use tokio::io::AsyncReadExt;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
        let mut closed = 0;
        for mut stream in attacker {
            let mut buf = [0u8; 256];
            if let Ok(Ok(_)) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                closed += 1;
            }
        }
        closed
    });
    assert_eq!(
        closed, 350,
        "every half-sent or silent connection was closed"
    );
}

/// 2,000 wrong guesses from 127.0.0.2: after `failed_authentications_per_minute`, each is
/// answered 429 with `Retry-After` at once; the client on 127.0.0.1 is never slowed. Was: 401
/// each, no slowdown.
#[test]
fn failed_authentications_are_throttled_per_source() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |_| {});
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    let addr: std::net::SocketAddr = authority.parse().unwrap();
    let guess = |n: usize| -> (u16, String, Duration) {
        let socket = socket2_like_bind(addr);
        let mut stream = socket;
        let started = Instant::now();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer guess-{n:040}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
        .unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, response, started.elapsed())
    };
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    let mut slowest_refusal = Duration::ZERO;
    let began = Instant::now();
    for n in 0..2000 {
        let (status, response, took) = guess(n);
        *statuses.entry(status).or_default() += 1;
        if status == 429 {
            assert!(
                response.to_ascii_lowercase().contains("retry-after: "),
                "{response}"
            );
            slowest_refusal = slowest_refusal.max(took);
        }
        if n == 1000 {
            // The client elsewhere: authenticated at once.
            let started = Instant::now();
            let acme = format!("Bearer {ACME}");
            assert_eq!(post(&authority, &[("Authorization", &acme)]).0, 200);
            assert!(started.elapsed() < Duration::from_secs(1));
        }
    }
    // 30 a minute: the allowance, and one more for each 2 s the guesses took.
    let allowed = 30 + (began.elapsed().as_secs() / 2) as usize + 1;
    let unauthorized = statuses.get(&401).copied().unwrap_or(0);
    assert!((30..=allowed).contains(&unauthorized), "{statuses:?}");
    assert_eq!(
        statuses.get(&429).copied().unwrap_or(0),
        2000 - unauthorized,
        "{statuses:?}"
    );
    eprintln!("2,000 guesses in {:?}: {statuses:?}", began.elapsed());
    assert!(
        slowest_refusal < Duration::from_millis(500),
        "{slowest_refusal:?}"
    );
}

/// A blocking stream from 127.0.0.2 to `addr`.
fn socket2_like_bind(addr: std::net::SocketAddr) -> TcpStream {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let stream = socket.connect(addr).await.unwrap();
        let stream = stream.into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
    })
}

/// A credential that is present but unreadable — not UTF-8, not `Bearer` — is 401, with or
/// without `--anonymous-tenant`. Was: treated as absent, so the request ran anonymously.
#[test]
fn unreadable_credentials_are_refused_even_with_an_anonymous_tenant() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |_| {});
    let serving = Serving::start_with(
        &[],
        "127.0.0.1:0",
        &config,
        &upstream.state,
        &[],
        &["--anonymous-tenant", "acme"],
    );
    let authority = serving.authority();
    let body = initialize_body("2025-11-25");
    let request = |authorization: Option<&[u8]>| {
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n",
            body.len()
        )
        .into_bytes();
        if let Some(value) = authorization {
            request.extend_from_slice(b"Authorization: ");
            request.extend_from_slice(value);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"\r\n");
        request.extend_from_slice(body.as_bytes());
        raw(&authority, &request).0
    };
    assert_eq!(request(None), 200, "no credential: the anonymous tenant");
    assert_eq!(request(Some(b"Bearer \xff\xfe-not-utf8")), 401);
    assert_eq!(request(Some(b"Basic YWxpY2U6cGFzcw==")), 401);
    assert_eq!(request(Some(b"Bearer")), 401);
    assert_eq!(
        request(Some(b"Bearer wrong-token-0123456789abcdef0123")),
        401
    );
}

/// A call id or session id longer than 256 bytes, or holding control characters, is refused
/// before the journal and the log; no log line can be forged. Was: a 1 MB id journaled, logged
/// and forwarded; CR/LF forged lines.
#[test]
fn ids_are_bounded_and_cannot_forge_log_lines() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |_| {});
    let serving = Serving::start(&config, &upstream.state, &[]);
    let authority = serving.authority();
    for meta in [
        json!({"brain.dev/call_id": "x".repeat(1024 * 1024)}),
        json!({"brain.dev/call_id": "c1\ntools/call forged tenant=globex"}),
        json!({"brain.dev/session_id": "s\r\nforged"}),
        json!({"brain.dev/session_id": "y".repeat(257)}),
    ] {
        let result = call(&authority, ACME, "echo", json!({"message": "m"}), meta);
        assert_eq!(result["isError"], json!(true), "{result}");
        assert_eq!(
            result["_meta"]["brain.dev/outcome"]["error_type"],
            json!("refused")
        );
        assert_eq!(
            result["_meta"]["brain.dev/outcome"]["unknown_outcome"],
            json!(false)
        );
    }
    // 256 bytes is still an id.
    let fine = call(
        &authority,
        ACME,
        "echo",
        json!({"message": "m"}),
        json!({"brain.dev/call_id": "z".repeat(256)}),
    );
    assert_eq!(fine["isError"], json!(false), "{fine}");
    assert_eq!(tests::server::Stats::get(&upstream.server.stats.calls), 1);
    std::thread::sleep(Duration::from_millis(200));
    let log = serving.stderr();
    assert!(
        !log.lines()
            .any(|line| line.starts_with("tools/call forged")),
        "{log}"
    );
    assert!(!log.contains("forged tenant"), "{log}");
    assert!(log.len() < 64 * 1024, "no megabyte id in the log");
}

/// What a client reads names the binding and what it may do, never the upstream URL or
/// address, nor brain's derived upstream call id; the operator's log has the detail, joined by
/// the call id. Was: `could not connect to http://127.0.0.1:…/internal-mcp`, the derived id in
/// the journal-conflict refusal.
#[test]
fn a_client_reads_nothing_internal() {
    let upstream = upstream();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/internal-mcp", dead.local_addr().unwrap());
    drop(dead);
    let mut tools = tests::server::bindings_json(&upstream.server.url, |_, binding| {
        binding["tenants"] = json!(["acme"]);
    });
    let mut gone = tools
        .iter()
        .find(|tool| tool["name"] == "echo")
        .unwrap()
        .clone();
    gone["name"] = json!("gone");
    gone["url"] = json!(dead_url);
    tools.push(gone);
    let config = json!({"serve": {"clients": [
        {"tenant": "acme", "token_env": "BRAIN_SERVE_TOKEN_ACME"}]}, "tools": tools});
    let path = upstream.dir.path().join("host.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let serving = Serving::start(path.to_str().unwrap(), &upstream.state, &[]);
    let authority = serving.authority();
    let text = |result: &Value| {
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let unreachable = call(
        &authority,
        ACME,
        "gone",
        json!({"message": "m"}),
        json!({"brain.dev/call_id": "unreachable-1"}),
    );
    let told = text(&unreachable);
    assert_eq!(
        unreachable["_meta"]["brain.dev/outcome"]["error_type"],
        json!("not_sent")
    );
    assert!(told.starts_with("gone: not sent"), "{told}");
    assert!(
        !told.contains("127.0.0.1") && !told.contains("internal-mcp"),
        "{told}"
    );

    let first = call(
        &authority,
        ACME,
        "echo",
        json!({"message": "one"}),
        json!({"brain.dev/call_id": "conflict-1"}),
    );
    assert_eq!(first["isError"], json!(false));
    let conflict = call(
        &authority,
        ACME,
        "echo",
        json!({"message": "another"}),
        json!({"brain.dev/call_id": "conflict-1"}),
    );
    assert_eq!(
        conflict["_meta"]["brain.dev/outcome"]["error_type"],
        json!("journal_conflict")
    );
    std::thread::sleep(Duration::from_millis(200));
    let log = serving.stderr();
    let upstream_id = log
        .lines()
        .filter(|line| line.contains("conflict-1"))
        .find_map(|line| {
            let line: Value = serde_json::from_str(line).ok()?;
            line["upstream_call_id"].as_str().map(str::to_owned)
        })
        .expect("the log names the upstream call id");
    let told = text(&conflict);
    assert!(!told.contains(&upstream_id), "{told}");
    assert!(told.starts_with("echo: refused"), "{told}");
    // The operator's log has the detail, on the line of the client's call id.
    let detail = log
        .lines()
        .find(|line| line.contains("unreachable-1"))
        .expect("a line for the call");
    assert!(detail.contains("internal-mcp"), "{detail}");
}

/// alice (acme) and bob (globex) log in through the same OAuth app (code + PKCE at the test
/// authorization server): each session is its user's, each cap and bound is its user's. Was:
/// keyed by the app's `client_id`, so bob used alice's session, alice deleted bob's, and one
/// user's call made the other's `limited`.
#[test]
fn two_tenants_through_one_oauth_app_stay_apart() {
    use tests::oauth::{AuthorizationServer, jwt_claims};
    let (port, resource) = free_resource();
    let authorization =
        AuthorizationServer::start_with(&resource, 300, &[("BRAIN_TEST_AS_JWT", "1")]);
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        *serve = json!({"authorization": {"issuer": authorization.issuer,
            "resource": resource, "tenant_claim": "tenant"},
            "sessions_per_client": 1, "concurrent_calls_per_client": 1});
    });
    let serving = Serving::start_at(&format!("127.0.0.1:{port}"), &config, &upstream.state, &[]);
    let authority = serving.authority();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let alice = tokio.block_on(authorization.user_token(&resource, "alice"));
    let bob = tokio.block_on(authorization.user_token(&resource, "bob"));
    let (a, b) = (jwt_claims(&alice), jwt_claims(&bob));
    assert_eq!(a["client_id"], b["client_id"], "one OAuth app");
    assert_eq!(
        (a["tenant"].as_str(), b["tenant"].as_str()),
        (Some("acme"), Some("globex"))
    );

    let open = |token: &str| {
        let bearer = format!("Bearer {token}");
        let (status, head, body) = post(&authority, &[("Authorization", &bearer)]);
        assert_eq!(status, 200, "{head}{body}");
        session_id(&head)
    };
    let alices = open(&alice);
    // bob's cap is his own: alice's one session does not use it up.
    let bobs = open(&bob);
    let bearer = format!("Bearer {alice}");
    assert_eq!(
        post(&authority, &[("Authorization", &bearer)]).0,
        429,
        "alice's cap is 1"
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let on = |token: &str, session: &str| {
        let bearer = format!("Bearer {token}");
        post_body(
            &authority,
            &[
                ("Authorization", &bearer),
                ("Mcp-Session-Id", session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            &list,
        )
    };
    let (status, _, body) = on(&bob, &alices);
    assert_eq!(status, 404, "bob cannot use alice's session: {body}");
    assert!(!body.contains("\"tools\""), "{body}");
    assert_eq!(delete(&authority, &bob, &alices), 404);
    assert_eq!(delete(&authority, &alice, &bobs), 404);
    assert_eq!(on(&alice, &alices).0, 200);
    assert_eq!(on(&bob, &bobs).0, 200);

    // alice's call in flight does not count against bob's bound.
    let slow = std::thread::scope(|scope| {
        let authority = &authority;
        let alice = &alice;
        let running =
            scope.spawn(move || call(authority, alice, "slow", json!({"seconds": 2}), json!({})));
        wait_for(&upstream.server.stats.calls, 1, "alice's call");
        let bobs_call = call(
            authority,
            &bob,
            "echo",
            json!({"message": "bob"}),
            json!({}),
        );
        assert_eq!(bobs_call["isError"], json!(false), "{bobs_call}");
        let alices_second = call(authority, alice, "echo", json!({"message": "a"}), json!({}));
        assert_eq!(
            alices_second["_meta"]["brain.dev/outcome"]["error_type"],
            json!("limited"),
            "alice's own bound is 1: {alices_second}"
        );
        running.join().unwrap()
    });
    assert_eq!(slow["isError"], json!(false), "{slow}");
}

/// h2c: the server's SETTINGS bound the streams of a connection (`max_concurrent_streams`), and
/// a connection that opens HTTP/2 but sends no request is closed at the head deadline, as an
/// HTTP/1.1 one is.
#[test]
fn an_h2c_connection_is_bounded_too() {
    let upstream = upstream();
    let config = hostile_config(upstream.dir.path(), &upstream.server.url, |serve| {
        serve["header_read_timeout_seconds"] = json!(2);
        serve["idle_timeout_seconds"] = json!(2);
        serve["max_concurrent_streams"] = json!(7);
    });
    let serving = Serving::start(&config, &upstream.state, &[]);
    let mut stream = TcpStream::connect(serving.authority()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The client preface and an empty SETTINGS frame, then nothing.
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .unwrap();
    let opened = Instant::now();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
    let closed_after = opened.elapsed();
    assert!(
        closed_after >= Duration::from_millis(1500) && closed_after < Duration::from_secs(6),
        "closed after {closed_after:?}"
    );
    // The server's first frame is its SETTINGS: MAX_CONCURRENT_STREAMS (0x3) is 7.
    assert!(received.len() >= 9, "{received:?}");
    let length =
        usize::from(received[0]) << 16 | usize::from(received[1]) << 8 | usize::from(received[2]);
    assert_eq!(received[3], 0x4, "a SETTINGS frame first");
    let settings = &received[9..9 + length];
    let streams = settings.chunks(6).find_map(|setting| {
        (u16::from_be_bytes([setting[0], setting[1]]) == 0x3)
            .then(|| u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]))
    });
    assert_eq!(streams, Some(7), "{settings:?}");

    // A connection that made a request and then holds no stream is closed at the idle timeout.
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let authority = serving.authority();
    let idle_for = tokio.block_on(async {
        let stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .unwrap();
        let ended = tokio::spawn(connection);
        let request = http::Request::get(format!("http://{authority}/ready"))
            .body(String::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        drop(response);
        let answered = Instant::now();
        let _ = tokio::time::timeout(Duration::from_secs(10), ended).await;
        answered.elapsed()
    });
    assert!(
        idle_for >= Duration::from_millis(1500) && idle_for < Duration::from_secs(6),
        "an idle h2c connection closed after {idle_for:?}"
    );
}
