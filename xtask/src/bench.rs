//! `cargo xtask bench [--quick] [--require-sdks]`: builds `brain-bench` and the test server in
//! release mode and runs the benchmark (the performance targets listed in the bench reference, docs/src/reference/bench.md,
//! "Performance: `cargo xtask bench`"); its exit code is the bench's (1 when a target is missed or
//! not measured).
//!
//! The release build is `cargo xtask dist`'s (see `dist.rs`): the same target, flags and feature
//! set, so that the two share every compiled dependency.

use std::process::ExitCode;

pub(crate) fn run(quick: bool, require_sdks: bool) -> anyhow::Result<ExitCode> {
    println!(
        "=== cargo build --release --workspace --bin brain-bench --bin brain-test-server --bin \
         brain-harness"
    );
    let release =
        crate::dist::release_build(&["brain-bench", "brain-test-server", "brain-harness"])?;
    let mut command = std::process::Command::new(release.join("brain-bench"));
    if quick {
        command.arg("--quick");
    }
    if require_sdks {
        command.arg("--require-sdks");
    }
    crate::workspace::run_tool(&mut command)
}
