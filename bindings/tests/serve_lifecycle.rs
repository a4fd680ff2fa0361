//! `brain-harness serve`'s lifecycle, with the fault-injecting test server upstream counting:
//! cancellation by revision, a SIGKILLed serve, two replicas on PostgreSQL, SIGTERM, the end of a
//! session (its owner's DELETE, its idle expiry), the server span, and `/ready` under a flood.

#![allow(clippy::print_stderr)] // the calls' medians under a flood of `/ready`, printed for the record

use std::process::Command;
use std::time::{Duration, Instant};

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
    let started = Instant::now();
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
    let deadline = Instant::now() + Duration::from_secs(20);
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
        assert!(Instant::now() < deadline, "no spans arrived");
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

/// serve's log lines (JSON) of the calls with the client's `call_id`, in order.
fn logged(stderr: &str, call_id: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"] == "tools/call" && line["call_id"] == call_id)
        .collect()
}

/// What `handle` returned, if it finished within `within`.
fn joined<T>(handle: std::thread::JoinHandle<T>, within: Duration) -> Option<T> {
    let deadline = Instant::now() + within;
    while !handle.is_finished() {
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    handle.join().ok()
}

/// The end of a 2025 session by its owner's DELETE withdraws its calls: a call already sent runs
/// to its result upstream (not cancelled), which a retry with the same call id on another session
/// gets from the journal; a call not yet claimed (waiting for its binding's concurrency slot) is
/// never sent, and leaves no slot held. Another client's DELETE is a 404 and ends nothing.
#[test]
fn deleting_a_session_withdraws_unclaimed_calls_and_keeps_sent_ones() {
    let Upstream {
        server,
        config,
        state,
        ..
    } = &upstream_with(
        |_| {},
        |name, binding| {
            if name == "slow" {
                binding["limits"] = json!({"concurrent": 1, "wait_seconds": 30});
            }
        },
    );
    let stats = &server.stats;
    let count = |counter: &std::sync::atomic::AtomicUsize| tests::server::Stats::get(counter);
    let serving = Serving::start(config, state, &[]);
    let authority = serving.authority();

    // A sent call: the DELETE answers, the session is gone, the call runs on upstream.
    let first = RawSession::open(&authority, ACME);
    let sent = first.spawn_call("slow", json!({"seconds": 2.5}), "sent-then-deleted");
    wait_for(&stats.calls, 1, "the call");
    let sent_at = Instant::now();
    let (status, response) = first.delete_as(ACME);
    assert!((200..300).contains(&status), "{response}");
    assert_eq!(first.ping(), 404, "the deleted session is gone");
    std::thread::sleep(
        (sent_at + Duration::from_millis(3500)).saturating_duration_since(Instant::now()),
    );
    assert_eq!(
        count(&stats.cancelled_runs),
        0,
        "the sent call is not cancelled upstream: {}",
        serving.stderr()
    );
    assert_eq!(count(&stats.running), 0, "the upstream run completed");
    // The caller's response ended with its session (no connection left hanging).
    let (status, answer) =
        joined(sent, Duration::from_secs(2)).expect("the deleted session's response ended");
    assert_eq!(status, 200, "{answer}");
    // Its result is in the journal: the retry, on another session, is replayed.
    let second = RawSession::open(&authority, ACME);
    let (status, retry) = second.call("slow", json!({"seconds": 2.5}), "sent-then-deleted");
    assert_eq!(status, 200, "{retry}");
    assert_eq!(outcome(&retry)["replayed"], json!(true), "{retry}");
    assert_eq!(retry["result"]["isError"], json!(false), "{retry}");
    assert_eq!(text(&retry), "slept", "{retry}");
    assert_eq!(count(&stats.calls), 1, "sent once");

    // An unclaimed call: it waits for `slow`'s one slot, held by another session's call; its
    // session's DELETE withdraws it, and it is never sent.
    let holder = second.spawn_call("slow", json!({"seconds": 3}), "holder");
    wait_for(&stats.calls, 2, "the holder's call");
    let third = RawSession::open(&authority, ACME);
    let waiting = third.spawn_call("slow", json!({"seconds": 0.2}), "unclaimed");
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(count(&stats.calls), 2, "the second call waits for the slot");
    assert!(!waiting.is_finished(), "the second call waits for the slot");
    let (status, response) = third.delete_as(ACME);
    assert!((200..300).contains(&status), "{response}");
    let (status, held) = joined(holder, Duration::from_secs(10)).expect("the holder's answer");
    assert_eq!(status, 200, "{held}");
    assert_eq!(text(&held), "slept", "{held}");
    // Once the slot is free, the withdrawn call does not take it.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        count(&stats.calls),
        2,
        "the withdrawn call is never sent: {}",
        serving.stderr()
    );
    let (status, answer) =
        joined(waiting, Duration::from_secs(2)).expect("the deleted session's response ended");
    assert_eq!(status, 200, "{answer}");
    // No slot is left held: the next call runs at once.
    let started = Instant::now();
    let (status, next) = second.call("slow", json!({"seconds": 0.2}), "after-the-withdrawal");
    assert_eq!(status, 200, "{next}");
    assert_eq!(text(&next), "slept", "{next}");
    assert_eq!(outcome(&next)["replayed"], json!(false), "{next}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the slot was free: {:?}",
        started.elapsed()
    );
    assert_eq!(count(&stats.calls), 3);
    assert_eq!(count(&stats.cancelled_runs), 0);

    // Another client's DELETE of acme's session: 404, and the session lives on.
    let (status, response) = second.delete_as(GLOBEX);
    assert_eq!(status, 404, "{response}");
    assert_eq!(second.ping(), 200, "acme's session is still open");
    let (status, echoed) = second.call("echo", json!({"message": "still here"}), "still-here");
    assert_eq!(status, 200, "{echoed}");
    assert_eq!(text(&echoed), "still here", "{echoed}");
    assert_eq!(count(&stats.calls), 4);

    // serve's log: the sent call ran to its result; the unclaimed one was cancelled, unsent, at
    // the DELETE (not at the end of its wait, ~3 s after it began).
    let stderr = serving.stderr();
    let sent = &logged(&stderr, "sent-then-deleted")[0];
    assert_eq!(sent["is_error"], json!(false), "{sent}");
    assert_eq!(sent["replayed"], json!(false), "{sent}");
    let withdrawn = logged(&stderr, "unclaimed");
    assert_eq!(withdrawn.len(), 1, "{stderr}");
    let withdrawn = &withdrawn[0];
    assert_eq!(withdrawn["error_type"], json!("cancelled"), "{withdrawn}");
    assert_eq!(withdrawn["unknown_outcome"], json!(false), "{withdrawn}");
    assert!(
        withdrawn["ms"].as_f64().is_some_and(|ms| ms < 2000.0),
        "withdrawn at the DELETE: {withdrawn}"
    );
}

