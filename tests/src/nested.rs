//! Nested cargo builds for tests, without a second set of compiled dependencies: a copy of the
//! workspace, checked with `cargo check --workspace --all-targets` (the features `cargo xtask
//! ci`'s clippy step resolved; the corpus crate left out) in the workspace's own target directory, offline. The copy's own
//! crates are new (their paths differ); its dependencies are the ones already checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::workspace_root;

/// Copies the workspace's sources to `to`: not build outputs, installed peers (virtualenvs hold
/// symlinks) or git.
pub fn copy_workspace(to: &Path) {
    copy_tree(&workspace_root(), to);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let skipped = ["target", "node_modules", ".git"]
            .iter()
            .any(|skip| name == *skip)
            || name.to_string_lossy().starts_with(".venv");
        let kind = entry.file_type().unwrap();
        if skipped || kind.is_symlink() {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// `cargo check --workspace --all-targets` of the copy at `workspace`, plus `extra` arguments;
/// without the corpus crate (`brain-codegen/corpus`, 200 bindings that none of these checks is
/// about: each copy would compile them again).
pub fn check(workspace: &Path, extra: &[&str]) -> Output {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "check",
            "--quiet",
            "--offline",
            "--locked",
            "--workspace",
            "--all-targets",
            "--exclude",
            "codegen-corpus",
        ])
        .args(extra)
        .current_dir(workspace)
        .env(
            "CARGO_TARGET_DIR",
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| workspace_root().join("target"), PathBuf::from),
        )
        .output()
        .expect("cargo runs")
}
