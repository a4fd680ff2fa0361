//! A tool's pin: the SHA-256 digests of its canonical JSON (keys sorted, no whitespace, numbers
//! by value) and of each top-level field's.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::model::{ToolPin, hex};

impl ToolPin {
    /// The pin of `tool`, a `tools/list` entry. Each field's canonical text is written once:
    /// hashed for its own digest, and fed in its place into the whole tool's.
    ///
    /// Numbers are compared by value, as JSON and JSON Schema compare them: `0`, `0.0`, `-0` and
    /// `0e5` are one number, written `0`; a number with a fraction, or too large for a 64-bit
    /// integer, is written as `serde_json` writes its `f64` (`1.5`, `1e300`). Two listings whose
    /// numbers are written differently but equal pin alike; any other difference does not.
    pub fn of(tool: &Value) -> ToolPin {
        ToolPin::with(tool, Numbers::ByValue)
    }

    /// The pin as discoveries wrote it before numbers were compared by value (each number
    /// as `serde_json` writes it: `0.0` apart from `0`). The same as [`ToolPin::of`] but where
    /// a listing wrote an integral number with a fraction or an exponent; pins written then
    /// verify against it still ([`crate::pin`]).
    pub fn as_written(tool: &Value) -> ToolPin {
        ToolPin::with(tool, Numbers::AsWritten)
    }

    fn with(tool: &Value, numbers: Numbers) -> ToolPin {
        use sha2::{Digest, Sha256};
        let Some(fields) = tool.as_object() else {
            let mut text = Vec::new();
            canonical(tool, numbers, &mut text);
            return ToolPin {
                digest: hex(Sha256::digest(&text).as_slice()),
                fields: BTreeMap::new(),
            };
        };
        let mut names: Vec<&String> = fields.keys().collect();
        names.sort();
        let mut whole = Sha256::new();
        let mut pinned = BTreeMap::new();
        let mut text = Vec::new();
        whole.update(b"{");
        for (n, name) in names.into_iter().enumerate() {
            text.clear();
            canonical(&fields[name], numbers, &mut text);
            if n > 0 {
                whole.update(b",");
            }
            whole.update(json_string(name));
            whole.update(b":");
            whole.update(&text);
            pinned.insert(name.clone(), hex(Sha256::digest(&text).as_slice()));
        }
        whole.update(b"}");
        ToolPin {
            digest: hex(whole.finalize().as_slice()),
            fields: pinned,
        }
    }
}

/// How [`canonical`] writes numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbers {
    /// By value ([`NumberValue`]).
    ByValue,
    /// As `serde_json` writes them (pins written before numbers were compared by value).
    AsWritten,
}

/// A JSON number's value, as JSON Schema compares numbers: mathematically. An integer, or an
/// `f64` that is integral and within a 64-bit integer's range (exactly: every such `f64` is an
/// `i128`), is [`NumberValue::Integer`]; any other `f64` (a fraction, or beyond every integer
/// `serde_json` reads as one: it reads larger integers as `f64`) is [`NumberValue::Float`].
/// Equal numbers have equal values, different numbers different ones.
///
/// `serde_json` reads numbers exactly this way only without its `arbitrary_precision` feature
/// (no crate of the workspace enables it; a test in this module would see it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum NumberValue {
    /// An integer.
    Integer(i128),
    /// Any other number: finite, never `-0.0` (that is `Integer(0)`).
    Float(f64),
}

impl NumberValue {
    /// The value of `number`.
    pub(crate) fn of(number: &serde_json::Number) -> NumberValue {
        /// 2^64: an integral `f64` below it in magnitude fits an `i128` exactly.
        const INTEGERS: f64 = 18_446_744_073_709_551_616.0;
        if let Some(n) = number.as_u64() {
            return NumberValue::Integer(i128::from(n));
        }
        if let Some(n) = number.as_i64() {
            return NumberValue::Integer(i128::from(n));
        }
        let float = number.as_f64().unwrap_or(f64::NAN);
        if float.fract() == 0.0 && float.abs() < INTEGERS {
            // Exact: integral and within range (`-0.0` is 0).
            return NumberValue::Integer(float as i128);
        }
        NumberValue::Float(float)
    }

    /// Writes the value as canonical JSON: an integer's digits, or `serde_json`'s shortest text
    /// of the `f64`.
    fn write(self, out: &mut Vec<u8>) {
        use std::io::Write as _;
        match self {
            NumberValue::Integer(n) => {
                let _ = write!(out, "{n}");
            }
            NumberValue::Float(float) => {
                serde_json::to_writer(out, &float).expect("a finite number serializes");
            }
        }
    }
}

/// Writes `value` as compact JSON with the keys of every object sorted (by their bytes), as
/// `serde_json` writes it but for numbers (`numbers`), without copying the tree.
fn canonical(value: &Value, numbers: Numbers, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (n, key) in keys.into_iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&json_string(key));
                out.push(b':');
                canonical(&map[key], numbers, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                canonical(item, numbers, out);
            }
            out.push(b']');
        }
        Value::Number(number) if numbers == Numbers::ByValue => {
            NumberValue::of(number).write(out);
        }
        scalar => serde_json::to_writer(out, scalar).expect("JSON serializes"),
    }
}

