//! `brain-harness serve`'s lifecycle, with the fault-injecting test server upstream counting:
//! cancellation by revision, a SIGKILLed serve, two replicas on PostgreSQL, SIGTERM, the end of a
//! session, and the server span.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

mod serving;

use serving::*;

/// A client's cancellation reaches the upstream server: `notifications/cancelled` at a 2025
/// session, and at 2026-07-28 a closed response stream (the client gone). At 2025 a dropped
/// connection is not a cancel: the call finishes into the journal, and the retry gets its answer.
#[test]
fn cancellation_is_relayed_and_a_dropped_2025_connection_is_not_one() {
    let Upstream {
        server,
        config,
        state,
        ..
    } = &upstream();
    let stats = &server.stats;
    let serving = Serving::start(config, state, &[]);

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

    // A client that goes away (SIGKILL) once the server counted its `nth` call.
    let abandon = |mode: &str, seconds: f64, nth: usize| {
        let plan = json!({"url": serving.url, "token": ACME, "mode": mode, "steps": [
            {"call": "slow", "arguments": {"seconds": seconds},
             "meta": {"brain.dev/call_id": format!("gone-{mode}")}},
        ]});
        let mut gone = spawn_client(&plan);
        wait_for(&stats.calls, nth, "the call");
        std::thread::sleep(Duration::from_millis(200));
        gone.kill().unwrap();
        gone.wait().unwrap();
    };

    // 2026-07-28: the client goes away mid-call; its closed stream cancels the call.
    abandon("auto", 5.0, 3);
    wait_for(
        &stats.cancelled_runs,
        3,
        "the cancellation of a call whose stream closed",
    );

    // 2025: the client goes away mid-call; the call runs to its end, and the retry is answered
    // from the journal.
    abandon("legacy", 1.5, 4);
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
    let Upstream {
        server,
        config,
        state,
        ..
    } = &upstream();
    let stats = &server.stats;
    for (n, mode) in ["legacy", "auto"].into_iter().enumerate() {
        let serving = Serving::start(config, state, &[]);
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
        let serving = Serving::start(config, state, &[]);
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
    let Upstream { server, config, .. } = &upstream();
    let stats = &server.stats;
    let one = Serving::start(config, &cluster.url, &[]);
    let two = Serving::start(config, &cluster.url, &[]);
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
    let Upstream {
        server,
        config,
        state,
        ..
    } = &upstream();
    let mut serving = Serving::start(config, state, &[]);
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

/// OpenTelemetry as for `call`: each client request is a SERVER span that continues the
/// client's trace (its `_meta.traceparent`), and brain's CLIENT span for the upstream call is its
/// child.
#[test]
fn a_served_call_is_a_server_span_in_the_client_s_trace() {
    let Upstream {
        config,
        state,
        tokio,
        ..
    } = &upstream();
    let collector = tokio.block_on(tests::otlp::Collector::start()).unwrap();
    let serving = Serving::start(
        config,
        state,
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

/// The end of a 2025 session (HTTP DELETE) cancels its call in flight upstream.
#[test]
fn deleting_a_session_cancels_its_call() {
    let Upstream {
        server,
        config,
        state,
        ..
    } = &upstream();
    let serving = Serving::start(config, state, &[]);
    let authority = serving.authority();
    let acme = format!("Bearer {ACME}");
    let (status, head, _) = post(&authority, &[("Authorization", &acme)]);
    assert_eq!(status, 200);
    let session = session_id(&head);
    let headers = |session: &str| {
        vec![
            ("Authorization".to_owned(), acme.clone()),
            ("Mcp-Session-Id".to_owned(), session.to_owned()),
            ("Mcp-Protocol-Version".to_owned(), "2025-11-25".to_owned()),
        ]
    };
    let send = |body: Value| {
        let headers = headers(&session);
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        post_body(&authority, &pairs, &body.to_string())
    };
    let (status, _, _) = send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(status, 202);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 10}}});
    let caller = {
        let authority = authority.clone();
        let headers = headers(&session);
        std::thread::spawn(move || {
            let pairs: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            post_body(&authority, &pairs, &call.to_string())
        })
    };
    wait_for(&server.stats.calls, 1, "the call");
    let mut stream = TcpStream::connect(&authority).unwrap();
    write!(
        stream,
        "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: {acme}\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 2"), "{response}");
    wait_for(
        &server.stats.cancelled_runs,
        1,
        "the upstream run's cancellation",
    );
    let _ = caller.join();
}
