//! Tidy rules about the docs and the public API, each a function that returns what breaks it:
//!
//! - every relative link in the Markdown docs resolves to a file, and every `#anchor` to a
//!   heading of the page it names ([`broken_links`]);
//! - every Rust snippet in them compiles as a doc test (its file is included by the `tests`
//!   crate's `docs` module) or is marked `ignore` with the reason, "not compiled", just before
//!   or inside it ([`unchecked_snippets`]);
//! - no public function of the library crates returns `Result<_, String>` ([`string_errors`]).

use std::path::{Path, PathBuf};

/// A Markdown file's lines outside fenced code blocks, with their line numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// A heading's anchor as GitHub and mdBook make it: lowercase, spaces to `-`, every other
/// character but letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings.
fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .into_iter()
        .filter_map(|(_, line)| {
            let heading = line.trim_start_matches('#');
            (line.starts_with('#') && heading.starts_with(' ')).then(|| slug(heading))
        })
        .collect()
}

/// The targets of the inline links `[text](target)` on a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        targets.push(target.to_owned());
        rest = &after[end..];
    }
    targets
}

/// Every relative link of `files` (Markdown) whose file does not exist, or whose `#anchor` is no
/// heading of its page, as `path:line: target (why)`.
pub(super) fn broken_links(base: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut broken = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file
            .strip_prefix(base)
            .unwrap_or(file)
            .display()
            .to_string();
        for (n, line) in prose(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let page = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                if !page.exists() {
                    broken.push(format!("{shown}:{n}: {target} (no such file)"));
                } else if !anchor.is_empty()
                    && page.extension().is_some_and(|e| e == "md")
                    && !anchors(&std::fs::read_to_string(&page).unwrap())
                        .iter()
                        .any(|a| a == anchor)
                {
                    broken.push(format!("{shown}:{n}: {target} (no such heading)"));
                }
            }
        }
    }
    broken
}

/// Every Rust code block of `files` that is neither compiled as a doc test (its file is one of
/// `compiled`) nor marked `ignore` with the words "not compiled" in the three lines before
/// its fence or in its first line, as `path:line`.
pub(super) fn unchecked_snippets(
    base: &Path,
    files: &[PathBuf],
    compiled: &[PathBuf],
) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let shown = file
            .strip_prefix(base)
            .unwrap_or(file)
            .display()
            .to_string();
        let mut fenced = false;
        for (i, line) in lines.iter().enumerate() {
            let Some(info) = line.trim_start().strip_prefix("```") else {
                continue;
            };
            fenced = !fenced;
            if !fenced || !(info == "rust" || info.starts_with("rust,")) {
                continue;
            }
            let ignored = info.split(',').any(|word| word == "ignore");
            // The sentence before the fence may break the words across lines.
            let reason = lines[i.saturating_sub(3)..=(i + 1).min(lines.len() - 1)]
                .join(" ")
                .to_lowercase()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains("not compiled");
            let ok = if ignored {
                reason
            } else {
                compiled.contains(file)
            };
            if !ok {
                let why = if ignored {
                    "marked ignore without saying why (\"not compiled here: …\")"
                } else {
                    "not compiled: its file is not in the tests crate's docs module"
                };
                found.push(format!("{shown}:{}: {why}", i + 1));
            }
        }
    }
    found
}

/// The files the `tests` crate's `docs` module compiles as doc tests (`include_str!("../../X")`
/// in `tests/src/lib.rs`).
pub(super) fn compiled_docs(base: &Path) -> Vec<PathBuf> {
    let lib = std::fs::read_to_string(base.join("tests/src/lib.rs")).unwrap();
    lib.split("include_str!(\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|path| base.join("tests/src").join(path))
        .filter_map(|path| path.canonicalize().ok())
        .collect()
}

/// Whether the signature's text names `Result<_, String>`.
fn names_string_error(signature: &str) -> bool {
    let text: String = signature.split_whitespace().collect();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("Result<") {
        let args = &rest[at + "Result<".len()..];
        let (mut depth, mut last_comma, mut end) = (0usize, None, None);
        for (i, c) in args.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(i),
                _ => {}
            }
        }
        if let (Some(comma), Some(end)) = (last_comma, end)
            && &args[comma + 1..end] == "String"
        {
            return true;
        }
        rest = args;
    }
    false
}

