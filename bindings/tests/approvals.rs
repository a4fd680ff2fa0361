//! Approvals across real `brain-harness` processes on one state store — the default SQLite
//! file, and a throwaway PostgreSQL cluster — counted at the server. A call an `@approval`
//! policy holds is refused `approval_required` and never sent; an approver, from another
//! process with its token, approves it; the same call (call id, arguments, session) then runs
//! once, and is replayed after. What the approval is bound to is tried as an attacker would:
//! other arguments, another session, another tenant's approver, no token, the requesting
//! principal approving its own call, an expired approval, a changed policy, two replicas
//! retrying at once, a harness killed mid-call.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tests::server::{Faults, Stats, TestServer};

mod common;

use common::state::{State, on_each_state, postgres, result, sqlite, until_running, wait};
use common::write_config;

/// `echo` runs freely unless its message starts with "refund"; then it needs a person. `slow`
/// always does.
const POLICIES: &str = r#"
@id("echo")
permit (principal, action == Brain::Action::"tool:echo", resource)
when { !(context.input.message like "refund*") };

@id("refunds-need-a-person")
@reason("a refund needs a person's approval")
@approval
permit (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "refund*" && context.call.approval.granted == true };

@id("slow-needs-a-person")
@approval
permit (principal, action == Brain::Action::"tool:slow", resource)
when { context.call.approval.granted == true };
"#;

const OPS_TOKEN: &str = "ops-approver-token-1";
const OTHER_TOKEN: &str = "other-tenant-approver-token";
/// An approver whose name is the calling tenant's own: the principal approving its own call.
const SELF_TOKEN: &str = "the-tenant-itself";

fn sha256(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn setup(dir: &Path, expires_seconds: u64) -> (TestServer, String) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir, &server.url, |binding| {
        binding["timeout_seconds"] = json!(30);
        binding["tenants"] = json!(["local", "other"]);
    });
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    host["policies"] = json!({"files": ["policies/*.cedar"]});
    host["approvals"] = json!({
        "expires_seconds": expires_seconds,
        "approvers": [
            {"name": "ops", "tenants": ["local"], "token_sha256": sha256(OPS_TOKEN)},
            {"name": "other-ops", "tenants": ["other"], "token_sha256": sha256(OTHER_TOKEN)},
            {"name": "local", "tenants": ["local"], "token_sha256": sha256(SELF_TOKEN)},
        ],
    });
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("policies/calls.cedar"), POLICIES).unwrap();
    std::fs::write(&config, serde_json::to_string_pretty(&host).unwrap()).unwrap();
    (server, config)
}

/// `brain-harness call` in `session`, started.
fn start(
    state: &State,
    config: &str,
    session: &str,
    id: &str,
    tool: &str,
    args: &str,
) -> std::process::Child {
    state
        .command()
        .args([
            "--config",
            config,
            "call",
            "--tenant",
            "local",
            "--session",
            session,
        ])
        .args(["--call-id", id, tool, args])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("brain-harness starts")
}

async fn call(
    state: &State,
    config: &str,
    session: &str,
    id: &str,
    tool: &str,
    args: &str,
) -> Value {
    result(&wait(start(state, config, session, id, tool, args)).await)
}

/// `brain-harness approvals ARGS…` with `token` (none: no variable, empty stdin).
async fn approvals(state: &State, config: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut command: Command = state.command();
    command
        .args(["--config", config, "approvals"])
        .args(args)
        .env_remove("BRAIN_APPROVER_TOKEN")
        .stdin(Stdio::null());
    if let Some(token) = token {
        command.env("BRAIN_APPROVER_TOKEN", token);
    }
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn held(result: &Value) -> String {
    assert_eq!(result["is_error"], json!(true), "{result}");
    assert_eq!(result["unknown_outcome"], json!(false), "{result}");
    assert_eq!(result["kind"], json!("approval_required"), "{result}");
    result["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no approval id: {result}"))
        .to_owned()
}

fn ok(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn refused(output: &Output, naming: &str) {
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(naming), "{stderr}");
}

