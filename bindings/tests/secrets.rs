//! Tokens never leak: brain-harness runs with `RUST_LOG=trace` through a success, a refused token
//! (401), a timeout and protocol errors, on both revisions, and neither the token's value nor a
//! wrong token's value appears in stdout, stderr or the events; and OAuth's secrets (client
//! secrets, private keys and the assertions signed with them, workload assertions, tokens) never
//! appear either, against a real authorization server.

use std::process::{Command, Output};

use serde_json::{Value, json};
use tests::server::{Faults, TestServer};

const TOKEN: &str = "brain-secret-7f3a9c1e-token-value";
const WRONG: &str = "brain-wrong-5b2d8e4f-token-value";

fn binding(name: &str, url: &str, revision: &str, timeout: u64) -> Value {
    json!({
        "name": name, "description": "Echo under a fault.",
        "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        "url": url, "mcp_tool": "echo", "token_env": "BRAIN_SECRETS_TEST_TOKEN",
        "tenants": ["local"], "timeout_seconds": timeout, "protocol_version": revision
    })
}

/// `BRAIN_STATE_KEY` in the OAuth secrets test.
const STATE_KEY: &str = "xHq0V4l1Y7bV9tH3nF1m0kQ3bS6rW8eU2yP5cJ7zL1o=";

