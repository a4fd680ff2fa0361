//! Ids are data, never terminal input — across real `brain-harness` processes on the default
//! SQLite file and on a throwaway PostgreSQL cluster, counted at the server.
//!
//! `call` refuses a call id or session with a control character, or over 256 bytes (a
//! `tool.result`, exit 1): nothing held, journaled or sent. And what a store holds is printed
//! escaped by every command: control characters (ESC, DEL, U+0085), a bidi override (U+202E) and
//! a backslash written with the store's own client (`sqlite3`, `psql`) into the approvals, the
//! journal, the drift, the grants and the audit chain, and a config's tenant in `limits`, come
//! out as `\u{1b}` (text) or `\u001b` (JSON), never raw.

use std::process::{Command, Output, Stdio};

use brain_runtime::escape::escaped_char;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tests::server::{Faults, Stats, TestServer};

mod common;

use common::state::{State, on_each_state, postgres, sqlite};
use common::write_config;

/// The value written into the store: ESC, an SGR sequence, DEL, NEL (C1), RLO, a backslash.
const HOSTILE: &str = "h\u{1b}[31m\u{7f}\u{85}\u{202e}\\";
/// `HOSTILE` as text prints it.
const TEXT: &str = r"h\u{1b}[31m\u{7f}\u{85}\u{202e}\\";
/// `HOSTILE` inside a JSON line.
const JSON: &str = r"h\u001b[31m\u007f\u0085\u202e\\";

/// The attack: a call id that, printed raw, erases the line above and shows a smaller amount.
const ANSI_ID: &str = "c1\u{1b}[2K\u{1b}[1A  \"amount\": 5";

const POLICIES: &str = r#"
@id("echo")
permit (principal, action == Brain::Action::"tool:echo", resource)
when { !(context.input.message like "refund*") };

@id("refunds-need-a-person")
@approval
permit (principal, action == Brain::Action::"tool:echo", resource)
when { context.input.message like "refund*" && context.call.approval.granted == true };
"#;

const OPS_TOKEN: &str = "ops-approver-token-1";

/// The test server, and a config whose `echo` holds refunds for the approver `ops`, has a
/// rate limit, and allows the tenant `HOSTILE` too (a config's text, printed by `limits`).
async fn setup(dir: &std::path::Path) -> (TestServer, String) {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let config = write_config(dir, &server.url, |binding| {
        binding["timeout_seconds"] = json!(30);
        binding["tenants"] = json!(["local", HOSTILE]);
        if binding["name"] == json!("echo") {
            binding["limits"] = json!({"calls": 100, "per_seconds": 60});
        }
    });
    let mut host: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let token: String = Sha256::digest(OPS_TOKEN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    host["policies"] = json!({"files": ["policies/calls.cedar"]});
    host["approvals"] = json!({
        "approvers": [{"name": "ops", "tenants": ["local"], "token_sha256": token}],
    });
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("policies/calls.cedar"), POLICIES).unwrap();
    std::fs::write(&config, serde_json::to_string_pretty(&host).unwrap()).unwrap();
    (server, config)
}

/// `brain-harness ARGS…` on the state, as the approver `ops`.
async fn harness(state: &State, config: &str, args: &[&str]) -> Output {
    let mut command: Command = state.command();
    command
        .args(["--config", config])
        .args(args)
        .env("BRAIN_APPROVER_TOKEN", OPS_TOKEN)
        .env_remove("BRAIN_AUDIT_KEY_FILE")
        .stdin(Stdio::null());
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// `brain-harness call` of `echo` in `session` with `call_id`.
async fn call(state: &State, config: &str, session: &str, call_id: &str, message: &str) -> Output {
    let arguments = json!({"message": message}).to_string();
    harness(
        state,
        config,
        &[
            "call",
            "--tenant",
            "local",
            "--session",
            session,
            "--call-id",
            call_id,
            "echo",
            &arguments,
        ],
    )
    .await
}

/// What a command printed, stdout and stderr, after checking that neither holds a character
/// that must be escaped (line breaks between lines aside).
fn printed(output: &Output, what: &str) -> (String, String) {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    let stderr = String::from_utf8(output.stderr.clone()).unwrap();
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        let raw: Vec<char> = text
            .chars()
            .filter(|&c| c != '\n' && escaped_char(c))
            .collect();
        assert!(
            raw.is_empty(),
            "{what}: raw {raw:?} on {stream}:\n{}",
            text.escape_debug()
        );
    }
    (stdout, stderr)
}

