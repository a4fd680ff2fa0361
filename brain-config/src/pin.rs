//! Whether what a server lists now is what was reviewed: a binding's pin (or, without one, its
//! readable fields) against the tool's live `tools/list` entry. Pure: the runtime asks it before
//! a call is sent, and `discover --check` shows the same changes in detail.
//!
//! A change to any pinned field refuses, but for the fields the model sees only as the pinned
//! text (`description`, `title`, `icons`, `_meta`), which warn unless the binding says
//! `"on_drift": "refuse"`. Nothing can let a schema change through.

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

/// The top-level fields whose digest differs from the pin's, added or removed included.
fn pinned_changes(pin: &ToolPin, live: &Value) -> BTreeSet<String> {
    let now = ToolPin::of(live);
    if now.digest == pin.digest {
        return BTreeSet::new();
    }
    pin.fields
        .keys()
        .chain(now.fields.keys())
        .filter(|name| pin.fields.get(*name) != now.fields.get(*name))
        .cloned()
        .collect()
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
        .filter(|(name, pinned)| pinned.as_ref() != live.get(*name))
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
}
