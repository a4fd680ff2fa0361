//! How brain-harness prints what it did not write itself — ids, sessions, principals,
//! arguments, binding names, texts, reasons, approvers, owners, read from the state's store or
//! answered by a server: always through `brain_runtime::escape` (the one rule; the reference is
//! `docs/src/reference/cli.md#how-output-is-escaped`). A table's fields are escaped with
//! [`text`] before they are padded; a JSON line is written by [`json`]; a line quoting such a
//! value (a warning, an error) is escaped whole by [`line`] or [`error`].

#![allow(clippy::print_stdout, clippy::print_stderr)]

pub(crate) use brain_runtime::escape::{escape as text, escape_json};

/// `value` as one JSON line on stdout, its control and format characters `\u` escapes.
pub(crate) fn json(value: &impl serde::Serialize) {
    let line = serde_json::to_string(value).expect("a JSON value serializes");
    println!("{}", escape_json(&line));
}

/// `value` serialized as JSON on one line, escaped: for a value shown inside a text line.
pub(crate) fn json_text(value: &impl serde::Serialize) -> String {
    let line = serde_json::to_string(value).expect("a JSON value serializes");
    escape_json(&line).into_owned()
}

/// `message` on stdout, escaped whole.
pub(crate) fn line(message: &str) {
    println!("{}", text(message));
}

/// `error: ` and `message` on stderr, escaped whole.
pub(crate) fn error(message: &str) {
    eprintln!("error: {}", text(message));
}

/// `message` on stderr, escaped whole.
pub(crate) fn note(message: &str) {
    eprintln!("{}", text(message));
}

/// The top-level entries of the JSON object `json`, in their order, each one kept — a key a
/// tampered row repeats too; `None` when `json` is not an object.
pub(crate) fn entries(json: &str) -> Option<Vec<(String, serde_json::Value)>> {
    serde_json::from_str::<Entries>(json).ok().map(|e| e.0)
}

struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn every_entry_is_kept_in_order() {
        let entries = super::entries(r#"{"amount":5,"note":"x","amount":900000}"#).unwrap();
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["amount", "note", "amount"]);
        assert_eq!(entries[2].1, json!(900000));
        assert!(super::entries("[1]").is_none());
        assert!(super::entries("not json").is_none());
    }

    #[test]
    fn json_shown_in_text_is_escaped_and_still_json() {
        let shown = super::json_text(&json!({"k": "a\u{1b}\u{85}\u{202e}\\"}));
        assert_eq!(shown, r#"{"k":"a\u001b\u0085\u202e\\"}"#);
    }
}