/// A command's stdout, checked clean and holding `expected`.
async fn shows(state: &State, config: &str, args: &[&str], expected: &str) -> String {
    let output = harness(state, config, args).await;
    let (stdout, stderr) = printed(&output, &args.join(" "));
    assert!(
        stdout.contains(expected),
        "{args:?}: expected {expected:?} in:\n{stdout}\nstderr: {stderr}"
    );
    stdout
}

/// JSON Lines, each checked valid.
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// The `tool.result` a `call` printed, checked clean.
fn result(output: &Output) -> Value {
    let (stdout, _) = printed(output, "call");
    let last = stdout.lines().last().expect("a tool.result line");
    let result: Value = serde_json::from_str(last).unwrap();
    assert_eq!(result["type"], json!("tool.result"), "{stdout}");
    result
}

/// A refusal by the gate: a `tool.result`, exit 1, naming `field`, the id shown escaped.
fn refused(output: &Output, field: &str, shown: &str) {
    let result = result(output);
    assert_eq!(output.status.code(), Some(1), "{result}");
    assert_eq!(result["kind"], json!("refused"), "{result}");
    assert_eq!(result["unknown_outcome"], json!(false), "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("the {field} \"{shown}")),
        "{field}: {text}"
    );
}

async fn hostile_ids_are_refused_by_call_before_the_journal(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = setup(dir.path()).await;
    let calls = || Stats::get(&server.stats.calls);

    // The held refund of 900000 whose id would show "amount": 5 to the approver.
    let ansi = call(&state, &config, "s1", ANSI_ID, "refund 900000").await;
    refused(&ansi, "call id", r#"c1\u{1b}[2K\u{1b}[1A  "amount": 5"#);
    let session = call(&state, &config, "s\u{85}1", "c2", "refund 900000").await;
    refused(&session, "session", r"s\u{85}1");
    let session = call(&state, &config, "s\u{1b}[2J", "c3", "hello").await;
    refused(&session, "session", r"s\u{1b}[2J");
    let long = "a".repeat(257);
    refused(
        &call(&state, &config, "s1", &long, "hello").await,
        "call id",
        "aaaa",
    );
    refused(
        &call(&state, &config, &long, "c4", "hello").await,
        "session",
        "aaaa",
    );
    // Nothing held, nothing journaled, nothing sent.
    let listed = shows(
        &state,
        &config,
        &["approvals", "list", "--all", "--json"],
        "",
    )
    .await;
    assert!(listed.is_empty(), "{listed}");
    let journaled = shows(&state, &config, &["journal", "--json"], "").await;
    assert!(journaled.is_empty(), "{journaled}");
    assert_eq!(calls(), 0);

    // 256 bytes is an id: the call runs, once.
    let longest = "b".repeat(256);
    let ran = result(&call(&state, &config, &longest, &longest, "hello").await);
    assert_eq!(ran["is_error"], json!(false), "{ran}");
    assert_eq!(calls(), 1);
    let journaled = lines(&shows(&state, &config, &["journal", "--json"], &longest).await);
    assert_eq!(journaled.len(), 1, "{journaled:?}");
    assert_eq!(journaled[0]["call_id"], json!(longest));
}

/// The store's own client runs `sql`, `{H}` replaced by an SQL expression of `HOSTILE`.
fn client(state: &State, sql: &str) {
    let chr = match state {
        State::Default(_) => "char",
        State::Postgres(_) => "chr",
    };
    let hostile =
        format!("('h' || {chr}(27) || '[31m' || {chr}(127) || {chr}(133) || {chr}(8238) || '\\')");
    // The same inside a JSON string: ESC as JSON's escape (JSON has no raw C0), the backslash
    // doubled; DEL, NEL and RLO raw, as JSON allows.
    let json = format!("'h\\u001b[31m' || {chr}(127) || {chr}(133) || {chr}(8238) || '\\\\'");
    let sql = sql.replace("{H}", &hostile).replace("{J}", &json);
    let output = match state {
        State::Default(dir) => Command::new("sqlite3")
            .arg(dir.path().join("brain/state.db"))
            .arg(&sql)
            .output(),
        State::Postgres(cluster) => Command::new("psql")
            .args([
                cluster.url.as_str(),
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                &sql,
            ])
            .output(),
    }
    .expect("the store's client runs");
    assert!(output.status.success(), "{sql}: {output:?}");
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

async fn stored_control_characters_print_escaped(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (_server, config) = setup(dir.path()).await;
    let ran = result(&call(&state, &config, "s1", "c1", "hello").await);
    assert_eq!(ran["is_error"], json!(false), "{ran}");
    let held = result(&call(&state, &config, "s1", "r1", "refund 10").await);
    let id = held["approval_id"].as_str().expect("held").to_owned();

    // Approvals: every text column; the arguments JSON with a key repeated; a copy whose
    // arguments are not JSON; a decided copy whose approver is hostile.
    let columns = "tenant, session, call_id, binding, principal, digest, policies, arguments, \
                   reason, state, created, expires, decided_by, decided, used";
    client(
        &state,
        &format!(
            "UPDATE brain_approvals SET session = {{H}}, call_id = {{H}}, binding = {{H}}, \
             principal = {{H}}, reason = {{H}}, \
             arguments = '{{\"amount\":5,\"note\":\"' || {{J}} || '\",\"amount\":900000}}' \
             WHERE id = '{id}'; \
             INSERT INTO brain_approvals (id, {columns}) SELECT 'apr_text', tenant, session, \
             call_id, binding, principal, digest, policies, {{H}}, reason, state, created, \
             expires, decided_by, decided, used FROM brain_approvals WHERE id = '{id}'; \
             INSERT INTO brain_approvals (id, {columns}) SELECT 'apr_denied', tenant, session, \
             call_id, binding, principal, digest, policies, NULL, reason, 'denied', created, \
             expires, {{H}}, created, used FROM brain_approvals WHERE id = '{id}'"
        ),
    );
    // The journal: every text column, a JSON result, and a copy whose result is not JSON.
    let calls = "tenant, session, call_id, digest, binding, state, owner, created, deadline, \
                 finished, is_error, unknown_outcome, result, result_bytes, trace_id, task";
    client(
        &state,
        &format!(
            "UPDATE brain_calls SET session = {{H}}, call_id = {{H}}, binding = {{H}}, \
             owner = {{H}}, trace_id = {{H}}, \
             result = '{{\"text\":\"' || {{J}} || '\"}}' WHERE call_id = 'c1'; \
             INSERT INTO brain_calls ({calls}) SELECT tenant, 'copy', call_id, digest, binding, \
             state, owner, created, deadline, finished, is_error, unknown_outcome, {{H}}, \
             result_bytes, trace_id, task FROM brain_calls WHERE owner = {{H}}"
        ),
    );
    let now = now_ms();
    client(
        &state,
        &format!(
            "INSERT INTO brain_drift (binding, listed, process, pinned, fields, refused, \
             first_seen) VALUES ({{H}}, {{H}}, {{H}}, {{H}}, '[\"' || {{J}} || '\"]', 1 = 0, \
             {now}); \
             INSERT INTO brain_grants (grant_id, tenant, generation, state, binding, resource, \
             scopes, updated) VALUES ({{H}}, {{H}}, 1, 'valid', {{H}}, {{H}}, \
             'read ' || {{H}}, {now}); \
             UPDATE brain_audit SET record = {{H}} || record WHERE seq = 1"
        ),
    );

    // approvals list: a table, JSON Lines, with the decided ones.
    shows(&state, &config, &["approvals", "list"], TEXT).await;
    let listed = shows(&state, &config, &["approvals", "list", "--json"], JSON).await;
    for approval in lines(&listed) {
        assert_eq!(approval["call_id"], json!(HOSTILE), "{approval}");
    }
    shows(&state, &config, &["approvals", "list", "--all"], "denied").await;
    // approvals show: the arguments a line per top-level key, the repeated key twice.
    let shown = shows(&state, &config, &["approvals", "show", &id], TEXT).await;
    for line in [
        "arguments  (3 keys)",
        "  \"amount\": 5\n",
        &format!("  \"note\": \"{JSON}\"\n"),
        "  \"amount\": 900000\n",
        &format!("call_id    {TEXT}\n"),
        &format!("reason     {TEXT}\n"),
    ] {
        assert!(shown.contains(line), "{line:?} in:\n{shown}");
    }
    let shown = lines(&shows(&state, &config, &["approvals", "show", &id, "--json"], JSON).await);
    assert_eq!(shown[0]["arguments"]["note"], json!(HOSTILE));
    let text = format!("arguments (not JSON): \"{JSON}\"");
    shows(&state, &config, &["approvals", "show", "apr_text"], &text).await;
    let shown = lines(
        &shows(
            &state,
            &config,
            &["approvals", "show", "apr_text", "--json"],
            JSON,
        )
        .await,
    );
    assert_eq!(shown[0]["arguments_text"], json!(HOSTILE), "{:?}", shown[0]);
    let denied = format!("decided_by {TEXT}\n");
    shows(
        &state,
        &config,
        &["approvals", "show", "apr_denied"],
        &denied,
    )
    .await;

    // journal: the table, its results, JSON Lines.
    shows(&state, &config, &["journal"], TEXT).await;
    let results = shows(&state, &config, &["journal", "--results"], JSON).await;
    assert!(
        results.contains(&format!("result (not JSON): {TEXT}")),
        "{results}"
    );
    let listed = lines(&shows(&state, &config, &["journal", "--json", "--results"], JSON).await);
    let listed: Vec<&Value> = (listed.iter())
        .filter(|e| e["call_id"] == json!(HOSTILE))
        .collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    for entry in &listed {
        assert_eq!(entry["owner"], json!(HOSTILE), "{entry}");
    }
    assert!(listed.iter().any(|e| e["result_text"] == json!(HOSTILE)));
    assert!(listed.iter().any(|e| e["result"]["text"] == json!(HOSTILE)));

    // drift, tokens: tables and JSON Lines.
    shows(&state, &config, &["drift"], TEXT).await;
    let drift = lines(&shows(&state, &config, &["drift", "--json"], JSON).await);
    assert_eq!(drift[0]["process"], json!(HOSTILE), "{drift:?}");
    assert_eq!(drift[0]["fields"], json!([HOSTILE]), "{drift:?}");
    shows(&state, &config, &["tokens"], TEXT).await;
    let tokens = lines(&shows(&state, &config, &["tokens", "--json"], JSON).await);
    for field in ["binding", "tenant", "resource"] {
        assert_eq!(tokens[0][field], json!(HOSTILE), "{tokens:?}");
    }

    // audit: verify names the edited record; export carries its exact (hostile) bytes.
    shows(
        &state,
        &config,
        &["audit", "verify"],
        "record 1: not a record",
    )
    .await;
    let exported = lines(&shows(&state, &config, &["audit", "export"], JSON).await);
    assert!(
        exported.iter().any(|line| line["record"]
            .as_str()
            .is_some_and(|r| r.starts_with(HOSTILE))),
        "{exported:?}"
    );
    shows(
        &state,
        &config,
        &["audit", "export", "--format", "ocsf"],
        JSON,
    )
    .await;

    // limits: the config's tenant, in a bucket's name.
    shows(&state, &config, &["limits"], &format!("tenant/{TEXT}")).await;
    let limits = lines(&shows(&state, &config, &["limits", "--json"], JSON).await);
    assert!(
        limits
            .iter()
            .any(|b| b["bucket"] == json!(format!("rate:binding/echo/tenant/{HOSTILE}"))),
        "{limits:?}"
    );
}

/// A tenant's chain renamed to `HOSTILE` in the store: `audit verify` names it escaped.
async fn audit_verify_escapes_a_stored_tenant(state: State) {
    let dir = tempfile::tempdir().unwrap();
    let (_server, config) = setup(dir.path()).await;
    let ran = result(&call(&state, &config, "s1", "c1", "hello").await);
    assert_eq!(ran["is_error"], json!(false), "{ran}");
    client(&state, "UPDATE brain_audit SET tenant = {H}");
    let verified = harness(&state, &config, &["audit", "verify"]).await;
    let (stdout, _) = printed(&verified, "audit verify");
    // The tenant as Rust's Debug quotes it, then escaped whole: its backslashes doubled.
    assert!(stdout.contains(r"h\\u{1b}[31m"), "{stdout}");
}

on_each_state!(
    hostile_ids_are_refused_by_call_before_the_journal,
    stored_control_characters_print_escaped,
    audit_verify_escapes_a_stored_tenant,
);