fn json_string(text: &str) -> Vec<u8> {
    serde_json::to_vec(text).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::model::ToolPin;

    /// The pins as they were first written: the tree copied with its keys sorted, serialized,
    /// hashed. Pins committed by earlier discoveries must keep verifying: `ToolPin::as_written`
    /// is this always, `ToolPin::of` wherever no number was written integral with a fraction
    /// or an exponent (`0.0`, `1e2`).
    fn reference(value: &Value) -> String {
        fn sorted(value: &Value) -> Value {
            match value {
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    Value::Object(
                        (keys.into_iter())
                            .map(|k| (k.clone(), sorted(&map[k])))
                            .collect(),
                    )
                }
                Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
                other => other.clone(),
            }
        }
        crate::model::sha256(&serde_json::to_string(&sorted(value)).unwrap())
    }

    #[test]
    fn pins_are_the_digests_first_written() {
        let tools = [
            json!({"name": "echo", "description": "Echo \"quoted\"\n\u{1F600} é",
                   "inputSchema": {"type": "object", "required": ["z", "a"],
                                   "properties": {"z": {"type": "integer", "maximum": 1e300},
                                                  "a": {"type": ["string", "null"], "default": -0.5},
                                                  "É": {"enum": [true, false, null, 12345678901234567890u64]}}},
                   "annotations": {"readOnlyHint": true}, "_meta": {}, "icons": []}),
            json!({"zeta": 1, "Alpha": [{"b": 2, "a": [{"d": 4, "c": 3}]}], "\u{7f}": "\u{0}\t"}),
            json!({}),
        ];
        for tool in &tools {
            let pin = ToolPin::of(tool);
            assert_eq!(ToolPin::as_written(tool), pin, "{tool}");
            assert_eq!(pin.digest, reference(tool), "{tool}");
            for (name, value) in tool.as_object().unwrap() {
                assert_eq!(pin.fields[name], reference(value), "{name}");
            }
        }
        assert_eq!(
            ToolPin::of(&json!([1, {"b": 1, "a": 2}])).digest,
            reference(&json!([1, {"b": 1, "a": 2}]))
        );
    }

    /// Numbers are digested by value: every spelling of one number, one text; different
    /// numbers, different texts — also beyond `f64`'s exact integers, where an integer and the
    /// nearest `f64` differ.
    #[test]
    fn numbers_are_digested_by_value() {
        let text = |json: &str| {
            let value: Value = serde_json::from_str(json).unwrap();
            let mut out = Vec::new();
            super::canonical(&value, super::Numbers::ByValue, &mut out);
            String::from_utf8(out).unwrap()
        };
        let alike: [(&str, &[&str]); 9] = [
            ("0", &["0", "-0", "0.0", "-0.0", "0e0", "0E+5", "0.000e-7"]),
            ("100", &["100", "1e2", "100.0", "1.0E2", "10000e-2"]),
            ("-7", &["-7", "-7.0", "-0.7e1"]),
            ("1.5", &["1.5", "1.50", "15e-1", "0.15E1"]),
            ("-0.5", &["-0.5", "-5e-1"]),
            (
                "1152921504606846976",
                &[
                    "1152921504606846976",
                    "1152921504606846976.0",
                    "1.152921504606846976e18",
                ],
            ),
            ("18446744073709551615", &["18446744073709551615"]),
            (
                "-9223372036854775808",
                &["-9223372036854775808", "-9223372036854775808.0"],
            ),
            // As serde_json writes the f64 (and wrote it in every pin before).
            (
                &serde_json::to_string(&1e300).unwrap(),
                &["1e300", "1.0e300", "1000e297"],
            ),
        ];
        for (canonical, spellings) in alike {
            for spelling in spellings {
                assert_eq!(text(spelling), canonical, "{spelling}");
            }
        }
        // Integers beyond f64's exact ones are not the nearest f64.
        assert_ne!(text("12345678901234567890"), text("12345678901234567890.0"));
        assert_ne!(text("9007199254740993"), text("9007199254740993.0"));
        // Beyond every 64-bit integer, serde_json reads integers as f64 (no
        // `arbitrary_precision`): one value, whichever way it is written.
        assert!(
            serde_json::from_str::<Value>("18446744073709551616")
                .unwrap()
                .is_f64()
        );
        assert_eq!(text("18446744073709551616"), text("18446744073709551616.0"));
        // Inside strings and keys, nothing changes.
        assert_eq!(text(r#"{"1.0": "0.0"}"#), r#"{"1.0":"0.0"}"#);
        assert_eq!(
            text("[1.0, {\"b\": 2.50, \"a\": -0}]"),
            r#"[1,{"a":0,"b":2.5}]"#
        );
    }
}
