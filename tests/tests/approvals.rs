//! Approvals in the journal's store, the same tests against each backend (memory, SQLite, and
//! PostgreSQL in a throwaway cluster the test starts): an approval is asked for once per call,
//! used by exactly one claim of that very call (key and digest), in the claim's transaction;
//! its arguments are kept only while it is open; pruning leaves pending approvals alone. And
//! the runtime: a held call is refused `approval_required` and counted 0 at the server, runs
//! once when approved, and a runtime without a journal refuses `@approval` policies.

use std::time::Duration;

use brain_runtime::journal::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalState, Asked, Claim, Claimed, Decision,
    Durability, Granted, Journal, JournalStore, Key,
};
use brain_runtime::{Approver, CallRequest, OutcomeKind, Runtime, RuntimeError, Scope};
use serde_json::json;
use tests::server::{Faults, Stats, TestServer};

fn key(call_id: &str) -> Key {
    Key {
        tenant: "local".into(),
        session: "s".into(),
        call_id: call_id.into(),
    }
}

fn request(call_id: &str, digest: &str, expires_ms: i64) -> ApprovalRequest {
    ApprovalRequest {
        key: key(call_id),
        binding: "echo".into(),
        principal: "Brain::Tenant::\"local\"".into(),
        digest: digest.into(),
        policies: "p1".into(),
        arguments: r#"{"message":"refund 10"}"#.into(),
        reason: "held".into(),
        expires_ms,
    }
}

fn claim(call_id: &str, digest: &str, owner: &str) -> Claim {
    Claim {
        key: key(call_id),
        digest: digest.into(),
        binding: "echo".into(),
        owner: owner.into(),
        timeout_ms: 60_000,
        trace_id: None,
        upstream: None,
    }
}

/// The approval `id` as the store shows it to the tenant "local"'s approvers.
async fn shown(store: &dyn JournalStore, id: &str) -> Approval {
    let filter = ApprovalFilter {
        id: Some(id.to_owned()),
        ..all()
    };
    store.approvals(&filter).await.unwrap().remove(0)
}

/// `approver` (deciding for `tenants`) decides `id` as the store shows it.
async fn decide(
    store: &dyn JournalStore,
    id: &str,
    tenants: &[&str],
    approver: &str,
    approved: bool,
) -> Option<Approval> {
    let approval = shown(store, id).await;
    let decision = Decision {
        id: id.to_owned(),
        tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
        approver: approver.to_owned(),
        approved,
        digest: approval.digest,
        policies: approval.policies,
        expires_ms: approval.expires_ms,
        signature: None,
    };
    store.decide_approval(&decision).await.unwrap()
}

/// The approval `id` as a claim uses it.
async fn granted(store: &dyn JournalStore, id: &str) -> Granted {
    let approval = shown(store, id).await;
    Granted {
        id: id.to_owned(),
        by: approval.decided_by.unwrap_or_default(),
        expires_ms: approval.expires_ms,
        signature: approval.signature,
    }
}

fn all() -> ApprovalFilter {
    ApprovalFilter {
        tenants: vec!["local".into()],
        ..ApprovalFilter::default()
    }
}

