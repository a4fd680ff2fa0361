//! Ids are data, never terminal input: the runtime's gate refuses a call id or session with a
//! control character (C0, DEL, C1) or over 256 bytes before anything is journaled, held or
//! sent — through `Runtime::call`, on SQLite and PostgreSQL, with an `@approval` policy that
//! would otherwise hold the call — and shows the id escaped in its reason. Counted at the
//! server; `brain-harness` over the same: `bindings/tests/ids.rs`.

use brain_runtime::journal::{Durability, Filter, Journal};
use brain_runtime::{
    Approver, CallRequest, ContentBlock, MAX_ID_BYTES, OutcomeKind, Runtime, Scope, ToolResult,
};
use serde_json::json;
use tests::server::{Faults, Stats, TestServer};

/// Refunds need a person; anything else runs.
const POLICIES: &str = r#"
@id("echo")
permit (principal, action == Brain::Action::"tool:echo", resource)
when { !(context.input.message like "refund*") };

@id("refunds-need-a-person")
@approval
permit (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "refund*" && context.call.approval.granted == true };
"#;

/// The attack: an id that, printed raw, erases the line above and shows a smaller amount.
const ANSI_ID: &str = "c1\u{1b}[2K\u{1b}[1A  \"amount\": 5";

fn request(session: &str, call_id: &str, message: &str) -> CallRequest {
    CallRequest::new(
        "echo",
        Scope {
            tenant_id: "local".into(),
            session_id: session.into(),
        },
        json!({"message": message}),
    )
    .with_call_id(call_id)
}

fn text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// Refused by the gate, naming `field` and showing `shown` (the id escaped).
fn refused(result: &ToolResult, field: &str, shown: &str) {
    assert!(result.is_error, "{result:?}");
    assert!(!result.unknown_outcome, "{result:?}");
    assert_eq!(result.kind, Some(OutcomeKind::Refused), "{result:?}");
    assert_eq!(result.approval_id, None, "{result:?}");
    let reason = text(result);
    assert!(
        reason.contains(&format!("the {field} \"{shown}")),
        "{reason}"
    );
    assert!(!reason.chars().any(char::is_control), "{reason:?}");
}

async fn ids_are_refused_before_the_journal(journal: Journal) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = tests::policies::with_approver(dir.path(), &server.url, POLICIES);
    let runtime = Runtime::builder(&config)
        .journal(journal.clone())
        .build()
        .unwrap();
    let calls = || Stats::get(&server.stats.calls);

    // A held refund whose call id would rewrite the approver's screen: refused, not held.
    let ansi = runtime
        .call(request("s1", ANSI_ID, "refund 900000"))
        .result()
        .await;
    refused(&ansi, "call id", "c1\\u{1b}[2K\\u{1b}[1A  \"amount\": 5");
    for control in ['\u{0}', '\n', '\u{7f}', '\u{85}', '\u{9b}'] {
        let id = format!("c2{control}x");
        let result = runtime
            .call(request("s1", &id, "refund 900000"))
            .result()
            .await;
        refused(&result, "call id", "c2\\");
        let session = format!("s{control}1");
        let result = runtime
            .call(request(&session, "c3", "refund 900000"))
            .result()
            .await;
        refused(&result, "session", "s\\");
    }
    let long = "a".repeat(MAX_ID_BYTES + 1);
    let over = runtime.call(request("s1", &long, "hello")).result().await;
    refused(&over, "call id", "aaaa");
    assert!(text(&over).contains("257 bytes"), "{over:?}");
    let over = runtime.call(request(&long, "c4", "hello")).result().await;
    refused(&over, "session", "aaaa");

    // Nothing held, nothing journaled, nothing sent, nothing in the audit chain.
    let approver = Approver::new(&config, journal.clone(), tests::policies::OPS_TOKEN).unwrap();
    assert!(approver.list(None, false, 0).await.unwrap().is_empty());
    assert!(journal.list(&Filter::default()).await.unwrap().is_empty());
    assert!(journal.store().audit_tenants().await.unwrap().is_empty());
    assert_eq!(calls(), 0);

    // 256 bytes is an id: the call runs; a refund with it is held.
    let longest = "b".repeat(MAX_ID_BYTES);
    let ran = runtime
        .call(request(&longest, &longest, "hello"))
        .result()
        .await;
    assert!(!ran.is_error, "{ran:?}");
    assert_eq!(calls(), 1);
    let held = runtime
        .call(request("s1", &longest, "refund 10"))
        .result()
        .await;
    assert_eq!(held.kind, Some(OutcomeKind::ApprovalRequired), "{held:?}");
    assert_eq!(approver.pending(None).await.unwrap().len(), 1);
    // Printable text that is not ASCII is an id too (escaped where it is printed).
    let bidi = runtime
        .call(request("s\u{202e}1", "c\\\u{200b}5", "hello"))
        .result()
        .await;
    assert!(!bidi.is_error, "{bidi:?}");
    assert_eq!(calls(), 2);
    runtime.wait_for_cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_ids_with_controls_or_over_256_bytes_are_refused_before_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::sqlite(&dir.path().join("state.db"), Durability::Normal).unwrap();
    ids_are_refused_before_the_journal(journal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_ids_with_controls_or_over_256_bytes_are_refused_before_the_journal() {
    let cluster = tests::postgres::Cluster::start();
    let journal = Journal::postgres(&cluster.url).await.unwrap();
    ids_are_refused_before_the_journal(journal).await;
}
