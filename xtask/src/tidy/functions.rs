//! How long each function is: from its `fn` line to its closing brace, both counted (its doc
//! comments and attributes are not), read with the tidy lexer so that braces in strings,
//! comments and character literals do not count. Code under `#[cfg(test)]` is left out, and a
//! `#[cfg(test)] mod x;` names a test file ([`Scan::test_modules`]).

use std::path::{Path, PathBuf};

use super::lex::lex;

/// A function with a body: the line of its `fn`, its name and how many lines it spans.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Function {
    pub(super) line: usize,
    pub(super) name: String,
    pub(super) lines: usize,
}

/// What [`scan`] finds in one file.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// Its functions (nested ones too, each counted on its own), in order.
    pub(super) functions: Vec<Function>,
    /// The modules it declares test-only without a body (`#[cfg(test)] mod tests;`).
    pub(super) test_modules: Vec<String>,
}

/// The functions of Rust `source` outside its `#[cfg(test)]` items (a `#![cfg(test)]` file has
/// none), and its test-only file modules.
pub(super) fn scan(source: &str) -> Scan {
    let tokens = lex(source);
    let text = |i: usize| tokens.get(i).map_or("", |t| t.0.as_str());
    let starts: Vec<usize> = std::iter::once(0)
        .chain(source.match_indices('\n').map(|(n, _)| n + 1))
        .collect();
    let line = |i: usize| starts.partition_point(|&s| s <= tokens[i].1);
    let mut scan = Scan::default();
    let mut i = 0;
    while i < tokens.len() {
        if text(i) == "#" && matches!((text(i + 1), text(i + 2)), ("[", _) | ("!", "[")) {
            let inner = text(i + 1) == "!";
            let close = matching(&tokens, i + 1 + usize::from(inner));
            let test = test_only(&tokens[i..close]);
            i = close + 1;
            if test && inner {
                return Scan::default();
            }
            if test {
                i = skip_item(&tokens, i, &mut scan.test_modules);
            }
            continue;
        }
        let named = text(i + 1).starts_with(|c: char| c.is_alphabetic() || c == '_');
        if text(i) == "fn"
            && named
            && let Some(close) = body_end(&tokens, i + 2)
        {
            scan.functions.push(Function {
                line: line(i),
                name: text(i + 1).to_owned(),
                lines: line(close) - line(i) + 1,
            });
        }
        i += 1;
    }
    scan
}

/// Whether attribute `tokens` (from `#` to `]`) is a `cfg` that holds only under `test`:
/// `#[cfg(test)]`, `#[cfg(all(test, ..))]`, not `#[cfg(not(test))]`.
fn test_only(tokens: &[(String, usize)]) -> bool {
    let words = || tokens.iter().map(|t| t.0.as_str());
    words()
        .nth(2)
        .is_some_and(|w| w == "cfg" || w == "[" && words().nth(3) == Some("cfg"))
        && words().any(|w| w == "test")
        && !words().any(|w| w == "not" || w == "any")
}

/// The index after the test-only item that starts at token `at` (after its `#[cfg(test)]`):
/// its other attributes, then up to its `;` or through its `{ .. }`. A `mod x;` adds `x` to
/// `test_modules`.
fn skip_item(tokens: &[(String, usize)], mut at: usize, test_modules: &mut Vec<String>) -> usize {
    let text = |i: usize| tokens.get(i).map_or("", |t| t.0.as_str());
    while text(at) == "#" && text(at + 1) == "[" {
        at = matching(tokens, at + 1) + 1;
    }
    let start = at;
    let mut depth = 0usize;
    while at < tokens.len() {
        match text(at) {
            "(" | "[" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            ";" if depth == 0 => {
                let words: Vec<&str> = (start..at).map(text).collect();
                if let [.., "mod", name] = words[..] {
                    test_modules.push(name.to_owned());
                }
                return at + 1;
            }
            "{" if depth == 0 => return matching(tokens, at) + 1,
            _ => {}
        }
        at += 1;
    }
    at
}

