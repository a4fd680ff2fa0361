//! The corpus: real MCP servers' `tools/list` answers, as the servers sent them
//! (`tests/corpus/<prefix>.json`, captured by `tests/corpus/capture.py`; each names its package
//! and version). Every tool brain can call is bound the way
//! `cargo xtask discover --prefix <prefix>_ --write` binds it, all servers into one config, and
//! that config is generated like a deployment's own: into the workspace member
//! `brain-codegen/corpus` (`host.json`, `src/generated/mod.rs`, and `report.txt`, what happened to each
//! server's tools). That crate compiles the code as the bindings crate does — a library under
//! the workspace's lints and `#![deny(warnings)]`, and clippy `-D warnings` in `cargo xtask ci` —
//! and its tests parse arguments for every tool.
//!
//! Update with `EXPECTORATE=overwrite cargo test -p brain-codegen --test corpus`, then review the
//! diff.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use brain_config::discovery::{
    BindingSettings, Server, binding_from_tool, binding_name, collisions, lint, merge, task_only,
};
use brain_config::{HostConfig, ToolBinding};
use serde_json::Value;

fn here(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// One captured `tools/list` answer.
struct Fixture {
    /// The file's stem: the bindings' prefix is `<prefix>_`.
    prefix: String,
    fixture: Value,
}

fn corpus() -> Vec<Fixture> {
    let mut fixtures: Vec<Fixture> = std::fs::read_dir(here("tests/corpus"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| Fixture {
            prefix: path.file_stem().unwrap().to_string_lossy().into_owned(),
            fixture: serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        })
        .collect();
    fixtures.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    fixtures
}

/// The fixture's server as discovery would name it.
fn server(fixture: &Value) -> Server {
    match (&fixture["url"], &fixture["command"]) {
        (Value::String(url), Value::Null) => Server::Url(url.clone()),
        (Value::Null, Value::Array(words)) => Server::Command {
            command: words
                .iter()
                .map(|w| w.as_str().unwrap().to_owned())
                .collect(),
            env: Default::default(),
            env_from: Default::default(),
            sandbox: None,
        },
        _ => panic!("a fixture has a `url` or a `command`"),
    }
}

/// The corpus config, and the report of what became of every server's tools.
fn bind_corpus() -> (HostConfig, String) {
    let mut config = HostConfig {
        serve: None,
        tenant_limits: None,
        policies: None,
        approvals: None,
        audit: None,
        model_apis: None,
        schema: None,
        tools: Vec::new(),
    };
    let mut report = String::new();
    for Fixture { prefix, fixture } in corpus() {
        let settings = BindingSettings {
            server: server(&fixture),
            token_env: None,
            tenants: vec!["local".into()],
            timeout_seconds: brain_config::DEFAULT_TIMEOUT_SECONDS,
            max_output_bytes: brain_config::DEFAULT_MAX_OUTPUT_BYTES,
            protocol_version: fixture["protocolVersion"].as_str().unwrap().to_owned(),
            on_input_request: None,
            auth: None,
            // The fixtures do not record the servers' capabilities.
            server_tasks: false,
            ca_file: None,
        };
        let tools = fixture["tools"].as_array().unwrap();
        writeln!(
            report,
            "{prefix}: {} ({} {}, MCP {}): {} tools",
            fixture["source"].as_str().unwrap(),
            fixture["server"]["name"].as_str().unwrap_or_default(),
            fixture["server"]["version"].as_str().unwrap_or_default(),
            settings.protocol_version,
            tools.len()
        )
        .unwrap();
        let mut bindings: Vec<ToolBinding> = Vec::new();
        for tool in tools {
            let name = tool["name"].as_str().unwrap();
            if task_only(tool) {
                writeln!(report, "  refused {name}: it runs only as an MCP task").unwrap();
                continue;
            }
            let mut binding = binding_from_tool(tool, &settings);
            binding.name = binding_name(&format!("{prefix}_"), name);
            for lint in lint(&binding) {
                writeln!(report, "  {lint}").unwrap();
            }
            let alone = HostConfig {
                serve: None,
                tenant_limits: None,
                policies: None,
                approvals: None,
                audit: None,
                model_apis: None,
                schema: None,
                tools: vec![binding.clone()],
            };
            let errors = brain_config::validate(&alone);
            if errors.is_empty() {
                bindings.push(binding);
            } else {
                for error in errors {
                    write!(report, "  rejected {name}: {}", error.render("host.json")).unwrap();
                }
            }
        }
        assert_eq!(collisions(&config, &bindings), [], "{prefix}: collisions");
        writeln!(report, "  bound {}", bindings.len()).unwrap();
        merge(&mut config, bindings);
    }
    (config, report)
}

#[test]
fn the_corpus_generates_its_crate() {
    let (config, mut report) = bind_corpus();
    let errors = brain_config::validate(&config);
    assert!(errors.is_empty(), "{errors:?}");
    let mut host = serde_json::to_string_pretty(&config).unwrap();
    host.push('\n');
    expectorate::assert_contents(here("corpus/host.json"), &host);
    // The same way `cargo xtask codegen` reads bindings/host.json.
    let config = brain_config::parse(host.as_bytes(), "brain-codegen/corpus/host.json").unwrap();
    let module = brain_codegen::generate(&config, "brain-codegen/corpus/host.json").unwrap();

    common::assert_generated(&here("corpus/src/generated"), &module);
    // The types typify would not make faithful, from their doc: "The `input_schema` of `x`, as
    // a JSON object: typed fields would not be faithful to the schema (REASON). brain …".
    let mut json_objects = Vec::new();
    for line in module.lines() {
        if let Some(doc) = line.trim().strip_prefix("/// The `")
            && let Some((field, rest)) = doc.split_once("` of `")
            && let Some((binding, rest)) = rest.split_once("`, as a JSON object: ")
            && let Some((_, reason)) = rest.split_once("schema (")
            && let Some((reason, _)) = reason.rsplit_once("). ")
        {
            json_objects.push(format!("  {binding} {field}: {reason}"));
        }
    }
    writeln!(
        report,
        "{} bindings; {} argument or output types are JSON objects (typed fields would not be \
         faithful to the schema):",
        config.tools.len(),
        json_objects.len()
    )
    .unwrap();
    for line in json_objects {
        writeln!(report, "{line}").unwrap();
    }
    expectorate::assert_contents(here("corpus/report.txt"), &report);
}
