//! `brain-harness login` and `logout` as a user runs them, against a real authorization server
//! (oidc-provider on loopback, `tests::oauth`) and the test server guarding `/mcp` with its
//! tokens: the authorization URL opened in `$BROWSER` (a test browser that approves and follows
//! the redirects to the harness's loopback port), tokens stored in a 0600 file and used by
//! `call`, and never printed, even at trace level.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use tests::oauth::{USER_CLIENT, servers};
use tests::server::bindings_json;

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

async fn harness(args: Vec<String>, store: &Path) -> Output {
    let store = store.to_owned();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            // Each process its own journal: these tests reuse call ids across calls.
            .env("BRAIN_STATE_URL", "memory:")
            .args(&args)
            .env("BRAIN_TOKEN_STORE", &store)
            .env("BROWSER", browser())
            .env("RUST_LOG", "trace")
            .output()
            .expect("brain-harness runs")
    })
    .await
    .unwrap()
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
    let tools = bindings_json(&server.url, |_, binding| {
        binding["auth"] = json!({"type": "authorization_code", "client_id": USER_CLIENT});
        binding["protocol_version"] = json!("2025-11-25");
    });
    let config = dir.path().join("host.json");
    std::fs::write(&config, json!({ "tools": tools }).to_string()).unwrap();
    let config = config.display().to_string();
    let store = dir.path().join("state/tokens.json");
    let args = |words: &[&str]| {
        let mut all = vec!["--config".to_owned(), config.clone()];
        all.extend(words.iter().map(|w| (*w).to_owned()));
        all
    };

    let before = harness(
        args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]),
        &store,
    )
    .await;
    assert_eq!(before.status.code(), Some(1), "{}", all(&before));
    assert!(
        all(&before).contains("brain-harness login --tenant local echo"),
        "{}",
        all(&before)
    );

    let login = harness(args(&["login", "--tenant", "local", "echo"]), &store).await;
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
        let mode = std::fs::metadata(&store).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let stored: Value = serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
    let entry = &stored["tokens"][format!("local {}", server.url)];
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
        &store,
    )
    .await;
    assert_eq!(call.status.code(), Some(0), "{}", all(&call));
    assert!(
        String::from_utf8_lossy(&call.stdout).contains(r#""text":"hi""#),
        "{}",
        all(&call)
    );
    for output in [&login, &call] {
        let text = all(output);
        assert!(
            !text.contains(&access) && !text.contains(&refresh),
            "a token was printed"
        );
    }

    let other = harness(
        args(&["call", "--tenant", "other", "echo", r#"{"message": "hi"}"#]),
        &store,
    )
    .await;
    assert_eq!(
        other.status.code(),
        Some(1),
        "tenant `other` is not allowed: {}",
        all(&other)
    );

    let logout = harness(args(&["logout", "--tenant", "local", "echo"]), &store).await;
    assert_eq!(logout.status.code(), Some(0), "{}", all(&logout));
    let after = harness(
        args(&["call", "--tenant", "local", "echo", r#"{"message": "hi"}"#]),
        &store,
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
        &store,
    )
    .await;
    assert_eq!(wrong.status.code(), Some(2), "{}", all(&wrong));
}