async fn store_rules(store: &dyn JournalStore) {
    assert!(store.renew("o1", 60_000, true).await.unwrap());
    let Asked::Pending(id) = store
        .ask_approval(&request("c1", "d1", 60_000))
        .await
        .unwrap()
    else {
        panic!("a new call's approval is pending");
    };
    // Asked again: the same one. Other arguments (another digest): another one.
    assert_eq!(
        store
            .ask_approval(&request("c1", "d1", 60_000))
            .await
            .unwrap(),
        Asked::Pending(id.clone())
    );
    let Asked::Pending(other) = store
        .ask_approval(&request("c1", "d2", 60_000))
        .await
        .unwrap()
    else {
        panic!("other arguments ask anew");
    };
    assert_ne!(other, id);
    // A pending approval claims nothing.
    assert_eq!(
        store
            .claim_approved(&claim("c1", "d1", "o1"), None, &granted(store, &id).await)
            .await
            .unwrap(),
        Claimed::Unapproved
    );
    // Another tenant's approver decides nothing of it.
    assert!(decide(store, &id, &["other"], "x", true).await.is_none());
    let decided = decide(store, &id, &["local"], "ops", true)
        .await
        .expect("decided");
    assert_eq!(decided.state, ApprovalState::Approved);
    assert_eq!(decided.decided_by.as_deref(), Some("ops"));
    assert_eq!(decided.arguments, None, "decided: the arguments are gone");
    assert!(decide(store, &id, &["local"], "ops", false).await.is_none());
    assert_eq!(
        store
            .ask_approval(&request("c1", "d1", 60_000))
            .await
            .unwrap(),
        Asked::Approved(granted(store, &id).await)
    );
    // Never for another key, nor another digest.
    assert_eq!(
        store
            .claim_approved(&claim("c2", "d1", "o1"), None, &granted(store, &id).await)
            .await
            .unwrap(),
        Claimed::Unapproved
    );
    assert_eq!(
        store
            .claim_approved(&claim("c1", "d2", "o1"), None, &granted(store, &id).await)
            .await
            .unwrap(),
        Claimed::Unapproved
    );
    // Used once, by the claim of this very call.
    assert_eq!(
        store
            .claim_approved(&claim("c1", "d1", "o1"), None, &granted(store, &id).await)
            .await
            .unwrap(),
        Claimed::Claimed
    );
    assert_eq!(
        store
            .claim_approved(&claim("c1", "d1", "o1"), None, &granted(store, &id).await)
            .await
            .unwrap(),
        Claimed::Taken
    );
    assert_eq!(
        store
            .ask_approval(&request("c1", "d1", 60_000))
            .await
            .unwrap(),
        Asked::Journaled
    );
    let shown = store.approvals(&all()).await.unwrap();
    let used = shown.iter().find(|a| a.id == id).unwrap();
    assert_eq!(used.state, ApprovalState::Used);
    assert!(used.used_ms.is_some());

    // Denied: refused on every retry while it lasts.
    let Asked::Pending(denied) = store
        .ask_approval(&request("c3", "d1", 60_000))
        .await
        .unwrap()
    else {
        panic!()
    };
    decide(store, &denied, &["local"], "ops", false).await;
    assert_eq!(
        store
            .ask_approval(&request("c3", "d1", 60_000))
            .await
            .unwrap(),
        Asked::Denied {
            id: denied,
            by: "ops".into()
        }
    );

    // An approval that expires: its arguments go; pruning leaves the open ones alone.
    let Asked::Pending(short) = store.ask_approval(&request("c4", "d1", 300)).await.unwrap() else {
        panic!()
    };
    decide(store, &short, &["local"], "ops", true).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        store
            .claim_approved(
                &claim("c4", "d1", "o1"),
                None,
                &granted(store, &short).await
            )
            .await
            .unwrap(),
        Claimed::Unapproved,
        "an expired approval is never used"
    );
    let Asked::Pending(stale) = store.ask_approval(&request("c5", "d1", 300)).await.unwrap() else {
        panic!()
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    store.prune(60_000).await.unwrap();
    let after = store.approvals(&all()).await.unwrap();
    let stale = after
        .iter()
        .find(|a| a.id == stale)
        .expect("kept within the retention");
    assert_eq!(
        stale.arguments, None,
        "an expired approval's arguments are deleted"
    );
    let pending = after
        .iter()
        .find(|a| a.id == other)
        .expect("a pending approval stays");
    assert!(pending.arguments.is_some(), "{pending:?}");
    let open = store
        .approvals(&ApprovalFilter {
            pending: true,
            ..all()
        })
        .await
        .unwrap();
    assert_eq!(open.iter().map(|a| &a.id).collect::<Vec<_>>(), [&other]);
    // Past the retention, expired approvals go; the open one stays.
    store.prune(100).await.unwrap();
    let left = store.approvals(&all()).await.unwrap();
    assert!(left.iter().any(|a| a.id == other), "{left:?}");
    assert!(!left.iter().any(|a| a.id == short), "{left:?}");
}

