//! Fixture configs in, generated code out: `tests/fixtures/<name>.json` → the module
//! `tests/snapshots/<name>/mod.rs` (or `tests/snapshots/<name>.rejected.txt` for a config the rules
//! reject). Every snapshot compiles under `#![deny(warnings)]` and works (`tests/generated_*.rs`),
//! and misuse of it does not compile (`tests/ui`, checked by `tests/tests/codegen_misuse.rs` with
//! the workspace's compiled dependencies).
//!
//! Update with `EXPECTORATE=overwrite cargo test -p brain-codegen --test snapshots`, then review
//! the diff.

#![allow(clippy::print_stdout)]

mod common;

use std::path::{Path, PathBuf};

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

fn fixtures() -> Vec<(String, PathBuf)> {
    let mut fixtures: Vec<(String, PathBuf)> = std::fs::read_dir(dir("fixtures"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        // Beside the configs: the files they name (`keys/`).
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            (
                path.file_stem().unwrap().to_string_lossy().into_owned(),
                path,
            )
        })
        .collect();
    fixtures.sort();
    fixtures
}

#[test]
fn fixtures_generate_their_snapshots() {
    for (name, path) in fixtures() {
        let source = format!("tests/fixtures/{name}.json");
        match brain_config::parse(&std::fs::read(&path).unwrap(), &source) {
            Ok(config) => {
                let module = brain_codegen::generate(&config, &source).unwrap();
                common::assert_generated(&dir("snapshots").join(&name), &module);
            }
            Err(diagnostics) => {
                let out = dir("snapshots").join(format!("{name}.rejected.txt"));
                expectorate::assert_contents(out, &format!("{diagnostics}\n"));
            }
        }
    }
}

#[test]
fn generation_is_deterministic() {
    for (_, path) in fixtures() {
        if let Ok(config) = brain_config::load_file(&path) {
            let first = brain_codegen::generate(&config, "x").unwrap();
            let second = brain_codegen::generate(&config.clone(), "x").unwrap();
            assert_eq!(first, second);
        }
    }
}

/// 128 bindings generate, each in its own module; prints how long it took (the target is
/// under 2 s; benchmarks, not tests, hold the figure).
#[test]
fn one_hundred_and_twenty_eight_bindings() {
    let tools: Vec<serde_json::Value> = (0..128)
        .map(|i| {
            serde_json::json!({
                "name": format!("tool_{i:03}"),
                "description": format!("Tool number {i}."),
                "input_schema": {"type": "object", "properties": {
                    "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
                    "mode": {"type": "string", "enum": ["fast", "exact"]},
                    "filters": {"type": "array", "items": {"$ref": "#/$defs/filter"}}},
                    "required": ["query"],
                    "$defs": {"filter": {"type": "object", "properties": {"field": {"type": "string"}}}}},
                "output_schema": {"type": "object", "properties": {"hits": {"type": "array", "items": {"type": "string"}}}},
                "url": "https://mcp.example.com/mcp", "mcp_tool": format!("tool_{i}"), "tenants": ["local"]
            })
        })
        .collect();
    let text = serde_json::json!({ "tools": tools }).to_string();
    let config = brain_config::parse(text.as_bytes(), "host.json").unwrap();
    let started = std::time::Instant::now();
    let module = brain_codegen::generate(&config, "host.json").unwrap();
    let elapsed = started.elapsed();
    assert_eq!(module.matches("\npub mod tool_").count(), 128);
    assert!(module.contains("Tool127(tool_127::Tool127Args)"));
    println!("codegen of 128 bindings: {elapsed:?}");
}
