//! `cargo xtask gate [--rebaseline]`: builds `brain-gate` and the test server and runs the
//! performance gate (see `tests/src/bin/brain-gate.rs`); its exit code is the gate's (1 on a
//! regression). Needs valgrind.

use std::process::ExitCode;

pub(crate) fn run(rebaseline: bool) -> anyhow::Result<ExitCode> {
    crate::workspace::cargo_build(
        &[
            "--quiet",
            "--bin",
            "brain-gate",
            "--bin",
            "brain-test-server",
            "--bin",
            "brain-harness",
        ],
        "brain-gate",
    )?;
    let mut command =
        std::process::Command::new(crate::workspace::target_dir().join("debug/brain-gate"));
    if rebaseline {
        command.arg("--rebaseline");
    }
    crate::workspace::run_tool(&mut command)
}
