//! `brain-harness login` and `logout` as a user runs them, against a real authorization server
//! (oidc-provider on loopback, `tests::oauth`) and the test server guarding `/mcp` with its
//! tokens: the authorization URL opened in `$BROWSER` (a test browser that approves and follows
//! the redirects to the harness's loopback port), tokens stored in the state's SQLite file
//! (0600) and used by `call`, listed by `tokens` and never printed, even at trace level; an
//! earlier brain's `tokens.json` imported and retired.
#![allow(clippy::print_stderr)] // the authorization server's counts, printed for the record

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use tests::oauth::{USER_CLIENT, servers, servers_with};
use tests::server::bindings_json;

/// The state's key in the PostgreSQL tests (32 bytes, base64).
const STATE_KEY: &str = "qDaj0LoVFJmvB1cR1iA3yx7n0T0nKcqNNs2kpoaSWd8=";

/// The test browser, built beside brain-harness (in the `tests` package).
fn browser() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_brain-harness")).with_file_name("brain-test-browser");
    assert!(
        path.exists(),
        "{} is missing: build the workspace's binaries (cargo build --workspace)",
        path.display()
    );
    path
}

/// A host config in a test's directory: the test server's tools, whose users log in with the
/// authorization server's user client.
struct UserConfig {
    path: String,
}

impl UserConfig {
    /// Writes `dir/host.json`: the tools at `url`, pinned to `revision`, each edited by `edit`.
    fn write(dir: &Path, url: &str, revision: &str, edit: impl Fn(&mut Value)) -> UserConfig {
        let tools = bindings_json(url, |_, binding| {
            binding["auth"] = json!({"type": "authorization_code", "client_id": USER_CLIENT});
            binding["protocol_version"] = json!(revision);
            edit(binding);
        });
        let path = dir.join("host.json");
        std::fs::write(&path, json!({ "tools": tools }).to_string()).unwrap();
        UserConfig {
            path: path.display().to_string(),
        }
    }

    /// The harness's arguments: `--config` and `words`.
    fn args(&self, words: &[&str]) -> Vec<String> {
        let mut all = vec!["--config".to_owned(), self.path.clone()];
        all.extend(words.iter().map(|w| (*w).to_owned()));
        all
    }
}

/// The harness with its state (journal and tokens) in `dir/state.db`, and its config dir (where
/// an earlier brain kept `tokens.json`) in `dir/config`.
async fn harness(args: Vec<String>, dir: &Path) -> Output {
    let state = format!("sqlite:{}", dir.join("state.db").display());
    harness_on(args, dir, &state).await
}

/// The harness with its state at `state`.
async fn harness_on(args: Vec<String>, dir: &Path, state: &str) -> Output {
    let mut command = harness_command(&args, dir, state);
    tokio::task::spawn_blocking(move || command.output().expect("brain-harness runs"))
        .await
        .unwrap()
}

/// The harness command [`harness_on`] runs.
fn harness_command(args: &[String], dir: &Path, state: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_brain-harness"));
    // A database other hosts read keeps tokens only sealed.
    if state.starts_with("postgres") {
        command.env("BRAIN_STATE_KEY", STATE_KEY);
    }
    command
        .env("BRAIN_STATE_URL", state)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("BRAIN_TOKEN_STORE")
        .args(args)
        .env("BROWSER", browser())
        .env("RUST_LOG", "trace");
    command
}

