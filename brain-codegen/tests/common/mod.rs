//! What the snapshot tests share.

use std::path::Path;

/// Asserts that `dir` holds exactly the generated module, as `mod.rs` (`EXPECTORATE=overwrite`
/// writes it; a stray file fails the test instead of lingering).
pub(crate) fn assert_generated(dir: &Path, module: &str) {
    std::fs::create_dir_all(dir).unwrap();
    expectorate::assert_contents(dir.join("mod.rs"), module);
    let on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(on_disk, ["mod.rs"], "stray files in {}", dir.display());
}
