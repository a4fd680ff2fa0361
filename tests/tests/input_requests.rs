//! The server asks for user input (spec, "Results and errors", row 3): the call fails with
//! `unknown_outcome: true` and exactly one `tools/call` reaches the server — at 2025-11-25 (a
//! server request on the session, answered with a JSON-RPC error, then the call cancelled) and at
//! 2026-07-28 (an `input_required` result with `inputRequests`, and nothing more sent). An
//! `input_required` result without input requests is a continuation, not a request for input.
//! `on_input_request: "decline"` (per binding) declines elicitations and goes on; sampling and
//! roots still fail.
//!
//! Every test asserts `(is_error, unknown_outcome, tools/call count)`.

use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use brain_runtime::Runtime;
use serde_json::{Value, json};
use tests::client::{call, config, eventually, text};
use tests::server::{Faults, Stats, TestServer};

const SESSION: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";

/// A runtime over every test-server tool pinned to `revision`, with `on_input_request` when given.
fn runtime(url: &str, revision: &str, on_input_request: Option<&str>) -> Runtime {
    let config = config(url, |_, binding| {
        binding["protocol_version"] = json!(revision);
        binding["timeout_seconds"] = json!(20);
        if let Some(choice) = on_input_request {
            binding["on_input_request"] = json!(choice);
        }
    });
    Runtime::new(&config).unwrap()
}

fn count(counter: &AtomicUsize) -> usize {
    Stats::get(counter)
}

/// Calls `tool` and checks `(is_error, unknown_outcome, tools/call count)` and the message.
async fn check(
    revision: &str,
    on_input_request: Option<&str>,
    tool: &str,
    arguments: Value,
    expected: (bool, bool, usize),
    needle: &str,
) -> TestServer {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let runtime = runtime(&server.url, revision, on_input_request);
    let result = call(&runtime, tool, arguments).await;
    let seen = (
        result.is_error,
        result.unknown_outcome,
        count(&server.stats.calls),
    );
    assert_eq!(seen, expected, "{tool} at {revision}: {result:?}");
    assert!(
        text(&result).contains(needle),
        "{needle:?} not in {result:?}"
    );
    server
}

// Default (`on_input_request` absent, i.e. "fail"): the call fails, unknown outcome, one call.

#[tokio::test]
async fn session_elicitation_fails_the_call_and_the_server_is_answered_then_cancelled() {
    let server = check(
        SESSION,
        None,
        "elicit",
        json!({}),
        (true, true, 1),
        "asked for user input (elicitation/create: \"Approve?\")",
    )
    .await;
    // Answered with a JSON-RPC error, so it does not wait; then the request was cancelled.
    assert_eq!(count(&server.stats.client_answers), 1);
    assert_eq!(eventually(&server.stats.cancellations, 1).await, 1);
}

#[tokio::test]
async fn session_sampling_and_roots_fail_the_call() {
    for (tool, method) in [
        ("sample", "sampling/createMessage"),
        ("roots", "roots/list"),
    ] {
        let server = check(SESSION, None, tool, json!({}), (true, true, 1), method).await;
        assert_eq!(count(&server.stats.client_answers), 1, "{tool}");
        assert_eq!(
            eventually(&server.stats.cancellations, 1).await,
            1,
            "{tool}"
        );
    }
}

#[tokio::test]
async fn stateless_input_requests_fail_the_call_and_nothing_more_is_sent() {
    for (ask, method) in [
        ("elicitation", "elicitation/create: \"Go ahead?\""),
        ("sampling", "sampling/createMessage"),
        ("roots", "roots/list"),
    ] {
        let server = check(
            STATELESS,
            None,
            "input_required",
            json!({"rounds": 1, "ask": ask}),
            (true, true, 1),
            method,
        )
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The listing that verified the pin, then the call's one POST.
        assert_eq!(count(&server.stats.lists), 1, "{ask}");
        assert_eq!(
            count(&server.stats.requests),
            2,
            "{ask}: one POST, nothing after it"
        );
    }
}

#[tokio::test]
async fn the_failure_says_how_to_opt_in() {
    for revision in [SESSION, STATELESS] {
        let (tool, arguments) = if revision == SESSION {
            ("elicit", json!({}))
        } else {
            ("input_required", json!({"rounds": 1, "ask": "elicitation"}))
        };
        check(
            revision,
            Some("fail"),
            tool,
            arguments,
            (true, true, 1),
            "\"on_input_request\": \"decline\"",
        )
        .await;
    }
}

// A continuation is not a request for user input.

#[tokio::test]
async fn stateless_request_state_without_input_requests_continues() {
    check(
        STATELESS,
        None,
        "input_required",
        json!({"rounds": 2}),
        (false, false, 3),
        "completed after 2 rounds, input responses: null",
    )
    .await;
}

// Opt-in: `on_input_request: "decline"` declines elicitations; sampling and roots still fail.

#[tokio::test]
async fn session_decline_answers_the_elicitation_and_the_call_completes() {
    let server = check(
        SESSION,
        Some("decline"),
        "elicit",
        json!({}),
        (false, false, 1),
        "Decline",
    )
    .await;
    assert_eq!(count(&server.stats.client_answers), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(count(&server.stats.cancellations), 0);
}

#[tokio::test]
async fn stateless_decline_continues_with_a_declined_elicitation() {
    check(
        STATELESS,
        Some("decline"),
        "input_required",
        json!({"rounds": 1, "ask": "elicitation"}),
        (false, false, 2),
        r#"{"approval":{"action":"decline"}}"#,
    )
    .await;
}

#[tokio::test]
async fn decline_still_fails_sampling_and_roots() {
    for (tool, method) in [
        ("sample", "sampling/createMessage"),
        ("roots", "roots/list"),
    ] {
        check(
            SESSION,
            Some("decline"),
            tool,
            json!({}),
            (true, true, 1),
            method,
        )
        .await;
    }
    for (ask, method) in [
        ("sampling", "sampling/createMessage"),
        ("roots", "roots/list"),
    ] {
        check(
            STATELESS,
            Some("decline"),
            "input_required",
            json!({"rounds": 1, "ask": ask}),
            (true, true, 1),
            method,
        )
        .await;
    }
}