fn all(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_stores_tokens_that_calls_use_and_logout_removes() {
    let (_authorization, server) = servers(300, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = UserConfig::write(dir.path(), &server.url, "2025-11-25", |_| {});
    let store = dir.path();
    let args = |words: &[&str]| config.args(words);

    let before = harness(
        args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]),
        store,
    )
    .await;
    assert_eq!(before.status.code(), Some(1), "{}", all(&before));
    assert!(
        all(&before).contains("brain-harness login --tenant local echo"),
        "{}",
        all(&before)
    );

    let login = harness(args(&["login", "--tenant", "local", "echo"]), store).await;
    assert_eq!(login.status.code(), Some(0), "{}", all(&login));
    assert!(
        all(&login).contains("Open this URL to authorize brain"),
        "{}",
        all(&login)
    );
    assert!(
        all(&login).contains("stored tokens for tenant local"),
        "{}",
        all(&login)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.join("state.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let entry = stored_tokens(&store.join("state.db"), "local").await;
    let access = entry["access_token"]
        .as_str()
        .expect("an access token")
        .to_owned();
    let refresh = entry["refresh_token"]
        .as_str()
        .expect("a refresh token")
        .to_owned();

    let call = harness(
        args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]),
        store,
    )
    .await;
    assert_eq!(call.status.code(), Some(0), "{}", all(&call));
    assert!(
        String::from_utf8_lossy(&call.stdout).contains(r#""text":"hi""#),
        "{}",
        all(&call)
    );
    let listed = harness(vec!["tokens".into(), "--json".into()], store).await;
    assert_eq!(listed.status.code(), Some(0), "{}", all(&listed));
    let grant: Value = serde_json::from_slice(&listed.stdout).expect("one grant, as JSON");
    assert_eq!(grant["binding"], "echo");
    assert_eq!(grant["tenant"], "local");
    assert_eq!(grant["state"], "valid");
    assert!(grant["expires"].is_string(), "{grant}");
    for output in [&login, &call, &listed] {
        let text = all(output);
        assert!(
            !text.contains(&access) && !text.contains(&refresh),
            "a token was printed"
        );
    }

    let other = harness(
        args(&["call", "--tenant", "other", "echo", r#"{"message": "hi"}"#]),
        store,
    )
    .await;
    assert_eq!(
        other.status.code(),
        Some(1),
        "tenant `other` is not allowed: {}",
        all(&other)
    );

    let logout = harness(args(&["logout", "--tenant", "local", "echo"]), store).await;
    assert_eq!(logout.status.code(), Some(0), "{}", all(&logout));
    let listed = harness(vec!["tokens".into(), "--json".into()], store).await;
    let grant: Value = serde_json::from_slice(&listed.stdout).expect("one grant, as JSON");
    assert_eq!(grant["state"], "logged_out", "a tombstone");
    let after = harness(
        args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]),
        store,
    )
    .await;
    assert_eq!(after.status.code(), Some(1), "{}", all(&after));
    assert!(
        all(&after).contains("brain-harness login"),
        "{}",
        all(&after)
    );

    let wrong = harness(
        args(&["login", "--tenant", "local", "progress_no_such_tool"]),
        store,
    )
    .await;
    assert_eq!(wrong.status.code(), Some(2), "{}", all(&wrong));
}

/// The tokens the state file at `path` holds for `tenant` (unsealed: a SQLite file in the
/// user's state dir, mode 0600, without `BRAIN_STATE_KEY`).
async fn stored_tokens(path: &Path, tenant: &str) -> Value {
    let journal =
        brain_runtime::journal::Journal::sqlite(path, brain_runtime::journal::Durability::Normal)
            .unwrap();
    let grants = journal.grants();
    let listed = grants.list().await.unwrap();
    let grant = listed
        .iter()
        .find(|g| g.key.tenant == tenant)
        .expect("the tenant's grant");
    let row = grants.load(&grant.key).await.unwrap().expect("the grant");
    serde_json::from_str(row.written.sealed.as_deref().expect("tokens")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_token_file_is_imported_once_and_the_old_variable_is_refused() {
    let (_authorization, server) = servers(300, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = UserConfig::write(dir.path(), &server.url, "2025-11-25", |_| {});
    let args = |words: &[&str]| config.args(words);
    // An earlier brain logged in: its tokens are in `tokens.json`.
    let earlier = dir.path().join("earlier");
    let login = harness(args(&["login", "--tenant", "local", "echo"]), &earlier).await;
    assert_eq!(login.status.code(), Some(0), "{}", all(&login));
    let tokens = stored_tokens(&earlier.join("state.db"), "local").await;
    let file = dir.path().join("config/brain/tokens.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let legacy = json!({"tokens": {format!("local {}", server.url): tokens}});
    std::fs::write(&file, legacy.to_string()).unwrap();

    let call = harness(
        args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]),
        dir.path(),
    )
    .await;
    assert_eq!(call.status.code(), Some(0), "{}", all(&call));
    assert!(all(&call).contains("imported 1 grant(s)"), "{}", all(&call));
    assert!(!file.exists(), "the file is retired");
    assert!(file.with_extension("json.imported").exists());
    let again = harness(
        args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]),
        dir.path(),
    )
    .await;
    assert_eq!(again.status.code(), Some(0), "{}", all(&again));
    assert!(
        !all(&again).contains("imported"),
        "imported once: {}",
        all(&again)
    );

    let old = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        let args = args(&["call", "--tenant", "local", "echo", "{}"]);
        move || {
            Command::new(env!("CARGO_BIN_EXE_brain-harness"))
                .env(
                    "BRAIN_STATE_URL",
                    format!("sqlite:{}", dir.join("state.db").display()),
                )
                .env("XDG_CONFIG_HOME", dir.join("config"))
                .env("BRAIN_TOKEN_STORE", dir.join("tokens.json"))
                .args(&args)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(old.status.code(), Some(2), "{}", all(&old));
    assert!(
        all(&old).contains("BRAIN_TOKEN_STORE is no longer read"),
        "{}",
        all(&old)
    );
}

/// 8 `brain-harness call` processes at once, in rounds after the access token (4 s) expired,
/// against oidc-provider rotating refresh tokens with its reuse detection (a spent refresh
/// token presented again revokes the grant): every call succeeds, and the authorization server
/// sees exactly one refresh per expiry and no `invalid_grant`.
async fn eight_processes_refresh_a_rotating_grant_once_per_expiry(state: Option<&str>) {
    let (authorization, server) = servers(4, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("state.db").display());
    let state = state.unwrap_or(&sqlite).to_owned();
    let config = UserConfig::write(dir.path(), &server.url, "2026-07-28", |_| {});
    let args = |words: &[&str]| config.args(words);
    let login = harness_on(
        args(&["login", "--tenant", "local", "echo"]),
        dir.path(),
        &state,
    )
    .await;
    assert_eq!(login.status.code(), Some(0), "{}", all(&login));
    // Every output, and (on SQLite, whose file holds them unsealed) every token the grant held,
    // to check at the end that no process printed one at trace level.
    let sqlite_path = state.strip_prefix("sqlite:").map(PathBuf::from);
    let mut outputs = vec![all(&login)];
    let mut secrets = Vec::new();
    for round in 0..4 {
        if let Some(path) = &sqlite_path {
            let tokens = stored_tokens(path, "local").await;
            for name in ["access_token", "refresh_token"] {
                secrets.push(tokens[name].as_str().expect(name).to_owned());
            }
        }
        if round == 3 {
            break;
        }
        if round > 0 {
            // Past the access token's expiry.
            tokio::time::sleep(std::time::Duration::from_millis(4_500)).await;
        }
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let args = args(&[
                    "call",
                    "--tenant",
                    "local",
                    "echo",
                    &format!(r#"{{"message": "r{round}p{i}"}}"#),
                ]);
                let (dir, state) = (dir.path().to_owned(), state.clone());
                tokio::spawn(async move { harness_on(args, &dir, &state).await })
            })
            .collect();
        for (i, call) in calls.into_iter().enumerate() {
            let output = call.await.unwrap();
            assert_eq!(
                output.status.code(),
                Some(0),
                "round {round}, process {i}: {}",
                all(&output)
            );
            assert!(
                String::from_utf8_lossy(&output.stdout).contains(&format!("r{round}p{i}")),
                "{}",
                all(&output)
            );
            outputs.push(all(&output));
        }
    }
    if sqlite_path.is_some() {
        secrets.sort();
        secrets.dedup();
        assert_eq!(secrets.len(), 6, "three generations of two tokens each");
    }
    for output in &outputs {
        assert!(output.contains("TRACE"), "trace level: {output}");
        for secret in &secrets {
            assert!(!output.contains(secret.as_str()), "a token was printed");
        }
    }
    let stats = authorization.stats().await;
    eprintln!("the authorization server's counts: {stats}");
    assert_eq!(
        stats["token"]["refresh_token"],
        json!(2),
        "one refresh per expiry: {stats}"
    );
    assert_eq!(
        stats["token_errors"],
        json!({}),
        "no invalid_grant: {stats}"
    );
    assert_eq!(
        stats["token"]["authorization_code"],
        json!(1),
        "one login: {stats}"
    );
    let listed = harness_on(vec!["tokens".into(), "--json".into()], dir.path(), &state).await;
    let grant: Value = serde_json::from_slice(&listed.stdout).expect("one grant, as JSON");
    assert_eq!(grant["state"], "valid", "{grant}");
    assert_eq!(grant["rotates"], true, "learnt from the refreshes: {grant}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_on_sqlite_refresh_a_rotating_grant_once_per_expiry() {
    eight_processes_refresh_a_rotating_grant_once_per_expiry(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_on_postgres_refresh_a_rotating_grant_once_per_expiry() {
    let cluster = tokio::task::spawn_blocking(tests::postgres::Cluster::start)
        .await
        .unwrap();
    eight_processes_refresh_a_rotating_grant_once_per_expiry(Some(&cluster.url)).await;
    // What the database holds of the tokens is sealed.
    let journal = brain_runtime::journal::Journal::postgres(&cluster.url)
        .await
        .unwrap();
    let grants = journal.grants();
    let listed = grants.list().await.unwrap();
    let row = grants.load(&listed[0].key).await.unwrap().unwrap();
    let sealed = row.written.sealed.expect("tokens");
    assert!(sealed.starts_with("brain-aead-1:"), "sealed");
    assert!(
        !sealed.contains("access_token") && !sealed.contains("refresh"),
        "{sealed}"
    );
    // Without the key, the harness refuses to use the database's tokens.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let tools = bindings_json("http://127.0.0.1:9/mcp", |_, binding| {
        binding["auth"] = json!({"type": "authorization_code", "client_id": USER_CLIENT});
    });
    std::fs::write(&config, json!({ "tools": tools }).to_string()).unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .env("BRAIN_STATE_URL", &cluster.url)
        .env_remove("BRAIN_STATE_KEY")
        .env("XDG_CONFIG_HOME", dir.path())
        .args([
            "--config",
            &config.display().to_string(),
            "call",
            "--tenant",
            "local",
            "echo",
            "{}",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", all(&refused));
    assert!(
        all(&refused).contains("BRAIN_STATE_KEY is not set"),
        "{}",
        all(&refused)
    );
}

/// A harness killed (SIGKILL) after its refresh request was sent — the authorization server
/// spent the refresh token and answers 20 s later. The next process waits for the dead
/// refresher's claim to expire (on the store's clock), then presents the old refresh token once
/// more: a server with a reuse grace period accepts it (`rotate: false`), one with reuse
/// detection refuses it, and the grant is marked as needing a login — one more refresh request,
/// no loop.
async fn a_refresher_killed_mid_refresh(rotate: bool, postgres: bool) {
    let env = [
        ("BRAIN_TEST_AS_REFRESH_DELAY_MS", "20000"),
        ("BRAIN_TEST_AS_ROTATE", if rotate { "1" } else { "0" }),
    ];
    let (authorization, server) = servers_with(2, &[], &env).await;
    let dir = tempfile::tempdir().unwrap();
    let cluster = if postgres {
        Some(
            tokio::task::spawn_blocking(tests::postgres::Cluster::start)
                .await
                .unwrap(),
        )
    } else {
        None
    };
    let state = match &cluster {
        Some(cluster) => cluster.url.clone(),
        None => format!("sqlite:{}", dir.path().join("state.db").display()),
    };
    let config = UserConfig::write(dir.path(), &server.url, "2026-07-28", |binding| {
        binding["timeout_seconds"] = json!(120);
    });
    let args = |words: &[&str]| config.args(words);
    let login = harness_on(
        args(&["login", "--tenant", "local", "echo"]),
        dir.path(),
        &state,
    )
    .await;
    assert_eq!(login.status.code(), Some(0), "{}", all(&login));
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;

    let call = args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]);
    let mut killed = harness_command(&call, dir.path(), &state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while authorization.tokens("refresh_token").await == 0 {
        assert!(std::time::Instant::now() < deadline, "no refresh was sent");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    killed.kill().unwrap(); // SIGKILL
    killed.wait().unwrap();

    let started = std::time::Instant::now();
    let next = harness_on(call.clone(), dir.path(), &state).await;
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(30),
        "the dead refresher's claim is waited for: {waited:?}"
    );
    let stats = authorization.stats().await;
    eprintln!("the authorization server's counts after {waited:?}: {stats}");
    let listed = harness_on(vec!["tokens".into(), "--json".into()], dir.path(), &state).await;
    let grant: Value = serde_json::from_slice(&listed.stdout).expect("one grant, as JSON");
    if rotate {
        assert_eq!(next.status.code(), Some(1), "{}", all(&next));
        assert!(
            all(&next).contains("login --tenant local echo"),
            "{}",
            all(&next)
        );
        assert_eq!(stats["token"]["refresh_token"], json!(1), "{stats}");
        assert_eq!(
            stats["token_errors"]["refresh_token:invalid_grant"],
            json!(1),
            "{stats}"
        );
        assert_eq!(grant["state"], "needs_login", "{grant}");
        // The next call asks for a login at once, without a token request.
        let after = harness_on(call, dir.path(), &state).await;
        assert_eq!(after.status.code(), Some(1), "{}", all(&after));
        assert!(all(&after).contains("needs a new login"), "{}", all(&after));
        assert_eq!(
            authorization.stats().await,
            stats,
            "no further token request"
        );
    } else {
        assert_eq!(next.status.code(), Some(0), "{}", all(&next));
        assert_eq!(stats["token"]["refresh_token"], json!(2), "{stats}");
        assert_eq!(stats["token_errors"], json!({}), "{stats}");
        assert_eq!(grant["state"], "valid", "{grant}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresher_killed_mid_refresh_is_recovered_within_a_reuse_grace_period() {
    a_refresher_killed_mid_refresh(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_refresher_killed_mid_refresh_is_recovered_within_a_reuse_grace_period() {
    a_refresher_killed_mid_refresh(false, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_refresher_killed_mid_refresh_leaves_a_grant_needing_login_without_a_loop() {
    a_refresher_killed_mid_refresh(true, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresher_killed_mid_refresh_leaves_a_grant_needing_login_without_a_loop() {
    a_refresher_killed_mid_refresh(true, false).await;
}

/// Two `brain-harness login` processes at the same moment, for two tenants: both keep their
/// tokens (the file of earlier brains was rewritten whole, and one tenant's tokens were lost).
async fn two_tenants_logging_in_at_once(state: Option<&str>) {
    let (_authorization, server) = servers(300, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("state.db").display());
    let state = state.unwrap_or(&sqlite).to_owned();
    let config = UserConfig::write(dir.path(), &server.url, "2026-07-28", |binding| {
        binding["tenants"] = json!(["a", "b"]);
    });
    let args = |words: &[&str]| config.args(words);
    for _ in 0..3 {
        let logins: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|tenant| {
                let (args, dir, state) = (
                    args(&["login", "--tenant", tenant, "echo"]),
                    dir.path().to_owned(),
                    state.clone(),
                );
                tokio::spawn(async move { harness_on(args, &dir, &state).await })
            })
            .collect();
        for login in logins {
            let login = login.await.unwrap();
            assert_eq!(login.status.code(), Some(0), "{}", all(&login));
        }
        for tenant in ["a", "b"] {
            let call = harness_on(
                args(&["call", "--tenant", tenant, "echo", r#"{"message": "kept"}"#]),
                dir.path(),
                &state,
            )
            .await;
            assert_eq!(
                call.status.code(),
                Some(0),
                "tenant {tenant}: {}",
                all(&call)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_logging_in_at_once_both_keep_their_tokens() {
    two_tenants_logging_in_at_once(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_two_tenants_logging_in_at_once_both_keep_their_tokens() {
    let cluster = tokio::task::spawn_blocking(tests::postgres::Cluster::start)
        .await
        .unwrap();
    two_tenants_logging_in_at_once(Some(&cluster.url)).await;
}
