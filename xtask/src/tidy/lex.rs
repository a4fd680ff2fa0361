//! Where a path is written in a file (proc-macro2 gives no line numbers without its
//! `span-locations` feature, which the workspace does not enable).

/// The line where `path` is first written in `source` after the start of the `inline` modules
/// (`mod a {` then `mod b {`): its segments joined by `::`, through `use` groups (`a::{x, b::c}`
/// writes `a::b::c`); `None` when it is not (a macro made it).
pub(super) fn line_of(source: &str, inline: &[String], path: &[String]) -> Option<usize> {
    let tokens = lex(source);
    let mut from = 0;
    for name in inline {
        let text = |i: usize| tokens.get(i).map_or("", |t| t.0.as_str());
        let at = (from..tokens.len()).find(|&i| text(i) == "mod" && text(i + 1) == name)?;
        from = at + 2;
    }
    let start = (from..tokens.len()).find(|&i| {
        (i == 0 || !matches!(tokens[i - 1].0.as_str(), "::" | ".")) && written_at(&tokens, i, path)
    })?;
    Some(source[..tokens[start].1].matches('\n').count() + 1)
}

/// Whether `path` is written at token `at` of `tokens` (see [`line_of`]).
fn written_at(tokens: &[(String, usize)], at: usize, path: &[String]) -> bool {
    let text = |i: usize| tokens.get(i).map_or("", |t| t.0.as_str());
    if text(at) != path[0] {
        return false;
    }
    if path.len() == 1 {
        return true;
    }
    if text(at + 1) != "::" {
        return false;
    }
    if text(at + 2) != "{" {
        return written_at(tokens, at + 2, &path[1..]);
    }
    let mut depth = 1;
    let mut i = at + 3;
    while depth > 0 && i < tokens.len() {
        if depth == 1 && (i == at + 3 || text(i - 1) == ",") && written_at(tokens, i, &path[1..]) {
            return true;
        }
        match text(i) {
            "{" => depth += 1,
            "}" => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    false
}

/// The tokens of Rust `source` that paths are made of, each with its byte offset: identifiers
/// (raw ones without `r#`), `::` and single punctuation; comments and literals left out.
pub(super) fn lex(source: &str) -> Vec<(String, usize)> {
    let bytes = source.as_bytes();
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let word = |i: usize| at(i).is_ascii_alphanumeric() || at(i) == b'_' || at(i) >= 0x80;
    let char_len = |i: usize| source[i..].chars().next().map_or(1, char::len_utf8);
    let (mut out, mut i) = (Vec::new(), 0);
    while i < bytes.len() {
        let start = i;
        match (at(i), at(i + 1)) {
            (b'/', b'/') => i = source[i..].find('\n').map_or(bytes.len(), |n| i + n),
            (b'/', b'*') => {
                let mut depth = 0;
                while i < bytes.len() {
                    match (at(i), at(i + 1)) {
                        (b'/', b'*') => (depth, i) = (depth + 1, i + 2),
                        (b'*', b'/') => (depth, i) = (depth - 1, i + 2),
                        _ => i += 1,
                    }
                    if depth == 0 {
                        break;
                    }
                }
            }
            (b'"', _) => i = skip_string(bytes, i + 1, false, 0),
            // A character: '\n', '\u{..}', 'x' (a lifetime, 'a without a closing quote, is left
            // as a `'` and its name).
            (b'\'', b'\\') => {
                let close = source.get(i + 3..).and_then(|rest| rest.find('\''));
                i = close.map_or(bytes.len(), |n| i + 4 + n);
            }
            (b'\'', _) if at(i + 1 + char_len(i + 1)) == b'\'' => i += 2 + char_len(i + 1),
            (b':', b':') => {
                out.push(("::".into(), start));
                i += 2;
            }
            (c, _) if word(i) => {
                while word(i) {
                    i += 1;
                }
                let text = &source[start..i];
                let hashes = source[i..].bytes().take_while(|b| *b == b'#').count();
                if matches!(text, "r" | "br" | "cr") && at(i + hashes) == b'"' {
                    i = skip_string(bytes, i + hashes + 1, true, hashes);
                } else if matches!(text, "b" | "c") && at(i) == b'"' {
                    i = skip_string(bytes, i + 1, false, 0);
                } else if text == "r" && hashes == 1 && word(i + 1) {
                    i += 1;
                    let ident = i;
                    while word(i) {
                        i += 1;
                    }
                    out.push((source[ident..i].to_string(), start));
                } else if !c.is_ascii_digit() {
                    out.push((text.to_string(), start));
                }
            }
            (c, _) if c.is_ascii_whitespace() => i += 1,
            _ => {
                i += char_len(i);
                out.push((source[start..i].to_string(), start));
            }
        }
    }
    out
}

/// The offset after the string literal whose text starts at `i`: with `\` escapes, or `raw`
/// and closed by `"` and `hashes` `#`.
fn skip_string(bytes: &[u8], mut i: usize, raw: bool, hashes: usize) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if !raw => i += 2,
            b'"' if bytes[i + 1..].iter().take(hashes).all(|b| *b == b'#')
                && bytes.len() > i + hashes =>
            {
                return i + 1 + hashes;
            }
            _ => i += 1,
        }
    }
    i
}