/// A session without a request in flight or begun for `serve.session_idle_seconds` expires —
/// one whose client went away while its call runs, not one whose client waits for an answer:
/// the call, already sent, is not cancelled upstream but runs to its result, which the retry
/// with the same call id on a new session gets from the journal.
#[test]
fn an_idle_session_expires_and_its_sent_call_is_kept() {
    let Upstream {
        server,
        config,
        state,
        ..
    } = &upstream_with(|serve| serve["session_idle_seconds"] = json!(2), |_, _| {});
    let stats = &server.stats;
    let count = |counter: &std::sync::atomic::AtomicUsize| tests::server::Stats::get(counter);
    let serving = Serving::start(config, state, &[]);
    let authority = serving.authority();
    // A session with a request in flight is not idle: its client waits for the answer.
    let waiting = RawSession::open(&authority, ACME);
    let answered = waiting.spawn_call("slow", json!({"seconds": 3.5}), "idle-waiting");
    // A session whose client went away (at 2025-11-25, not a cancellation) is.
    let session = RawSession::open(&authority, ACME);
    let left = session.call_and_leave("slow", json!({"seconds": 4}), "idle-session");
    wait_for(&stats.calls, 2, "the calls");
    drop(left);
    let sent_at = Instant::now();
    // No request on the session for 2 s (and the reaper's tick): it has expired, though its call
    // still runs.
    std::thread::sleep(Duration::from_millis(3000));
    assert_eq!(count(&stats.running), 2, "both calls still run");
    assert_eq!(session.ping(), 404, "the idle session expired");
    assert_eq!(
        waiting.ping(),
        200,
        "a session with a request in flight did not"
    );
    let (status, answer) = joined(answered, Duration::from_secs(3)).expect("answered");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(text(&answer), "slept", "{answer}");
    std::thread::sleep(
        (sent_at + Duration::from_millis(4800)).saturating_duration_since(Instant::now()),
    );
    assert_eq!(
        count(&stats.cancelled_runs),
        0,
        "the sent call is not cancelled upstream: {}",
        serving.stderr()
    );
    assert_eq!(count(&stats.running), 0, "the upstream runs completed");
    let again = RawSession::open(&authority, ACME);
    let (status, retry) = again.call("slow", json!({"seconds": 4}), "idle-session");
    assert_eq!(status, 200, "{retry}");
    assert_eq!(outcome(&retry)["replayed"], json!(true), "{retry}");
    assert_eq!(text(&retry), "slept", "{retry}");
    assert_eq!(count(&stats.calls), 2, "each sent once");
    let logged = logged(&serving.stderr(), "idle-session");
    assert_eq!(
        logged[0]["is_error"],
        json!(false),
        "ran to its result: {}",
        logged[0]
    );
}

