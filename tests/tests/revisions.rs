//! Protocol revisions: a binding that pins one requires exactly it (a mismatch fails before
//! `tools/call`, `unknown_outcome: false`, saying what the server offered and how to re-pin); a
//! binding that pins none accepts any revision brain speaks — 2024-11-05 to 2025-11-25 over
//! sessions, 2026-07-28 without — and each revision gets what it defines on the wire (the
//! `MCP-Protocol-Version` header only from 2025-06-18 on).

use std::sync::atomic::AtomicUsize;

use brain_runtime::Runtime;
use serde_json::json;
use tests::client::{call, config, text};
use tests::server::{Faults, Stats, TestServer, bindings_json};

fn runtime(url: &str, revision: Option<&str>) -> Runtime {
    let config = config(url, |_, binding| {
        if let Some(revision) = revision {
            binding["protocol_version"] = json!(revision);
            if revision < "2025-06-18" {
                // Those revisions have no structured content (rule output-schema-before-structured).
                binding.as_object_mut().unwrap().remove("output_schema");
            }
        }
        binding["timeout_seconds"] = json!(20);
    });
    Runtime::new(&config).unwrap()
}

fn count(counter: &AtomicUsize) -> usize {
    Stats::get(counter)
}

fn lock<T: Clone>(mutex: &std::sync::Mutex<T>) -> T {
    mutex.lock().unwrap().clone()
}

#[tokio::test]
async fn each_session_revision_gets_its_own_wire() {
    for (revision, header) in [
        ("2024-11-05", None),
        ("2025-03-26", None),
        ("2025-06-18", Some("2025-06-18")),
        ("2025-11-25", Some("2025-11-25")),
    ] {
        let server = TestServer::start(Faults::default()).await.unwrap();
        let runtime = runtime(&server.url, Some(revision));
        let result = call(&runtime, "echo", json!({"message": "hi"})).await;
        assert_eq!(
            (result.is_error, text(&result).as_str()),
            (false, "hi"),
            "{revision}"
        );
        let result = call(&runtime, "progress", json!({"steps": 2})).await;
        assert_eq!(text(&result), "done 2 steps", "{revision}");
        assert_eq!(lock(&server.stats.offered_revisions), [revision, revision]);
        let headers = lock(&server.stats.protocol_headers);
        assert!(!headers.is_empty());
        assert!(
            headers.iter().all(|h| h.as_deref() == header),
            "{revision}: MCP-Protocol-Version headers sent: {headers:?}"
        );
        assert_eq!(count(&server.stats.calls), 2);
        // Before 2025-11-25, brain also listens on the session's GET stream during a call (SDKs
        // of that time send a call's progress there).
        let listens = if revision < "2025-11-25" { 2 } else { 0 };
        assert_eq!(count(&server.stats.listens), listens, "{revision}");
    }
}

#[tokio::test]
async fn an_unpinned_binding_offers_the_newest_session_revision() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let result = call(
        &runtime(&server.url, None),
        "echo",
        json!({"message": "hi"}),
    )
    .await;
    assert_eq!((result.is_error, text(&result).as_str()), (false, "hi"));
    assert_eq!(lock(&server.stats.offered_revisions), ["2025-11-25"]);
}