/// Every `pub` function (and method of a `pub` trait) under `dirs` of `base` whose signature
/// returns `Result<_, String>`, as `path: fn name`.
pub(super) fn string_errors(base: &Path, dirs: &[&str]) -> Vec<String> {
    use quote::ToTokens;
    let mut found = Vec::new();
    let mut check = |path: &Path, name: &syn::Ident, sig: &syn::Signature| {
        if names_string_error(&sig.to_token_stream().to_string()) {
            let shown = path.strip_prefix(base).unwrap_or(path).display();
            found.push(format!("{shown}: fn {name}"));
        }
    };
    for dir in dirs {
        for path in super::files(&base.join(dir), &["rs"], &[]) {
            let file = syn::parse_file(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let mut items: Vec<&syn::Item> = file.items.iter().collect();
            while let Some(item) = items.pop() {
                let public = |vis: &syn::Visibility| matches!(vis, syn::Visibility::Public(_));
                match item {
                    syn::Item::Fn(f) if public(&f.vis) => check(&path, &f.sig.ident, &f.sig),
                    syn::Item::Impl(block) => {
                        for inner in &block.items {
                            if let syn::ImplItem::Fn(f) = inner
                                && public(&f.vis)
                                && block.trait_.is_none()
                            {
                                check(&path, &f.sig.ident, &f.sig);
                            }
                        }
                    }
                    syn::Item::Trait(t) if public(&t.vis) => {
                        for inner in &t.items {
                            if let syn::TraitItem::Fn(f) = inner {
                                check(&path, &f.sig.ident, &f.sig);
                            }
                        }
                    }
                    syn::Item::Mod(m) if !is_test(&m.attrs) => {
                        items.extend(m.content.iter().flat_map(|(_, inner)| inner));
                    }
                    _ => {}
                }
            }
        }
    }
    found
}

/// Whether the attributes make an item test-only (`#[cfg(test)]`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    use quote::ToTokens;
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.meta.to_token_stream().to_string().contains("test"))
}

/// `path` is over `max` bytes: `path: N bytes, over M`.
pub(super) fn oversized(base: &Path, path: &str, max: u64) -> Option<String> {
    let size = std::fs::metadata(base.join(path)).unwrap().len();
    (size > max).then(|| format!("{path}: {size} bytes, over {max}"))
}

/// The MCP revisions, whose names are dates.
const REVISIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// Whether `word` is a date (`YYYY-MM-DD`) other than an MCP revision's name.
pub(super) fn dated(word: &str) -> bool {
    let b = word.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
        && !REVISIONS.contains(&word)
}

/// Whether `word` looks like a commit id: 7 to 40 lowercase hex digits, digits and letters
/// among them.
pub(super) fn commit_id(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        && word.bytes().any(|c| c.is_ascii_digit())
        && word.bytes().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn broken_links_and_anchors_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let page = write(
            dir.path(),
            "docs/page.md",
            "# A page\n\n## HTTPS, HTTP/2 and private CAs\n",
        );
        let readme = write(
            dir.path(),
            "README.md",
            "[ok](docs/page.md#https-http2-and-private-cas) [self](#top) \
             [gone](docs/nope.md) [bad](docs/page.md#nope) [web](https://x.invalid/a)\n\
             ```text\n[in a fence](nowhere.md)\n```\n# Top\n",
        );
        let found = broken_links(dir.path(), &[readme, page]);
        assert_eq!(
            found,
            [
                "README.md:1: docs/nope.md (no such file)",
                "README.md:1: docs/page.md#nope (no such heading)",
            ]
        );
    }

    #[test]
    fn unchecked_snippets_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let compiled = write(dir.path(), "a.md", "```rust\nfn main() {}\n```\n");
        let other = write(
            dir.path(),
            "b.md",
            "Not compiled here: it needs a server.\n\n```rust,ignore\nx\n```\n\
             ```rust,ignore\ny\n```\n```rust,no_run\nz\n```\n```text\nfine\n```\n",
        );
        let found = unchecked_snippets(dir.path(), &[compiled.clone(), other], &[compiled]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("b.md:6: marked ignore"), "{found:?}");
        assert!(found[1].starts_with("b.md:9: not compiled"), "{found:?}");
    }

    #[test]
    fn dates_and_commit_ids_are_found() {
        assert!(dated("2026-12-07"));
        assert!(!dated("2025-11-25"), "an MCP revision's name");
        assert!(!dated("2026-12-7"));
        assert!(commit_id("b00c647") && commit_id("704c778"));
        assert!(!commit_id("ed25519-dalek") && !commit_id("1234567") && !commit_id("decade"));
    }

    #[test]
    fn oversized_files_are_found() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "README.md", &"x".repeat(11));
        assert_eq!(oversized(dir.path(), "README.md", 11), None);
        assert_eq!(
            oversized(dir.path(), "README.md", 10).as_deref(),
            Some("README.md: 11 bytes, over 10")
        );
    }

    #[test]
    fn string_errors_are_found() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "krate/src/lib.rs",
            "pub fn bad() -> Result<Vec<(u8, u8)>, String> { todo!() }\n\
             pub fn fine() -> Result<(), Error> { todo!() }\n\
             pub fn map() -> std::collections::BTreeMap<String, String> { todo!() }\n\
             fn private() -> Result<(), String> { todo!() }\n\
             pub struct S;\nimpl S { pub fn method(&self) -> Result<u8, String> { todo!() } }\n\
             pub trait T { fn hook(&self) -> Box<dyn Fn() -> Result<String, String>>; }\n\
             #[cfg(test)] mod tests { pub fn helper() -> Result<(), String> { Ok(()) } }\n",
        );
        let mut found = string_errors(dir.path(), &["krate/src"]);
        found.sort();
        assert_eq!(
            found,
            [
                "krate/src/lib.rs: fn bad",
                "krate/src/lib.rs: fn hook",
                "krate/src/lib.rs: fn method",
            ]
        );
    }
}