/// `/ready` answers 200 `{"ready": true, "state": "sqlite"}` from the start, from a background
/// probe: a flood of it (4 keep-alive connections for 3 s) is answered 200 and quickly, and does
/// not slow the calls served meanwhile (their median within 2× the quiet one's, plus 10 ms).
#[test]
fn ready_answers_from_a_background_probe_and_a_flood_does_not_delay_calls() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let Upstream {
        server,
        config,
        state,
        ..
    } = &upstream();
    let serving = Serving::start(config, state, &[]);
    let authority = serving.authority();
    let (status, body) = Connection::open(&authority).request("GET", "/ready", &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"ready": true, "state": "sqlite"})
    );

    // 40 sequential 2026-07-28 `echo` calls on one keep-alive connection: each one's time.
    let time_calls = |label: &str| -> Vec<Duration> {
        let mut connection = Connection::open(&authority);
        (0..40)
            .map(|n| {
                let id = format!("{label}-{n}");
                let started = Instant::now();
                let (status, message) = connection.call(ACME, "echo", json!({"message": id}), &id);
                let took = started.elapsed();
                assert_eq!(status, 200, "{message}");
                assert_eq!(text(&message), id, "{message}");
                took
            })
            .collect()
    };
    let median = |times: &[Duration]| {
        let mut times = times.to_vec();
        times.sort();
        times[times.len() / 2]
    };
    time_calls("warm-up");
    let quiet = time_calls("quiet");

    let stop = Arc::new(AtomicBool::new(false));
    let flood_started = Instant::now();
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            let (stop, authority) = (Arc::clone(&stop), authority.clone());
            std::thread::spawn(move || {
                let mut connection = Connection::open(&authority);
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let (status, body) = connection.request("GET", "/ready", &[], "");
                    answers.push((status, started.elapsed(), body));
                }
                answers
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let flooded = time_calls("flooded");
    std::thread::sleep(
        (flood_started + Duration::from_secs(3)).saturating_duration_since(Instant::now()),
    );
    stop.store(true, Ordering::Relaxed);
    let answers: Vec<(u16, Duration, String)> = flooders
        .into_iter()
        .flat_map(|flooder| flooder.join().unwrap())
        .collect();
    let flood_time = flood_started.elapsed();

    let (quiet_median, flooded_median) = (median(&quiet), median(&flooded));
    let mut latencies: Vec<Duration> = answers.iter().map(|(_, took, _)| *took).collect();
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    let slowest = *latencies.last().unwrap();
    eprintln!(
        "echo median: {quiet_median:?} quiet, {flooded_median:?} under the flood; /ready: {} \
         answers in {flood_time:?}, median {:?}, p99 {p99:?}, max {slowest:?}",
        answers.len(),
        median(&latencies),
    );
    if let Some((status, _, body)) = answers.iter().find(|(status, _, _)| *status != 200) {
        panic!("a /ready in the flood answered {status}: {body}");
    }
    assert!(answers.len() >= 1000, "{} /ready answers", answers.len());
    assert!(
        slowest < Duration::from_secs(1),
        "/ready answers quickly: {slowest:?}"
    );
    assert!(
        flooded_median <= quiet_median * 2 + Duration::from_millis(10),
        "a flood of /ready delays calls: median {flooded_median:?} against {quiet_median:?}"
    );
    assert_eq!(tests::server::Stats::get(&server.stats.calls), 120);
}

