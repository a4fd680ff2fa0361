//! brain-harness against third-party MCP servers (none written by this project), started by the
//! tests on a free loopback port: the official Python SDK (`mcp==2.3.0`, our script
//! `tests/interop/python_server.py`; the older `mcp==1.9.4` and `mcp==1.12.4`, which negotiate
//! MCP 2025-03-26 and 2025-06-18, `tests/interop/python_server_v1.py`) and
//! `@modelcontextprotocol/server-everything@2026.8.31`.
//! `tests/interop/setup.sh` installs both (`cargo xtask ci` runs it).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A peer with a config of bindings to its tools.
struct Peer {
    process: tests::peers::Peer,
    url: String,
    _dir: tempfile::TempDir,
    config: PathBuf,
}

impl Peer {
    fn start(peer: tests::peers::Peer, bindings: Vec<Value>) -> Peer {
        let url = peer.url.clone();
        let tools: Vec<Value> = bindings
            .into_iter()
            .map(|mut binding| {
                binding["url"] = json!(url);
                binding["tenants"] = json!(["local"]);
                binding["timeout_seconds"] = json!(20);
                binding
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("host.json");
        std::fs::write(&config, json!({ "tools": tools }).to_string()).unwrap();
        Peer {
            process: peer,
            url,
            _dir: dir,
            config,
        }
    }

    /// The Python SDK server, serving our script.
    fn python() -> Peer {
        let names = [
            "echo",
            "progress",
            "weather",
            "image",
            "fail",
            "slow",
            "elicit",
            "echo_meta",
        ];
        Peer::discovered(tests::peers::Peer::python(), &names)
    }

    /// server-everything.
    fn everything() -> Peer {
        let names = [
            "echo",
            "get-structured-content",
            "get-tiny-image",
            "trigger-long-running-operation",
            "get-resource-links",
        ];
        Peer::discovered(tests::peers::Peer::everything(), &names)
    }

    /// `process`'s tools `names`, bound as `cargo xtask discover` binds them (pinned, but to
    /// no revision), named with `_` for `-`: every call is verified against the server's
    /// listing.
    fn discovered(process: tests::peers::Peer, names: &[&str]) -> Peer {
        let discovery = tests::peers::discover(&process.url);
        let settings = tests::peers::local_settings(&process.url, &discovery);
        let bindings = names
            .iter()
            .map(|name| {
                let tool = discovery
                    .tools
                    .iter()
                    .find(|tool| tool["name"] == *name)
                    .unwrap_or_else(|| panic!("{name} is not listed"));
                let binding = brain_config::discovery::binding_from_tool(tool, &settings);
                let mut binding = serde_json::to_value(binding).unwrap();
                binding["name"] = json!(name.replace('-', "_"));
                // Unpinned: the newest session revision, as the cases below expect.
                binding.as_object_mut().unwrap().remove("protocol_version");
                binding
            })
            .collect();
        Peer::start(process, bindings)
    }

    /// `brain-harness --config ... call --tenant local --call-id C TOOL ARGS` (JSON Lines).
    fn call(&self, tool: &str, arguments: Value) -> (Option<i32>, Vec<Value>) {
        let output: Output = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
            // Each process its own journal: these tests reuse call ids across calls.
            .env("BRAIN_STATE_URL", "memory:")
            .arg("--config")
            .arg(&self.config)
            .args(["call", "--tenant", "local", "--call-id", "interop-1", tool])
            .arg(arguments.to_string())
            .output()
            .expect("brain-harness runs");
        let events = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        (output.status.code(), events)
    }
}

fn result(events: &[Value]) -> &Value {
    let last = events.last().expect("at least the result");
    assert_eq!(last["type"], json!("tool.result"), "{events:?}");
    last
}

#[track_caller]
fn assert_outcome(result: &Value, is_error: bool, unknown_outcome: bool) {
    assert_eq!(
        (&result["is_error"], &result["unknown_outcome"]),
        (&json!(is_error), &json!(unknown_outcome)),
        "{result}"
    );
}

/// What both revisions must do against the Python SDK server: text, progress in order,
/// structured content, image, a tool error, and the scope and progress token in `_meta`.
fn python_common(peer: &Peer) {
    let (code, events) = peer.call("echo", json!({"message": "hello"}));
    assert_eq!(code, Some(0), "{events:?}");
    assert_outcome(result(&events), false, false);
    assert_eq!(
        result(&events)["content"][0],
        json!({"type": "text", "text": "hello"})
    );

    let (code, events) = peer.call("progress", json!({"steps": 5}));
    assert_eq!(code, Some(0));
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool.progress")
        .collect();
    let values: Vec<f64> = progress
        .iter()
        .map(|e| e["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(progress[0]["message"], json!("step 1/5"));
    assert_eq!(progress[0]["call_id"], json!("interop-1"));

    let (code, events) = peer.call("weather", json!({"city": "Oslo"}));
    assert_eq!(code, Some(0));
    assert_eq!(
        result(&events)["structured_content"],
        json!({"city": "Oslo", "temperature": 21.5})
    );
    // The SDK's own text block already holds the JSON: no second one.
    assert_eq!(result(&events)["content"].as_array().unwrap().len(), 1);

    let (code, events) = peer.call("image", json!({}));
    assert_eq!(code, Some(0));
    assert_eq!(result(&events)["content"][0]["type"], json!("image"));
    assert_eq!(
        result(&events)["content"][0]["mime_type"],
        json!("image/png")
    );

    let (code, events) = peer.call("fail", json!({}));
    assert_eq!(code, Some(1));
    assert_outcome(result(&events), true, false);

    let seen = echo_meta(peer);
    assert_eq!(
        seen["meta"]["brain.dev/scope"],
        json!({"tenant_id": "local", "session_id": "harness", "call_id": "interop-1"})
    );
    let token = seen["meta"]
        .get("progressToken")
        .or(seen["meta"].get("progress_token"));
    assert_eq!(token, Some(&json!("interop-1")), "{seen}");
}

/// The `_meta` the Python server saw.
fn echo_meta(peer: &Peer) -> Value {
    let (code, events) = peer.call("echo_meta", json!({}));
    assert_eq!(code, Some(0));
    let text = result(&events)["content"][0]["text"].as_str().unwrap();
    serde_json::from_str(text).unwrap()
}

/// A 1 s timeout on a 60 s sleep ends the call in about a second, outcome unknown.
fn python_timeout(peer: &Peer) {
    peer.set_on_all("timeout_seconds", json!(1));
    let started = Instant::now();
    let (code, events) = peer.call("slow", json!({"seconds": 60}));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code, Some(1));
    assert_outcome(result(&events), true, true);
    assert!(peer.url.starts_with("http://127.0.0.1:"));
}

#[test]
fn python_sdk_server() {
    let peer = Peer::python();
    python_common(&peer);

    // `ctx.elicit` fails the call with an unknown outcome after exactly one tools/call, and the
    // server is not left waiting.
    let started = Instant::now();
    let (code, events, calls) = peer.counted_call("elicit", json!({}));
    assert_eq!((code, calls), (Some(1), 1));
    assert_outcome(result(&events), true, true);
    assert!(text(&events).contains("elicitation/create"), "{events:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let (code, _) = peer.call("echo", json!({"message": "still serving"}));
    assert_eq!(code, Some(0));

    // Opted in: the elicitation is declined and the tool goes on, still one tools/call.
    peer.set_on_all("on_input_request", json!("decline"));
    let (code, events, calls) = peer.counted_call("elicit", json!({}));
    assert_eq!((code, calls), (Some(0), 1), "{events:?}");
    assert_outcome(result(&events), false, false);
    assert!(text(&events).contains("elicited: decline"), "{events:?}");
}

/// The text blocks of the last event (the result).
fn text(events: &[Value]) -> String {
    result(events)["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Peer {
    /// Calls `tool` and counts the `tools/call` requests the (Python) server received for it.
    fn counted_call(&self, tool: &str, arguments: Value) -> (Option<i32>, Vec<Value>, u64) {
        let before = self.process.tool_calls();
        let (code, events) = self.call(tool, arguments);
        (code, events, self.process.tool_calls() - before)
    }

    /// Sets `field` on every binding of the peer's config (`null`: removes it).
    fn set_on_all(&self, field: &str, value: Value) {
        let mut config: Value =
            serde_json::from_slice(&std::fs::read(&self.config).unwrap()).unwrap();
        for tool in config["tools"].as_array_mut().unwrap() {
            match &value {
                Value::Null => {
                    tool.as_object_mut().unwrap().remove(field);
                }
                value => tool[field] = value.clone(),
            }
        }
        std::fs::write(&self.config, config.to_string()).unwrap();
    }
}

#[test]
fn python_sdk_server_stateless_2026_07_28() {
    let peer = Peer::python();
    peer.set_on_all("protocol_version", json!("2026-07-28"));
    python_common(&peer);
    assert_eq!(
        echo_meta(&peer)["meta"]["io.modelcontextprotocol/protocolVersion"],
        json!("2026-07-28")
    );

    // 2026-07-28 has no back-channel: the Python SDK refuses its own `ctx.elicit` after the call
    // was sent (HTTP 400), so the outcome is unknown, after exactly one tools/call — with or
    // without the opt-in, which has nothing to decline here.
    for choice in ["fail", "decline"] {
        peer.set_on_all("on_input_request", json!(choice));
        let (code, events, calls) = peer.counted_call("elicit", json!({}));
        assert_eq!((code, calls), (Some(1), 1), "{choice}: {events:?}");
        assert_outcome(result(&events), true, true);
    }
}

#[test]
fn python_sdk_server_timeout() {
    python_timeout(&Peer::python());
}

#[test]
fn python_sdk_server_timeout_2026_07_28() {
    let peer = Peer::python();
    peer.set_on_all("protocol_version", json!("2026-07-28"));
    python_timeout(&peer);
}

#[test]
fn server_everything() {
    let peer = Peer::everything();

    let (code, events) = peer.call("echo", json!({"message": "hello"}));
    assert_eq!(code, Some(0), "{events:?}");
    assert!(
        result(&events)["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello")
    );

    let (code, events) = peer.call("get_structured_content", json!({"location": "Chicago"}));
    assert_eq!(code, Some(0), "{events:?}");
    assert!(result(&events)["structured_content"]["temperature"].is_number());

    let (code, events) = peer.call("get_tiny_image", json!({}));
    assert_eq!(code, Some(0), "{events:?}");
    let kinds: Vec<&Value> = result(&events)["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["type"])
        .collect();
    assert!(kinds.contains(&&json!("image")), "{kinds:?}");

    let (code, events) = peer.call(
        "trigger_long_running_operation",
        json!({"duration": 1, "steps": 4}),
    );
    assert_eq!(code, Some(0), "{events:?}");
    let progress: Vec<f64> = events
        .iter()
        .filter(|e| e["type"] == "tool.progress")
        .map(|e| e["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0, 4.0]);

    let (code, events) = peer.call("get_resource_links", json!({"count": 2}));
    assert_eq!(code, Some(1));
    assert_outcome(result(&events), true, true);
    assert!(
        result(&events)["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("type `resource_link`")
    );
}

/// An older Python SDK release (mcp 1.x), discovered with the library functions `cargo xtask
/// discover` uses, then called through brain-harness at the revision it negotiates: text,
/// progress (which these releases send on the session's GET stream), isError, elicitation when
/// the revision has it, the timeout; the same bindings unpinned; and pinned to another revision,
/// refused before `tools/call`.
fn older_python(release: &str, revision: &str) {
    let process = tests::peers::Peer::python_v1(release);
    let url = process.url.clone();
    let discovery = tests::peers::discover(&url);
    assert_eq!(discovery.protocol_version, revision);
    let settings = tests::peers::local_settings(&url, &discovery);
    let bindings: Vec<Value> = discovery
        .tools
        .iter()
        .map(|tool| {
            let binding = brain_config::discovery::binding_from_tool(tool, &settings);
            serde_json::to_value(binding).unwrap()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.json");
    std::fs::write(&config, json!({ "tools": bindings }).to_string()).unwrap();
    brain_config::load_file(&config).unwrap_or_else(|e| panic!("{e}"));
    let peer = Peer {
        process,
        url,
        _dir: dir,
        config,
    };

    let (code, events, calls) = peer.counted_call("echo", json!({"message": "hi"}));
    assert_eq!((code, calls), (Some(0), 1), "{events:?}");
    assert_eq!(result(&events)["content"][0]["text"], json!("hi"));

    let (code, events) = peer.call("progress", json!({"steps": 3}));
    assert_eq!(code, Some(0), "{events:?}");
    let progress: Vec<(f64, String)> = events
        .iter()
        .filter(|e| e["type"] == "tool.progress")
        .map(|e| {
            let message = e["message"].as_str().unwrap_or_default().to_owned();
            (e["progress"].as_f64().unwrap(), message)
        })
        .collect();
    assert_eq!(
        progress,
        [
            (1.0, "step 1/3".to_owned()),
            (2.0, "step 2/3".to_owned()),
            (3.0, "step 3/3".to_owned())
        ],
        "{events:?}"
    );
    assert_eq!(result(&events)["content"][0]["text"], json!("done 3 steps"));

    let (code, events) = peer.call("fail", json!({}));
    assert_eq!(code, Some(1));
    assert_outcome(result(&events), true, false);
    assert!(text(&events).contains("the tool failed"), "{events:?}");

    let (code, events) = peer.call("weather", json!({"city": "Oslo"}));
    assert_eq!(code, Some(0), "{events:?}");
    if revision >= "2025-06-18" {
        assert_eq!(
            result(&events)["structured_content"],
            json!({"city": "Oslo", "temperature": 21.5})
        );
        let (code, events, calls) = peer.counted_call("elicit", json!({}));
        assert_eq!((code, calls), (Some(1), 1), "{events:?}");
        assert_outcome(result(&events), true, true);
        peer.set_on_all("on_input_request", json!("decline"));
        let (code, events, calls) = peer.counted_call("elicit", json!({}));
        assert_eq!((code, calls), (Some(0), 1), "{events:?}");
        assert!(text(&events).contains("elicited: decline"), "{events:?}");
        peer.set_on_all("on_input_request", Value::Null);
    } else {
        assert!(text(&events).contains("Oslo"), "{events:?}");
    }

    // Unpinned, the same bindings accept the revision the server offers; the debug log of the
    // call names it.
    peer.set_on_all("protocol_version", Value::Null);
    let output = Command::new(env!("CARGO_BIN_EXE_brain-harness"))
        // Each process its own journal: these tests reuse call ids across calls.
        .env("BRAIN_STATE_URL", "memory:")
        .arg("--config")
        .arg(&peer.config)
        .args([
            "call",
            "--tenant",
            "local",
            "echo",
            r#"{"message": "unpinned"}"#,
        ])
        .env("RUST_LOG", "brain_runtime=debug")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let log = String::from_utf8_lossy(&output.stderr);
    let ended = log
        .lines()
        .find(|line| line.contains("call ended"))
        .unwrap_or_default();
    assert!(ended.contains(&format!("revision=\"{revision}\"")), "{log}");

    // Pinned to another revision: refused before tools/call, saying what the server offered.
    peer.set_on_all("protocol_version", json!("2025-11-25"));
    if revision < "2025-06-18" {
        peer.set_on_all("output_schema", Value::Null);
    }
    let (code, events, calls) = peer.counted_call("echo", json!({"message": "x"}));
    assert_eq!((code, calls), (Some(1), 0), "{events:?}");
    assert_outcome(result(&events), true, false);
    assert!(
        text(&events).contains(&format!(
            "the server offered MCP {revision}, but the binding pins 2025-11-25"
        )),
        "{events:?}"
    );

    peer.set_on_all("protocol_version", json!(revision));
    python_timeout(&peer);
}

#[test]
fn python_sdk_1_9_at_2025_03_26() {
    older_python("1.9", "2025-03-26");
}

#[test]
fn python_sdk_1_12_at_2025_06_18() {
    older_python("1.12", "2025-06-18");
}