async fn an_approved_call_runs_once_and_only_as_approved(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path(), 3600).await;
    let refund = r#"{"message": "refund 10"}"#;
    let calls = || Stats::get(&server.stats.calls);

    let first = call(&state, &config, "s1", "r1", "echo", refund).await;
    let id = held(&first);
    assert_eq!(calls(), 0, "a held call is never sent");
    // Asked again before a decision: the same pending approval, still not sent.
    assert_eq!(
        held(&call(&state, &config, "s1", "r1", "echo", refund).await),
        id
    );
    assert_eq!(calls(), 0);

    // What the approver sees: the call and its arguments; not another tenant's approver.
    let listed = ok(&approvals(&state, &config, Some(OPS_TOKEN), &["list", "--json"]).await);
    let listed: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], json!(id));
    assert_eq!(listed[0]["arguments"], json!({"message": "refund 10"}));
    assert_eq!(listed[0]["call_id"], json!("r1"));
    let other = ok(&approvals(&state, &config, Some(OTHER_TOKEN), &["list", "--json"]).await);
    assert!(
        other.is_empty(),
        "another tenant's approver sees nothing: {other}"
    );
    refused(
        &approvals(&state, &config, Some(OTHER_TOKEN), &["approve", &id]).await,
        "is not pending for this approver",
    );
    // No token, a wrong one, the requesting principal itself: refused, nothing decided.
    refused(
        &approvals(&state, &config, None, &["approve", &id]).await,
        "no approver token",
    );
    refused(
        &approvals(&state, &config, Some("guess"), &["approve", &id]).await,
        "matches no approver",
    );
    refused(
        &approvals(&state, &config, Some(SELF_TOKEN), &["approve", &id]).await,
        "another approver must decide it",
    );
    assert_eq!(
        held(&call(&state, &config, "s1", "r1", "echo", refund).await),
        id
    );

    let approved = ok(&approvals(
        &state,
        &config,
        Some(OPS_TOKEN),
        &["approve", &id, "--json"],
    )
    .await);
    let approved: Value = serde_json::from_str(approved.trim()).unwrap();
    assert_eq!(approved["state"], json!("approved"), "{approved}");
    assert_eq!(approved["decided_by"], json!("ops"), "{approved}");
    assert_eq!(
        approved["arguments"],
        Value::Null,
        "decided: its arguments are gone"
    );

    // Other arguments under the same call id, the same call in another session: not approved.
    let other_args = call(
        &state,
        &config,
        "s1",
        "r1",
        "echo",
        r#"{"message": "refund 10000"}"#,
    )
    .await;
    assert_ne!(held(&other_args), id);
    assert_ne!(
        held(&call(&state, &config, "s2", "r1", "echo", refund).await),
        id
    );
    assert_eq!(calls(), 0);

    // Two replicas retry at once: it runs once.
    let (a, b) = (
        start(&state, &config, "s1", "r1", "echo", refund),
        start(&state, &config, "s1", "r1", "echo", refund),
    );
    let (a, b) = (result(&wait(a).await), result(&wait(b).await));
    assert_eq!(calls(), 1, "{a} {b}");
    for ran in [&a, &b] {
        assert_eq!(ran["is_error"], json!(false), "{ran}");
    }
    // A third retry is replayed from the journal; the approval is used.
    let third = call(&state, &config, "s1", "r1", "echo", refund).await;
    assert_eq!(third["replayed"], json!(true), "{third}");
    assert_eq!(calls(), 1);
    let shown = ok(&approvals(&state, &config, Some(OPS_TOKEN), &["show", &id, "--json"]).await);
    assert_eq!(
        serde_json::from_str::<Value>(shown.trim()).unwrap()["state"],
        json!("used")
    );
    // The same call id with other arguments now meets the journal: a conflict, not sent.
    let conflict = call(
        &state,
        &config,
        "s1",
        "r1",
        "echo",
        r#"{"message": "refund 10000"}"#,
    )
    .await;
    assert_eq!(conflict["kind"], json!("journal_conflict"), "{conflict}");
    assert_eq!(calls(), 1);

    // A denied approval refuses its call.
    let denied = held(&call(&state, &config, "s1", "r2", "echo", refund).await);
    ok(&approvals(&state, &config, Some(OPS_TOKEN), &["deny", &denied]).await);
    let after = call(&state, &config, "s1", "r2", "echo", refund).await;
    assert_eq!(after["kind"], json!("policy_denied"), "{after}");
    assert!(
        after["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("\"ops\" denied")
    );
    assert_eq!(calls(), 1);
}