/// Four serve replicas on one PostgreSQL, 250 calls through each, tenants acme and globex
/// interleaved, and a fifth replica SIGKILLed mid-call whose call a retry through another
/// replica finds unknown: every chain links with no gap and no fork (`audit verify` holds with
/// the replicas' public key), holds exactly each call's claim and outcome, and the killed call's
/// chain ends "taken over as unknown".
#[test]
fn replicas_on_postgresql_keep_one_chain_per_tenant() {
    use serving::hostile::call;
    let cluster = tests::postgres::Cluster::start();
    let Upstream {
        server,
        config,
        dir,
        ..
    } = &upstream();
    let (private, public) = tests::audit::openssl_key_pair(dir.path(), "audit");
    let key = [("BRAIN_AUDIT_KEY_FILE", private.to_str().unwrap())];
    let replicas: Vec<Serving> = (0..4)
        .map(|_| Serving::start(config, &cluster.url, &key))
        .collect();

    // A fifth replica, killed while its call runs; the retry lands on another.
    let doomed = Serving::start(config, &cluster.url, &key);
    let authority = doomed.authority();
    let slow = std::thread::spawn(move || {
        let _ = std::panic::catch_unwind(|| {
            call(
                &authority,
                ACME,
                "slow",
                json!({"seconds": 30}),
                json!({"brain.dev/call_id": "killed"}),
            )
        });
    });
    wait_for(&server.stats.calls, 1, "the slow call");
    drop(doomed); // SIGKILL
    let _ = slow.join();

    let threads: Vec<_> = replicas
        .iter()
        .enumerate()
        .map(|(n, replica)| {
            let authority = replica.authority();
            std::thread::spawn(move || {
                for i in 0..250 {
                    let token = if i % 2 == 0 { ACME } else { GLOBEX };
                    let id = format!("r{n}-{i}");
                    let result = call(
                        &authority,
                        token,
                        "echo",
                        json!({"message": id}),
                        json!({"brain.dev/call_id": id}),
                    );
                    assert_eq!(result["isError"], json!(false), "{result}");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(tests::server::Stats::get(&server.stats.calls), 1001);
    // The killed call, once its owner's lease lapsed: unknown, not sent again.
    std::thread::sleep(Duration::from_secs(6));
    let retry = call(
        &replicas[0].authority(),
        ACME,
        "slow",
        json!({"seconds": 30}),
        json!({"brain.dev/call_id": "killed"}),
    );
    assert_eq!(
        retry["_meta"]["brain.dev/outcome"]["unknown_outcome"],
        json!(true),
        "{retry}"
    );
    assert_eq!(tests::server::Stats::get(&server.stats.calls), 1001);
    drop(replicas);

    let harness = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args(["--config", config, "--state", &cluster.url, "audit"])
            .args(args)
            .env_remove("BRAIN_AUDIT_KEY_FILE")
            .output()
            .unwrap()
    };
    let verified = harness(&["verify", "--public-key", public.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert_eq!(verified.status.code(), Some(0), "{said}{verified:?}");
    assert!(said.contains("verified 2002 records in 2 chains"), "{said}");
    let exported = harness(&["export", "--tenant", "acme"]);
    let records: Vec<Value> = String::from_utf8_lossy(&exported.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["type"] == "audit.record")
        .map(|line| serde_json::from_str(line["record"].as_str().unwrap()).unwrap())
        .collect();
    let seqs: Vec<i64> = records.iter().map(|r| r["seq"].as_i64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=records.len() as i64).collect::<Vec<_>>(),
        "no gap, no fork"
    );
    // Its upstream call id (serve derives one per tenant and session): the one `slow` claim.
    let slow = &records.iter().find(|r| r["binding"] == "slow").unwrap()["call_id"];
    let killed: Vec<&str> = records
        .iter()
        .filter(|r| r["call_id"] == *slow)
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(killed, ["claimed", "taken_over_as_unknown"], "{records:?}");
}
