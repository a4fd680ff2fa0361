//! Preparing a tool's JSON Schema for typify, and deciding whether typify's types would be
//! faithful to it.

use serde_json::{Map, Value};

/// Why typify's types would not accept exactly what the schema accepts, if they would not.
/// Only what the schema uses counts: a definition nothing refers to is no type (see [`used`]).
pub(crate) fn unfaithful(schema: &Value) -> Option<String> {
    let schema = &used(schema);
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
            (
                "patternProperties" | "unevaluatedProperties" | "dependentSchemas" | "if" | "not",
                _,
            ) => Some(format!("`{keyword}`: typify cannot represent it")),
            ("enum", Value::Array(values)) => colliding_variants(values)
                .map(|(a, b)| format!("`enum`: typify would give {a:?} and {b:?} one Rust name")),
            _ => None,
        };
    });
    reason.or_else(|| optional_null(schema))
}

/// An optional property whose own `type` or `enum` allows `null` (`"type": ["integer",
/// "null"]`): typify makes it an `Option` left out when `None`, so a `null` given (often "clear
/// it") would not be sent. (`anyOf` with a `null` branch is unfaithful already.)
fn optional_null(schema: &Value) -> Option<String> {
    let Value::Object(map) = schema else {
        return None;
    };
    if let Some(Value::Object(properties)) = map.get("properties") {
        let required = |name: &str| {
            map.get("required")
                .and_then(Value::as_array)
                .is_some_and(|names| names.iter().any(|n| n == name))
        };
        for (name, property) in properties {
            let nullable = match property.get("type") {
                Some(Value::String(ty)) => ty == "null",
                Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
                _ => false,
            } || property
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|values| values.contains(&Value::Null));
            if nullable && !required(name) {
                return Some(format!(
                    "optional `{name}` allows `null`: typed fields would not send a null given"
                ));
            }
        }
    }
    map.iter()
        .flat_map(|(keyword, value)| subschemas(keyword, value))
        .find_map(optional_null)
}

/// Two values of a string `enum` that typify 0.8 cannot name apart (it panics on them). typify
/// Pascal-cases each value, characters an identifier cannot hold dropped; when two names
/// collide it tries again with those characters (and `_`) as `X`; when they still collide it
/// gives up: `reactions-+1` and `reactions--1` both become `ReactionsX1`. This mirrors
/// typify-impl 0.8.0's `sanitize` (typify is pinned); codegen also survives a panic it misses.
fn colliding_variants(values: &[Value]) -> Option<(String, String)> {
    let values: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
    let named = |rewrite: &dyn Fn(&str) -> String| {
        let names: Vec<String> = values.iter().map(|v| variant_name(&rewrite(v))).collect();
        (0..names.len()).find_map(|j| {
            (0..j)
                .find(|&i| names[i] == names[j])
                .map(|i| (values[i].to_owned(), values[j].to_owned()))
        })
    };
    named(&|value| value.to_owned())?;
    named(&|value| value.replace(|c| c == '_' || !unicode_ident::is_xid_continue(c), "X"))
}

/// typify's variant name for a string value.
fn variant_name(value: &str) -> String {
    use heck::ToPascalCase as _;
    let name = match value {
        "+1" => "plus1".to_owned(),
        "-1" => "minus1".to_owned(),
        _ => value
            .replace('\'', "")
            .replace(|c| !unicode_ident::is_xid_continue(c), "-")
            .to_pascal_case(),
    };
    match name.chars().next() {
        Some(c) if unicode_ident::is_xid_start(c) => name,
        _ => format!("X{name}"),
    }
}

