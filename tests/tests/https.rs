//! brain over HTTPS against the test server behind TLS (a CA the test makes): HTTP/2 chosen by
//! ALPN, HTTP/1.1 otherwise; what a call costs the server (TCP connections, TLS handshakes,
//! resumption) counted on its side; a binding's own CA (`ca_file`); a call that waits for a
//! stream beyond the server's `SETTINGS_MAX_CONCURRENT_STREAMS` and times out before it left is
//! not sent; a call that gets no socket for want of file descriptors says `ulimit -n`.

use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use brain_runtime::{Runtime, ToolResult};
use serde_json::{Value, json};
use tests::client::{call, request, text};
use tests::server::{Faults, Stats, TestServer};
use tests::tls::TlsOptions;

const REVISIONS: [&str; 2] = ["2026-07-28", "2025-11-25"];

fn count(counter: &AtomicUsize) -> usize {
    Stats::get(counter)
}

/// A runtime for the server's bindings, pinned at `revision`, trusting `ca_file` (if any);
/// `extra` adds bindings (each patched from the one of the same tool).
fn runtime(server: &TestServer, revision: &str, ca_file: Option<&std::path::Path>) -> Runtime {
    runtime_with(server, revision, ca_file, &[])
}

fn runtime_with(
    server: &TestServer,
    revision: &str,
    ca_file: Option<&std::path::Path>,
    extra: &[(&str, &str, u64)],
) -> Runtime {
    let patch = |_: &str, binding: &mut Value| {
        binding["protocol_version"] = json!(revision);
        if let Some(path) = ca_file {
            binding["ca_file"] = json!(path.to_str().unwrap());
        }
    };
    let mut bindings = tests::server::bindings_json(&server.url, patch);
    for (name, tool, timeout) in extra {
        let mut binding = bindings
            .iter()
            .find(|b| b["name"] == *tool)
            .cloned()
            .unwrap();
        binding["name"] = json!(name);
        binding["timeout_seconds"] = json!(timeout);
        bindings.push(binding);
    }
    let text = json!({ "tools": bindings }).to_string();
    let config =
        brain_config::parse(text.as_bytes(), "test.json").unwrap_or_else(|e| panic!("{e}"));
    Runtime::new(&config).unwrap()
}

async fn start(tls: TlsOptions) -> (TestServer, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ca_file = tls.ca.write_ca(dir.path());
    let server = TestServer::start(Faults {
        tls: Some(tls),
        ..Faults::default()
    })
    .await
    .unwrap();
    (server, dir, ca_file)
}

#[track_caller]
fn assert_ok(result: &ToolResult, needle: &str) {
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (false, false),
        "{result:?}"
    );
    assert!(text(result).contains(needle), "{result:?}");
}

/// Over HTTP/2 every call of a runtime shares one connection: after the first call, no call
/// costs a TCP connection or a TLS handshake — sequential or 32 at once — at both revisions.
#[tokio::test]
async fn https_with_http2_shares_one_connection_and_one_tls13_handshake() {
    for revision in REVISIONS {
        let (server, _dir, ca_file) = start(TlsOptions::h2()).await;
        let runtime = runtime(&server, revision, Some(&ca_file));
        assert_ok(
            &call(&runtime, "echo", json!({"message": "warm"})).await,
            "warm",
        );
        for i in 0..10 {
            let message = format!("seq {i}");
            assert_ok(
                &call(&runtime, "echo", json!({"message": message})).await,
                &message,
            );
        }
        let calls = (0..32).map(|i| {
            let runtime = runtime.clone();
            async move { call(&runtime, "echo", json!({"message": format!("par {i}")})).await }
        });
        for result in futures_util::future::join_all(calls).await {
            assert_ok(&result, "par");
        }
        let stats = &server.stats;
        assert_eq!(count(&stats.calls), 43, "{revision}");
        assert_eq!(count(&stats.accepted), 1, "{revision}: TCP connections");
        assert_eq!(
            count(&stats.tls.handshakes),
            1,
            "{revision}: TLS handshakes"
        );
        assert_eq!(count(&stats.tls.tls13), 1, "{revision}: TLS 1.3");
        assert_eq!(
            count(&stats.tls.h2_connections),
            1,
            "{revision}: HTTP/2 by ALPN"
        );
        drop(runtime);
        server.closed_by_client().await;
    }
}

