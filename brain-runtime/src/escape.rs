//! Text that came from a store, a server or a caller, made safe to print on a terminal: one
//! rule for what is escaped ([`escaped_char`]), written as text ([`escape`]) or inside a
//! serialized JSON line ([`escape_json`]). The reference:
//! `docs/src/reference/cli.md#how-output-is-escaped`.
//!
//! Escaped: the C0 controls (U+0000–U+001F), DEL (U+007F) and the C1 controls (U+0080–U+009F),
//! which a terminal acts on (an ANSI sequence can erase and rewrite what an approver reads);
//! the bidirectional and invisible format characters of "Trojan Source" (CVE-2021-42574):
//! U+061C, U+200B–U+200F, U+2028–U+202E, U+2060–U+2069 and U+FEFF; and, in text, the backslash
//! itself, so that an escape cannot be mimicked by a literal one.

use std::borrow::Cow;

/// Whether `c` is written escaped: a control (C0, DEL, C1), or a bidirectional, zero-width or
/// line-breaking format character. The backslash is [`escape`]'s own rule.
pub fn escaped_char(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// `text` as printed: `\` as `\\`; newline, carriage return and tab as `\n`, `\r`, `\t`; every
/// other [`escaped_char`] as `\u{…}` (its code point in lowercase hex, as Rust writes it).
/// Borrowed when nothing needs escaping.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || escaped_char(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if escaped_char(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A serialized JSON value (one line, as `serde_json` or RFC 8785 writes it) with every
/// [`escaped_char`] written as a JSON `\uXXXX` escape: still valid JSON, decoding to the same
/// value. `serde_json` escapes C0 itself but writes DEL, C1 and the format characters raw.
/// Outside strings JSON has only ASCII punctuation, digits, letters and spaces, so only string
/// contents change.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(escaped_char) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if escaped_char(c) {
            // Every escaped character is in the Basic Multilingual Plane: one `\uXXXX`.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{escape, escape_json, escaped_char};

    /// One of each class, and its escaped forms (text, JSON).
    const CLASSES: &[(char, &str, &str)] = &[
        ('\u{0}', "\\u{0}", "\\u0000"),
        ('\u{7}', "\\u{7}", "\\u0007"),
        ('\n', "\\n", "\\n"),
        ('\r', "\\r", "\\r"),
        ('\t', "\\t", "\\t"),
        ('\u{1b}', "\\u{1b}", "\\u001b"),
        ('\u{1f}', "\\u{1f}", "\\u001f"),
        ('\u{7f}', "\\u{7f}", "\\u007f"),
        ('\u{80}', "\\u{80}", "\\u0080"),
        ('\u{85}', "\\u{85}", "\\u0085"),
        ('\u{9b}', "\\u{9b}", "\\u009b"),
        ('\u{9f}', "\\u{9f}", "\\u009f"),
        ('\u{61c}', "\\u{61c}", "\\u061c"),
        ('\u{200b}', "\\u{200b}", "\\u200b"),
        ('\u{200f}', "\\u{200f}", "\\u200f"),
        ('\u{2028}', "\\u{2028}", "\\u2028"),
        ('\u{202a}', "\\u{202a}", "\\u202a"),
        ('\u{202e}', "\\u{202e}", "\\u202e"),
        ('\u{2060}', "\\u{2060}", "\\u2060"),
        ('\u{2066}', "\\u{2066}", "\\u2066"),
        ('\u{2069}', "\\u{2069}", "\\u2069"),
        ('\u{feff}', "\\u{feff}", "\\ufeff"),
    ];

    #[test]
    fn every_class_is_escaped_in_text() {
        for &(c, text, _) in CLASSES {
            assert!(escaped_char(c), "{c:?}");
            let escaped = escape(&format!("a{c}b")).into_owned();
            assert_eq!(escaped, format!("a{text}b"), "{c:?}");
            assert!(!escaped.chars().any(escaped_char), "{escaped}");
        }
    }

    #[test]
    fn a_backslash_is_doubled_so_no_escape_can_be_forged() {
        assert_eq!(escape("a\\b"), "a\\\\b");
        // A literal `\u{1b}` and a real ESC print differently.
        assert_eq!(escape("\\u{1b}"), "\\\\u{1b}");
        assert_eq!(escape("\u{1b}"), "\\u{1b}");
    }

    #[test]
    fn printable_text_is_borrowed_unchanged() {
        for text in [
            "c1",
            "",
            "refund 900000",
            "ünïcödé 日本 🙂",
            "\"quoted\" {}",
            "\u{a0}",
        ] {
            assert!(
                matches!(escape(text), std::borrow::Cow::Borrowed(_)),
                "{text}"
            );
            assert_eq!(escape(text), text);
            assert!(matches!(escape_json(text), std::borrow::Cow::Borrowed(_)));
        }
        for c in [
            '\u{a0}', '\u{ad}', '\u{2010}', '\u{2027}', '\u{202f}', '\u{206a}', ' ', '~',
        ] {
            assert!(!escaped_char(c), "{c:?}");
        }
    }

    #[test]
    fn the_attack_prints_as_data() {
        let id = "c1\u{1b}[2K\u{1b}[1A  \"amount\": 5";
        assert_eq!(escape(id), "c1\\u{1b}[2K\\u{1b}[1A  \"amount\": 5");
    }

    #[test]
    fn json_stays_valid_and_decodes_to_the_same_value() {
        let mut all: String = CLASSES.iter().map(|&(c, _, _)| c).collect();
        all.push_str("\\ \"x\" ünï");
        let value = serde_json::json!({"k\u{202e}": all, "n": [1, "\u{85}"]});
        for serialized in [
            serde_json::to_string(&value).unwrap(),
            serde_jcs::to_string(&value).unwrap(),
        ] {
            let escaped = escape_json(&serialized);
            assert!(!escaped.chars().any(escaped_char), "{escaped}");
            let decoded: serde_json::Value = serde_json::from_str(&escaped).unwrap();
            assert_eq!(decoded, value);
        }
        for &(c, _, json) in CLASSES {
            let line = serde_json::to_string(&c.to_string()).unwrap();
            assert_eq!(escape_json(&line), format!("\"{json}\""), "{c:?}");
        }
    }
}
