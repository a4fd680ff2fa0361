//! The audit chain through the library, on SQLite and on PostgreSQL: what a runtime appends
//! (claims, outcomes, a policy denial, an approval asked, decided and used), checkpoints signed
//! at a clean shutdown, the journal's pruning leaving the chain whole, the audit's own pruning
//! leaving a `pruned_through` record from which verification holds, and a journal written
//! before the chain existed, migrated.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use brain_runtime::audit::{AuditKey, AuditSettings, Keyring, VerifyOptions, verify};
use brain_runtime::journal::{Durability, Journal};
use brain_runtime::{Approver, CallRequest, Runtime, Scope};
use serde_json::{Value, json};
use tests::server::{Faults, Stats, TestServer};

const POLICIES: &str = r#"
@id("echo")
permit (principal, action == Brain::Action::"tool:echo", resource)
when { !(context.input.message like "refund*") };

@id("no-secrets")
forbid (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "secret*" };

@id("refunds-need-a-person")
@approval
permit (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "refund*" && context.call.approval.granted == true };
"#;

fn config(dir: &Path, url: &str) -> brain_config::HostConfig {
    tests::policies::with_approver(dir, url, POLICIES)
}

/// A key as `openssl genpkey` writes it, and its public half.
fn key(dir: &Path) -> (AuditKey, Keyring) {
    let (private, public) = tests::audit::openssl_key_pair(dir, "audit");
    (
        AuditKey::from_pem_file(&private).unwrap(),
        Keyring::from_pem_files(&[public]).unwrap(),
    )
}

fn request(call_id: &str, message: &str) -> CallRequest {
    CallRequest::new(
        "echo",
        Scope {
            tenant_id: "local".into(),
            session_id: "s".into(),
        },
        json!({"message": message}),
    )
    .with_call_id(call_id)
}

/// The kinds of `journal`'s chain of "local", in order.
async fn kinds(journal: &Journal) -> Vec<String> {
    let records = journal
        .store()
        .audit_records("local", 1, 1000)
        .await
        .unwrap();
    records
        .iter()
        .map(|r| {
            let record: Value = serde_json::from_str(&r.record).unwrap();
            record["kind"].as_str().unwrap().to_owned()
        })
        .collect()
}

enum Store {
    Sqlite(tempfile::TempDir),
    Postgres(tests::postgres::Cluster),
}

impl Store {
    async fn journal(&self) -> Journal {
        match self {
            Store::Sqlite(dir) => {
                Journal::sqlite(&dir.path().join("state.db"), Durability::Normal).unwrap()
            }
            Store::Postgres(cluster) => Journal::postgres(&cluster.url).await.unwrap(),
        }
    }
}

