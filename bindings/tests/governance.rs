//! Governance tried as an attacker would, across real `brain-harness` processes on one state
//! store — the default SQLite file, and a throwaway PostgreSQL cluster — tampered with through
//! the store's own client (`sqlite3`, `psql`) and counted at the server:
//!
//! - a key approver's decision is a statement it signs: a pending approval set to approved in
//!   the store runs nothing, nor does a signature copied from another approval; a signed
//!   approval runs once and is replayed after; a token approver's forged decision runs (a store
//!   writer can forge it, as SECURITY.md says) and `audit verify` names the claim;
//! - a chain cannot get shorter without `verify` saying so: history erased behind a forged
//!   `pruned_through` is named by its first missing seq, with and without an anchor, and the
//!   signer refuses to sign it (signing the other chains); a chain rewritten with every
//!   checkpoint deleted fails `verify --public-key`.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tests::audit::{genesis, hex, link};
use tests::server::{Faults, Stats, TestServer};

mod common;

use common::state::{State, on_each_state, postgres, result, sqlite, wait};
use common::write_config;

/// `echo` runs freely unless its message starts with "refund"; then it needs a person.
const POLICIES: &str = r#"
@id("echo")
permit (principal, action == Brain::Action::"tool:echo", resource)
when { !(context.input.message like "refund*") };

@id("refunds-need-a-person")
@approval
permit (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "refund*" && context.call.approval.granted == true };
"#;

/// The token of `clerk`, the token approver of the tenant "other".
const CLERK_TOKEN: &str = "clerk-approver-token";

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The test's keys (`openssl` PEM files in its directory) and config.
struct Setup {
    server: TestServer,
    config: String,
    /// The audit's signing key, and its public key.
    audit: (String, String),
    /// The approver `ops`'s private key (its public key is `ops.pub`, named by the config).
    ops: String,
}

/// `echo` for the tenants "local" (decided by `ops`, a key approver) and "other" (decided by
/// `clerk`, a token approver); the audit's public key in the config.
async fn setup(dir: &Path) -> Setup {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir, &server.url, |binding| {
        binding["timeout_seconds"] = json!(30);
        binding["tenants"] = json!(["local", "other"]);
    });
    let (audit, audit_public) = tests::audit::openssl_key_pair(dir, "audit");
    let (ops, _) = tests::audit::openssl_key_pair(dir, "ops");
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    host["policies"] = json!({"files": ["calls.cedar"]});
    host["approvals"] = json!({"approvers": [
        {"name": "ops", "tenants": ["local"], "public_key": "ops.pub"},
        {"name": "clerk", "tenants": ["other"], "token_sha256": hex(&Sha256::digest(CLERK_TOKEN))},
    ]});
    host["audit"] = json!({"public_keys": ["audit.pub"]});
    std::fs::write(dir.join("calls.cedar"), POLICIES).unwrap();
    std::fs::write(&config, serde_json::to_string_pretty(&host).unwrap()).unwrap();
    let path = |p: &Path| p.display().to_string();
    Setup {
        server,
        config,
        audit: (path(&audit), path(&audit_public)),
        ops: path(&ops),
    }
}

impl Setup {
    fn calls(&self) -> usize {
        Stats::get(&self.server.stats.calls)
    }

