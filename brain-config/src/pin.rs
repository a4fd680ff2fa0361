//! Whether what a server lists now is what was reviewed: a binding's pin (or, without one, its
//! readable fields) against the tool's live `tools/list` entry. Pure: the runtime asks it before
//! a call is sent, and `discover --check` shows the same changes in detail.
//!
//! A change to any pinned field refuses, but for the fields the model sees only as the pinned
//! text (`description`, `title`, `icons`, `_meta`), which warn unless the binding says
//! `"on_drift": "refuse"`. Nothing can let a schema change through.
//!
//! Numbers compare by value, as in JSON Schema: a schema that says `"minimum": 0` where the
//! server lists `0.0` (or `1e2` for `100`) is the same schema; `0` against `1`, or against
//! `"0"`, is a change.

mod digest;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::model::{ToolBinding, ToolPin};

/// The fields whose change only warns by default: the model sees the pinned text anyway.
pub const WARN_ONLY: &[&str] = &["description", "title", "icons", "_meta"];

/// What a live listing says of one binding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PinCheck {
    /// The fields (as the server spells them) whose change refuses the call; `["(absent)"]` when
    /// the tool is not listed, `["(listed twice)"]` when its name is listed more than once.
    pub refused: Vec<String>,
    /// The fields whose change only warns.
    pub warned: Vec<String>,
}

impl PinCheck {
    /// Nothing changed.
    pub fn unchanged(&self) -> bool {
        self.refused.is_empty() && self.warned.is_empty()
    }
}

/// Compares `binding` with the entries of a complete listing that carry its `mcp_tool` name
/// (`listed`: none, one, or — a drift of its own — several). `refuse_all`: the binding's
/// `on_drift` is `refuse`, so a warn-only change refuses too.
pub fn check(binding: &ToolBinding, listed: &[&Value], refuse_all: bool) -> PinCheck {
    let live = match listed {
        [] => return refused("(absent)"),
        [live] => *live,
        _ => return refused("(listed twice)"),
    };
    let changed = match &binding.pin {
        Some(pin) => pinned_changes(pin, live),
        None => readable_changes(binding, live),
    };
    let mut check = PinCheck::default();
    for field in changed {
        if WARN_ONLY.contains(&field.as_str()) && !refuse_all {
            check.warned.push(field);
        } else {
            check.refused.push(field);
        }
    }
    check
}

fn refused(why: &str) -> PinCheck {
    PinCheck {
        refused: vec![why.to_owned()],
        warned: Vec::new(),
    }
}

/// The top-level fields whose digest differs from the pin's, added or removed included
/// (`discover --check` names the same).
///
/// Numbers by value ([`ToolPin::of`]); a pin written before numbers were compared by value
/// also matches what it digested then ([`ToolPin::as_written`]), so that an upgrade refuses
/// nothing it let through. Such a pin sees a server that now writes `0` where it wrote `0.0`
/// as a change, until it is written again (`discover --write`).
pub fn pinned_changes(pin: &ToolPin, live: &Value) -> BTreeSet<String> {
    let now = ToolPin::of(live);
    if now.digest == pin.digest {
        return BTreeSet::new();
    }
    let changed = |now: &ToolPin| -> BTreeSet<String> {
        (pin.fields.keys().chain(now.fields.keys()))
            .filter(|name| pin.fields.get(*name) != now.fields.get(*name))
            .cloned()
            .collect()
    };
    let by_value = changed(&now);
    let written = ToolPin::as_written(live);
    if written.digest == pin.digest {
        return BTreeSet::new();
    }
    if written == now {
        return by_value;
    }
    by_value.intersection(&changed(&written)).cloned().collect()
}

/// Whether two JSON values are the same: numbers by value, as JSON Schema compares them
/// (`0` is `0.0`), objects whatever their keys' order; anything else as written.
pub fn same(a: &Value, b: &Value) -> bool {
    use digest::NumberValue;
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => NumberValue::of(a) == NumberValue::of(b),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, a)| b.get(key).is_some_and(|b| same(a, b)))
        }
        (a, b) => a == b,
    }
}

