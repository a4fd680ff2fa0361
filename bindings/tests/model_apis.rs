//! Tool definitions for each model API, tried as a user would: `brain-harness tools --format`
//! over the codegen corpus (13 real servers, 192 tools), checked by the model APIs' own SDK code
//! (`tests/interop/model_apis.py` in `.venv-models`: openai-agents 0.24.0, anthropic 2.10.0,
//! google-genai 3.3.0; `tests/interop/setup.sh` installs them), and `call --from openai` against
//! the official Python SDK server with every optional argument `null`.

#![allow(clippy::print_stderr)] // the SDKs' report and each API's counts, printed for the record

use std::path::{Path, PathBuf};
use std::process::Command;

use brain_config::ModelApi;
use serde_json::{Value, json};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `brain-harness ARGS`: (exit code, stdout, stderr).
fn harness(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        .env("BRAIN_STATE_URL", "memory:")
        .args(args)
        .output()
        .expect("brain-harness runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn every_format_of_the_corpus_passes_the_model_apis_own_sdks() {
    let corpus = workspace().join("brain-codegen/corpus/host.json");
    let corpus = corpus.to_str().unwrap();
    let mut documents = serde_json::Map::new();
    for api in ModelApi::ALL {
        let (code, stdout, stderr) = harness(&[
            "--config",
            corpus,
            "tools",
            "--format",
            api.as_str(),
            "--tenant",
            "local",
        ]);
        assert_eq!(code, Some(0), "{stderr}");
        // stdout is exactly the document; every note went to stderr.
        let document: Value = serde_json::from_str(&stdout).expect("stdout is one JSON document");
        let summary = stderr.lines().last().unwrap_or_default().to_owned();
        eprintln!("{summary}");
        assert!(
            summary.starts_with(&format!("{api}: 192 of 192 tools")),
            "{summary}"
        );
        documents.insert(api.as_str().to_owned(), document);
    }
    // Each tool alone for Anthropic too, past its per-request limit of 20 strict tools.
    let config =
        brain_config::load_file(&workspace().join("brain-codegen/corpus/host.json")).unwrap();
    let alone: Vec<Value> = config
        .tools
        .iter()
        .filter_map(|b| brain_config::model_api::project(ModelApi::Anthropic, b).definition)
        .collect();
    documents.insert("anthropic-alone".into(), json!({"tools": alone}));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("definitions.json");
    std::fs::write(&file, Value::Object(documents).to_string()).unwrap();
    let interop = workspace().join("tests/interop");
    let checked = Command::new(interop.join(".venv-models/bin/python"))
        .arg(interop.join("model_apis.py"))
        .arg(&file)
        .output()
        .expect("tests/interop/setup.sh installed .venv-models");
    let report = String::from_utf8_lossy(&checked.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&checked.stderr));
    assert!(
        checked.status.success(),
        "the SDKs refused some definitions:\n{report}"
    );
    let lines: Vec<Value> = report
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let strict = |api: &str| {
        lines
            .iter()
            .find(|l| l["api"] == api)
            .map(|l| l["strict"].as_u64().unwrap())
            .unwrap()
    };
    assert!(strict("openai") >= 150, "{report}");
    assert_eq!(strict("anthropic"), 20, "{report}");
    assert!(strict("anthropic-alone") >= 150, "{report}");
    // brain makes strict every tool openai-agents' own conversion makes strict faithfully.
    let agents = lines.iter().find(|l| l["api"] == "openai-agents").unwrap();
    assert!(
        agents["brain_strict"].as_u64() >= agents["faithful"].as_u64(),
        "{agents}"
    );
}

