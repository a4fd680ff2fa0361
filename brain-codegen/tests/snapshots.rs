//! Fixture configs in, generated code out: `tests/fixtures/<name>.json` → the files under
//! `tests/snapshots/<name>/` (or `tests/snapshots/<name>.rejected.txt` for a config the rules
//! reject). Every snapshot must compile under `#![deny(warnings)]` (`tests/pass`), and misuse
//! of it must not (`tests/ui`).
//!
//! Update with `EXPECTORATE=overwrite cargo test -p brain-codegen --test snapshots` (and
//! `TRYBUILD=overwrite` for `tests/ui/*.stderr`), then review the diff.

use std::path::{Path, PathBuf};

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

fn fixtures() -> Vec<(String, PathBuf)> {
    let mut fixtures: Vec<(String, PathBuf)> = std::fs::read_dir(dir("fixtures"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .map(|path| {
            (
                path.file_stem().unwrap().to_string_lossy().into_owned(),
                path,
            )
        })
        .collect();
    fixtures.sort();
    fixtures
}

#[test]
fn fixtures_generate_their_snapshots() {
    for (name, path) in fixtures() {
        let source = format!("tests/fixtures/{name}.json");
        match brain_config::parse(&std::fs::read(&path).unwrap(), &source) {
            Ok(config) => {
                let files = brain_codegen::generate(&config, &source).unwrap();
                let out = dir("snapshots").join(&name);
                std::fs::create_dir_all(&out).unwrap();
                for file in &files {
                    expectorate::assert_contents(out.join(&file.path), &file.contents);
                }
                let mut on_disk: Vec<String> = std::fs::read_dir(&out)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect();
                on_disk.sort();
                let mut expected: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
                expected.sort();
                assert_eq!(on_disk, expected, "stray files in tests/snapshots/{name}");
            }
            Err(diagnostics) => {
                let out = dir("snapshots").join(format!("{name}.rejected.txt"));
                expectorate::assert_contents(out, &format!("{diagnostics}\n"));
            }
        }
    }
}

#[test]
fn generation_is_deterministic() {
    for (_, path) in fixtures() {
        if let Ok(config) = brain_config::load_file(&path) {
            let first = brain_codegen::generate(&config, "x").unwrap();
            let second = brain_codegen::generate(&config.clone(), "x").unwrap();
            assert_eq!(first, second);
        }
    }
}

#[test]
fn generated_code_compiles_and_misuse_does_not() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/pass/*.rs");
    cases.compile_fail("tests/ui/*.rs");
}
