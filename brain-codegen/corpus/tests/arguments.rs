//! Every corpus tool, called through its generated types: the table compiled in is
//! `host.json`, names round-trip, and arguments the schema accepts parse into the typed call and
//! come back out (`TypedCall::arguments`, what brain sends) still valid against the schema and
//! with nothing lost — for a minimal instance (required properties only), a full one (every
//! property, and a key no property names where the schema allows one) and a full one with
//! `null` wherever the schema allows it, made from each schema.

use std::str::FromStr;

use brain_runtime::TypedCall;
use codegen_corpus::generated::{BINDINGS, ToolCall, ToolName, host_config};
use serde_json::{Map, Value, json};

#[test]
fn the_compiled_in_table_is_host_json() {
    let text = include_str!("../host.json");
    let config = brain_config::parse(text.as_bytes(), "host.json").unwrap();
    assert_eq!(host_config(), config);
    assert_eq!(BINDINGS.len(), ToolName::ALL.len());
    for name in ToolName::ALL {
        assert_eq!(ToolName::from_str(name.as_str()), Ok(*name));
    }
}

/// Tools none of whose made-up instances the schema accepts (the generator below does not
/// satisfy every keyword): their typed parse is not exercised here.
const NO_INSTANCE: &[&str] = &[];

#[test]
fn arguments_the_schema_accepts_parse_and_come_back_valid() {
    let mut exercised = 0;
    let mut without = Vec::new();
    for name in ToolName::ALL {
        let binding = name.binding();
        let schema: Value = serde_json::from_str(binding.input_schema).unwrap();
        let mut any = false;
        for shape in [Shape::Minimal, Shape::Full, Shape::Nulls] {
            let Some(arguments) = instance(&schema, &schema, shape, 0) else {
                continue;
            };
            if binding.validate(&arguments).is_err() {
                continue;
            }
            any = true;
            let call = ToolCall::parse(name.as_str(), arguments.clone()).unwrap_or_else(|e| {
                panic!("{name}: the schema accepts {arguments}, the typed parse does not: {e}")
            });
            assert_eq!(call.name(), *name);
            let sent = call.arguments();
            binding.validate(&sent).unwrap_or_else(|e| {
                panic!("{name}: {arguments} parsed, and came back as {sent}, which the schema refuses: {e}")
            });
            assert!(
                keeps(&sent, &arguments),
                "{name}: {arguments} parsed, and came back as {sent}, without some of it"
            );
        }
        if any {
            exercised += 1;
        } else {
            without.push(name.as_str());
        }
    }
    assert_eq!(
        without, NO_INSTANCE,
        "tools without an instance the schema accepts"
    );
    assert_eq!(exercised + without.len(), ToolName::ALL.len());
}

/// Whether `sent` holds everything `given` held (the typed call may add defaults, but loses
/// nothing: no key a schema allows is dropped, no value changed).
fn keeps(sent: &Value, given: &Value) -> bool {
    match (sent, given) {
        (Value::Object(sent), Value::Object(given)) => given
            .iter()
            .all(|(key, value)| sent.get(key).is_some_and(|s| keeps(s, value))),
        (Value::Array(sent), Value::Array(given)) => {
            sent.len() == given.len() && sent.iter().zip(given).all(|(s, g)| keeps(s, g))
        }
        (Value::Number(sent), Value::Number(given)) => sent.as_f64() == given.as_f64(),
        _ => sent == given,
    }
}

/// Which instance of a schema to make.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// The required properties.
    Minimal,
    /// Every property, and a key no property names where the schema allows one.
    Full,
    /// As `Full`, with `null` wherever the schema allows it.
    Nulls,
}

