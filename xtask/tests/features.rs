//! One feature set for the three builds of a `cargo xtask ci` run: xtask alone (`cargo xtask`),
//! the workspace without its dev-dependencies (the steps' `cargo build --workspace --bin …`) and
//! with them (the tests). Cargo unifies a dependency's features only over what one command
//! builds; where the three part, the dependency and everything above it are compiled once more.
//! xtask's `Cargo.toml` enables the tests' features to keep them together.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each registry package of a `cargo tree` (not the workspace's own, not the host's proc
/// macros), with the feature sets it is built with.
fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "tree",
            "--locked",
            "--prefix",
            "none",
            "--format",
            "{p} [{f}]",
        ])
        .args(["--target", "x86_64-unknown-linux-gnu"])
        .args(args)
        .current_dir(tests::workspace_root())
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let line = line.trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once(" [") else {
            continue;
        };
        // `name vX.Y.Z`, then ` (proc-macro)` or ` (/path)` for the host's and the workspace's.
        if package.contains(" (") {
            continue;
        }
        packages
            .entry(package.to_owned())
            .or_default()
            .insert(features.trim_end_matches(']').to_owned());
    }
    packages
}

/// The package's feature sets in `build` that the tests' build does not have.
fn parted(
    build: &BTreeMap<String, BTreeSet<String>>,
    tests: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut parted = Vec::new();
    for (package, sets) in build {
        let Some(wanted) = tests.get(package) else {
            continue;
        };
        // The largest set is the target's (a smaller one may be a build script's).
        let largest = |sets: &BTreeSet<String>| {
            sets.iter()
                .max_by_key(|set| set.split(',').count())
                .cloned()
                .unwrap_or_default()
        };
        if largest(sets) != largest(wanted) {
            parted.push(format!(
                "{package}: [{}], the tests' build [{}]",
                largest(sets),
                largest(wanted)
            ));
        }
    }
    parted
}

#[test]
fn one_feature_set() {
    let tests = features(&["--workspace", "--edges", "normal,dev"]);
    let xtask = features(&["--package", "xtask", "--edges", "normal"]);
    let steps = features(&["--workspace", "--edges", "normal"]);
    let mut apart = parted(&xtask, &tests);
    apart.extend(
        parted(&steps, &tests)
            .into_iter()
            .map(|line| format!("(the workspace without dev-dependencies) {line}")),
    );
    assert!(
        apart.is_empty(),
        "xtask alone or the workspace without dev-dependencies builds these dependencies with \
         other features than the tests do, so a CI run compiles them (and all above them) \
         twice:\n{}\nFix: enable the tests' features of each in xtask/Cargo.toml's feature \
         unification section.",
        apart.join("\n")
    );
}
