//! `cargo xtask discover` as a user runs it against third-party MCP servers on loopback: the
//! Python SDK server (today's release and older ones) and server-everything.

use serde_json::json;

mod common;

use common::{args, bindings, passes_check, stderr, stdout, xtask};

#[tokio::test]
async fn python_sdk_server() {
    let peer = tests::peers::Peer::python();
    let output = xtask(
        args(&[
            "discover",
            "--url",
            &peer.url,
            "--tenant",
            "local",
            "--tools",
            "echo,weather,image",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = bindings(&output);
    assert_eq!(printed[0]["description"], json!("Echo a message back."));
    assert_eq!(printed[0]["input_schema"]["required"], json!(["message"]));
    assert_eq!(
        printed[1]["output_schema"]["required"],
        json!(["city", "temperature"])
    );
    assert_eq!(printed[0]["protocol_version"], json!("2026-07-28"));
    passes_check(&printed).await;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    std::fs::write(&path, json!({ "tools": printed }).to_string()).unwrap();
    let output = xtask(
        args(&["discover", "--check", path.to_str().unwrap()]),
        vec![],
    )
    .await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );

    let output = xtask(
        args(&[
            "discover",
            "--url",
            &peer.url,
            "--tenant",
            "local",
            "--tools",
            "echo,missing_one",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no tool named \"missing_one\""),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn server_everything() {
    let peer = tests::peers::Peer::everything();
    let output = xtask(
        args(&[
            "discover",
            "--url",
            &peer.url,
            "--tenant",
            "local",
            "--tools",
            "echo,get-structured-content,trigger-long-running-operation",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = bindings(&output);
    assert_eq!(printed.len(), 3);
    assert_eq!(printed[1]["annotations"]["readOnlyHint"], json!(true));
    assert!(printed[1]["output_schema"]["properties"]["humidity"].is_object());
    // `get-structured-content` is a fine name for a model; the config accepts it unchanged.
    passes_check(&printed).await;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.json");
    std::fs::write(&path, json!({ "tools": printed }).to_string()).unwrap();
    let output = xtask(
        args(&["discover", "--check", path.to_str().unwrap()]),
        vec![],
    )
    .await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );

    // A tool that runs only as an MCP task is bound as one: `task: true`, and the server's
    // declaration that it runs tool calls as tasks pinned.
    let output = xtask(
        args(&[
            "discover",
            "--url",
            &peer.url,
            "--tenant",
            "local",
            "--tools",
            "echo,simulate-research-query",
        ]),
        vec![],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = bindings(&output);
    passes_check(&printed).await;
    let research = printed
        .iter()
        .find(|b| b["mcp_tool"] == "simulate-research-query")
        .expect("bound");
    assert_eq!(research["task"], json!(true), "{research}");
    assert_eq!(research["server_tasks"], json!(true), "{research}");
    assert_eq!(
        research["protocol_version"],
        json!("2025-11-25"),
        "{research}"
    );
    let echo = printed.iter().find(|b| b["mcp_tool"] == "echo").unwrap();
    assert_eq!(echo.get("task"), None, "{echo}");
}

/// Older Python SDK releases: discovery names and pins the revision each negotiates, the
/// bindings pass every rule, and `--check` finds no drift.
#[tokio::test]
async fn older_python_sdk_servers_pin_their_revision() {
    for (release, revision, structured) in
        [("1.9", "2025-03-26", false), ("1.12", "2025-06-18", true)]
    {
        let peer = tests::peers::Peer::python_v1(release);
        let output = xtask(
            args(&[
                "discover",
                "--url",
                &peer.url,
                "--tenant",
                "local",
                "--tools",
                "echo,weather",
            ]),
            vec![],
        )
        .await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(
            stderr(&output).contains(&format!("speaks MCP {revision}")),
            "{}",
            stderr(&output)
        );
        let printed = bindings(&output);
        assert!(
            printed
                .iter()
                .all(|b| b["protocol_version"] == json!(revision))
        );
        assert_eq!(
            printed[1].get("output_schema").is_some(),
            structured,
            "{release}"
        );
        passes_check(&printed).await;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.json");
        std::fs::write(&path, json!({ "tools": printed }).to_string()).unwrap();
        let output = xtask(
            args(&["discover", "--check", path.to_str().unwrap()]),
            vec![],
        )
        .await;
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}{}",
            stdout(&output),
            stderr(&output)
        );
    }
}
