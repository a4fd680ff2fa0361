//! Policies across real `brain-harness` processes on one state store — the default SQLite file,
//! and a throwaway PostgreSQL cluster — counted at the server: a call the policies deny is
//! refused before the journal (counted 0, no journal entry), an allowed one runs once (counted
//! 1), and its retried call id is replayed from the journal. The decisions themselves, on
//! fixtures and on the corpus's real tools: `brain-config/tests/policies.rs`,
//! `brain-codegen/tests/policies.rs`.

use std::path::Path;

use serde_json::{Value, json};
use tests::server::{Faults, Stats, TestServer};

mod common;

use common::state::{State, on_each_state, postgres, result, sqlite, wait};
use common::write_config;

/// The policies: `huge` (its `bytes` an integer) up to 100 bytes for `local`; `echo` for
/// everyone but never a message that starts with "drop".
const POLICIES: &str = r#"
@id("small-outputs")
@reason("outputs over 100 bytes need a person")
permit (principal == Brain::Tenant::"local", action == Brain::Action::"tool:huge", resource)
when { context.input.bytes <= 100 };

@id("echo")
permit (principal, action == Brain::Action::"tool:echo", resource);

@id("no-drops")
@reason("nothing that looks like a drop")
forbid (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "drop*" };
"#;

async fn setup(dir: &Path) -> (TestServer, String) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir, &server.url, |binding| {
        binding["timeout_seconds"] = json!(30);
    });
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    host["policies"] = json!({"files": ["policies/*.cedar"]});
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("policies/calls.cedar"), POLICIES).unwrap();
    std::fs::write(&config, serde_json::to_string_pretty(&host).unwrap()).unwrap();
    (server, config)
}

fn assert_denied(result: &Value, naming: &str) {
    assert_eq!(result["is_error"], json!(true), "{result}");
    assert_eq!(result["unknown_outcome"], json!(false), "{result}");
    assert_eq!(result["kind"], json!("policy_denied"), "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains(naming), "{result}");
}

async fn denied_calls_are_never_sent_and_allowed_ones_run_once(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path()).await;
    let call = |id: &str, tool: &str, args: &str| wait(state.start(&config, id, tool, args));

    let over = call("over", "huge", r#"{"bytes": 101}"#).await;
    assert_eq!(over.status.code(), Some(1));
    assert_denied(
        &result(&over),
        r#"no policy permits "huge" for Brain::Tenant::"local""#,
    );
    let forbidden = result(&call("drop", "echo", r#"{"message": "drop table"}"#).await);
    assert_denied(
        &forbidden,
        r#"forbid "no-drops" (nothing that looks like a drop)"#,
    );
    assert_eq!(
        Stats::get(&server.stats.calls),
        0,
        "a denied call is never sent"
    );

    let under = call("under", "huge", r#"{"bytes": 100}"#).await;
    assert_eq!(
        under.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&under.stderr)
    );
    let under = result(&under);
    assert_eq!(under["is_error"], json!(false), "{under}");
    assert_eq!(Stats::get(&server.stats.calls), 1);
    // The retried id is answered from the journal, as any journaled call: counted once.
    let again = result(&call("under", "huge", r#"{"bytes": 100}"#).await);
    assert_eq!(again["replayed"], json!(true), "{again}");
    assert_eq!(Stats::get(&server.stats.calls), 1);

    // A denied call left no journal entry: its id is free for an allowed call.
    let journal = state
        .command()
        .args(["journal", "--json", "--call-id", "over"])
        .output()
        .unwrap();
    assert!(
        journal.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&journal.stdout)
    );
    let reused = result(&call("over", "huge", r#"{"bytes": 5}"#).await);
    assert_eq!(reused["is_error"], json!(false), "{reused}");
    assert_eq!(Stats::get(&server.stats.calls), 2);
}

on_each_state!(denied_calls_are_never_sent_and_allowed_ones_run_once);

/// `brain-harness tools --tenant` hides what no permit's scope matches (here every tool but `huge`
/// and `echo`), never a tool whose calls depend on their arguments; without `--tenant`, all.
#[tokio::test]
async fn tools_lists_what_the_policies_may_permit() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, config) = setup(dir.path()).await;
    let names = async |args: &[&str]| {
        let args = [&["--config", config.as_str(), "tools", "--json"], args].concat();
        let output = common::harness(&args, &[]).await;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    let mut local = names(&["--tenant", "local"]).await;
    local.sort();
    assert_eq!(local, ["echo", "huge"]);
    assert!(
        names(&[]).await.len() > 10,
        "every binding without --tenant"
    );
}