async fn a_runtime_audits_what_it_does_and_pruning_keeps_the_chain(store: Store) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &server.url);
    let (key, keys) = key(dir.path());
    let settings = AuditSettings {
        key: Some(Arc::new(key)),
        ..AuditSettings::default()
    };
    let journal = store.journal().await.audit(settings.clone());
    let runtime = Runtime::builder(&config)
        .journal(journal.clone())
        .build()
        .unwrap();
    assert!(!runtime.call(request("c1", "hello")).result().await.is_error);
    let denied = runtime.call(request("c2", "secret plans")).result().await;
    assert_eq!(denied.kind, Some(brain_runtime::OutcomeKind::PolicyDenied));
    let held = runtime.call(request("r1", "refund 10")).result().await;
    let id = held.approval_id.clone().expect("held");
    let approver = Approver::new(&config, journal.clone(), "ops-token").unwrap();
    approver.approve(&id).await.unwrap();
    assert!(
        !runtime
            .call(request("r1", "refund 10"))
            .result()
            .await
            .is_error
    );
    runtime.wait_for_cleanup().await;
    assert_eq!(Stats::get(&server.stats.calls), 2);

    // The denial is appended off the caller's path: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !kinds(&journal).await.contains(&"policy_denied".to_owned()) {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            kinds(&journal).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut found = kinds(&journal).await;
    found.sort();
    let mut expected = vec![
        "approval_approved",
        "approval_asked",
        "claimed",
        "claimed",
        "finished",
        "finished",
        "policy_denied",
    ];
    expected.sort();
    assert_eq!(found, expected);
    let records = journal
        .store()
        .audit_records("local", 1, 1000)
        .await
        .unwrap();
    let used = records
        .iter()
        .find(|r| {
            r.record.contains("\"kind\":\"claimed\"") && r.record.contains("\"call_id\":\"r1\"")
        })
        .unwrap();
    assert!(
        used.record.contains(&format!("\"approval\":\"{id}\"")),
        "{}",
        used.record
    );
    for record in &records {
        assert!(
            !record.record.contains("refund 10"),
            "no arguments: {}",
            record.record
        );
        assert!(
            !record.record.contains("secret plans"),
            "no arguments: {}",
            record.record
        );
    }

    let options = VerifyOptions {
        keys: keys.clone(),
        ..VerifyOptions::default()
    };
    // A checkpoint signed at the clean shutdown; the denial may have come after it.
    let verified = verify(journal.store(), &options).await.unwrap();
    assert!(verified.holds(), "{}", verified.summary());
    assert_eq!(verified.records, 7, "{}", verified.summary());
    assert!(verified.checkpoint.is_some(), "{}", verified.summary());

    // The journal's pruning (every finished call) leaves the chain whole.
    let pruned = store.journal().await.retention(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(pruned.prune().await.unwrap() >= 2);
    assert!(journal.list(&Default::default()).await.unwrap().is_empty());
    let verified = verify(journal.store(), &options).await.unwrap();
    assert!(verified.holds(), "{}", verified.summary());
    assert_eq!(verified.records, 7);

    // The audit's own pruning: nothing goes before a checkpoint that outlived the retention it
    // states has signed it (the shutdown's states 400 days).
    let audit_pruned = store.journal().await.audit(AuditSettings {
        retention: Duration::ZERO,
        ..settings.clone()
    });
    audit_pruned.prune().await.unwrap();
    assert_eq!(kinds(&journal).await.len(), 7);
    // A checkpoint stating a retention of a millisecond, outlived at once: the pruning then
    // leaves a pruned_through record, from which the chain verifies.
    let key = settings.key.as_ref().unwrap();
    let short = Duration::from_millis(1);
    let signed = brain_runtime::audit::sign(journal.store(), key, &keys, short)
        .await
        .unwrap();
    assert!(
        signed.signed.is_some() && signed.refused.is_empty(),
        "{signed:?}"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    audit_pruned.prune().await.unwrap();
    let left = kinds(&journal).await;
    assert_eq!(
        left.last().map(String::as_str),
        Some("pruned_through"),
        "{left:?}"
    );
    assert_eq!(
        left.len(),
        2,
        "the newest record and the pruned_through: {left:?}"
    );
    // The pruning signed its pruned_through records at once.
    let verified = verify(journal.store(), &options).await.unwrap();
    assert!(verified.holds(), "{}", verified.summary());
    assert_eq!(verified.unsigned, 0, "{}", verified.summary());
    // Another checkpoint over the pruned chain.
    let signed = brain_runtime::audit::sign(journal.store(), key, &keys, settings.retention)
        .await
        .unwrap();
    assert!(
        signed.signed.is_some() && signed.refused.is_empty(),
        "{signed:?}"
    );
    assert!(verify(journal.store(), &options).await.unwrap().holds());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_runtime_audits_what_it_does_and_pruning_keeps_the_chain() {
    a_runtime_audits_what_it_does_and_pruning_keeps_the_chain(Store::Sqlite(
        tempfile::tempdir().unwrap(),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_runtime_audits_what_it_does_and_pruning_keeps_the_chain() {
    a_runtime_audits_what_it_does_and_pruning_keeps_the_chain(Store::Postgres(
        tests::postgres::Cluster::start(),
    ))
    .await;
}

/// A journal from before the chain (SQLite schema 6, PostgreSQL schema 7) with a call in it:
/// migrated on open, and `verify` says the chain starts with the first call after.
async fn a_journal_from_before_the_chain_is_migrated(store: Store) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &server.url);
    {
        let journal = store.journal().await;
        let runtime = Runtime::builder(&config).journal(journal).build().unwrap();
        assert!(
            !runtime
                .call(request("old", "hello"))
                .result()
                .await
                .is_error
        );
        runtime.wait_for_cleanup().await;
    }
    // What a brain from before the chain left: no chain.
    let output = match &store {
        // The runtime above closes its connection off this task: wait for its lock as a
        // client would.
        Store::Sqlite(dir) => std::process::Command::new("sqlite3")
            .args(["-cmd", ".timeout 10000"])
            .arg(dir.path().join("state.db"))
            .arg(
                "DROP TABLE brain_audit; DROP TABLE brain_audit_checkpoints; \
                 PRAGMA user_version = 6",
            )
            .output(),
        Store::Postgres(cluster) => std::process::Command::new("psql")
            .args([cluster.url.as_str(), "-v", "ON_ERROR_STOP=1", "-c"])
            .arg(
                "DROP TABLE brain_audit; DROP TABLE brain_audit_heads; \
                 DROP TABLE brain_audit_checkpoints; UPDATE brain_schema SET version = 7",
            )
            .output(),
    }
    .unwrap();
    assert!(output.status.success(), "{output:?}");
    let journal = store.journal().await;
    let runtime = Runtime::builder(&config)
        .journal(journal.clone())
        .build()
        .unwrap();
    assert!(
        !runtime
            .call(request("new", "hello"))
            .result()
            .await
            .is_error
    );
    runtime.wait_for_cleanup().await;
    let verified = verify(journal.store(), &VerifyOptions::default())
        .await
        .unwrap();
    assert!(verified.holds(), "{}", verified.summary());
    assert_eq!(verified.records, 2);
    let entries = journal.list(&Default::default()).await.unwrap();
    let old = entries.iter().find(|e| e.key.call_id == "old").unwrap();
    assert!(verified.since_ms.unwrap() > old.created_ms, "{verified:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_journal_from_before_the_chain_is_migrated() {
    a_journal_from_before_the_chain_is_migrated(Store::Sqlite(tempfile::tempdir().unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_journal_from_before_the_chain_is_migrated() {
    a_journal_from_before_the_chain_is_migrated(Store::Postgres(tests::postgres::Cluster::start()))
        .await;
}

/// A drift seen is recorded in the chain of each tenant its binding lists, once per process and
/// listing (as `brain_drift` keeps it), on SQLite and on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_is_recorded_in_each_tenant_s_chain() {
    let cluster = tests::postgres::Cluster::start();
    for store in [
        Store::Sqlite(tempfile::tempdir().unwrap()),
        Store::Postgres(cluster),
    ] {
        let journal = store.journal().await;
        let drift = brain_runtime::journal::Drift {
            binding: "refund".into(),
            pinned: "sha256:pinned".into(),
            listed: "sha256:listed".into(),
            fields: vec!["inputSchema".into()],
            refused: true,
            tenants: vec!["acme".into(), "globex".into()],
            process: "host:1:abc".into(),
            first_seen_ms: 0,
        };
        assert!(journal.store().record_drift(&drift).await.unwrap());
        assert!(!journal.store().record_drift(&drift).await.unwrap(), "once");
        for tenant in ["acme", "globex"] {
            let records = journal.store().audit_records(tenant, 1, 10).await.unwrap();
            assert_eq!(records.len(), 1, "{tenant}: {records:?}");
            let record: Value = serde_json::from_str(&records[0].record).unwrap();
            assert_eq!(record["kind"], json!("drift"));
            assert_eq!(record["binding"], json!("refund"));
            assert_eq!(record["refused"], json!(true));
        }
        let verified = verify(journal.store(), &VerifyOptions::default())
            .await
            .unwrap();
        assert!(verified.holds(), "{}", verified.summary());
        assert_eq!((verified.records, verified.tenants), (2, 2));
    }
}

/// `Runtime::builder(config).journal(j)` applies the config's `audit`: `"enabled": false`
/// appends nothing, and the default appends; the host's signing key stays on the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_applies_the_config_s_audit() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = key(dir.path());
    for (enabled, appended) in [(false, 0), (true, 2)] {
        let mut config = config(dir.path(), &server.url);
        config.audit = Some(brain_config::audit::AuditConfig {
            enabled: Some(enabled),
            checkpoint_seconds: Some(5),
            ..Default::default()
        });
        let path = dir.path().join(format!("{enabled}.db"));
        let journal = Journal::sqlite(&path, Durability::Normal)
            .unwrap()
            .audit(AuditSettings {
                key: Some(Arc::new(
                    AuditKey::from_pem_file(&dir.path().join("audit.pem")).unwrap(),
                )),
                ..AuditSettings::default()
            });
        let runtime = Runtime::builder(&config)
            .journal(journal.clone())
            .build()
            .unwrap();
        let result = runtime.call(request("c1", "hello")).result().await;
        assert!(!result.is_error, "{result:?}");
        runtime.wait_for_cleanup().await;
        let reopened = Journal::sqlite(&path, Durability::Normal).unwrap();
        assert_eq!(kinds(&reopened).await.len(), appended, "enabled: {enabled}");
        // The key stayed: a checkpoint signed at the clean shutdown, by it.
        let checkpoints = reopened.store().audit_checkpoints().await.unwrap();
        assert_eq!(
            checkpoints.len(),
            usize::from(enabled),
            "enabled: {enabled}"
        );
        if let Some(checkpoint) = checkpoints.last() {
            assert!(checkpoint.body.contains(key.id()), "{}", checkpoint.body);
        }
    }
}
