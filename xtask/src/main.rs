//! `cargo xtask`: the project's commands, as thin glue over the library crates.
//!
//! - `cargo xtask discover --url URL [--token-env VAR] --tenant T --tools a,b [--write CONFIG]`
//!   — bindings from a live MCP server; `cargo xtask discover --check CONFIG` — drift
//! - `cargo xtask check [--config PATH]` — validate a host config (default `bindings/host.json`)
//! - `cargo xtask policy schema [--config PATH] [--out FILE]` — the Cedar schema the policies
//!   are checked against, derived from the bindings
//! - `cargo xtask codegen [--check] [--config PATH --out DIR]` — write (or verify) the generated
//!   files: this workspace's, or a host's committed bindings
//! - `cargo xtask demo` — the main job on the embedded default config
//! - `cargo xtask examples` — the example crates, run against the test server
//! - `cargo xtask conformance [--scenario NAME] [--spec-version REV]` — the official MCP client
//!   conformance suite against `brain-conformance-client`
//! - `cargo xtask bench [--quick]` — the performance targets, measured side by side
//! - `cargo xtask soak [--calls N] [--concurrency C] [--fault-rate F]` — calls with random faults
//! - `cargo xtask gate [--rebaseline]` — the performance gate: instructions and counts per call
//! - `cargo xtask ci` — everything CI runs
//! - `cargo xtask dist` — the statically linked release `brain-harness`

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod check;
mod ci;
mod codegen;
mod conformance;
mod conformance_server;
mod demo;
mod discover;
mod dist;
mod examples;
mod gate;
mod soak;
#[cfg(test)]
mod tidy;
mod workspace;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "brain's project commands", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Turn tools of a live MCP server into bindings, or check pinned bindings for drift.
    ///
    /// MCP only: HTTP and SSE tools have no listing protocol, so their bindings are written by
    /// hand (docs/src/guides/http-tools.md); `--check` passes over them.
    Discover(Box<discover::DiscoverArgs>),
    /// Validate a host config and print every diagnostic, rustc-style.
    Check {
        /// The host config to check.
        #[arg(long, value_name = "PATH", default_value_os_t = default_config())]
        config: PathBuf,
    },
    /// Policies: `schema` writes the Cedar schema brain derives from the bindings (the one every
    /// load validates the policies against), for editors and review.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Write the generated files: this workspace's (bindings/src/generated from
    /// bindings/host.json, and brain-config/host-config.schema.json), or with --config and --out
    /// a host's committed bindings.
    Codegen {
        /// Only verify that the generated files are fresh; write nothing.
        #[arg(long)]
        check: bool,
        /// A host config to generate typed bindings from (with --out).
        #[arg(long, value_name = "PATH", requires = "out")]
        config: Option<PathBuf>,
        /// The directory for the host's generated module (`DIR/mod.rs`); refused when it holds a
        /// file brain-codegen did not write.
        #[arg(long, value_name = "DIR", requires = "config")]
        out: Option<PathBuf>,
    },
    /// Run the main job on the embedded default config (bindings/host.json).
    Demo {
        /// Keep the demo's directory (its config and call journal) and say where it is, to try
        /// `brain-harness journal` and `audit` on it afterwards.
        #[arg(long)]
        keep: bool,
    },
    /// Run the official MCP client conformance suite (both pinned versions, both revisions)
    /// against brain-conformance-client, checked against tests/conformance/expected-failures.yaml.
    Conformance(conformance::ConformanceArgs),
    /// Measure the performance targets (the bench reference, docs/src/reference/bench.md) side
    /// by side; exit 1 if one is missed, 2 if a group of rows fails (`--smoke`: only 2).
    Bench(bench::BenchArgs),
    /// Soak the runtime: many calls with random faults; exit 1 on any violation.
    Soak(soak::SoakArgs),
    /// The performance gate: the client's instructions per call (callgrind) and the server's
    /// connections, TLS handshakes and requests per call, against tests/perf-gate.json; exit 1
    /// on a regression.
    Gate {
        /// Write tests/perf-gate.json from this run (after a new rustc or Cargo.lock, or an
        /// intended change; review its diff).
        #[arg(long)]
        rebaseline: bool,
    },
    /// Build the example crates (examples/) and run each against the test server on loopback.
    Examples,
    /// Run everything CI runs: fmt, clippy, codegen --check, conformance, the gate, the soak, the
    /// examples, doc tests and tests.
    Ci,
    /// Build the statically linked release brain-harness.
    Dist {
        /// The cargo profile (default `release`; the test of `dist` uses `static-check`, the
        /// same static link without optimisation).
        #[arg(long, default_value = "release")]
        profile: String,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Write the `.cedarschema` of the config's bindings (stdout, or --out).
    Schema {
        /// The host config.
        #[arg(long, value_name = "PATH", default_value_os_t = default_config())]
        config: PathBuf,
        /// Where to write it (a `.cedarschema` file); stdout when absent.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(discover::go_style_flags(std::env::args()));
    let result = match cli.command {
        Command::Discover(args) => discover::run(*args),
        Command::Check { config } => check::run(&config),
        Command::Policy {
            command: PolicyCommand::Schema { config, out },
        } => check::policy_schema(&config, out.as_deref()),
        Command::Codegen { check, config, out } => codegen::run(
            check,
            config
                .zip(out)
                .map(|(config, out)| codegen::Target { config, out }),
        ),
        Command::Demo { keep } => demo::run(keep),
        Command::Conformance(args) => conformance::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Soak(args) => soak::run(&args),
        Command::Gate { rebaseline } => gate::run(rebaseline),
        Command::Examples => examples::run(),
        Command::Ci => ci::run(),
        Command::Dist { profile } => dist::run(&profile),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `bindings/host.json`, the deployment's config.
fn default_config() -> PathBuf {
    let path = workspace::workspace_root().join("bindings/host.json");
    // Shown as `bindings/host.json` when run from the root, as `cargo xtask` usually is.
    match std::env::current_dir() {
        Ok(cwd) => path
            .strip_prefix(&cwd)
            .map_or(path.clone(), |p| p.to_owned()),
        Err(_) => path,
    }
}