#[tokio::test]
async fn a_pinned_revision_is_required_exactly() {
    let server = TestServer::start(Faults {
        initialize_revision: Some("2025-06-18".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let result = call(
        &runtime(&server.url, Some("2025-11-25")),
        "echo",
        json!({"message": "x"}),
    )
    .await;
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (true, false),
        "{result:?}"
    );
    let message = text(&result);
    assert!(
        message.contains("the server offered MCP 2025-06-18, but the binding pins 2025-11-25"),
        "{message}"
    );
    assert!(message.contains("cargo xtask discover"), "{message}");
    assert!(message.contains("remove `protocol_version`"), "{message}");
    assert_eq!(count(&server.stats.calls), 0);
}

#[tokio::test]
async fn a_revision_brain_does_not_speak_is_refused_before_the_call() {
    let server = TestServer::start(Faults {
        initialize_revision: Some("2099-01-01".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let result = call(&runtime(&server.url, None), "echo", json!({"message": "x"})).await;
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (true, false),
        "{result:?}"
    );
    assert!(text(&result).contains("offered MCP 2099-01-01, which brain does not speak"));
    assert_eq!(count(&server.stats.calls), 0);
}

#[tokio::test]
async fn an_unpinned_binding_goes_stateless_when_the_server_refuses_sessions() {
    let server = TestServer::start(Faults {
        refuse_sessions: true,
        ..Faults::default()
    })
    .await
    .unwrap();
    let runtime = runtime(&server.url, None);
    let result = call(&runtime, "echo", json!({"message": "hi"})).await;
    assert_eq!(
        (result.is_error, text(&result).as_str()),
        (false, "hi"),
        "{result:?}"
    );
    assert_eq!(
        (count(&server.stats.initializes), count(&server.stats.calls)),
        (1, 1)
    );
    // Learned: the binding's next call goes stateless at once.
    let result = call(&runtime, "echo", json!({"message": "again"})).await;
    assert_eq!(text(&result), "again");
    assert_eq!(
        (count(&server.stats.initializes), count(&server.stats.calls)),
        (1, 2)
    );
    // The tools/list that verified the pin (once: kept for its TTL), then the two calls.
    let headers = lock(&server.stats.protocol_headers);
    let stateless = Some("2026-07-28".to_owned());
    assert_eq!(headers, [stateless.clone(), stateless.clone(), stateless]);
    assert_eq!(count(&server.stats.lists), 1);
}

#[tokio::test]
async fn a_pinned_session_revision_does_not_go_stateless() {
    let server = TestServer::start(Faults {
        refuse_sessions: true,
        ..Faults::default()
    })
    .await
    .unwrap();
    let result = call(
        &runtime(&server.url, Some("2025-11-25")),
        "echo",
        json!({"message": "x"}),
    )
    .await;
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (true, false),
        "{result:?}"
    );
    assert!(text(&result).contains("-32022"), "{result:?}");
    assert_eq!(count(&server.stats.calls), 0);
}

#[tokio::test]
async fn an_older_revision_the_server_answers_is_accepted_and_spoken() {
    let server = TestServer::start(Faults {
        initialize_revision: Some("2025-03-26".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let result = call(
        &runtime(&server.url, None),
        "echo",
        json!({"message": "hi"}),
    )
    .await;
    assert_eq!(
        (result.is_error, text(&result).as_str()),
        (false, "hi"),
        "{result:?}"
    );
    let headers = lock(&server.stats.protocol_headers);
    assert!(headers.iter().all(Option::is_none), "{headers:?}");
}

#[tokio::test]
async fn output_schemas_are_not_expected_before_2025_06_18() {
    // A binding that pins nothing, with an output_schema (the server lists one), whose server
    // speaks 2025-03-26: a result without structured content fails (unknown outcome: the tool
    // ran), saying why.
    let server = TestServer::start(Faults {
        initialize_revision: Some("2025-03-26".into()),
        echo_output_schema: true,
        ..Faults::default()
    })
    .await
    .unwrap();
    let tools = bindings_json(&server.url, |name, binding| {
        if name == "echo" {
            binding["output_schema"] = json!({"type": "object"});
        }
    });
    let config = brain_config::parse(json!({ "tools": tools }).to_string().as_bytes(), "t.json")
        .unwrap_or_else(|e| panic!("{e}"));
    let result = call(
        &Runtime::new(&config).unwrap(),
        "echo",
        json!({"message": "x"}),
    )
    .await;
    assert_eq!(
        (result.is_error, result.unknown_outcome),
        (true, true),
        "{result:?}"
    );
    assert!(
        text(&result).contains("the server speaks MCP 2025-03-26, which has no structured content"),
        "{result:?}"
    );
    assert_eq!(count(&server.stats.calls), 1);

    // Pinning 2025-03-26 with an output_schema is refused by the config compiler.
    let mut weather = bindings_json(&server.url, |_, _| {})
        .into_iter()
        .find(|b| b["name"] == "weather")
        .unwrap();
    weather["protocol_version"] = json!("2025-03-26");
    let rejected =
        brain_config::parse(json!({"tools": [weather]}).to_string().as_bytes(), "t.json")
            .unwrap_err();
    assert!(
        rejected
            .to_string()
            .contains("output-schema-before-structured"),
        "{rejected}"
    );
}
