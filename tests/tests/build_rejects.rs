//! `cargo build -p bindings` refuses an invalid `host.json` and stale generated code, with the
//! diagnostics of `cargo xtask check` and the command that fixes it. Runs real cargo builds on a
//! copy of the workspace (offline), in the workspace's own target directory (`tests::nested`:
//! the copy's own crates are new, its dependencies the ones already checked).

use std::path::{Path, PathBuf};

use tests::nested::{check, copy_workspace};

fn edit_host_json(workspace: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let path: PathBuf = workspace.join("bindings/host.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

#[test]
fn cargo_build_rejects_invalid_and_stale_configs() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path();
    copy_workspace(workspace);

    // An MCP binding with `inspect_session`.
    edit_host_json(workspace, |config| {
        config["tools"][0]["inspect_session"] = serde_json::json!(true);
    });
    let output = check(workspace, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the build succeeded");
    assert!(
        stderr.contains("error[inspect-session-on-mcp]: host.json:")
            && stderr.contains("/tools/0/inspect_session (tool \"echo\")"),
        "{stderr}"
    );
    assert!(stderr.contains("cargo xtask check"), "{stderr}");

    // A valid change that nobody regenerated the code for.
    edit_host_json(workspace, |config| {
        config["tools"][0]
            .as_object_mut()
            .unwrap()
            .remove("inspect_session");
        config["tools"][0]["description"] = serde_json::json!("Echo a message back, changed.");
    });
    let output = check(workspace, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the build succeeded");
    assert!(
        stderr.contains("error: bindings/src/generated is stale"),
        "{stderr}"
    );
    assert!(stderr.contains("run `cargo xtask codegen`"), "{stderr}");
}