async fn an_expired_approval_or_a_changed_policy_refuses_the_retry(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path(), 2).await;
    let refund = r#"{"message": "refund 10"}"#;

    let id = held(&call(&state, &config, "s1", "late", "echo", refund).await);
    ok(&approvals(&state, &config, Some(OPS_TOKEN), &["approve", &id]).await);
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    let late = held(&call(&state, &config, "s1", "late", "echo", refund).await);
    assert_ne!(late, id, "an expired approval is never used");

    let id = held(&call(&state, &config, "s1", "changed", "echo", refund).await);
    ok(&approvals(&state, &config, Some(OPS_TOKEN), &["approve", &id]).await);
    let cedar = dir.path().join("policies/calls.cedar");
    let changed = format!("{POLICIES}\n// reviewed again\n");
    std::fs::write(&cedar, changed).unwrap();
    let again = held(&call(&state, &config, "s1", "changed", "echo", refund).await);
    assert_ne!(again, id, "an approval under other policies is never used");

    // The binding re-pinned (here unpinned: its input schema, which its identity hashes
    // instead, changed) after the approval: the retry asks again.
    ok(&approvals(&state, &config, Some(OPS_TOKEN), &["approve", &again]).await);
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    for tool in host["tools"].as_array_mut().unwrap() {
        if tool["name"] == "echo" {
            tool["input_schema"]["description"] = json!("re-pinned");
        }
    }
    std::fs::write(&config, host.to_string()).unwrap();
    let repinned = held(&call(&state, &config, "s1", "changed", "echo", refund).await);
    assert_ne!(
        repinned, again,
        "an approval of another binding is never used"
    );
    assert_eq!(Stats::get(&server.stats.calls), 0);
}

/// An attacker with the store's own client (`sqlite3`, `psql`) runs `sql` on the state store.
fn tamper(state: &State, sql: &str) {
    let mut command = match state {
        State::Default(dir) => {
            let mut command = Command::new("sqlite3");
            command.arg(dir.path().join("brain/state.db"));
            command.arg(sql);
            command
        }
        State::Postgres(cluster) => {
            let mut command = Command::new("psql");
            command.args([cluster.url.as_str(), "-v", "ON_ERROR_STOP=1", "-c", sql]);
            command
        }
    };
    let output = command.output().expect("the store's client runs");
    assert!(output.status.success(), "{sql}: {output:?}");
}

/// What the approver is shown is what it approves. An attacker who can write the store shows
/// it a small refund while the held call asks a large one: `approve` refuses, nothing runs.
/// Copying a small refund's arguments and digest over the large one's makes the approval one
/// of the small call: the large call is never run by it.
async fn an_approval_edited_in_the_store_approves_nothing_else(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path(), 3600).await;
    let large = r#"{"message": "refund 10000"}"#;
    let small = r#"{"message": "refund 10"}"#;
    let id = held(&call(&state, &config, "s1", "big", "echo", large).await);
    tamper(
        &state,
        &format!(
            "UPDATE brain_approvals SET arguments = '{{\"message\":\"refund 10\"}}' WHERE id = '{id}'"
        ),
    );
    let shown = ok(&approvals(&state, &config, Some(OPS_TOKEN), &["show", &id, "--json"]).await);
    let shown: Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(
        shown["arguments"],
        json!({"message": "refund 10"}),
        "the lie"
    );
    refused(
        &approvals(&state, &config, Some(OPS_TOKEN), &["approve", &id]).await,
        "that are not the held call's",
    );
    assert_eq!(
        held(&call(&state, &config, "s1", "big", "echo", large).await),
        id
    );

    // The small call's arguments and digest copied over: approving it approves the small call.
    let decoy = held(&call(&state, &config, "s1", "decoy", "echo", small).await);
    tamper(
        &state,
        &format!(
            "UPDATE brain_approvals SET (arguments, digest) = (SELECT arguments, digest FROM \
             brain_approvals WHERE id = '{decoy}') WHERE id = '{id}'"
        ),
    );
    ok(&approvals(&state, &config, Some(OPS_TOKEN), &["approve", &id]).await);
    let retry = held(&call(&state, &config, "s1", "big", "echo", large).await);
    assert_ne!(retry, id, "the large refund asks again");
    assert_eq!(Stats::get(&server.stats.calls), 0, "nothing ran");
}

async fn a_harness_killed_after_approval_leaves_a_journaled_call(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path(), 3600).await;
    let slow = r#"{"seconds": 30}"#;
    let id = held(&call(&state, &config, "s1", "k1", "slow", slow).await);
    ok(&approvals(&state, &config, Some(OPS_TOKEN), &["approve", &id]).await);
    let mut running = start(&state, &config, "s1", "k1", "slow", slow);
    until_running(&server).await;
    running.kill().unwrap();
    let _ = running.wait();
    // Handled as any journaled call whose process died: unknown, never sent again.
    let retry = call(&state, &config, "s1", "k1", "slow", slow).await;
    assert_eq!(retry["unknown_outcome"], json!(true), "{retry}");
    assert_eq!(Stats::get(&server.stats.calls), 1);
}

on_each_state!(
    an_approved_call_runs_once_and_only_as_approved,
    an_expired_approval_or_a_changed_policy_refuses_the_retry,
    a_harness_killed_after_approval_leaves_a_journaled_call,
    an_approval_edited_in_the_store_approves_nothing_else,
);