/// A server without HTTP/2 gets HTTP/1.1: after warm-up, sequential calls reuse pooled
/// connections (no handshake per call; at 2025-11-25 a call's DELETE, off the caller's path,
/// overlaps the next call, so the pool holds two); a new connection resumes a TLS session while
/// the client holds a ticket (TLS 1.3 tickets are single-use: the server sends two per
/// handshake, so of three new connections at once, two resume).
#[tokio::test]
async fn https_with_http1_reuses_connections_and_resumes_tls_sessions() {
    for revision in REVISIONS {
        let (server, _dir, ca_file) = start(TlsOptions::h1()).await;
        let runtime = runtime(&server, revision, Some(&ca_file));
        let stats = &server.stats;
        for i in 0..5 {
            let message = format!("warm {i}");
            assert_ok(
                &call(&runtime, "echo", json!({"message": message})).await,
                &message,
            );
        }
        runtime.wait_for_cleanup().await;
        let warm = count(&stats.tls.handshakes);
        assert!(warm <= 2, "{revision}: {warm} handshakes in warm-up");
        for i in 0..20 {
            let message = format!("seq {i}");
            assert_ok(
                &call(&runtime, "echo", json!({"message": message})).await,
                &message,
            );
        }
        runtime.wait_for_cleanup().await;
        assert_eq!(
            count(&stats.tls.handshakes),
            warm,
            "{revision}: no handshake per call"
        );
        assert_eq!(count(&stats.tls.h2_connections), 0, "{revision}");
        // Four at once: more connections than the pool holds, each resuming a session.
        let (a, b, c, d) = tokio::join!(
            call(&runtime, "slow", json!({"seconds": 0.2})),
            call(&runtime, "slow", json!({"seconds": 0.2})),
            call(&runtime, "slow", json!({"seconds": 0.2})),
            call(&runtime, "slow", json!({"seconds": 0.2})),
        );
        for result in [a, b, c, d] {
            assert_ok(&result, "");
        }
        // The sessions' DELETEs, off the callers' path, may open connections of their own.
        runtime.wait_for_cleanup().await;
        let handshakes = count(&stats.tls.handshakes);
        assert!(handshakes > warm, "{revision}: {handshakes}");
        let resumed = count(&stats.tls.resumed);
        assert!(
            resumed >= 1,
            "{revision}: {resumed} of {handshakes} handshakes resumed"
        );
        assert_eq!(count(&stats.tls.tls13), handshakes, "{revision}");
        // hyper-util's pool may start a connection for a request that then takes one that
        // became idle first; the started one is left unfinished, never carrying a request.
        assert!(count(&stats.accepted) >= handshakes, "{revision}");
    }
}

/// Without the binding's CA the server's certificate is refused before anything is sent; with
/// `ca_file` it is trusted for that binding (the platform's roots stay trusted beside it).
#[tokio::test]
async fn a_private_ca_is_trusted_only_through_the_bindings_ca_file() {
    let (server, _dir, ca_file) = start(TlsOptions::h2()).await;
    let untrusting = runtime(&server, "2026-07-28", None);
    let refused = call(&untrusting, "echo", json!({"message": "x"})).await;
    assert_eq!(
        (refused.is_error, refused.unknown_outcome),
        (true, false),
        "{refused:?}"
    );
    assert!(text(&refused).contains("UnknownIssuer"), "{refused:?}");
    assert_eq!(count(&server.stats.calls), 0);
    assert!(tests::client::eventually(&server.stats.tls.failed, 1).await >= 1);
    let trusting = runtime(&server, "2026-07-28", Some(&ca_file));
    assert_ok(
        &call(&trusting, "echo", json!({"message": "trusted"})).await,
        "trusted",
    );
    assert_eq!(count(&server.stats.calls), 1);

    // A file that is not a certificate is refused when the runtime is built, naming the binding.
    let bogus = ca_file.with_file_name("bogus.pem");
    std::fs::write(&bogus, "not a certificate").unwrap();
    let text = json!({ "tools": tests::server::bindings_json(&server.url, |_, b| {
        b["ca_file"] = json!(bogus.to_str().unwrap());
    }) })
    .to_string();
    let config = brain_config::parse(text.as_bytes(), "test.json").unwrap();
    let error = Runtime::new(&config).unwrap_err().to_string();
    assert!(
        error.contains("ca_file of") && error.contains("bogus.pem"),
        "{error}"
    );
}