/// An instance of `schema` in `shape`, or `None` when this simple generator cannot make one.
fn instance(schema: &Value, root: &Value, shape: Shape, depth: usize) -> Option<Value> {
    let full = shape != Shape::Minimal;
    let nulls = shape == Shape::Nulls;
    if depth > 12 {
        return None;
    }
    let Value::Object(schema) = schema else {
        return Some(json!({}));
    };
    if let Some(value) = schema.get("const") {
        return Some(value.clone());
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values
            .iter()
            .find(|v| !v.is_null())
            .or(values.first())
            .cloned();
    }
    if let Some(value) = schema.get("default") {
        return Some(value.clone());
    }
    if let Some(Value::String(reference)) = schema.get("$ref") {
        let target = root.pointer(reference.strip_prefix('#')?)?;
        return instance(target, root, shape, depth + 1);
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(combinator) {
            let made: Vec<Value> = branches
                .iter()
                .filter_map(|branch| instance(branch, root, shape, depth + 1))
                .collect();
            return made
                .iter()
                .find(|v| v.is_null() == nulls)
                .or(made.first())
                .cloned();
        }
    }
    if let Some(Value::Array(branches)) = schema.get("allOf") {
        let mut merged = Map::new();
        for branch in branches {
            match instance(branch, root, shape, depth + 1)? {
                Value::Object(part) => merged.extend(part),
                other => return Some(other),
            }
        }
        return Some(Value::Object(merged));
    }
    let ty = match schema.get("type") {
        Some(Value::String(ty)) => ty.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| (*t == "null") == nulls)
            .unwrap_or("null"),
        _ if schema.contains_key("properties") => "object",
        _ if schema.contains_key("items") => "array",
        _ => return Some(json!({})),
    };
    let number = |schema: &Map<String, Value>| {
        let low = schema
            .get("minimum")
            .and_then(Value::as_f64)
            .or_else(|| {
                schema
                    .get("exclusiveMinimum")
                    .and_then(Value::as_f64)
                    .map(|m| m + 1.0)
            })
            .unwrap_or(1.0);
        let high = schema
            .get("maximum")
            .and_then(Value::as_f64)
            .or_else(|| {
                schema
                    .get("exclusiveMaximum")
                    .and_then(Value::as_f64)
                    .map(|m| m - 1.0)
            })
            .unwrap_or(f64::MAX);
        low.min(high).ceil()
    };
    Some(match ty {
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut object = Map::new();
            // A full instance has one key no property names, where the schema allows it.
            match schema.get("additionalProperties") {
                Some(Value::Bool(false)) | None => {}
                Some(extra) if full => {
                    if let Some(value) = instance(extra, root, shape, depth + 1) {
                        object.insert("extra_key".into(), value);
                    }
                }
                Some(_) => {}
            }
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, property) in properties {
                    let needed = required.contains(&key.as_str());
                    if !needed && !full {
                        continue;
                    }
                    match instance(property, root, shape, depth + 1) {
                        Some(value) => {
                            object.insert(key.clone(), value);
                        }
                        None if needed => return None,
                        None => {}
                    }
                }
            }
            Value::Object(object)
        }
        "array" => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let count = if full { min.max(1) } else { min };
            let item = match schema.get("items") {
                Some(items) if count > 0 => instance(items, root, shape, depth + 1)?,
                _ => Value::Null,
            };
            Value::Array((0..count).map(|_| item.clone()).collect())
        }
        "string" => {
            let text = match schema.get("format").and_then(Value::as_str) {
                Some("uri" | "url" | "uri-reference") => "https://example.com/".to_owned(),
                Some("date-time") => "2026-01-01T00:00:00Z".to_owned(),
                Some("date") => "2026-01-01".to_owned(),
                Some("time") => "12:00:00Z".to_owned(),
                Some("email") => "someone@example.com".to_owned(),
                Some("uuid") => "00000000-0000-4000-8000-000000000000".to_owned(),
                _ => {
                    let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(1);
                    "x".repeat(min.max(1) as usize)
                }
            };
            Value::String(text)
        }
        "integer" => json!(number(schema) as i64),
        "number" => json!(number(schema)),
        "boolean" => json!(true),
        _ => Value::Null,
    })
}
