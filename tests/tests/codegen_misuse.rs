//! Misuse of generated code does not compile (`brain-codegen/tests/ui/*.rs`, each with the
//! error it must cause in `<case>.stderr`): every case is added to a copy of the workspace as an
//! example of `brain-codegen` and checked with `tests::nested::check` — the workspace's compiled
//! dependencies, no second set. Each case must fail with its expected error, at its expected
//! place. (The cases that must compile are `brain-codegen/tests/generated_*.rs`.)

use std::collections::BTreeMap;

use serde_json::Value;
use tests::nested::{check, copy_workspace};

#[test]
fn misuse_of_generated_code_does_not_compile() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path();
    copy_workspace(workspace);
    let ui = workspace.join("brain-codegen/tests/ui");
    let mut cases: Vec<String> = std::fs::read_dir(&ui)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 3, "{cases:?}");
    let manifest = workspace.join("brain-codegen/Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    for case in &cases {
        text += &format!("\n[[example]]\nname = \"ui_{case}\"\npath = \"tests/ui/{case}.rs\"\n");
    }
    std::fs::write(&manifest, text).unwrap();

    let output = check(workspace, &["--keep-going", "--message-format", "json"]);
    assert!(!output.status.success(), "the misuse compiled");
    // The first error of each case, as rustc rendered it.
    let mut first_errors: BTreeMap<String, String> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let target = message["target"]["name"].as_str().unwrap_or_default();
        if message["reason"] == "compiler-message"
            && message["message"]["level"] == "error"
            && let Some(case) = target.strip_prefix("ui_")
            && let Some(rendered) = message["message"]["rendered"].as_str()
        {
            first_errors
                .entry(case.to_owned())
                .or_insert_with(|| rendered.to_owned());
        }
    }
    for case in &cases {
        let expected = std::fs::read_to_string(ui.join(format!("{case}.stderr"))).unwrap();
        let rendered = first_errors
            .get(case)
            .unwrap_or_else(|| panic!("{case} compiled, or failed without an error of its own"));
        // The error line, and where: ` --> tests/ui/<case>.rs:LINE:COLUMN`.
        let mut lines = expected.lines();
        let (error, place) = (lines.next().unwrap(), lines.next().unwrap());
        let place = place.trim_start().trim_start_matches("--> ");
        assert!(
            rendered.starts_with(error),
            "{case}: expected {error:?}, got:\n{rendered}"
        );
        assert!(
            rendered.contains(&format!("brain-codegen/{place}")),
            "{case}: expected the error at {place}, got:\n{rendered}"
        );
    }
}
