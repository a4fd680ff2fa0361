//! `cargo xtask soak [--calls N] [--concurrency C] [--fault-rate F]`: builds `brain-soak` and the
//! test server and runs the soak (see `tests/src/bin/brain-soak.rs`); its exit code is the
//! soak's (1 on any violation).

use std::process::ExitCode;

/// How much to soak.
#[derive(clap::Args)]
pub(crate) struct SoakArgs {
    /// Calls to make.
    #[arg(long, default_value_t = 20_000)]
    pub(crate) calls: usize,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    pub(crate) concurrency: usize,
    /// Share of calls sent to a faulty server.
    #[arg(long, default_value_t = 0.1)]
    pub(crate) fault_rate: f64,
}

pub(crate) fn run(args: &SoakArgs) -> anyhow::Result<ExitCode> {
    crate::workspace::cargo_build(
        &[
            "--quiet",
            "--bin",
            "brain-soak",
            "--bin",
            "brain-test-server",
        ],
        "brain-soak",
    )?;
    crate::workspace::run_tool(
        std::process::Command::new(crate::workspace::target_dir().join("debug/brain-soak"))
            .args(["--calls", &args.calls.to_string()])
            .args(["--concurrency", &args.concurrency.to_string()])
            .args(["--fault-rate", &args.fault_rate.to_string()]),
    )
}
