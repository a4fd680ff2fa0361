//! The audit chain across real `brain-harness` processes on one state store — the default
//! SQLite file, and a throwaway PostgreSQL cluster — tampered with as an attacker would, with
//! the store's own client (`sqlite3`, `psql`): `audit verify` names each broken record, `audit
//! sign` refuses a forged tail, and an export verifies offline with the guide's Python script
//! until one byte of it is flipped.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tests::server::{Faults, TestServer};

mod common;

use common::state::{State, on_each_state, postgres, result, sqlite, wait};
use common::write_config;

/// A key pair as `openssl` writes it: (private PKCS#8 PEM, public SPKI PEM).
fn keys(dir: &Path, name: &str) -> (String, String) {
    let (private, public) = tests::audit::openssl_key_pair(dir, name);
    (private.display().to_string(), public.display().to_string())
}

/// `brain-harness ARGS…` on the state, with `key` as BRAIN_AUDIT_KEY_FILE.
async fn harness(state: &State, key: Option<&str>, args: &[&str]) -> Output {
    let mut command: Command = state.command();
    command
        .args(args)
        .env_remove("BRAIN_AUDIT_KEY_FILE")
        .stdin(Stdio::null());
    if let Some(key) = key {
        command.env("BRAIN_AUDIT_KEY_FILE", key);
    }
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// A call of `echo` as `tenant`, signed with `key`.
async fn call(state: &State, config: &str, key: &str, tenant: &str, id: &str) -> Value {
    let mut child = state.command();
    child
        .args([
            "--config",
            config,
            "call",
            "--tenant",
            tenant,
            "--call-id",
            id,
        ])
        .args(["echo", r#"{"message": "hi"}"#])
        .env("BRAIN_AUDIT_KEY_FILE", key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    result(&wait(child.spawn().unwrap()).await)
}

/// The store's own client runs `sql` (statements separated by `;`), and prints what it read.
/// SQLite keeps no table of heads (a chain's head is its last record): statements on it are
/// PostgreSQL's only.
fn client(state: &State, sql: &str) -> String {
    let sql = match state {
        State::Default(_) => statements(sql)
            .into_iter()
            .filter(|statement| !statement.contains("heads"))
            .collect::<Vec<_>>()
            .join("; "),
        State::Postgres(_) => sql.to_owned(),
    };
    state.sql(&sql)
}

/// `sql`'s statements (split at each `;` outside quotes).
fn statements(sql: &str) -> Vec<String> {
    let (mut all, mut one, mut quoted) = (Vec::new(), String::new(), false);
    for c in sql.chars() {
        match c {
            '\'' => quoted = !quoted,
            ';' if !quoted => {
                all.push(std::mem::take(&mut one).trim().to_owned());
                continue;
            }
            _ => {}
        }
        one.push(c);
    }
    all.push(one.trim().to_owned());
    all.retain(|s| !s.is_empty());
    all
}

const SAVE: &str = "CREATE TABLE bak_audit AS SELECT * FROM brain_audit; \
     CREATE TABLE bak_heads AS SELECT * FROM brain_audit_heads; \
     CREATE TABLE bak_checkpoints AS SELECT * FROM brain_audit_checkpoints";
const RESTORE: &str = "DELETE FROM brain_audit; INSERT INTO brain_audit SELECT * FROM bak_audit; \
     DELETE FROM brain_audit_heads; INSERT INTO brain_audit_heads SELECT * FROM bak_heads; \
     DELETE FROM brain_audit_checkpoints; \
     INSERT INTO brain_audit_checkpoints SELECT * FROM bak_checkpoints";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The chain's link, as an attacker who read the guide computes it.
fn link(previous: &str, record: &str) -> String {
    let previous: Vec<u8> = (0..previous.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&previous[i..i + 2], 16).unwrap())
        .collect();
    let mut hash = Sha256::new();
    hash.update(&previous);
    hash.update(record.as_bytes());
    hex(&hash.finalize())
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

async fn verify(state: &State, config: &str, public: &str) -> (i32, String) {
    let output = harness(
        state,
        None,
        &[
            "--config",
            config,
            "audit",
            "verify",
            "--public-key",
            public,
        ],
    )
    .await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// Runs `tamper`, checks that verify fails naming `expected`, and restores the chain.
async fn caught(state: &State, config: &str, public: &str, tamper: &str, expected: &str) {
    client(state, tamper);
    let (code, text) = verify(state, config, public).await;
    assert_eq!(code, 1, "{tamper}: {text}");
    assert!(
        text.contains(expected),
        "{tamper}: expected {expected:?} in:\n{text}"
    );
    client(state, RESTORE);
    let (code, text) = verify(state, config, public).await;
    assert_eq!(code, 0, "restored after {tamper}: {text}");
}

async fn setup(dir: &Path, state: &State, key: &str) -> (TestServer, String) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir, &server.url, |binding| {
        binding["tenants"] = json!(["local", "other"]);
    });
    for i in 0..6 {
        let ran = call(state, &config, key, "local", &format!("l{i}")).await;
        assert_eq!(ran["is_error"], json!(false), "{ran}");
    }
    for i in 0..2 {
        call(state, &config, key, "other", &format!("o{i}")).await;
    }
    (server, config)
}

async fn every_tampering_is_named(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = keys(dir.path(), "audit");
    let (_server, config) = setup(dir.path(), &state, &private).await;
    let (code, text) = verify(&state, &config, &public).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("verified 16 records in 2 chains"), "{text}");
    assert!(text.contains("0 records after it unsigned"), "{text}");
    client(&state, SAVE);
    // A copy of the store verifies as the live one does.
    if let State::Default(_) = &state {
        let copy = dir.path().join("copy.db");
        client(&state, &format!(".backup {}", copy.display()));
        // As private as brain keeps its own (it refuses a state file others may read).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
        let output = harness(
            &state,
            None,
            &[
                "--config",
                &config,
                "--state",
                &format!("sqlite:{}", copy.display()),
                "audit",
                "verify",
                "--public-key",
                &public,
            ],
        )
        .await;
        let said = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{said}");
        assert!(said.contains("verified 16 records in 2 chains"), "{said}");
    }

    // A finished call's outcome changed.
    caught(
        &state,
        &config,
        &public,
        "UPDATE brain_audit SET record = replace(record, '\"is_error\":false', \
         '\"is_error\":true') WHERE tenant = 'local' AND seq = 4",
        "tenant \"local\", record 4: edited",
    )
    .await;
    // A record in the middle deleted.
    caught(
        &state,
        &config,
        &public,
        "DELETE FROM brain_audit WHERE tenant = 'local' AND seq = 6",
        "record 7: record 6 before it was deleted",
    )
    .await;
    // The last 5 deleted, the head set back to match.
    caught(
        &state,
        &config,
        &public,
        "DELETE FROM brain_audit WHERE tenant = 'local' AND seq > 7; UPDATE brain_audit_heads \
         SET seq = 7, hash = (SELECT hash FROM brain_audit WHERE tenant = 'local' AND seq = 7) \
         WHERE tenant = 'local'",
        "record 7: the chain ends here, and checkpoint",
    )
    .await;
    // One tenant's whole chain.
    caught(
        &state,
        &config,
        &public,
        "DELETE FROM brain_audit WHERE tenant = 'other'; \
         DELETE FROM brain_audit_heads WHERE tenant = 'other'",
        "tenant \"other\": the store has no chain for this tenant",
    )
    .await;
    // Two records swapped.
    caught(
        &state,
        &config,
        &public,
        "UPDATE brain_audit SET seq = -seq WHERE tenant = 'local' AND seq IN (3, 4); \
         UPDATE brain_audit SET seq = 4 WHERE tenant = 'local' AND seq = -3; \
         UPDATE brain_audit SET seq = 3 WHERE tenant = 'local' AND seq = -4",
        "tenant \"local\", record 3: reordered",
    )
    .await;

    // A forged record inserted before the newest checkpoint, every hash after it recomputed.
    let rows = client(
        &state,
        "SELECT seq, record FROM brain_audit WHERE tenant = 'local' ORDER BY seq",
    );
    let rows: Vec<(i64, String)> = rows
        .lines()
        .map(|line| {
            let (seq, record) = line.split_once('|').unwrap();
            (seq.parse().unwrap(), record.to_owned())
        })
        .collect();
    let at = 5;
    let mut forged = Vec::new();
    let mut previous = client(
        &state,
        &format!(
            "SELECT hash FROM brain_audit WHERE tenant = 'local' AND seq = {}",
            at - 1
        ),
    )
    .trim()
    .to_owned();
    let mut records: Vec<String> = rows.iter().map(|(_, r)| r.clone()).collect();
    // A copy of the claim before it, as if a call had been made.
    records.insert(at as usize - 1, rows[at as usize - 3].1.clone());
    for (i, record) in records.iter().enumerate().skip(at as usize - 1) {
        let seq = i as i64 + 1;
        let old = serde_json::from_str::<Value>(record).unwrap()["seq"].clone();
        let record = record.replace(&format!("\"seq\":{old},"), &format!("\"seq\":{seq},"));
        let hash = link(&previous, &record);
        forged.push(format!(
            "INSERT INTO brain_audit (tenant, seq, at, record, hash) VALUES ('local', {seq}, {}, \
             {}, '{hash}')",
            serde_json::from_str::<Value>(&record).unwrap()["at"],
            quoted(&record)
        ));
        previous = hash;
    }
    let last = records.len();
    let sql = format!(
        "DELETE FROM brain_audit WHERE tenant = 'local' AND seq >= {at}; {}; UPDATE \
         brain_audit_heads SET seq = {last}, hash = '{previous}' WHERE tenant = 'local'",
        forged.join("; ")
    );
    caught(&state, &config, &public, &sql, "not the hash checkpoint").await;

    // The newest checkpoint replaced by one another key signed.
    let (other, _) = keys(dir.path(), "other");
    let signed = harness(
        &state,
        Some(&other),
        &["--config", &config, "audit", "sign"],
    )
    .await;
    assert_eq!(signed.status.code(), Some(0), "{signed:?}");
    caught(
        &state,
        &config,
        &public,
        "UPDATE brain_audit_checkpoints SET body = (SELECT body FROM brain_audit_checkpoints \
         ORDER BY id DESC LIMIT 1), signature = (SELECT signature FROM brain_audit_checkpoints \
         ORDER BY id DESC LIMIT 1) WHERE id = (SELECT max(id) FROM bak_checkpoints); \
         DELETE FROM brain_audit_checkpoints WHERE id > (SELECT max(id) FROM bak_checkpoints)",
        "which is not a trusted public key",
    )
    .await;

    // The tail deleted with the checkpoints that cover it: only an anchored checkpoint, kept
    // outside the store, shows it.
    let head = harness(&state, None, &["--config", &config, "audit", "head"]).await;
    assert_eq!(head.status.code(), Some(0), "{head:?}");
    let anchor = dir.path().join("anchor.json");
    std::fs::write(&anchor, &head.stdout).unwrap();
    client(
        &state,
        "DELETE FROM brain_audit WHERE tenant = 'local' AND seq > 10; \
         UPDATE brain_audit_heads SET seq = 10, hash = (SELECT hash FROM brain_audit \
         WHERE tenant = 'local' AND seq = 10) WHERE tenant = 'local'; \
         DELETE FROM brain_audit_checkpoints WHERE id > (SELECT max(id) - 3 FROM bak_checkpoints)",
    );
    let (code, text) = verify(&state, &config, &public).await;
    assert_eq!(code, 0, "without an anchor it cannot be seen: {text}");
    let args = [
        "--config",
        &config,
        "audit",
        "verify",
        "--public-key",
        &public,
        "--anchor",
    ];
    let missing = harness(&state, None, &args).await;
    assert_eq!(missing.status.code(), Some(2), "--anchor needs its file");
    let anchor = anchor.to_str().unwrap();
    let anchored = harness(&state, None, &[&args[..], &[anchor]].concat()).await;
    let said = String::from_utf8_lossy(&anchored.stdout);
    assert_eq!(anchored.status.code(), Some(1), "{said}");
    assert!(
        said.contains("the anchored checkpoint is not in the store"),
        "{said}"
    );
    assert!(
        said.contains("tenant \"local\", record 10: the chain ends here"),
        "{said}"
    );
    client(&state, RESTORE);

    // A forged tail: brain refuses to sign it.
    let last = client(
        &state,
        "SELECT record FROM brain_audit WHERE tenant = 'local' ORDER BY seq DESC LIMIT 1",
    );
    let tail = last.trim().replace("\"seq\":12,", "\"seq\":13,");
    let checkpoints = client(&state, "SELECT count(*) FROM brain_audit_checkpoints");
    client(
        &state,
        &format!(
            "INSERT INTO brain_audit (tenant, seq, at, record, hash) VALUES ('local', 13, {}, \
             {}, '{}'); UPDATE brain_audit_heads SET seq = 13 WHERE tenant = 'local'",
            serde_json::from_str::<Value>(&tail).unwrap()["at"],
            quoted(&tail),
            "0".repeat(64)
        ),
    );
    let refused = harness(
        &state,
        Some(&private),
        &["--config", &config, "audit", "sign"],
    )
    .await;
    let said = String::from_utf8_lossy(&refused.stdout);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        said.contains("refused: tenant \"local\", record 13: edited"),
        "{said}"
    );
    assert_eq!(
        client(&state, "SELECT count(*) FROM brain_audit_checkpoints"),
        checkpoints,
        "nothing signed"
    );
}

/// The guide's script (docs/src/guides/journal.md), as a user copies it.
fn guide_script() -> String {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/guides/journal.md"),
    )
    .unwrap();
    let start = guide
        .find("```python\n")
        .expect("the guide has the Python script");
    let script = &guide[start + "```python\n".len()..];
    script[..script.find("```").unwrap()].to_owned()
}

