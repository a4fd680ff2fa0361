//! `cargo xtask discover` as a user runs it: the real binary against the test server on loopback
//! (and against the Python SDK server and server-everything: `discover_peers.rs`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::server::{Faults, TestServer, tool_list};

mod common;

use common::{args, bindings, passes_check, stderr, stdout, xtask};

#[tokio::test]
async fn prints_one_binding_per_named_tool() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let output = xtask(
        args(&[
            "discover",
            "--url",
            &server.url,
            "--tenant",
            "local,staging",
            "--tools",
            "weather,echo",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = bindings(&output);
    let tools = tool_list();
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    // The whole tool as the server listed it is pinned (rmcp serializes it as the server did).
    let pin = brain_config::ToolPin::of(&serde_json::to_value(echo).unwrap());
    assert_eq!(printed[1]["pin"], serde_json::to_value(&pin).unwrap());
    assert!(pin.fields.contains_key("name") && pin.digest.starts_with("sha256:"));
    let mut printed = printed;
    printed[1].as_object_mut().unwrap().remove("pin");
    assert_eq!(
        printed[1],
        json!({
            "name": "echo",
            "description": "Echo a message back.",
            "input_schema": Value::Object((*echo.input_schema).clone()),
            "url": server.url,
            "mcp_tool": "echo",
            "tenants": ["local", "staging"],
            "timeout_seconds": 300,
            "max_output_bytes": 1048576,
            "protocol_version": "2026-07-28"
        })
    );
    assert_eq!(printed[0]["name"], json!("weather"));
    assert_eq!(
        printed[0]["output_schema"]["required"],
        json!(["city", "temperature"])
    );
    // No lint for these tools: stderr only names the revision.
    assert_eq!(
        stderr(&output),
        format!(
            "the server at {} speaks MCP 2026-07-28; the bindings pin it in `protocol_version`\n",
            server.url
        )
    );
    passes_check(&printed).await;
}

#[tokio::test]
async fn go_style_flags_and_every_page() {
    let server = TestServer::start(Faults {
        extra_tools: 128,
        page_size: Some(7),
        ..Faults::default()
    })
    .await
    .unwrap();
    let output = xtask(
        args(&[
            "discover",
            "-url",
            &server.url,
            "-tenant",
            "local",
            "-tools",
            "generated_127,echo",
            "--timeout-seconds",
            "60",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = bindings(&output);
    assert_eq!(printed.len(), 2);
    assert_eq!(
        printed[0]["description"],
        json!("Generated tool number 127.")
    );
    assert_eq!(printed[0]["timeout_seconds"], json!(60));
}

#[tokio::test]
async fn missing_tools_are_named_and_exit_1() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let output = xtask(
        args(&[
            "discover",
            "--url",
            &server.url,
            "--tenant",
            "local",
            "--tools",
            "echo,nope,gone",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with(&format!(
            "error: the server at {} has no tool named \"nope\", \"gone\"\n  help: it has \"echo\"",
            server.url
        )),
        "{}",
        stderr(&output)
    );
    assert_eq!(stdout(&output), "");
}

#[tokio::test]
async fn refuses_zero_or_more_than_128_names() {
    let names: Vec<String> = (0..129).map(|i| format!("t{i}")).collect();
    let output = xtask(
        args(&[
            "discover",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--tenant",
            "local",
            "--tools",
            &names.join(","),
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("names 129 tools; name 1 to 128"),
        "{}",
        stderr(&output)
    );
    let output = xtask(
        args(&[
            "discover",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--tenant",
            "local",
            "--tools",
            "",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
}

#[tokio::test]
async fn gives_up_on_a_server_that_never_answers() {
    // Connections complete in the kernel's backlog, but nothing ever answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let started = Instant::now();
    let output = xtask(
        args(&[
            "discover", "--url", &url, "--tenant", "local", "--tools", "echo",
        ]),
        vec![("BRAIN_DISCOVER_TIMEOUT_SECONDS", "1".into())],
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("discovery took longer than 1 s"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn a_refused_token_names_the_variable_never_the_value() {
    let server = TestServer::start(Faults {
        require_token: Some("right-token".into()),
        ..Faults::default()
    })
    .await
    .unwrap();
    let base = [
        "discover",
        "--url",
        &server.url,
        "--tenant",
        "local",
        "--tools",
        "echo",
    ];
    let mut with_token = args(&base);
    with_token.extend(args(&["--token-env", "BRAIN_DISCOVER_TEST_TOKEN"]));

    let output = xtask(
        with_token.clone(),
        vec![("BRAIN_DISCOVER_TEST_TOKEN", "wrong-token".into())],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output)
            .contains("the server refused the token in BRAIN_DISCOVER_TEST_TOKEN (HTTP 401)"),
        "{}",
        stderr(&output)
    );
    assert!(!stderr(&output).contains("wrong-token"));

    let output = xtask(args(&base), vec![]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("--token-env"),
        "{}",
        stderr(&output)
    );

    let output = xtask(with_token.clone(), vec![]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("BRAIN_DISCOVER_TEST_TOKEN is not set"),
        "{}",
        stderr(&output)
    );

    let output = xtask(
        with_token,
        vec![("BRAIN_DISCOVER_TEST_TOKEN", "right-token".into())],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        bindings(&output)[0]["token_env"],
        json!("BRAIN_DISCOVER_TEST_TOKEN")
    );
}

#[tokio::test]
async fn write_merges_atomically_and_check_finds_drift() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    std::fs::write(
        &config,
        json!({"$schema": "../brain-config/host-config.schema.json", "tools": [
            {"name": "keep_me", "description": "An HTTP tool.", "input_schema": {"type": "object"},
             "url": "https://tools.example.com/x", "tenants": ["local"]},
            {"name": "echo", "description": "An old echo.", "input_schema": {"type": "object"},
             "url": server.url, "mcp_tool": "echo", "tenants": ["local"]}
        ]})
        .to_string(),
    )
    .unwrap();
    let path = config.to_str().unwrap();
    let output = xtask(
        args(&[
            "discover",
            "--url",
            &server.url,
            "--tenant",
            "local",
            "--tools",
            "echo,weather,image",
            "--write",
            path,
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(": 1 replaced, 2 added, 4 bindings in all"),
        "{}",
        stdout(&output)
    );
    let written: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    let names: Vec<&str> = written["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["keep_me", "echo", "weather", "image"]);
    assert_eq!(
        written["tools"][1]["description"],
        json!("Echo a message back.")
    );
    assert_eq!(
        written["$schema"],
        json!("../brain-config/host-config.schema.json")
    );

    // The pinned bindings match their server...
    let output = xtask(args(&["discover", "--check", path]), vec![]).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("ok: 3 MCP bindings match their servers"),
        "{}",
        stdout(&output)
    );

    // ...until the server changes `echo` under the reviewed config.
    drop(server);
    let url = written["tools"][1]["url"].as_str().unwrap().to_owned();
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    // The old server lets go of its port once its graceful shutdown ends.
    let mut listener = None;
    for _ in 0..100 {
        if let Ok(bound) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            listener = Some(bound);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listener = listener.expect("the port is free again");
    let _drifted = TestServer::serve(
        listener,
        Faults {
            drifted: true,
            ..Faults::default()
        },
    )
    .unwrap();
    let output = xtask(args(&["discover", "--check", path]), vec![]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains(&format!("drift: tool \"echo\" (mcp_tool \"echo\" at {url}):\n  description:\n    - pinned: \"Echo a message back.\"\n    + live:   \"Echo a message back, louder.\"\n  input_schema:\n    /properties/volume: added {{\"type\":\"integer\"}}\n")), "{out}");
    // Fields read only through the pin, and a rename.
    assert!(out.contains(&format!("drift: tool \"weather\" (mcp_tool \"weather\" at {url}):\n  _meta: added {{\"version\":2}}\n  title: added \"Weather now\"\n")), "{out}");
    assert!(out.contains(&format!("drift: tool \"image\" (mcp_tool \"image\" at {url}):\n  the server no longer has this tool\n  it was most likely renamed to \"picture\" (an unbound tool with the same input schema); bind it with --tools picture\n")), "{out}");
    assert!(out.contains("error: 3 of 3 MCP bindings drifted"), "{out}");
}

#[tokio::test]
async fn write_refuses_a_merge_that_would_be_invalid() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let before = json!({"tools": [{"name": "Echo", "description": "Collides with echo as a Rust type.",
        "input_schema": {"type": "object"}, "url": "https://tools.example.com/x", "tenants": ["local"]}]})
    .to_string();
    std::fs::write(&config, &before).unwrap();
    let output = xtask(
        args(&[
            "discover",
            "--url",
            &server.url,
            "--tenant",
            "local",
            "--tools",
            "echo",
            "--write",
            config.to_str().unwrap(),
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("error[ident-collision]"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        before,
        "the file is untouched"
    );
}

/// Tools of two servers with the same name: `--write` refuses to replace one with the other
/// (the file unchanged), `--prefix` binds the second apart (the server's name kept in
/// `mcp_tool`, a name the model cannot see rewritten and reported), `--replace` replaces.
#[tokio::test]
async fn write_refuses_a_collision_unless_prefixed_or_replaced() {
    let first = TestServer::start(Faults::default()).await.unwrap();
    let second = TestServer::start(Faults::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let path = config.to_str().unwrap();
    let discover = |url: &str, extra: &[&str]| {
        let mut list = vec![
            "discover", "--url", url, "--tenant", "local", "--tools", "echo", "--write", path,
        ];
        list.extend_from_slice(extra);
        xtask(args(&list), vec![])
    };
    let names = || {
        let written: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
        written["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_owned(),
                    t["mcp_tool"].as_str().unwrap().to_owned(),
                    t["url"].as_str().unwrap().to_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    let output = discover(&first.url, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // The same server again: an update, not a collision.
    let output = discover(&first.url, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let before = std::fs::read(&config).unwrap();

    let output = discover(&second.url, &[]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains("already has a binding \"echo\" that calls MCP tool \"echo\" at")
            && said.contains(&second.url)
            && said.contains("--prefix")
            && said.contains("--replace"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&config).unwrap(),
        before,
        "the file must not change"
    );

    let output = discover(&second.url, &["--prefix", "second.v2."]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("tool \"echo\" is bound as \"second_v2_echo\""),
        "{}",
        stderr(&output)
    );
    let expected_first = ("echo".to_owned(), "echo".to_owned(), first.url.clone());
    let prefixed = (
        "second_v2_echo".to_owned(),
        "echo".to_owned(),
        second.url.clone(),
    );
    assert_eq!(names(), [expected_first, prefixed.clone()]);

    let output = discover(&second.url, &["--replace"]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("\"echo\" replaced"),
        "{}",
        stderr(&output)
    );
    let replaced = ("echo".to_owned(), "echo".to_owned(), second.url.clone());
    assert_eq!(names(), [replaced, prefixed]);
}

#[tokio::test]
async fn on_input_request_is_carried_into_the_bindings() {
    let server = TestServer::start(Faults::default()).await.unwrap();
    let discover = |choice: &str| {
        args(&[
            "discover",
            "--url",
            &server.url,
            "--tenant",
            "local",
            "--tools",
            "elicit",
            "--on-input-request",
            choice,
        ])
    };
    let output = xtask(discover("decline"), vec![]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(bindings(&output)[0]["on_input_request"], json!("decline"));
    passes_check(&bindings(&output)).await;
    // `fail` is the default: left out of the binding.
    let output = xtask(discover("fail"), vec![]).await;
    assert_eq!(bindings(&output)[0].get("on_input_request"), None);
    let output = xtask(discover("ask"), vec![]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("neither `fail` nor `decline`"),
        "{}",
        stderr(&output)
    );
}

/// `--command` (and the Go tool's `-command`): the stdio test server started, listed and shut
/// down; the bindings carry `command`, `env` and `env_from` (never a value) and pass every rule;
/// `--write` then `--check` find no drift, and a server that changed is reported.
#[tokio::test]
async fn a_stdio_server_by_command() {
    let server = tests::process::test_server_binary().display().to_string();
    let command = format!("'{server}' --stdio");
    let output = xtask(
        args(&[
            "discover",
            "-command",
            &command,
            "--env",
            "MODE=demo",
            "--env-from",
            "API_KEY=BRAIN_TEST_STDIO_SECRET",
            "--tenant",
            "local",
            "--tools",
            "echo,weather",
        ]),
        vec![("BRAIN_TEST_STDIO_SECRET", "hunter2-secret".to_owned())],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = bindings(&output);
    assert_eq!(printed.len(), 2);
    assert_eq!(printed[0]["command"], json!([server, "--stdio"]));
    assert_eq!(printed[0]["env"], json!({"MODE": "demo"}));
    assert_eq!(
        printed[0]["env_from"],
        json!({"API_KEY": "BRAIN_TEST_STDIO_SECRET"})
    );
    assert_eq!(printed[0]["protocol_version"], "2025-11-25");
    assert!(printed[0].get("url").is_none());
    assert!(!stdout(&output).contains("hunter2") && !stderr(&output).contains("hunter2"));
    passes_check(&printed).await;

    // A variable named by --env-from that is not set: refused, by name.
    let unset = xtask(
        args(&[
            "discover",
            "--command",
            &command,
            "--env-from",
            "API_KEY=BRAIN_TEST_UNSET_VAR",
            "--tenant",
            "local",
            "--tools",
            "echo",
        ]),
        vec![],
    )
    .await;
    assert_eq!(unset.status.code(), Some(1), "{}", stderr(&unset));
    assert!(
        stderr(&unset).contains("BRAIN_TEST_UNSET_VAR"),
        "{}",
        stderr(&unset)
    );

    // --write, then --check: no drift; with `echo` changed (the server started with --drifted),
    // drift on `echo`.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    let config = config.to_str().unwrap();
    let write = xtask(
        args(&[
            "discover",
            "--command",
            &command,
            "--tenant",
            "local",
            "--tools",
            "echo",
            "--write",
            config,
        ]),
        vec![],
    )
    .await;
    assert_eq!(write.status.code(), Some(0), "{}", stderr(&write));
    let check = xtask(args(&["discover", "--check", config]), vec![]).await;
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}{}",
        stdout(&check),
        stderr(&check)
    );
    let mut text: Value = serde_json::from_str(&std::fs::read_to_string(config).unwrap()).unwrap();
    text["tools"][0]["command"] = json!([server, "--stdio", "--drifted"]);
    std::fs::write(config, text.to_string()).unwrap();
    let check = xtask(args(&["discover", "--check", config]), vec![]).await;
    assert_eq!(
        check.status.code(),
        Some(1),
        "{}{}",
        stdout(&check),
        stderr(&check)
    );
    assert!(
        stdout(&check).contains("drift: tool \"echo\""),
        "{}",
        stdout(&check)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_server_is_discovered_and_checked_with_auth() {
    use tests::oauth::{SERVICE_CLIENT, SERVICE_SECRET, servers};
    let (authorization, server) = servers(300, &[]).await;
    let auth = json!({"type": "client_credentials", "client_id": SERVICE_CLIENT,
        "client_secret_env": "BRAIN_DISCOVER_TEST_SECRET"})
    .to_string();
    let base = args(&[
        "discover",
        "--url",
        &server.url,
        "--tenant",
        "local",
        "--tools",
        "echo",
    ]);
    let without = xtask(base.clone(), vec![]).await;
    assert_eq!(without.status.code(), Some(1));
    assert!(stderr(&without).contains("--auth"), "{}", stderr(&without));

    let mut with_auth = base.clone();
    with_auth.extend(args(&["--auth", &auth]));
    let unset = xtask(with_auth.clone(), vec![]).await;
    assert_eq!(unset.status.code(), Some(1));
    assert!(
        stderr(&unset).contains("BRAIN_DISCOVER_TEST_SECRET (auth.client_secret_env)"),
        "{}",
        stderr(&unset)
    );

    let env = vec![("BRAIN_DISCOVER_TEST_SECRET", SERVICE_SECRET.to_owned())];
    let output = xtask(with_auth, env.clone()).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = bindings(&output);
    assert_eq!(printed[0]["auth"]["client_id"], json!(SERVICE_CLIENT));
    assert!(!stdout(&output).contains(SERVICE_SECRET) && !stderr(&output).contains(SERVICE_SECRET));
    passes_check(&printed).await;

    // --check reaches the server with each binding's auth.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    std::fs::write(&path, json!({ "tools": printed }).to_string()).unwrap();
    let check = xtask(args(&["discover", "--check", path.to_str().unwrap()]), env).await;
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    assert_eq!(authorization.tokens("client_credentials").await, 2);
}
