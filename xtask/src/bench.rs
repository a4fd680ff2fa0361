//! `cargo xtask bench [--quick]`: builds `brain-bench` and the test server in release mode and
//! runs the benchmark (DESIGN §7, P1–P6); its exit code is the bench's (1 when a target is
//! missed).

use std::process::ExitCode;

pub(crate) fn run(quick: bool) -> anyhow::Result<ExitCode> {
    println!("=== cargo build --release --workspace --bin brain-bench --bin brain-test-server");
    crate::cargo_build(
        &[
            "--release",
            "--bin",
            "brain-bench",
            "--bin",
            "brain-test-server",
        ],
        "brain-bench",
    )?;
    let mut command = std::process::Command::new(crate::target_dir().join("release/brain-bench"));
    if quick {
        command.arg("--quick");
    }
    crate::run_tool(&mut command)
}
