//! `cargo xtask conformance` as CI runs it: the real suite against the real client, checked
//! against a baseline. Each case runs one scenario, so that the whole file takes seconds.

use std::process::{Command, Output};

fn conformance(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("conformance")
        .args(args)
        .output()
        .expect("xtask runs")
}

fn all_output(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn baseline(entries: &[&str]) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let list: Vec<String> = entries.iter().map(|entry| format!("\"{entry}\"")).collect();
    let text = format!("client: [{}]\n", list.join(", "));
    std::fs::write(file.path(), text).unwrap();
    file
}

#[test]
fn passing_scenarios_match_the_committed_baseline() {
    let output = conformance(&["--scenario", "initialize"]);
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    // Both suite versions have it at 2025-11-25.
    assert!(
        text.contains("conformance 0.1.16, client scenarios at 2025-11-25"),
        "{text}"
    );
    assert!(
        text.contains("conformance 0.2.0-alpha.12, client scenarios at 2025-11-25"),
        "{text}"
    );
}

#[test]
fn a_failure_missing_from_the_baseline_fails_the_run() {
    let empty = baseline(&[]);
    let output = conformance(&[
        "--scenario",
        "elicitation-sep1034-client-defaults",
        "--expected-failures",
        empty.path().to_str().unwrap(),
    ]);
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("Unexpected failures"), "{text}");
}

#[test]
fn a_baseline_entry_that_passes_fails_the_run() {
    let stale = baseline(&["request-metadata"]);
    let output = conformance(&[
        "--scenario",
        "request-metadata",
        "--expected-failures",
        stale.path().to_str().unwrap(),
    ]);
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("Stale baseline entries"), "{text}");
    assert!(text.contains("at 2026-07-28"), "{text}");
}

#[test]
fn extension_scenarios_run_by_name_at_every_revision() {
    let output = conformance(&["--scenario", "auth/client-credentials-jwt"]);
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    for run in [
        "conformance 0.1.16, extension scenario auth/client-credentials-jwt at its own revision",
        "conformance 0.2.0-alpha.12, extension scenario auth/client-credentials-jwt at 2025-11-25",
        "conformance 0.2.0-alpha.12, extension scenario auth/client-credentials-jwt at 2026-07-28",
    ] {
        assert!(text.contains(run), "{run}:\n{text}");
    }
    assert!(!text.contains("FAILED"), "{text}");
}