/// A server that allows one HTTP/2 stream at a time: a call that waits for a stream while
/// another holds the only one, and times out before its request left, is not sent
/// (`unknown_outcome: false`) — the server never saw it — and says why.
#[tokio::test]
async fn a_call_waiting_for_an_http2_stream_past_its_timeout_was_not_sent() {
    let tls = TlsOptions {
        max_concurrent_streams: Some(1),
        ..TlsOptions::h2()
    };
    let (server, _dir, ca_file) = start(tls).await;
    let runtime = runtime_with(
        &server,
        "2026-07-28",
        Some(&ca_file),
        &[("slow_short", "slow", 1)],
    );
    assert_ok(
        &call(&runtime, "echo", json!({"message": "warm"})).await,
        "warm",
    );
    let holding = runtime.call(request("slow", json!({"seconds": 3})));
    for _ in 0..200 {
        if count(&server.stats.running) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(count(&server.stats.running), 1);
    let waited = call(&runtime, "slow_short", json!({"seconds": 0})).await;
    assert_eq!(
        (waited.is_error, waited.unknown_outcome),
        (true, false),
        "{waited:?}"
    );
    assert!(text(&waited).contains("never sent"), "{waited:?}");
    let held = holding.result().await;
    assert_ok(&held, "");
    // The warm-up and the holding call; the waiting one never arrived.
    assert_eq!(count(&server.stats.calls), 2);
    assert_eq!(count(&server.stats.accepted), 1);
}

/// A process out of file descriptors: the call gets no socket, fails before anything is sent
/// (`unknown_outcome: false`, nothing reached the server), and the error says what to raise.
#[tokio::test]
async fn a_call_without_a_file_descriptor_for_its_socket_names_ulimit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    // It takes every descriptor of its process: only where it has the process to itself
    // (nextest, which `cargo xtask ci` uses, runs each test in its own process).
    if std::env::var_os("NEXTEST").is_none() {
        return;
    }
    let server = TestServer::start(Faults::default()).await.unwrap();
    let runtime = Runtime::new(&tests::client::config(&server.url, |_, binding| {
        binding["protocol_version"] = json!("2026-07-28");
    }))
    .unwrap();
    // This test's own process (nextest runs each test alone): a low limit, then every descriptor
    // under it taken.
    let before = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(256),
            maximum: before.maximum,
        },
    )
    .unwrap();
    let mut held = Vec::new();
    while let Ok(file) = std::fs::File::open("/dev/null") {
        held.push(file);
    }
    let result = call(&runtime, "echo", json!({"message": "x"})).await;
    drop(held);
    setrlimit(Resource::Nofile, before).unwrap();
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (true, false),
        "{result:?}"
    );
    assert!(text(&result).contains("ulimit -n"), "{result:?}");
    assert_eq!(count(&server.stats.requests), 0);
}

/// The Python SDK server behind Hypercorn over TLS, as behind a CDN's HTTP/2 front: brain trusts
/// the test's CA through `ca_file`, speaks HTTP/2 (chosen by ALPN), keeps one connection, and
/// each call runs once — counted by the server, at both revisions.
#[tokio::test]
async fn the_python_sdk_server_behind_hypercorn_over_tls_and_http2() {
    let ca = tests::tls::TestCa::new();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = ca.write_ca(dir.path());
    let peer = tests::peers::Peer::python_tls(&ca, dir.path());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stats_client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let stats = || async {
        stats_client
            .get(peer.url.replace("/mcp", "/stats"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let mut expected_calls = 0;
    // The binding as discovery pins it: each call is verified against the server's listing.
    let discovery = brain_runtime::discover::discover(&brain_runtime::discover::DiscoverOptions {
        url: peer.url.clone(),
        token: None,
        auth: None,
        timeout: Duration::from_secs(20),
        ca_file: Some(ca_file.clone()),
    })
    .await
    .unwrap();
    let echo = discovery
        .tools
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    let settings = tests::peers::local_settings(&peer.url, &discovery);
    for revision in REVISIONS {
        let mut binding =
            serde_json::to_value(brain_config::discovery::binding_from_tool(echo, &settings))
                .unwrap();
        binding["protocol_version"] = json!(revision);
        binding["ca_file"] = json!(ca_file.to_str().unwrap());
        let text = json!({ "tools": [binding] }).to_string();
        let runtime =
            Runtime::new(&brain_config::parse(text.as_bytes(), "t.json").unwrap()).unwrap();
        let before = stats().await;
        for i in 0..10 {
            let message = format!("{revision} {i}");
            assert_ok(
                &call(&runtime, "echo", json!({"message": message})).await,
                &message,
            );
        }
        let calls = (0..16).map(|i| {
            let runtime = runtime.clone();
            async move { call(&runtime, "echo", json!({"message": format!("par {i}")})).await }
        });
        for result in futures_util::future::join_all(calls).await {
            assert_ok(&result, "par");
        }
        runtime.wait_for_cleanup().await;
        expected_calls += 26;
        let after = stats().await;
        assert_eq!(after["calls"], expected_calls, "{revision}: {after}");
        let h2 = |s: &Value| s["requests"]["2"].as_u64().unwrap_or_default();
        let h1 = |s: &Value| s["requests"]["1.1"].as_u64().unwrap_or_default();
        // brain's requests all went over HTTP/2 (`/stats` itself is not counted), on one
        // connection.
        assert!(h2(&after) - h2(&before) >= 26, "{revision}: {after}");
        assert_eq!(h1(&after), h1(&before), "{revision}: {after}");
        let connections = |s: &Value| s["connections"].as_u64().unwrap_or_default();
        assert_eq!(
            connections(&after) - connections(&before),
            1,
            "{revision}: {after}"
        );
    }
}
