//! What the snapshot tests share.

use std::path::Path;

use brain_codegen::GeneratedFile;

/// Asserts that `dir` holds exactly the generated `files` (`EXPECTORATE=overwrite` writes them;
/// a file codegen no longer writes fails the test instead of lingering).
pub(crate) fn assert_generated(dir: &Path, files: &[GeneratedFile]) {
    std::fs::create_dir_all(dir).unwrap();
    for file in files {
        expectorate::assert_contents(dir.join(&file.path), &file.contents);
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
    expected.sort();
    assert_eq!(on_disk, expected, "stray files in {}", dir.display());
}
