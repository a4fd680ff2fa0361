//! The soak can fail: told to expect the wrong flags of one kind of server (a stand-in for a
//! broken classification), brain-soak reports every call of that kind and exits 1.

use std::process::Command;

#[test]
fn the_soak_fails_on_a_wrong_classification() {
    let output = Command::new(env!("CARGO_BIN_EXE_brain-soak"))
        .args([
            "--calls",
            "300",
            "--concurrency",
            "16",
            "--mislabel",
            "healthy",
        ])
        .output()
        .expect("brain-soak runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "(healthy) ended with (is_error, unknown_outcome) = (false, false), not (true, true)"
        ),
        "{stdout}"
    );
    assert!(
        !stdout.contains("(stdio healthy) ended with"),
        "only the mislabelled kind: {stdout}"
    );
}
