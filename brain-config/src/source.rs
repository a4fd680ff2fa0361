//! Where things are in the config's text: JSON pointer → line:column, and duplicate keys.
//!
//! `serde_json::Value` keeps no positions, so after `serde_json` has accepted the text (which
//! bounds its nesting), one iterative pass over the same text records where each member's key
//! and each array element starts. No recursion: depth costs heap, never stack.

use std::collections::{HashMap, HashSet};

/// A 1-based line and column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Positions of the JSON values in one config text.
#[derive(Debug, Default)]
pub(crate) struct SourceIndex<'a> {
    text: &'a str,
    /// Byte offset of each pointer's key (object members) or value (array elements, the root).
    offsets: HashMap<String, usize>,
    /// Pointers of keys that appear a second time in the same object, with the repeat's offset.
    duplicates: Vec<(String, usize)>,
    line_starts: Vec<usize>,
}

enum Frame {
    Object {
        pointer: String,
        keys: HashSet<String>,
        /// The pointer of the member whose key was read and whose value comes next.
        pending: Option<String>,
    },
    Array {
        pointer: String,
        next: usize,
    },
}

impl<'a> SourceIndex<'a> {
    /// Indexes `text`, which must be JSON that `serde_json` has already accepted.
    pub(crate) fn new(text: &'a str) -> Self {
        let mut index = SourceIndex {
            text,
            line_starts: std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
            ..SourceIndex::default()
        };
        index.scan();
        index
    }

    fn scan(&mut self) {
        let bytes = self.text.as_bytes();
        let mut stack: Vec<Frame> = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b' ' | b'\t' | b'\r' | b'\n' | b',' | b':' => i += 1,
                b'}' | b']' => {
                    stack.pop();
                    i += 1;
                }
                b'"' => {
                    let end = string_end(bytes, i);
                    if let Some(Frame::Object {
                        pointer,
                        keys,
                        pending: pending @ None,
                    }) = stack.last_mut()
                    {
                        let key: String =
                            serde_json::from_str(&self.text[i..end]).unwrap_or_default();
                        let member = format!("{pointer}/{}", escape_token(&key));
                        if !keys.insert(key) {
                            self.duplicates.push((member.clone(), i));
                        }
                        // The last occurrence is the one serde_json keeps, so it is the one shown.
                        self.offsets.insert(member.clone(), i);
                        *pending = Some(member);
                    } else {
                        self.value_at(&mut stack, i);
                    }
                    i = end;
                }
                open @ (b'{' | b'[') => {
                    let pointer = self.value_at(&mut stack, i);
                    stack.push(if open == b'{' {
                        Frame::Object {
                            pointer,
                            keys: HashSet::new(),
                            pending: None,
                        }
                    } else {
                        Frame::Array { pointer, next: 0 }
                    });
                    i += 1;
                }
                _ => {
                    self.value_at(&mut stack, i);
                    while i < bytes.len()
                        && !matches!(bytes[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n')
                    {
                        i += 1;
                    }
                }
            }
        }
    }

    /// Records a value starting at `offset` and returns its pointer.
    fn value_at(&mut self, stack: &mut [Frame], offset: usize) -> String {
        match stack.last_mut() {
            None => {
                self.offsets.entry(String::new()).or_insert(offset);
                String::new()
            }
            Some(Frame::Object { pending, .. }) => pending.take().unwrap_or_default(),
            Some(Frame::Array { pointer, next }) => {
                let element = format!("{pointer}/{next}");
                *next += 1;
                self.offsets.insert(element.clone(), offset);
                element
            }
        }
    }

    /// The location of `pointer`, or of its nearest ancestor that the text has.
    pub(crate) fn locate(&self, pointer: &str) -> Option<Location> {
        let mut pointer = pointer;
        loop {
            if let Some(&offset) = self.offsets.get(pointer) {
                return Some(self.location(offset));
            }
            pointer = &pointer[..pointer.rfind('/')?];
        }
    }

    /// The line and column of a byte offset.
    pub(crate) fn location(&self, offset: usize) -> Location {
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let column = self.text[start..offset].chars().count() + 1;
        Location { line, column }
    }

    /// Keys repeated within one object: their pointer and the repeat's location.
    pub(crate) fn duplicate_keys(&self) -> impl Iterator<Item = (&str, Location)> + '_ {
        self.duplicates
            .iter()
            .map(|(pointer, offset)| (pointer.as_str(), self.location(*offset)))
    }
}

/// The offset just past the string that starts with the quote at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Escapes one JSON pointer reference token (RFC 6901).
pub(crate) fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, pointer: &str, expected: (usize, usize)) {
        let index = SourceIndex::new(text);
        let location = index.locate(pointer).expect("pointer located");
        assert_eq!((location.line, location.column), expected, "{pointer}");
    }

    #[test]
    fn keys_and_elements() {
        let text = "{\n  \"tools\": [\n    {\"name\": \"a\", \"x\": [1, {\"y\": 2}]},\n    {\"na/me\": 3}\n  ]\n}";
        check(text, "", (1, 1));
        check(text, "/tools", (2, 3));
        check(text, "/tools/0", (3, 5));
        check(text, "/tools/0/name", (3, 6));
        check(text, "/tools/0/x/1/y", (3, 29));
        check(text, "/tools/1/na~1me", (4, 6));
        check(text, "/tools/1/missing", (4, 5));
    }

    #[test]
    fn columns_count_characters() {
        check("{\"é\": 1, \"k\": 2}", "/k", (1, 10));
    }

    #[test]
    fn escaped_quotes_and_keys() {
        check(r#"{"a\"b": "x\"}", "c": 1}"#, "/c", (1, 18));
        check(r#"{"\u0061": 1}"#, "/a", (1, 2));
    }

    #[test]
    fn duplicates_are_found() {
        let index = SourceIndex::new("{\"a\": 1,\n \"a\": 2, \"b\": {\"a\": 3}}");
        let duplicates: Vec<_> = index.duplicate_keys().collect();
        assert_eq!(duplicates, vec![("/a", Location { line: 2, column: 2 })]);
    }
}
