//! `policies.files` and `policies.tests`: paths and globs relative to the host config's
//! directory, read when the config is loaded. A glob that matches nothing, or a file that cannot
//! be read, is an error, never "no policies".

use std::path::Path;

use crate::diagnostic::{Diagnostic, Rule};
use crate::policy_config::{PolicyConfig, PolicySource, SourceKind};

/// The most a policy or test file may hold.
pub const MAX_POLICY_FILE_BYTES: u64 = 1024 * 1024;

/// Reads every file `config` names into its `sources`, in the order of the patterns and, within
/// a glob, of the paths; a file matched twice is read once.
pub(crate) fn read(config: &mut PolicyConfig, dir: &Path, errors: &mut Vec<Diagnostic>) {
    let mut sources = Vec::new();
    let lists = [
        ("files", SourceKind::Policies, &config.files),
        ("tests", SourceKind::Tests, &config.tests),
    ];
    for (field, kind, patterns) in lists {
        for (index, pattern) in patterns.iter().enumerate() {
            let pointer = format!("/policies/{field}/{index}");
            let error = |message: String, help: &str| {
                Diagnostic::new(Rule::PolicyFiles, &pointer, message, help)
            };
            if Path::new(pattern).is_absolute() || pattern.split(['/', '\\']).any(|p| p == "..") {
                errors.push(error(
                    format!("{pattern:?} is not inside the host config's directory"),
                    "name the files relative to the host config's directory, without `..`",
                ));
                continue;
            }
            let full = dir.join(pattern);
            let paths = match glob::glob(&full.to_string_lossy()) {
                Ok(paths) => paths,
                Err(e) => {
                    errors.push(error(
                        format!("{pattern:?} is not a valid glob: {}", e.msg),
                        "write a path, or a glob with `*`, `?` or `[...]`",
                    ));
                    continue;
                }
            };
            let mut matched = 0;
            for path in paths {
                let path = match path {
                    Ok(path) => path,
                    Err(e) => {
                        errors.push(error(
                            format!("cannot read {}: {}", e.path().display(), e.error()),
                            "make the file readable, or remove the pattern",
                        ));
                        continue;
                    }
                };
                if path.is_dir() {
                    continue;
                }
                matched += 1;
                let relative = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                if sources.iter().any(|s: &PolicySource| s.path == relative) {
                    continue;
                }
                match read_text(&path) {
                    Ok(text) => sources.push(PolicySource {
                        path: relative,
                        kind,
                        text,
                    }),
                    Err(why) => errors.push(error(
                        format!("cannot read {}: {why}", path.display()),
                        "make the file readable UTF-8 of at most 1 MiB, or remove the pattern",
                    )),
                }
            }
            if matched == 0 {
                errors.push(error(
                    format!(
                        "{pattern:?} matches no file in {}",
                        if dir.as_os_str().is_empty() {
                            ".".to_owned()
                        } else {
                            dir.display().to_string()
                        }
                    ),
                    "check the path: policy files are named relative to the host config's \
                     directory, and a pattern that matches nothing is an error, never \"no \
                     policies\"",
                ));
            }
        }
    }
    config.sources = sources;
}

fn read_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_POLICY_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_POLICY_FILE_BYTES {
        return Err("larger than 1 MiB".to_owned());
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())
}
