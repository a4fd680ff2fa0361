//! Every corpus tool, called through its generated types: the table compiled in is
//! `host.json`, names round-trip, and arguments the schema accepts parse into the typed call and
//! come back out (`TypedCall::arguments`, what brain sends) still valid against the schema — for
//! a minimal instance (required properties only) and a full one (every property), made from
//! each schema.

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
        for full in [false, true] {
            let Some(arguments) = instance(&schema, &schema, full, 0) else {
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

/// An instance of `schema` (`full`: every property, else the required ones), or `None` when
/// this simple generator cannot make one.
fn instance(schema: &Value, root: &Value, full: bool, depth: usize) -> Option<Value> {
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
        return instance(target, root, full, depth + 1);
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(combinator) {
            let made: Vec<Value> = branches
                .iter()
                .filter_map(|branch| instance(branch, root, full, depth + 1))
                .collect();
            return made.iter().find(|v| !v.is_null()).or(made.first()).cloned();
        }
    }
    if let Some(Value::Array(branches)) = schema.get("allOf") {
        let mut merged = Map::new();
        for branch in branches {
            match instance(branch, root, full, depth + 1)? {
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
            .find(|t| *t != "null")
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
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, property) in properties {
                    let needed = required.contains(&key.as_str());
                    if !needed && !full {
                        continue;
                    }
                    match instance(property, root, full, depth + 1) {
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
                Some(items) if count > 0 => instance(items, root, full, depth + 1)?,
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