/// The index of the closing brace of the body of the function whose signature goes on from
/// token `at` (after its name): the first `{` outside parentheses and brackets; `None` when a
/// `;` comes first (a declaration in a trait or an `extern` block).
fn body_end(tokens: &[(String, usize)], mut at: usize) -> Option<usize> {
    let mut depth = 0usize;
    while at < tokens.len() {
        match tokens[at].0.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            ";" if depth == 0 => return None,
            "{" if depth == 0 => return Some(matching(tokens, at)),
            _ => {}
        }
        at += 1;
    }
    None
}

/// The index of the bracket that closes the one at token `open` (`{`, `[` or `(`), or the last
/// index when the source ends first.
fn matching(tokens: &[(String, usize)], open: usize) -> usize {
    let (opens, closes) = match tokens[open].0.as_str() {
        "{" => ("{", "}"),
        "[" => ("[", "]"),
        _ => ("(", ")"),
    };
    let mut depth = 0usize;
    for (i, (text, _)) in tokens.iter().enumerate().skip(open) {
        if text == opens {
            depth += 1;
        } else if text == closes {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    tokens.len().saturating_sub(1)
}

/// The functions of `files` (of `base`) longer than `max` lines, longest first, each with its
/// length and as `path:line name N lines`. A file that a `#[cfg(test)] mod x;` of another of
/// `files` names (`x.rs` or `x/mod.rs` beside it) is test code, and left out.
pub(super) fn long_functions(base: &Path, files: &[PathBuf], max: usize) -> Vec<(usize, String)> {
    let scans: Vec<(&PathBuf, Scan)> = files
        .iter()
        .map(|file| (file, scan(&std::fs::read_to_string(file).unwrap())))
        .collect();
    let tests: Vec<PathBuf> = scans
        .iter()
        .flat_map(|(file, scan)| scan.test_modules.iter().flat_map(|m| module_files(file, m)))
        .collect();
    let mut found = Vec::new();
    for (file, scan) in scans.iter().filter(|(file, _)| !tests.contains(file)) {
        let path = file.strip_prefix(base).unwrap_or(file).display();
        for f in scan.functions.iter().filter(|f| f.lines > max) {
            let at = format!("{path}:{} {} {} lines", f.line, f.name, f.lines);
            found.push((f.lines, at));
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found
}

/// Where rustc looks for module `name` declared in `file`: `x.rs` or `x/mod.rs` in `file`'s
/// directory for a `lib.rs`, `main.rs` or `mod.rs`, else in the directory named after `file`.
fn module_files(file: &Path, name: &str) -> [PathBuf; 2] {
    let stem = file.file_stem().unwrap().to_string_lossy();
    let parent = file.parent().unwrap();
    let dir = match &*stem {
        "lib" | "main" | "mod" => parent.to_owned(),
        _ => parent.join(&*stem),
    };
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file with the shapes that fool a naive brace count.
    const FIXTURE: &str = r####"
/// Doc comments and attributes do not count.
#[inline]
pub fn outer(x: u8) -> impl Fn(u8) -> u8 {
    let s = "}}} a string's braces";
    let r = r#"raw "}" { "#;
    let c = '{';
    let e = '\'';
    let b = b'}';
    // a comment's brace: }
    /* a block comment's brace: { /* nested } */ */
    fn inner<'a>(y: &'a str) -> &'a str {
        y
    }
    move |z| { x + z }
}

trait T {
    fn declared(&self) -> u8;
    fn defaulted(&self) -> u8 { 1 }
}

#[cfg(test)]
fn test_helper() {
    let v = vec![1];
}

#[cfg(test)]
mod tests;

#[cfg(not(test))]
fn shipped(
    f: fn(u8) -> u8,
) -> u8 {
    f(1)
}
"####;

    #[test]
    fn functions_are_counted_from_fn_to_closing_brace() {
        let found_in = scan(FIXTURE);
        let found: Vec<(usize, &str, usize)> = found_in
            .functions
            .iter()
            .map(|f| (f.line, f.name.as_str(), f.lines))
            .collect();
        assert_eq!(
            found,
            [
                (4, "outer", 13),
                (12, "inner", 3),
                (20, "defaulted", 1),
                (32, "shipped", 5),
            ]
        );
        assert_eq!(found_in.test_modules, ["tests"]);
        assert!(scan("#![cfg(test)]\nfn f() {\n}\n").functions.is_empty());
    }
}
