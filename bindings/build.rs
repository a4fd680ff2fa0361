//! Refuses to build when `host.json` is invalid or `src/generated` is stale. Writes nothing.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    println!("cargo::rerun-if-changed=host.json");
    println!("cargo::rerun-if-changed=src/generated/mod.rs");
    let config = match brain_config::load_file(std::path::Path::new("host.json")) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            eprintln!(
                "error: bindings/host.json is invalid: fix it (`cargo xtask check` shows the same), then run `cargo xtask codegen`"
            );
            return ExitCode::FAILURE;
        }
    };
    let generated = std::fs::read_to_string("src/generated/mod.rs").unwrap_or_default();
    let recorded = generated
        .lines()
        .find_map(|line| line.strip_prefix("// config-digest: "));
    let digest = config.digest();
    if recorded != Some(digest.as_str()) {
        eprintln!(
            "error: bindings/src/generated is stale: it was generated from {}, but bindings/host.json is now {digest}\n  help: run `cargo xtask codegen` and commit the result",
            recorded.unwrap_or("nothing")
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