#[tokio::test]
async fn memory_store_keeps_approvals_by_the_rules() {
    store_rules(Journal::memory().store()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_keeps_approvals_by_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal).unwrap();
    store_rules(journal.store()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_keeps_approvals_by_the_rules() {
    let cluster = tests::postgres::Cluster::start();
    let journal = Journal::postgres(&cluster.url).await.unwrap();
    store_rules(journal.store()).await;
}

const POLICIES: &str = r#"
@id("echo")
permit (principal, action == Brain::Action::"tool:echo", resource)
when { !(context.input.message like "refund*") };

@id("refunds-need-a-person")
@approval
permit (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "refund*" && context.call.approval.granted == true };
"#;

fn config(dir: &std::path::Path, url: &str) -> brain_config::HostConfig {
    tests::policies::with_approver(dir, url, POLICIES)
}

fn refund(call_id: &str) -> CallRequest {
    CallRequest::new(
        "echo",
        Scope {
            tenant_id: "local".into(),
            session_id: "s".into(),
        },
        json!({"message": "refund 10"}),
    )
    .with_call_id(call_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_is_not_sent_until_approved_then_runs_once() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &server.url);

    let refused = Runtime::builder(&config).build().unwrap_err();
    assert!(matches!(refused, RuntimeError::Approvals(_)), "{refused}");
    assert!(
        refused.to_string().contains("refunds-need-a-person"),
        "{refused}"
    );

    let journal = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal).unwrap();
    let runtime = Runtime::builder(&config)
        .journal(journal.clone())
        .build()
        .unwrap();
    let held = runtime.call(refund("r1")).result().await;
    assert_eq!(held.kind, Some(OutcomeKind::ApprovalRequired), "{held:?}");
    assert!(!held.unknown_outcome);
    let id = held.approval_id.clone().expect("an approval id");
    assert_eq!(Stats::get(&server.stats.calls), 0);
    // A call the policies permit outright pays nothing of this.
    let free = runtime
        .call(CallRequest::new(
            "echo",
            Scope {
                tenant_id: "local".into(),
                session_id: "s".into(),
            },
            json!({"message": "hello"}),
        ))
        .result()
        .await;
    assert!(!free.is_error, "{free:?}");
    assert_eq!(Stats::get(&server.stats.calls), 1);

    assert!(Approver::new(&config, journal.clone(), "not-a-token").is_err());
    let approver = Approver::new(&config, journal.clone(), "ops-token").unwrap();
    assert_eq!(approver.name(), "ops");
    let pending = approver.pending(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0].arguments.as_deref(),
        Some(r#"{"message":"refund 10"}"#)
    );
    approver.approve(&id).await.unwrap();

    let ran = runtime.call(refund("r1")).result().await;
    assert!(!ran.is_error, "{ran:?}");
    assert_eq!(Stats::get(&server.stats.calls), 2);
    let again = runtime.call(refund("r1")).result().await;
    assert!(again.replayed, "{again:?}");
    assert_eq!(Stats::get(&server.stats.calls), 2);
    runtime.wait_for_cleanup().await;
}

/// A call id whose call ended `not_sent` under a permissive policy, retried after an
/// `@approval` policy covers it, is decided again as a new call is: held, never sent.
async fn a_not_sent_retry_passes_the_whole_gate(journal: Journal) {
    // Nothing listens on the port at first: the call is claimed, then not sent.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let binding = json!({
        "name": "refund", "description": "Refunds an order.", "input_schema": {"type": "object"},
        "url": format!("http://127.0.0.1:{port}/tools/echo"), "tenants": ["local"],
        "timeout_seconds": 10
    });
    let open = "@id(\"all\")\npermit (principal, action, resource);\n";
    let held = "@id(\"refunds-need-a-person\")\n@approval\npermit (principal, action == \
                Brain::Action::\"tool:refund\", resource)\nwhen { \
                context.call.approval.granted == true };\n";
    let config = |policies: &str| {
        std::fs::write(dir.path().join("calls.cedar"), policies).unwrap();
        let host = json!({
            "policies": {"files": ["calls.cedar"]},
            "approvals": {"approvers": [{"name": "ops", "tenants": ["local"],
                "token_sha256": "0".repeat(64)}]},
            "tools": [binding],
        });
        let path = dir.path().join("host.json");
        std::fs::write(&path, host.to_string()).unwrap();
        brain_config::load_file(&path).unwrap_or_else(|e| panic!("{e}"))
    };
    let request = || {
        CallRequest::new(
            "refund",
            Scope {
                tenant_id: "local".into(),
                session_id: "s".into(),
            },
            json!({"amount": 900000}),
        )
        .with_call_id("r1")
    };
    let permissive = Runtime::builder(&config(open))
        .journal(journal.clone())
        .build()
        .unwrap();
    let first = permissive.call(request()).result().await;
    assert!(first.is_error && !first.unknown_outcome, "{first:?}");
    permissive.wait_for_cleanup().await;

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let server = TestServer::serve(listener, Faults::default()).unwrap();
    let holding = Runtime::builder(&config(held))
        .journal(journal)
        .build()
        .unwrap();
    let retry = holding.call(request()).result().await;
    assert_eq!(retry.kind, Some(OutcomeKind::ApprovalRequired), "{retry:?}");
    assert!(retry.approval_id.is_some(), "{retry:?}");
    assert_eq!(Stats::get(&server.tools.requests), 0, "nothing was sent");
    holding.wait_for_cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_not_sent_retry_passes_the_whole_gate() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal).unwrap();
    a_not_sent_retry_passes_the_whole_gate(journal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_not_sent_retry_passes_the_whole_gate() {
    let cluster = tests::postgres::Cluster::start();
    let journal = Journal::postgres(&cluster.url).await.unwrap();
    a_not_sent_retry_passes_the_whole_gate(journal).await;
}