/// `brain-harness audit export --format jsonl`, written to `dir/name`.
async fn export(state: &State, config: &str, dir: &Path, name: &str) -> std::path::PathBuf {
    let args = ["--config", config, "audit", "export", "--format", "jsonl"];
    let exported = harness(state, None, &args).await;
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let file = dir.join(name);
    std::fs::write(&file, &exported.stdout).unwrap();
    file
}

/// The script exited 1, saying `why`.
fn refused(output: &Output, why: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr.contains(why), "expected {why:?} in {stderr}");
}

/// Prunes the state's chains as their retention would, in this process on the same store: a
/// checkpoint signed with `private` stating a retention of 1 ms, outlived at once, lets the
/// pruning take every record but each chain's newest.
async fn prune(state: &State, private: &str, public: &str) {
    use brain_runtime::audit::{AuditKey, AuditSettings, Keyring};
    use brain_runtime::journal::{Durability, Journal};
    use std::sync::Arc;
    use std::time::Duration;
    let journal = match state {
        State::Default(home) => {
            Journal::sqlite(&home.path().join("brain/state.db"), Durability::Normal).unwrap()
        }
        State::Postgres(cluster) => Journal::postgres(&cluster.url).await.unwrap(),
    };
    let key = AuditKey::from_pem_file(Path::new(private)).unwrap();
    let keys = Keyring::from_pem_files(&[public]).unwrap();
    let signed = brain_runtime::audit::sign(journal.store(), &key, &keys, Duration::from_millis(1))
        .await
        .unwrap();
    assert!(
        signed.signed.is_some() && signed.refused.is_empty(),
        "{signed:?}"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let journal = journal.audit(AuditSettings {
        retention: Duration::ZERO,
        key: Some(Arc::new(key)),
        ..AuditSettings::default()
    });
    journal.prune().await.unwrap();
}

async fn an_export_verifies_offline_until_a_byte_changes(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = keys(dir.path(), "audit");
    let (_server, config) = setup(dir.path(), &state, &private).await;
    let exported = export(&state, &config, dir.path(), "audit.jsonl").await;
    let script = dir.path().join("verify_audit.py");
    std::fs::write(&script, guide_script()).unwrap();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/.venv/bin/python");
    let offline = |file: &Path| {
        Command::new(&python)
            .args([script.as_path(), file, Path::new(&public)])
            .output()
            .unwrap()
    };
    let ok = offline(&exported);
    assert!(ok.status.success(), "{ok:?}");
    assert!(
        String::from_utf8_lossy(&ok.stdout).contains("verified 16 records"),
        "{ok:?}"
    );
    // One byte flipped inside a record's bytes.
    let text = std::fs::read_to_string(&exported).unwrap();
    let flipped = text.replacen("\\\"is_error\\\":false", "\\\"is_error\\\":fals3", 1);
    assert_ne!(flipped, text);
    let bad = dir.path().join("flipped.jsonl");
    std::fs::write(&bad, flipped).unwrap();
    refused(&offline(&bad), "edited");

    // OCSF: API Activity events with the record embedded.
    let ocsf = harness(
        &state,
        None,
        &["--config", &config, "audit", "export", "--format", "ocsf"],
    )
    .await;
    let first: Value = serde_json::from_str(
        String::from_utf8_lossy(&ocsf.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["class_uid"], json!(6003), "{first}");
    assert_eq!(first["api"]["operation"], json!("claimed"), "{first}");
    assert!(
        first["unmapped"]["brain_audit"]["record"].is_string(),
        "{first}"
    );

    // An empty export proves nothing: refused, saying so.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    refused(&offline(&empty), "the export is empty");

    // The checkpoints deleted: records nothing signed are refused with the key.
    client(&state, SAVE);
    client(&state, "DELETE FROM brain_audit_checkpoints");
    let unsigned = export(&state, &config, dir.path(), "unsigned.jsonl").await;
    refused(&offline(&unsigned), "16 records and no checkpoint");
    let (code, text) = verify(&state, &config, &public).await;
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no checkpoint verifies"), "{text}");
    client(&state, RESTORE);

    // Pruned as the retention allows: a checkpoint stating a retention of a millisecond,
    // outlived at once, then the pruning (which signs a checkpoint over its pruned_through
    // records). Each chain keeps its newest record and a pruned_through naming the one before.
    prune(&state, &private, &public).await;
    let pruned = export(&state, &config, dir.path(), "pruned.jsonl").await;
    let ok = offline(&pruned);
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{ok:?}");
    assert!(said.contains("verified 4 records in 2 chains"), "{said}");
    let (code, text) = verify(&state, &config, &public).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("verified 4 records in 2 chains"), "{text}");
    // Without the outlived checkpoint, nothing explains the records gone: deleted, not pruned.
    let lines = std::fs::read_to_string(&pruned).unwrap();
    let outlived = lines
        .lines()
        .find(|line| line.contains("\\\"retention_ms\\\":1,"))
        .expect("the checkpoint stating a millisecond");
    let hidden = dir.path().join("hidden.jsonl");
    std::fs::write(&hidden, lines.replace(&format!("{outlived}\n"), "")).unwrap();
    refused(&offline(&hidden), "deleted, not pruned");
}

/// A harness SIGKILLed mid-call: `verify` lists the call as claimed, its owner's lease
/// expired; a retry records it taken over as unknown, and the call is no longer open.
async fn a_killed_call_is_open_until_a_retry_takes_it_over(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = keys(dir.path(), "audit");
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir.path(), &server.url, |binding| {
        binding["timeout_seconds"] = json!(30);
    });
    let slow = || {
        let mut command = state.command();
        command
            .args(["--config", &config, "call", "--tenant", "local"])
            .args(["--call-id", "k1", "slow", r#"{"seconds": 30}"#])
            .env("BRAIN_AUDIT_KEY_FILE", &private)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    let mut running = slow().spawn().unwrap();
    common::state::until_running(&server).await;
    running.kill().unwrap();
    let _ = running.wait();
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    // The killed harness signed nothing: sign what it left, open claim and all.
    let signed = harness(
        &state,
        Some(&private),
        &["--config", &config, "audit", "sign"],
    )
    .await;
    assert_eq!(signed.status.code(), Some(0), "{signed:?}");
    let (code, text) = verify(&state, &config, &public).await;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("open: tenant \"local\", call \"k1\"")
            && text.contains("its owner's lease expired"),
        "{text}"
    );
    let retried = result(&wait(slow().spawn().unwrap()).await);
    assert_eq!(retried["unknown_outcome"], json!(true), "{retried}");
    let (code, text) = verify(&state, &config, &public).await;
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("open:"), "{text}");
    let last = client(
        &state,
        "SELECT record FROM brain_audit WHERE tenant = 'local' ORDER BY seq DESC LIMIT 1",
    );
    assert!(
        last.contains("\"kind\":\"taken_over_as_unknown\""),
        "{last}"
    );
}

/// The host config's `audit`: its public keys are the ones `verify` checks signatures with (a
/// checkpoint signed by another key is caught without `--public-key`), `sign` trusts them as a
/// start, its interval is the one `verify` warns against, and a private key named there is
/// refused before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_config_names_the_keys_and_the_interval() {
    let state = sqlite();
    let dir = tempfile::tempdir().unwrap();
    let (private, _) = keys(dir.path(), "audit");
    let (rogue, _) = keys(dir.path(), "rogue");
    let server = TestServer::start(Faults::default()).await.unwrap();
    let with_audit = |audit: Value| {
        let config = write_config(dir.path(), &server.url, |_| {});
        let mut document: Value =
            serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
        document["audit"] = audit;
        std::fs::write(&config, document.to_string()).unwrap();
        config
    };
    let config = with_audit(json!({"checkpoint_seconds": 1, "public_keys": ["audit.pub"]}));
    for id in ["c1", "c2"] {
        let ran = call(&state, &config, &private, "local", id).await;
        assert_eq!(ran["is_error"], json!(false), "{ran}");
    }
    let args = ["--config", &config, "audit", "verify"];
    let verify = || harness(&state, None, &args);
    let output = verify().await;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("verified 4 records"), "{text}");
    assert!(!text.contains("no public key given"), "{text}");
    // The config's interval: the newest checkpoint is soon older than twice a second.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let text = String::from_utf8_lossy(&verify().await.stdout).into_owned();
    assert!(
        text.contains("more than twice the interval (1 s)"),
        "{text}"
    );

    // Another key signs: `sign` starts from the config's key's checkpoint, and `verify`, which
    // trusts only the config's key, names the stranger's.
    let signed = harness(
        &state,
        Some(&rogue),
        &["--config", &config, "audit", "sign"],
    )
    .await;
    assert_eq!(signed.status.code(), Some(0), "{signed:?}");
    let output = verify().await;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("which is not a trusted public key"), "{text}");

    // A private key where a public key belongs: a config error, its text never repeated.
    let config = with_audit(json!({"public_keys": ["audit.pem"]}));
    let output = harness(&state, None, &["--config", &config, "audit", "verify"]).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("audit-public-key") && text.contains("this is a private key"),
        "{text}"
    );
    let secret = std::fs::read_to_string(&private).unwrap();
    assert!(!text.contains(secret.lines().nth(1).unwrap()), "{text}");
}

on_each_state!(
    a_killed_call_is_open_until_a_retry_takes_it_over,
    every_tampering_is_named,
    an_export_verifies_offline_until_a_byte_changes,
);
