//! `cargo xtask bench [--quick | --smoke] [--require-sdks] [--json PATH]`: builds `brain-bench`
//! and the test server and runs the benchmark (the performance targets listed in the bench
//! reference, docs/src/reference/bench.md); its exit code is the bench's: 0 every target met, 1
//! a target missed or not measured, 2 a group of rows in error (its rows say why; the rest are
//! measured and printed all the same).
//!
//! A measuring run builds in release mode, as `cargo xtask dist` does (see `dist.rs`): the same
//! target, flags and feature set, so that the two share every compiled dependency. A smoke run
//! (`--smoke`, what `cargo xtask ci` runs) proves that every row still runs: it builds the debug
//! binaries the tests already built, measures every row once with tiny counts, and fails only
//! when a group errors, never on a target.

use std::path::PathBuf;
use std::process::ExitCode;

/// What `cargo xtask bench` was asked for.
#[derive(clap::Args, Default)]
pub(crate) struct BenchArgs {
    /// Fewer rounds and calls (under 3 minutes).
    #[arg(long, conflicts_with = "smoke")]
    pub(crate) quick: bool,
    /// Every row once with tiny counts, from the debug build: fails when a row errors, never on a
    /// target (`cargo xtask ci` runs it).
    #[arg(long)]
    pub(crate) smoke: bool,
    /// Fail when an SDK client is not installed (tests/interop/setup.sh) instead of reporting
    /// its targets as not measured.
    #[arg(long)]
    pub(crate) require_sdks: bool,
    /// Also write the results (every row, each group in error, the summary) as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
}

const BINS: [&str; 3] = ["brain-bench", "brain-test-server", "brain-harness"];

pub(crate) fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let built = if args.smoke {
        println!("=== cargo build --workspace --bin {}", BINS.join(" --bin "));
        let bins: Vec<&str> = BINS.iter().flat_map(|bin| ["--bin", bin]).collect();
        crate::workspace::cargo_build(&bins, "brain-bench")?;
        crate::workspace::target_dir().join("debug")
    } else {
        println!(
            "=== cargo build --release --workspace --bin {}",
            BINS.join(" --bin ")
        );
        crate::dist::release_build(&BINS)?
    };
    let mut command = std::process::Command::new(built.join("brain-bench"));
    if args.quick {
        command.arg("--quick");
    }
    if args.smoke {
        command.arg("--smoke");
    }
    if args.require_sdks {
        command.arg("--require-sdks");
    }
    if let Some(path) = &args.json {
        command.arg("--json").arg(path);
    }
    crate::workspace::run_tool(&mut command)
}