#[test]
fn a_model_s_nulls_for_optional_arguments_reach_the_python_sdk_server_as_absent() {
    let peer = tests::peers::Peer::python();
    let discovery = tests::peers::discover(&peer.url);
    let tool = discovery
        .tools
        .iter()
        .find(|tool| tool["name"] == "search")
        .expect("the server lists search")
        .clone();
    let binding = json!({"name": "search", "description": tool["description"], "url": peer.url,
        "mcp_tool": "search", "input_schema": tool["inputSchema"], "tenants": ["local"],
        "strict": true, "timeout_seconds": 20});
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    std::fs::write(
        &config,
        json!({"model_apis": ["openai"], "tools": [binding]}).to_string(),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let (code, stdout, _) = harness(&["--config", config, "tools", "--format", "openai"]);
    assert_eq!(code, Some(0));
    let definition: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        definition["tools"][0]["strict"],
        json!(true),
        "{definition}"
    );
    let required = &definition["tools"][0]["parameters"]["required"];
    assert_eq!(required, &json!(["query", "limit", "lang", "window"]));

    let all_null = json!({"query": "rust", "limit": null, "lang": null, "window": null});
    let call = |from: Option<&str>, arguments: &Value| {
        let mut args = vec!["--config", config, "call", "--tenant", "local"];
        if let Some(from) = from {
            args.extend(["--from", from]);
        }
        let arguments = arguments.to_string();
        args.extend(["search", arguments.as_str()]);
        let (code, stdout, stderr) = harness(&args);
        let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or("null"))
            .unwrap_or_else(|_| panic!("{stdout}{stderr}"));
        (code, result)
    };
    let (code, result) = call(Some("openai"), &all_null);
    assert_eq!(code, Some(0), "{result}");
    let read: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    // The server applied its own defaults: it never saw a null.
    assert_eq!(
        read,
        json!({"query": "rust", "limit": 10, "lang": "en", "window": {"start": "-1d", "end": "now"}})
    );
    let nested =
        json!({"query": "rust", "limit": 3, "lang": null, "window": {"start": "-7d", "end": null}});
    let (code, result) = call(Some("openai"), &nested);
    assert_eq!(code, Some(0), "{result}");
    let read: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(read["window"], json!({"start": "-7d", "end": "now"}));
    assert_eq!(read["limit"], json!(3));
    assert_eq!(peer.tool_calls(), 2);

    // The journal's key and digest are of the arguments mapped back: a retry with the same call
    // id is answered from the journal whether the model wrote `null` or left the property out,
    // and other arguments under that id are a conflict. Nothing more reaches the server.
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let journaled = |arguments: &Value, from: Option<&str>| {
        let arguments = arguments.to_string();
        let mut args = vec![
            "--config", config, "--state", &state, "call", "--tenant", "local",
        ];
        args.extend(["--call-id", "model-1"]);
        if let Some(from) = from {
            args.extend(["--from", from]);
        }
        args.extend(["search", arguments.as_str()]);
        let output = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            .args(&args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        serde_json::from_str::<Value>(stdout.lines().last().unwrap()).unwrap()
    };
    let first = journaled(
        &json!({"query": "journal", "limit": null, "lang": null, "window": null}),
        Some("openai"),
    );
    assert_eq!(first["is_error"], json!(false), "{first}");
    assert_eq!(peer.tool_calls(), 3);
    let again = journaled(&json!({"query": "journal"}), None);
    assert_eq!(again["replayed"], json!(true), "{again}");
    assert_eq!(again["content"], first["content"]);
    let other = journaled(&json!({"query": "journal", "limit": 5}), Some("openai"));
    assert_eq!(other["kind"], json!("journal_conflict"), "{other}");
    assert_eq!(peer.tool_calls(), 3);

    // Without --from, the arguments are the binding's own: the gate refuses the nulls, and
    // nothing reaches the server.
    let (code, result) = call(None, &all_null);
    assert_eq!(code, Some(1));
    assert_eq!(result["kind"], json!("refused"), "{result}");
    assert_eq!(result["unknown_outcome"], json!(false));
    assert_eq!(peer.tool_calls(), 3);

    // A constraint strict mode cannot carry is dropped from the definition, and the gate still
    // enforces it: a longer message is refused before any I/O.
    // The reviewer narrowed the schema and kept the pin of what the server lists: not drift.
    let listed = tests::peers::discover(&peer.url).tools;
    let echo_tool = listed.iter().find(|tool| tool["name"] == "echo").unwrap();
    let short = json!({"name": "short_echo", "description": "Echo at most 3 characters.",
        "url": peer.url, "mcp_tool": "echo", "tenants": ["local"], "timeout_seconds": 20,
        "pin": brain_config::ToolPin::of(echo_tool),
        "input_schema": {"type": "object", "required": ["message"],
            "properties": {"message": {"type": "string", "maxLength": 3}}}});
    std::fs::write(config, json!({"tools": [short]}).to_string()).unwrap();
    let (_, stdout, stderr) = harness(&["--config", config, "tools", "--format", "openai"]);
    let definition: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        definition["tools"][0]["parameters"]["properties"]["message"],
        json!({"type": "string"})
    );
    assert!(
        stderr.contains("dropped at /properties/message/maxLength"),
        "{stderr}"
    );
    let echo = |message: &str| {
        let arguments = json!({"message": message}).to_string();
        let args = [
            "--config",
            config,
            "call",
            "--tenant",
            "local",
            "--from",
            "openai",
            "short_echo",
            arguments.as_str(),
        ];
        let (code, stdout, _) = harness(&args);
        (
            code,
            serde_json::from_str::<Value>(stdout.lines().last().unwrap()).unwrap(),
        )
    };
    let (code, result) = echo("abcdef");
    assert_eq!(
        (code, &result["kind"]),
        (Some(1), &json!("refused")),
        "{result}"
    );
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("longer than 3"),
        "{result}"
    );
    assert_eq!(peer.tool_calls(), 3);
    let (code, result) = echo("abc");
    assert_eq!(code, Some(0), "{result}");
    assert_eq!(peer.tool_calls(), 4);
}