    /// `brain-harness call` of `echo` as `tenant`, its checkpoints signed with the audit key.
    async fn call(&self, state: &State, tenant: &str, id: &str, message: &str) -> Value {
        let mut child = state.command();
        child
            .args(["--config", &self.config, "call", "--tenant", tenant])
            .args(["--call-id", id, "echo"])
            .arg(json!({ "message": message }).to_string())
            .env("BRAIN_AUDIT_KEY_FILE", &self.audit.0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        result(&wait(child.spawn().unwrap()).await)
    }

    /// `brain-harness ARGS…` on the state, with `env` (and no key or token besides).
    async fn harness(&self, state: &State, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut command: Command = state.command();
        command
            .args(["--config", &self.config])
            .args(args)
            .env_remove("BRAIN_AUDIT_KEY_FILE")
            .env_remove("BRAIN_APPROVER_KEY_FILE")
            .env_remove("BRAIN_APPROVER_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap()
    }

    /// `audit verify --public-key audit.pub ARGS…`: its exit code and what it printed.
    async fn verify(&self, state: &State, args: &[&str]) -> (i32, String) {
        let verify = ["audit", "verify", "--public-key", &self.audit.1];
        let output = self
            .harness(state, &[], &[&verify[..], args].concat())
            .await;
        (output.status.code().unwrap_or(-1), text(&output))
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn held(result: &Value) -> String {
    assert_eq!(result["kind"], json!("approval_required"), "{result}");
    result["approval_id"].as_str().unwrap().to_owned()
}

/// A key approver's decision is what the claim checks: neither a state set in the store nor a
/// signature copied from another approval runs the call; the approver's own signature does,
/// once. A token approver's decision can be forged by a store writer: it runs, and `audit
/// verify` names the claim whose decision the chain does not show.
async fn a_store_writer_cannot_approve_for_a_key_approver(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path()).await;
    let large = held(&setup.call(&state, "local", "r1", "refund 900000").await);
    state.sql(&format!(
        "UPDATE brain_approvals SET state = 'approved', decided_by = 'ops', decided = 0 \
         WHERE id = '{large}'"
    ));
    let refused = setup.call(&state, "local", "r1", "refund 900000").await;
    assert_eq!(refused["kind"], json!("approval_required"), "{refused}");
    assert!(refused.to_string().contains("is not signed"), "{refused}");
    assert_eq!(setup.calls(), 0, "a forged approval runs nothing");

    // The approver signs a small refund; its signature copied onto the large one is not the
    // large one's.
    let small = held(&setup.call(&state, "local", "r2", "refund 5").await);
    let key = [("BRAIN_APPROVER_KEY_FILE", setup.ops.as_str())];
    let listed = setup.harness(&state, &key, &["approvals", "list"]).await;
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(text(&listed).contains(&small), "{}", text(&listed));
    let approved = setup
        .harness(&state, &key, &["approvals", "approve", &small])
        .await;
    assert!(approved.status.success(), "{}", text(&approved));
    state.sql(&format!(
        "UPDATE brain_approvals SET (decision_key, signature) = (SELECT decision_key, signature \
         FROM brain_approvals WHERE id = '{small}') WHERE id = '{large}'"
    ));
    let refused = setup.call(&state, "local", "r1", "refund 900000").await;
    assert_eq!(refused["kind"], json!("approval_required"), "{refused}");
    assert!(refused.to_string().contains("not valid"), "{refused}");
    assert_eq!(setup.calls(), 0, "a copied signature runs nothing");

    // The signed approval runs its call once, and the retry is the journal's answer.
    let ran = setup.call(&state, "local", "r2", "refund 5").await;
    assert_eq!(ran["is_error"], json!(false), "{ran}");
    assert_eq!(setup.calls(), 1);
    let replayed = setup.call(&state, "local", "r2", "refund 5").await;
    assert_eq!(replayed["is_error"], json!(false), "{replayed}");
    assert_eq!(setup.calls(), 1, "replayed, not run again");
    let decided = state
        .sql("SELECT record FROM brain_audit WHERE record LIKE '%\"kind\":\"approval_approved\"%'");
    assert!(
        decided.contains("\"signature\":") && decided.contains(&small),
        "the chain records the signed decision: {decided}"
    );
    let (code, said) = setup.verify(&state, &[]).await;
    assert_eq!(code, 0, "{said}");

    // A token approver's decision, forged: it runs (SECURITY.md), and verify names it.
    let forged = held(&setup.call(&state, "other", "o1", "refund 7").await);
    state.sql(&format!(
        "UPDATE brain_approvals SET state = 'approved', decided_by = 'clerk', decided = 0 \
         WHERE id = '{forged}'"
    ));
    let ran = setup.call(&state, "other", "o1", "refund 7").await;
    assert_eq!(ran["is_error"], json!(false), "{ran}");
    assert_eq!(setup.calls(), 2);
    let (code, said) = setup.verify(&state, &[]).await;
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains(&format!(
            "a claim used approval {forged}, whose decision the chain does not show"
        )),
        "{said}"
    );
}

/// Erases all but a tenant's newest record behind a well-linked, forged `pruned_through`.
fn erase_history(state: &State, tenant: &str) {
    let rows = state.sql(&format!(
        "SELECT seq, hash, at FROM brain_audit WHERE tenant = '{tenant}' ORDER BY seq"
    ));
    let rows: Vec<Vec<&str>> = rows.lines().map(|l| l.split('|').collect()).collect();
    let newest = rows.last().unwrap();
    let before = &rows[rows.len() - 2];
    let (through, through_hash) = (before[0], before[1]);
    let (seq, at) = (newest[0].parse::<i64>().unwrap() + 1, newest[2]);
    let record = format!(
        "{{\"at\":{at},\"kind\":\"pruned_through\",\"seq\":{seq},\"tenant\":\"{tenant}\",\
         \"through_hash\":\"{through_hash}\",\"through_seq\":{through},\"v\":1}}"
    );
    let hash = link(newest[1], &record);
    let mut sql = format!(
        "DELETE FROM brain_audit WHERE tenant = '{tenant}' AND seq <= {through}; INSERT INTO \
         brain_audit (tenant, seq, at, record, hash) VALUES ('{tenant}', {seq}, {at}, {}, \
         '{hash}')",
        quoted(&record)
    );
    if let State::Postgres(_) = state {
        sql += &format!(
            "; UPDATE brain_audit_heads SET seq = {seq}, hash = '{hash}' WHERE tenant = '{tenant}'"
        );
    }
    for statement in sql.split("; ") {
        state.sql(statement);
    }
}

/// History erased behind a forged `pruned_through`: `verify` names the first missing seq, with
/// and without an anchor; `audit sign` refuses that chain (exit 1) and signs the other, whose
/// head moved, keeping the refused one at the head last signed.
async fn history_erased_behind_a_forged_prune_is_named(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path()).await;
    for i in 0..4 {
        let ran = setup.call(&state, "local", &format!("l{i}"), "hi").await;
        assert_eq!(ran["is_error"], json!(false), "{ran}");
    }
    setup.call(&state, "other", "o0", "hi").await;
    let (code, said) = setup.verify(&state, &[]).await;
    assert_eq!(code, 0, "{said}");
    let head = setup.harness(&state, &[], &["audit", "head"]).await;
    let anchor = dir.path().join("anchor.json");
    std::fs::write(&anchor, &head.stdout).unwrap();
    let anchor = anchor.display().to_string();

    erase_history(&state, "local");
    assert_eq!(
        state
            .sql("SELECT count(*) FROM brain_audit WHERE tenant = 'local'")
            .trim(),
        "2",
        "the newest record and the forged pruned_through"
    );
    for args in [vec![], vec!["--anchor", anchor.as_str()]] {
        let (code, said) = setup.verify(&state, &args).await;
        assert_eq!(code, 1, "{args:?}: {said}");
        assert!(
            said.contains("tenant \"local\", record 1: missing through seq"),
            "{args:?}: {said}"
        );
    }

    // The other tenant's chain moves on (no key signs at the end of this call); the signer
    // signs it and refuses "local".
    let call = ["call", "--tenant", "other", "--call-id", "o1", "echo"];
    let ran = setup
        .harness(
            &state,
            &[],
            &[&call[..], &[r#"{"message": "hi"}"#]].concat(),
        )
        .await;
    assert_eq!(result(&ran)["is_error"], json!(false));
    let checkpoints = || {
        state
            .sql("SELECT count(*) FROM brain_audit_checkpoints")
            .trim()
            .parse::<i64>()
            .unwrap()
    };
    let before = checkpoints();
    let audit_key = [("BRAIN_AUDIT_KEY_FILE", setup.audit.0.as_str())];
    let signed = setup.harness(&state, &audit_key, &["audit", "sign"]).await;
    let said = text(&signed);
    assert_eq!(signed.status.code(), Some(1), "{said}");
    assert!(
        said.contains("refused: tenant \"local\", record 1"),
        "{said}"
    );
    assert_eq!(checkpoints(), before + 1, "the other chain signed: {said}");
    let newest = state.sql("SELECT body FROM brain_audit_checkpoints ORDER BY id DESC LIMIT 1");
    let newest: Value = serde_json::from_str(newest.trim()).unwrap();
    assert_eq!(
        newest["heads"]["local"]["start"]["from"],
        json!(1),
        "the refused chain kept as last signed: {newest}"
    );
    let (code, said) = setup.verify(&state, &[]).await;
    assert_eq!(code, 1, "{said}");
}

/// A chain rewritten consistently, every checkpoint deleted: with a public key, nothing that
/// verifies proves the records, and `verify` fails.
async fn a_rewrite_without_checkpoints_fails_verify_with_a_key(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path()).await;
    for i in 0..3 {
        setup.call(&state, "local", &format!("l{i}"), "hi").await;
    }
    // The first outcome rewritten as an error, every hash after it recomputed.
    let rows = state.sql("SELECT seq, record FROM brain_audit WHERE tenant = 'local' ORDER BY seq");
    let mut previous = genesis("local");
    let mut sql = vec!["DELETE FROM brain_audit_checkpoints".to_owned()];
    for line in rows.lines() {
        let (seq, record) = line.split_once('|').unwrap();
        let record = record.replacen("\"is_error\":false", "\"is_error\":true", 1);
        previous = link(&previous, &record);
        sql.push(format!(
            "UPDATE brain_audit SET record = {}, hash = '{previous}' WHERE tenant = 'local' AND \
             seq = {seq}",
            quoted(&record)
        ));
    }
    if let State::Postgres(_) = state {
        sql.push(format!(
            "UPDATE brain_audit_heads SET hash = '{previous}' WHERE tenant = 'local'"
        ));
    }
    for statement in &sql {
        state.sql(statement);
    }
    let (code, said) = setup.verify(&state, &[]).await;
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("no checkpoint verifies"), "{said}");
}

on_each_state!(
    a_store_writer_cannot_approve_for_a_key_approver,
    history_erased_behind_a_forged_prune_is_named,
    a_rewrite_without_checkpoints_fails_verify_with_a_key,
);