/// The schema without the definitions (`$defs`, `definitions`) nothing in it refers to, directly
/// or through other definitions. Servers generated from one API description often give every
/// tool the same large `$defs`; typed, each tool would carry types for all of them, and one
/// definition typify cannot type faithfully would make every tool a JSON object.
pub(crate) fn used(schema: &Value) -> Value {
    let Value::Object(root) = schema else {
        return schema.clone();
    };
    let mut used: std::collections::BTreeSet<(&str, &str)> = std::collections::BTreeSet::new();
    let mut pending: Vec<&Value> = root
        .iter()
        .filter(|(keyword, _)| !matches!(keyword.as_str(), "$defs" | "definitions"))
        .map(|(_, value)| value)
        .collect();
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    for keyword in ["$defs", "definitions"] {
                        let name = reference
                            .strip_prefix("#/")
                            .and_then(|r| r.strip_prefix(keyword))
                            .and_then(|r| r.strip_prefix('/'))
                            .map(|r| r.split('/').next().unwrap_or(r));
                        // A JSON pointer's escapes: `~1` is `/`, `~0` is `~`.
                        if let Some((name, definition)) = name.and_then(|name| {
                            let name = name.replace("~1", "/").replace("~0", "~");
                            root.get(keyword)?.as_object()?.get_key_value(&name)
                        }) && used.insert((keyword, name.as_str()))
                        {
                            pending.push(definition);
                        }
                    }
                }
                pending.extend(map.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    let mut schema = root.clone();
    for keyword in ["$defs", "definitions"] {
        if let Some(Value::Object(definitions)) = schema.get_mut(keyword) {
            definitions.retain(|name, _| used.contains(&(keyword, name.as_str())));
            if definitions.is_empty() {
                schema.remove(keyword);
            }
        }
    }
    Value::Object(schema)
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
    let mut schema = used(schema);
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
        let null = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"m": {"type": ["integer", "null"]}}}}});
        assert!(
            unfaithful(&null)
                .unwrap()
                .contains("optional `m` allows `null`")
        );
        let null_enum = json!({"type": "object", "properties": {"m": {"enum": ["a", null]}}});
        assert!(unfaithful(&null_enum).is_some());
        let required_null = json!({"type": "object", "properties": {"m": {"type": ["integer", "null"]}}, "required": ["m"]});
        assert_eq!(unfaithful(&required_null), None);
        let not = json!({"type": "object", "properties": {"a": {"not": {"type": "string"}}}});
        assert!(unfaithful(&not).unwrap().contains("`not`"));
        // Values typify would name alike (it panics on them); values it can name apart.
        let reactions = json!({"type": "object", "properties": {"sort": {"type": "string", "enum": ["reactions", "reactions-+1", "reactions--1"]}}});
        assert!(
            unfaithful(&reactions)
                .unwrap()
                .contains(r#""reactions-+1" and "reactions--1""#)
        );
        let renamed = json!({"type": "object", "properties": {"sort": {"type": "string", "enum": ["a-b", "a_c", "+1", "-1"]}}});
        assert_eq!(unfaithful(&renamed), None);
        // A property named like a keyword is not the keyword.
        let named = json!({"type": "object", "properties": {"oneOf": {"type": "string"}}});
        assert_eq!(unfaithful(&named), None);
    }

    /// The mirror of typify's variant naming agrees with typify: it finds a collision exactly
    /// when typify panics.
    #[test]
    fn colliding_variants_are_those_typify_panics_on() {
        let cases: &[&[&str]] = &[
            &["reactions", "reactions-+1", "reactions--1"],
            &["a-b", "a_b"],
            &["a-b", "aB"],
            &["a b", "a-b", "a_b"],
            &["+1", "-1", "plus1"],
            &["+1", "-1", "Plus1", "a", "A"],
            &["", "x"],
            &["1", "_1"],
            &["Ä-x", "ä_x"],
            &["it's", "its"],
            &["self", "Self"],
            &["created", "updated", "comments"],
        ];
        for values in cases {
            let schema = json!({"type": "string", "enum": values, "title": "Choice"});
            let typify_panics = std::panic::catch_unwind(|| {
                let mut space = typify::TypeSpace::new(&typify::TypeSpaceSettings::default());
                let root: schemars08::schema::RootSchema = serde_json::from_value(schema).unwrap();
                let _ = space.add_root_schema(root);
            })
            .is_err();
            let values: Vec<Value> = values.iter().map(|v| json!(v)).collect();
            assert_eq!(
                colliding_variants(&values).is_some(),
                typify_panics,
                "{values:?}"
            );
        }
    }

    /// Definitions nothing refers to are left out, however deep the chain of references.
    #[test]
    fn unused_definitions() {
        let schema = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/b"}}, "b": {"type": "string"},
                "loose": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": true}},
            "definitions": {"old": {"type": "integer"}, "a/b": {"type": "string"}}});
        let mut escaped = schema.clone();
        escaped["properties"]["e"] = json!({"$ref": "#/definitions/a~1b"});
        assert_eq!(
            used(&escaped)["definitions"],
            json!({"a/b": {"type": "string"}})
        );
        assert_eq!(
            used(&schema),
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}},
                "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/b"}}, "b": {"type": "string"}}})
        );
        assert_eq!(unfaithful(&schema), None);
        let mut refers = schema.clone();
        refers["properties"]["l"] = json!({"$ref": "#/$defs/loose"});
        assert!(
            unfaithful(&refers)
                .unwrap()
                .contains("additionalProperties")
        );
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
