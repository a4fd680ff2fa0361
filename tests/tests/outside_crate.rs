//! brain from outside the workspace: a crate that is no member of it depends on brain-runtime
//! (and on brain-codegen for its `build.rs`) by path, as the README's "Use from Rust" says, with
//! its own `host.json`. Its build generates the typed bindings; the same crate with
//! `inspect_session` added to its MCP binding fails to build, printing the diagnostic.
//!
//! The crate shares the workspace's target directory, `Cargo.lock` and profiles, so that it
//! checks against the dependencies already compiled instead of compiling a second set.

#![allow(clippy::print_stderr)]

use std::path::Path;
use std::process::{Command, Output};

const HOST_JSON: &str = r#"{
  "tools": [
    {
      "name": "echo",
      "description": "Echo a message back, unchanged.",
      "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
      "url": "http://127.0.0.1:8931/mcp",
      "mcp_tool": "echo",
      "tenants": ["local"]
    }
  ]
}
"#;

const BUILD_RS: &str = r#"fn main() -> Result<(), Box<dyn std::error::Error>> {
    brain_codegen::compile_config("host.json")?;
    Ok(())
}
"#;

const MAIN_RS: &str = r#"mod tools {
    brain_runtime::include_bindings!();
}

fn main() {
    let call = tools::ToolCall::Echo(tools::echo::EchoArgs { message: "hi".into() });
    assert_eq!(call.name().as_str(), "echo");
    let _ = brain_runtime::Runtime::new(&tools::host_config());
}
"#;

/// The workspace's `[profile.*]` sections, copied as they are.
fn profiles(manifest: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            inside = line.starts_with("[profile.");
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn write_crate(dir: &Path, host_json: &str) {
    let root = tests::workspace_root();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let manifest = format!(
        "[package]\nname = \"outside-host\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [dependencies]\nbrain-runtime = {{ path = {:?} }}\n\n\
         [build-dependencies]\nbrain-codegen = {{ path = {:?} }}\n\n\
         # Not a member of brain's workspace: a workspace of its own.\n[workspace]\n\n{}",
        root.join("brain-runtime").display().to_string(),
        root.join("brain-codegen").display().to_string(),
        profiles(&workspace)
    );
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("build.rs"), BUILD_RS).unwrap();
    std::fs::write(dir.join("src/main.rs"), MAIN_RS).unwrap();
    std::fs::write(dir.join("host.json"), host_json).unwrap();
}

fn check(dir: &Path) -> Output {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["check", "--offline", "--message-format", "short"])
        .current_dir(dir)
        .env(
            "CARGO_TARGET_DIR",
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| tests::workspace_root().join("target"), Into::into),
        )
        .env_remove("OUT_DIR")
        .output()
        .expect("cargo runs")
}

#[test]
fn a_crate_outside_the_workspace_builds_typed_bindings_and_fails_on_a_bad_config() {
    let dir = tempfile::tempdir().unwrap();
    write_crate(dir.path(), HOST_JSON);
    let started = std::time::Instant::now();
    let output = check(dir.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // What it costs CI (the crate and its build script, on the workspace's compiled dependencies).
    eprintln!("outside crate checked in {:?}", started.elapsed());

    // `inspect_session` on an MCP binding: the build fails with the diagnostic as
    // `cargo xtask check` renders it, and the error's Debug form after it.
    let bad = HOST_JSON.replace(
        r#""tenants": ["local"]"#,
        r#""tenants": ["local"],
      "inspect_session": true"#,
    );
    std::fs::write(dir.path().join("host.json"), bad).unwrap();
    let output = check(dir.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the bad config built:\n{stderr}");
    assert!(
        stderr.contains(
            "error[inspect-session-on-mcp]: host.json:10:7 /tools/0/inspect_session (tool \"echo\"): \
             `inspect_session` is not allowed on an MCP binding"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("help: remove `inspect_session`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Error: host.json is invalid (1 error, printed above)"),
        "{stderr}"
    );
}