/// `brain-harness call` of `tool` at trace level, with `env` set.
async fn harness(
    config: String,
    tool: &'static str,
    env: Vec<(&'static str, &'static str)>,
) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            // Each process its own journal: these tests reuse call ids across calls.
            .env("BRAIN_STATE_URL", "memory:")
            .args([
                "--config", &config, "call", "--tenant", "local", "--json", tool,
            ])
            .arg(r#"{"message": "hello"}"#)
            .env("RUST_LOG", "trace")
            .envs(env)
            .output()
            .expect("brain-harness runs")
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_appear_in_no_output_even_at_trace_level() {
    let with = |faults: Faults| Faults {
        require_token: Some(TOKEN.into()),
        ..faults
    };
    let ok = TestServer::start(with(Faults::default())).await.unwrap();
    let malformed = TestServer::start(with(Faults {
        malformed_call: true,
        ..Faults::default()
    }))
    .await
    .unwrap();
    let truncated = TestServer::start(with(Faults {
        truncated_call: true,
        ..Faults::default()
    }))
    .await
    .unwrap();
    let stalled = TestServer::start(with(Faults {
        stall_call: true,
        ..Faults::default()
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for revision in ["2025-11-25", "2026-07-28"] {
        let config = dir.path().join(format!("{revision}.json"));
        let tools = json!({"tools": [
            binding("ok", &ok.url, revision, 30),
            binding("malformed", &malformed.url, revision, 30),
            binding("truncated", &truncated.url, revision, 30),
            binding("stalled", &stalled.url, revision, 1),
        ]});
        std::fs::write(&config, tools.to_string()).unwrap();
        let config = config.display().to_string();
        let runs = [
            ("ok", TOKEN, false, false),
            ("ok", WRONG, true, false),
            ("malformed", TOKEN, true, true),
            ("truncated", TOKEN, true, true),
            ("stalled", TOKEN, true, true),
        ];
        for (tool, token, is_error, unknown_outcome) in runs {
            let output = harness(
                config.clone(),
                tool,
                vec![("BRAIN_SECRETS_TEST_TOKEN", token)],
            )
            .await;
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let label = format!("{tool} with {token} at {revision}");
            let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
                .unwrap_or_else(|e| panic!("{label}: {e}: {stdout} {stderr}"));
            assert_eq!(
                (&result["is_error"], &result["unknown_outcome"]),
                (&json!(is_error), &json!(unknown_outcome)),
                "{label}: {result}"
            );
            // The logs are on: the test would see a token if one were logged.
            assert!(
                stderr.contains("call started"),
                "{label}: no trace logs: {stderr}"
            );
            for secret in [TOKEN, WRONG] {
                assert!(
                    !stdout.contains(secret),
                    "{label}: token in stdout: {stdout}"
                );
                assert!(
                    !stderr.contains(secret),
                    "{label}: token in stderr: {stderr}"
                );
            }
        }
    }
}

/// A P-256 key made for this test only (no server knows it).
const PRIVATE_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgw+isnOKb6MibFSLQ
AaDBrkIXs6rIDPrKywLyJKypQg+hRANCAAQuOO/8J2OjNR//Dq2X2jCuUX2P8yH0
0C/8qidvEJYYJ9Jch+rmfN+vqGrWXA26RBCgYExxwTMG3jzoCrad2Wls
-----END PRIVATE KEY-----
";
const WRONG_SECRET: &str = "brain-wrong-client-secret-3c9d1e7a";
const ASSERTION: &str = "eyJhbGciOiJFUzI1NiJ9.brain-workload-assertion-5e8f2a.c2lnbmF0dXJl";

/// OAuth's secrets — client secrets (right and wrong), a private key and the assertions signed
/// with it, a workload's assertion, and the access tokens obtained — appear in no output, at
/// trace level, whether the authorization server accepts them or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_secrets_appear_in_no_output_even_at_trace_level() {
    use tests::oauth::{SERVICE_CLIENT, SERVICE_SECRET, servers};
    let (_authorization, server) = servers(300, &[]).await;
    let with_auth = |name: &str, auth: Value| {
        let mut binding = binding(name, &server.url, "2025-11-25", 10);
        binding.as_object_mut().unwrap().remove("token_env");
        binding["auth"] = auth;
        binding
    };
    let tools = vec![
        with_auth(
            "service",
            json!({"type": "client_credentials", "client_id": SERVICE_CLIENT, "client_secret_env": "BRAIN_SECRETS_RIGHT"}),
        ),
        with_auth(
            "wrong_secret",
            json!({"type": "client_credentials", "client_id": SERVICE_CLIENT, "client_secret_env": "BRAIN_SECRETS_WRONG"}),
        ),
        with_auth(
            "signed",
            json!({"type": "client_credentials", "client_id": "brain-signed", "private_key_env": "BRAIN_SECRETS_KEY"}),
        ),
        with_auth(
            "workload",
            json!({"type": "jwt_bearer", "assertion_env": "BRAIN_SECRETS_ASSERTION"}),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    std::fs::write(&config, json!({ "tools": tools }).to_string()).unwrap();
    let config = config.display().to_string();
    let key_body: Vec<&str> = PRIVATE_KEY
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    for (tool, succeeds) in [
        ("service", true),
        ("wrong_secret", false),
        ("signed", false),
        ("workload", false),
    ] {
        let env = vec![
            ("BRAIN_SECRETS_RIGHT", SERVICE_SECRET),
            ("BRAIN_SECRETS_WRONG", WRONG_SECRET),
            ("BRAIN_SECRETS_KEY", PRIVATE_KEY),
            ("BRAIN_SECRETS_ASSERTION", ASSERTION),
            // The key that seals stored tokens.
            ("BRAIN_STATE_KEY", STATE_KEY),
        ];
        let output = harness(config.clone(), tool, env).await;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(output.status.success(), succeeds, "{tool}: {text}");
        if !succeeds {
            assert!(text.contains("refused the request"), "{tool}: {text}");
        }
        for secret in [
            SERVICE_SECRET,
            WRONG_SECRET,
            ASSERTION,
            "brain-workload-assertion",
            STATE_KEY,
            STATE_KEY.trim_end_matches('='),
        ]
        .into_iter()
        .chain(key_body.iter().copied())
        {
            assert!(!text.contains(secret), "{tool} printed a secret: {text}");
        }
        // No JWT at all: not the signed client assertion, not the workload's.
        assert!(!text.contains("eyJ"), "{tool} printed a JWT: {text}");
        // The access token (opaque, from introspection-guarded calls) never appears either: the
        // only Authorization values in a trace would be redacted by hyper's sensitive flag.
        assert!(!text.to_lowercase().contains("bearer "), "{tool}: {text}");
    }
}