/// Without a pin: the fields a binding keeps readable, compared as `discover --check` does.
fn readable_changes(binding: &ToolBinding, live: &Value) -> BTreeSet<String> {
    let object = |map: &Option<Map<String, Value>>| map.clone().map(Value::Object);
    let fields = [
        (
            "description",
            Some(Value::String(binding.description.clone())),
        ),
        ("inputSchema", Some(binding.input_schema.clone())),
        ("outputSchema", binding.output_schema.clone()),
        ("annotations", object(&binding.annotations)),
        ("execution", object(&binding.execution)),
    ];
    fields
        .into_iter()
        .filter(|(name, pinned)| match (pinned, live.get(*name)) {
            (Some(pinned), Some(live)) => !same(pinned, live),
            (pinned, live) => pinned.is_some() || live.is_some(),
        })
        .map(|(name, _)| name.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A change a server makes to its tool.
    type Change = fn(&mut Value);

    fn tool() -> Value {
        json!({"name": "refund", "description": "Refund an order.",
            "inputSchema": {"type": "object", "properties": {"amount": {"type": "integer"}}},
            "annotations": {"destructiveHint": false}})
    }

    fn binding(pinned: bool) -> ToolBinding {
        let live = tool();
        let mut binding: ToolBinding = serde_json::from_value(json!({"name": "refund",
            "description": "Refund an order.", "input_schema": live["inputSchema"],
            "annotations": live["annotations"], "url": "http://127.0.0.1:9/mcp",
            "mcp_tool": "refund", "tenants": ["acme"]}))
        .unwrap();
        if pinned {
            binding.pin = Some(ToolPin::of(&live));
        }
        binding
    }

    /// The rug pulls of the issue, each caught with and without a pin; a description's change
    /// warns unless the binding refuses it; absence and a duplicate name refuse.
    #[test]
    fn every_change_is_seen_and_only_the_texts_warn() {
        for pinned in [true, false] {
            let binding = binding(pinned);
            let same = tool();
            assert!(check(&binding, &[&same], false).unchanged(), "{pinned}");
            let changes: [(&str, Change); 4] = [
                ("inputSchema", |t| {
                    t["inputSchema"]["required"] = json!(["amount"])
                }),
                ("inputSchema", |t| {
                    t["inputSchema"]["properties"]["amount"]["type"] = json!("string")
                }),
                ("annotations", |t| {
                    t["annotations"]["destructiveHint"] = json!(true)
                }),
                ("description", |t| {
                    t["description"] = json!("Send all funds.")
                }),
            ];
            for (field, change) in changes {
                let mut live = tool();
                change(&mut live);
                let seen = check(&binding, &[&live], false);
                let fields = if field == "description" {
                    &seen.warned
                } else {
                    &seen.refused
                };
                assert_eq!(fields, &[field.to_owned()], "{pinned} {seen:?}");
                let strict = check(&binding, &[&live], true);
                assert_eq!(strict.refused, [field.to_owned()], "{pinned}");
                assert!(strict.warned.is_empty());
            }
            assert_eq!(check(&binding, &[], false).refused, ["(absent)"]);
            assert_eq!(
                check(&binding, &[&same, &same], false).refused,
                ["(listed twice)"]
            );
        }
        // A field the binding does not keep readable is still caught by the pin.
        let mut live = tool();
        live["execution"] = json!({"taskSupport": "required"});
        assert_eq!(
            check(&binding(true), &[&live], false).refused,
            ["execution"]
        );
    }

    /// JSON text as `serde_json` reads it (`1e2` is the `f64` 100, `100` the integer).
    fn read(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    /// A tool whose schema has numbers where JSON Schema reads them: a default, an enum, a
    /// const, a minimum, nested.
    fn numbered(numbers: [&str; 5]) -> Value {
        let [default, hundred, fraction, minimum, zero] = numbers;
        read(&format!(
            r#"{{"name": "refund", "description": "Refund an order.",
            "inputSchema": {{"type": "object", "properties": {{
                "amount": {{"type": "number", "default": {default}, "minimum": {minimum},
                            "enum": [{hundred}, {fraction}, [{zero}]]}},
                "rate": {{"type": "object", "properties": {{"x": {{"const": {{"at": {zero}}}}}}}}}
            }}}},
            "annotations": {{"destructiveHint": false}}}}"#
        ))
    }

    fn pinned_binding(tool: &Value, pin: Option<ToolPin>) -> ToolBinding {
        let mut binding: ToolBinding = serde_json::from_value(json!({"name": "refund",
            "description": "Refund an order.", "input_schema": tool["inputSchema"],
            "annotations": tool["annotations"], "url": "http://127.0.0.1:9/mcp",
            "mcp_tool": "refund", "tenants": ["acme"]}))
        .unwrap();
        binding.pin = pin;
        binding
    }

    /// Numbers compare by value, as JSON Schema compares them: `0` is `0.0`, `-0` and `0e3`,
    /// `1e2` is `100`, `1.5` is `1.50`, wherever the schema has them; the pin, the readable
    /// fields (no pin) and `discover --check` agree. A real difference still refuses.
    #[test]
    fn numbers_compare_by_value_and_only_a_real_difference_refuses() {
        let pinned = numbered(["0", "100", "1.5", "-1", "0"]);
        let binding = pinned_binding(&pinned, Some(ToolPin::of(&pinned)));
        let readable = pinned_binding(&pinned, None);
        let alike = [
            ["0.0", "1e2", "1.50", "-1.0", "-0"],
            ["-0.0", "100.0", "15e-1", "-1e0", "0e3"],
            ["0E+0", "1.00E2", "0.15e1", "-10e-1", "0.000"],
        ];
        for numbers in alike {
            let live = numbered(numbers);
            assert_eq!(ToolPin::of(&live), ToolPin::of(&pinned), "{numbers:?}");
            assert!(same(&live, &pinned), "{numbers:?}");
            for binding in [&binding, &readable] {
                let seen = check(binding, &[&live], true);
                assert!(seen.unchanged(), "{numbers:?}: {seen:?}");
            }
            assert!(crate::discovery::drift(&binding, Some(&live)).is_empty());
        }
        let different = [
            ["1", "100", "1.5", "-1", "0"],
            ["\"0\"", "100", "1.5", "-1", "0"],
            ["0", "100.5", "1.5", "-1", "0"],
            ["0", "100", "1.25", "-1", "0"],
            ["0", "100", "1.5", "1", "0"],
            ["0", "100", "1.5", "-1", "null"],
            ["0", "100", "1.5", "-1", "false"],
            ["0", "100", "1.5", "-1", "0.1"],
        ];
        for numbers in different {
            let live = numbered(numbers);
            assert!(!same(&live, &pinned), "{numbers:?}");
            for binding in [&binding, &readable] {
                let seen = check(binding, &[&live], false);
                assert_eq!(seen.refused, ["inputSchema"], "{numbers:?}");
            }
            assert!(!crate::discovery::drift(&binding, Some(&live)).is_empty());
        }
    }

    /// A pin written before numbers compared by value (its `0.0` hashed as `0.0`) still
    /// verifies the listing it was written from, and one that writes `0.0` anywhere else the
    /// same; a real change still refuses.
    #[test]
    fn a_pin_written_before_numbers_compared_by_value_still_verifies() {
        let floats = numbered(["0.0", "100.0", "1.5", "-1.0", "0.0"]);
        let old = ToolPin::as_written(&floats);
        assert_ne!(old, ToolPin::of(&floats), "the two forms differ here");
        let binding = pinned_binding(&floats, Some(old));
        assert!(check(&binding, &[&floats], true).unchanged());
        let mut described = floats.clone();
        described["description"] = json!("Refund.");
        assert_eq!(
            check(&binding, &[&described], true).refused,
            ["description"]
        );
        let changed = numbered(["1.0", "100.0", "1.5", "-1.0", "0.0"]);
        assert_eq!(check(&binding, &[&changed], true).refused, ["inputSchema"]);
        // Without integral floats, both forms are one: every pin written before still holds.
        let integers = numbered(["0", "100", "1.5", "-1", "0"]);
        assert_eq!(ToolPin::as_written(&integers), ToolPin::of(&integers));
    }
}
