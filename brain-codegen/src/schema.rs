//! Preparing a tool's JSON Schema for typify, and deciding whether typify's types would be
//! faithful to it.

use serde_json::{Map, Value};

/// Why typify's types would not accept exactly what the schema accepts, if they would not.
pub(crate) fn unfaithful(schema: &Value) -> Option<String> {
    let mut reason = None;
    walk(schema, &mut |keyword, value| {
        if reason.is_some() {
            return;
        }
        reason = match (keyword, value) {
            ("additionalProperties", Value::Bool(true)) => Some(
                "`additionalProperties: true`: typed structs would drop the extra keys".to_owned(),
            ),
            ("oneOf" | "anyOf", _) => Some(format!(
                "`{keyword}`: typify's enums reject some inputs the schema accepts"
            )),
            ("patternProperties" | "unevaluatedProperties" | "dependentSchemas" | "if", _) => {
                Some(format!("`{keyword}`: typify cannot represent it"))
            }
            _ => None,
        };
    });
    reason
}

/// Calls `visit(keyword, value)` for every keyword of every subschema.
fn walk(schema: &Value, visit: &mut dyn FnMut(&str, &Value)) {
    let Value::Object(map) = schema else {
        return;
    };
    for (keyword, value) in map {
        visit(keyword, value);
        for sub in subschemas(keyword, value) {
            walk(sub, visit);
        }
    }
}

/// Keywords whose value maps names to subschemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];
/// Keywords whose value may be an array of subschemas.
const SCHEMA_ARRAYS: &[&str] = &["items", "prefixItems", "allOf", "anyOf", "oneOf"];
/// Keywords whose value may be one subschema.
const SCHEMA_VALUES: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// The subschemas under one keyword.
fn subschemas<'a>(keyword: &str, value: &'a Value) -> Vec<&'a Value> {
    match value {
        Value::Object(map) if SCHEMA_MAPS.contains(&keyword) => map.values().collect(),
        Value::Array(items) if SCHEMA_ARRAYS.contains(&keyword) => items.iter().collect(),
        Value::Object(_) if SCHEMA_VALUES.contains(&keyword) => vec![value],
        _ => Vec::new(),
    }
}

/// The schema as typify 0.8 reads it: `$defs` as `definitions` (refs rewritten), no `pattern`
/// or `format` (validated by jsonschema before any typed parse; as types they would pull in
/// regex, date and uuid crates), and the root titled `title` so that typify names it.
pub(crate) fn for_typify(schema: &Value, title: &str) -> Value {
    let mut schema = schema.clone();
    prepare(&mut schema);
    if let Value::Object(root) = &mut schema {
        if let Some(defs) = root.remove("$defs") {
            let definitions = root
                .entry("definitions")
                .or_insert_with(|| Value::Object(Map::new()));
            if let (Value::Object(definitions), Value::Object(defs)) = (definitions, defs) {
                definitions.extend(defs);
            }
        }
        root.remove("$schema");
        root.remove("$id");
        root.insert("title".into(), Value::String(title.to_owned()));
    }
    schema
}

fn prepare(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    map.remove("pattern");
    map.remove("format");
    if let Some(Value::String(reference)) = map.get_mut("$ref")
        && let Some(rest) = reference.strip_prefix("#/$defs/")
    {
        *reference = format!("#/definitions/{rest}");
    }
    for (keyword, value) in map.iter_mut() {
        let keyword = keyword.as_str();
        match value {
            Value::Object(map) if SCHEMA_MAPS.contains(&keyword) => {
                map.values_mut().for_each(prepare);
            }
            Value::Array(items) if SCHEMA_ARRAYS.contains(&keyword) => {
                items.iter_mut().for_each(prepare);
            }
            value @ Value::Object(_) if SCHEMA_VALUES.contains(&keyword) => prepare(value),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn faithful_schemas() {
        let plain =
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}});
        assert_eq!(unfaithful(&plain), None);
        let extra = json!({"type": "object", "properties": {"a": {"type": "object", "additionalProperties": true}}});
        assert!(unfaithful(&extra).unwrap().contains("additionalProperties"));
        let one_of = json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}});
        assert!(unfaithful(&one_of).unwrap().contains("oneOf"));
        // A property named like a keyword is not the keyword.
        let named = json!({"type": "object", "properties": {"oneOf": {"type": "string"}}});
        assert_eq!(unfaithful(&named), None);
    }

    #[test]
    fn prepared_for_typify() {
        let schema = json!({"type": "object", "$schema": "https://json-schema.org/draft/2020-12/schema",
            "properties": {"pattern": {"type": "string", "pattern": "^x", "format": "uri"}, "b": {"$ref": "#/$defs/b"}},
            "$defs": {"b": {"type": "integer"}}});
        assert_eq!(
            for_typify(&schema, "ToolArgs"),
            json!({"type": "object",
                "properties": {"pattern": {"type": "string"}, "b": {"$ref": "#/definitions/b"}},
                "definitions": {"b": {"type": "integer"}}, "title": "ToolArgs"})
        );
    }
}
