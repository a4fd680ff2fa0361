//! OpenAI's function tools (the Responses API and Chat Completions share the rules): strict mode
//! where it is faithful, the tool's own schema with lossless repairs otherwise.
//!
//! Strict mode (OpenAI's "Structured Outputs" rules): every object has
//! `additionalProperties: false` and lists every property in `required`; an optional property
//! becomes `anyOf: [original, {"type": "null"}]` (a `type` list beside `enum` would still refuse
//! `null`), and [`unproject`](super::unproject) turns the model's `null` back into "absent".

use serde_json::{Map, Value, json};

use super::projection::{
    ANNOTATIONS, NotStrict, NoteKind, Notes, describe_moved, not_strict, object, strict_or_not,
    union,
};
use super::schema::{accepts_null, free_form, types};
use crate::source::escape_token;

/// OpenAI's documented limits on a strict schema.
const MAX_DEPTH: usize = 10;
const MAX_PROPERTIES: usize = 5000;
const MAX_ENUM_VALUES: usize = 1000;
const MAX_STRING_LENGTH: usize = 120_000;
/// An enum of more than this many string values …
const LARGE_ENUM: usize = 250;
/// … has at most this many characters in all.
const MAX_LARGE_ENUM_LENGTH: usize = 15_000;

/// The string formats strict mode supports.
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords strict mode keeps, besides the structure it rewrites.
const KEPT: &[&str] = &[
    "type",
    "description",
    "title",
    "enum",
    "const",
    "pattern",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
];

/// Keywords strict mode refuses and the gate enforces: dropped.
const ENFORCED: &[&str] = &[
    "minLength",
    "maxLength",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "not",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// The function's `parameters`, and whether they are strict.
pub(super) fn parameters(
    input_schema: &Value,
    allowed: Result<(), &str>,
    notes: &mut Notes<'_>,
) -> (Value, bool) {
    strict_or_not(input_schema, allowed, notes, strict, |schema, notes| {
        repair(schema, "", true, notes);
    })
}

/// `schema` (self-contained) in strict mode, within OpenAI's limits.
fn strict(schema: &Value, changes: &mut Notes<'_>) -> Result<Value, NotStrict> {
    if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() {
        return Err(not_strict(
            "",
            "the root is a union (`anyOf`/`oneOf`), which strict mode refuses",
        ));
    }
    let schema = node(schema, "", false, changes)?;
    limits(&schema)?;
    Ok(schema)
}

/// One schema made strict. `in_union`: it is a branch of an `anyOf`, where an object's optional
/// properties could not be told apart when the arguments are mapped back.
fn node(
    schema: &Value,
    pointer: &str,
    in_union: bool,
    changes: &mut Notes<'_>,
) -> Result<Value, NotStrict> {
    let Value::Object(map) = schema else {
        return Err(not_strict(
            pointer,
            "a boolean schema (any value, or none), which strict mode cannot state",
        ));
    };
    if map.contains_key("allOf") {
        return Err(not_strict(pointer, "`allOf`, which strict mode refuses"));
    }
    if map.contains_key("prefixItems") {
        return Err(not_strict(
            pointer,
            "a tuple (`prefixItems`, or draft-07's `items` array), which strict mode refuses",
        ));
    }
    let union = union(map, pointer, changes)?;
    if union.is_none()
        && !map.contains_key("type")
        && !map.contains_key("enum")
        && !map.contains_key("const")
    {
        return Err(not_strict(
            pointer,
            "a value of any type (no `type`, `enum` or `anyOf`), which strict mode cannot state",
        ));
    }
    let mut out = Map::new();
    let moved = keywords(map, pointer, &mut out, changes);
    if let Some((key, branches)) = union {
        let branches = branches
            .iter()
            .enumerate()
            .map(|(i, branch)| node(branch, &format!("{pointer}/{key}/{i}"), true, changes))
            .collect::<Result<Vec<_>, _>>()?;
        out.insert("anyOf".into(), Value::Array(branches));
    }
    let kinds = types(schema);
    if kinds.contains(&"object") || map.contains_key("properties") {
        strict_object(schema, map, (pointer, in_union), &kinds, &mut out, changes)?;
    }
    if kinds.contains(&"array") {
        match map.get("items") {
            Some(items) => {
                let inner = node(items, &format!("{pointer}/items"), in_union, changes)?;
                out.insert("items".into(), inner);
            }
            None => {
                return Err(not_strict(
                    pointer,
                    "an array without `items` (elements of any type), which strict mode cannot \
                     state",
                ));
            }
        }
    }
    let moved: Vec<(String, Value)> = moved
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.clone()))
        .collect();
    describe_moved(&mut out, &moved, pointer, changes);
    Ok(Value::Object(out))
}

/// The keywords of `map` strict mode keeps, into `out`; the annotations (and formats it does not
/// know) to move into the description, returned; the rest dropped with a note. The structural
/// keywords are left to the caller.
fn keywords<'a>(
    map: &'a Map<String, Value>,
    pointer: &str,
    out: &mut Map<String, Value>,
    changes: &mut Notes<'_>,
) -> Vec<(&'a str, &'a Value)> {
    let mut moved = Vec::new();
    for (key, value) in map {
        let here = || format!("{pointer}/{}", escape_token(key));
        match key.as_str() {
            "properties"
            | "required"
            | "additionalProperties"
            | "patternProperties"
            | "items"
            | "anyOf"
            | "oneOf"
            | "$schema" => {}
            "format" => match value.as_str() {
                Some(format) if FORMATS.contains(&format) => {
                    out.insert(key.clone(), value.clone());
                }
                _ => moved.push((key.as_str(), value)),
            },
            k if KEPT.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            k if ANNOTATIONS.contains(&k) => moved.push((key.as_str(), value)),
            k if ENFORCED.contains(&k) => changes.push(
                NoteKind::Dropped,
                &here(),
                format!("`{key}`, which strict mode refuses (the gate still enforces it)"),
            ),
            _ => changes.push(
                NoteKind::Dropped,
                &here(),
                format!("`{key}`, which strict mode does not know"),
            ),
        }
    }
    moved
}

/// An object schema made strict into `out`: every property required, an optional one as
/// nullable (refused in a union branch, or when it already accepts `null`), no other property.
fn strict_object(
    schema: &Value,
    map: &Map<String, Value>,
    (pointer, in_union): (&str, bool),
    kinds: &[&str],
    out: &mut Map<String, Value>,
    changes: &mut Notes<'_>,
) -> Result<(), NotStrict> {
    if let Some(why) = free_form(schema) {
        return Err(not_strict(
            pointer,
            format!(
                "a free-form object ({why}): strict mode would refuse every property it was \
                 not told of"
            ),
        ));
    }
    let empty = Map::new();
    let properties = map["properties"].as_object().unwrap_or(&empty);
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut projected = Map::new();
    for (name, property) in properties {
        let here = format!("{pointer}/properties/{}", escape_token(name));
        let inner = node(property, &here, false, changes)?;
        if required.contains(&name.as_str()) {
            projected.insert(name.clone(), inner);
            continue;
        }
        if in_union {
            return Err(not_strict(
                &here,
                "an optional property inside a union branch: its `null` could not be told \
                 apart from another branch's when the arguments are mapped back",
            ));
        }
        if accepts_null(property, property) {
            return Err(not_strict(
                &here,
                "an optional property that already accepts `null`: as a required, nullable \
                 property its `null` would be ambiguous",
            ));
        }
        let null = object([("type", Value::from("null"))]);
        projected.insert(
            name.clone(),
            object([("anyOf", Value::Array(vec![inner, null]))]),
        );
    }
    let names: Vec<Value> = properties
        .keys()
        .map(|name| Value::from(name.as_str()))
        .collect();
    out.insert("properties".into(), Value::Object(projected));
    out.insert("required".into(), Value::Array(names));
    out.insert("additionalProperties".into(), Value::Bool(false));
    if !kinds.contains(&"object") && !map.contains_key("type") {
        out.insert("type".into(), json!("object"));
    }
    Ok(())
}

/// OpenAI's documented limits on a strict schema.
fn limits(schema: &Value) -> Result<(), NotStrict> {
    #[derive(Default)]
    struct Count {
        properties: usize,
        enum_values: usize,
        string_length: usize,
        depth: usize,
        large_enum: Option<(String, usize)>,
    }
    fn walk(schema: &Value, pointer: &str, depth: usize, count: &mut Count) {
        let Value::Object(map) = schema else { return };
        count.depth = count.depth.max(depth);
        if let Some(Value::Object(properties)) = map.get("properties") {
            count.properties += properties.len();
            for (name, property) in properties {
                count.string_length += name.len();
                let here = format!("{pointer}/properties/{}", escape_token(name));
                walk(property, &here, depth + 1, count);
            }
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            count.enum_values += values.len();
            let length: usize = values.iter().filter_map(Value::as_str).map(str::len).sum();
            count.string_length += length;
            if values.len() > LARGE_ENUM && length > MAX_LARGE_ENUM_LENGTH {
                count.large_enum = Some((pointer.to_owned(), length));
            }
        }
        if let Some(Value::String(constant)) = map.get("const") {
            count.string_length += constant.len();
        }
        if let Some(items) = map.get("items") {
            walk(items, &format!("{pointer}/items"), depth, count);
        }
        if let Some(Value::Array(branches)) = map.get("anyOf") {
            for (i, branch) in branches.iter().enumerate() {
                walk(branch, &format!("{pointer}/anyOf/{i}"), depth, count);
            }
        }
    }
    let mut count = Count::default();
    walk(schema, "", 0, &mut count);
    let over = |what: String| Err(not_strict("", what));
    if count.depth > MAX_DEPTH {
        return over(format!(
            "objects nest {} levels deep; strict mode allows {MAX_DEPTH}",
            count.depth
        ));
    }
    if count.properties > MAX_PROPERTIES {
        return over(format!(
            "{} properties in all; strict mode allows {MAX_PROPERTIES}",
            count.properties
        ));
    }
    if count.enum_values > MAX_ENUM_VALUES {
        return over(format!(
            "{} enum values in all; strict mode allows {MAX_ENUM_VALUES}",
            count.enum_values
        ));
    }
    if count.string_length > MAX_STRING_LENGTH {
        return over(format!(
            "{} characters of property names and enum values; strict mode allows \
             {MAX_STRING_LENGTH}",
            count.string_length
        ));
    }
    if let Some((pointer, length)) = count.large_enum {
        return Err(not_strict(
            &pointer,
            format!(
                "an enum of more than {LARGE_ENUM} values with {length} characters; strict mode \
                 allows {MAX_LARGE_ENUM_LENGTH}"
            ),
        ));
    }
    Ok(())
}

/// Lossless repairs a non-strict OpenAI tool needs: `properties` on the root object, `items`
/// on every array.
pub(super) fn repair(schema: &mut Value, pointer: &str, root: bool, notes: &mut Notes<'_>) {
    let Value::Object(map) = schema else { return };
    if root && !map.contains_key("properties") {
        map.insert("properties".into(), json!({}));
        notes.push(
            NoteKind::Repaired,
            "/properties",
            "`properties: {}` added to the root (OpenAI requires it; it changes nothing)",
        );
    }
    let is_array = match map.get("type") {
        Some(Value::String(kind)) => kind == "array",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "array"),
        _ => false,
    };
    if is_array && !map.contains_key("items") && !map.contains_key("prefixItems") {
        map.insert("items".into(), json!({}));
        notes.push(
            NoteKind::Repaired,
            pointer,
            "`items: {}` added to an array without `items` (OpenAI requires it; it changes \
             nothing)",
        );
    }
    for (key, value) in map.iter_mut() {
        if !matches!(
            key.as_str(),
            "properties"
                | "patternProperties"
                | "$defs"
                | "definitions"
                | "dependentSchemas"
                | "anyOf"
                | "oneOf"
                | "allOf"
                | "prefixItems"
                | "items"
                | "additionalProperties"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
        ) {
            continue;
        }
        let here = format!("{pointer}/{}", escape_token(key));
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(children) = value {
                    for (name, child) in children.iter_mut() {
                        repair(
                            child,
                            &format!("{here}/{}", escape_token(name)),
                            false,
                            notes,
                        );
                    }
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(children) = value {
                    for (i, child) in children.iter_mut().enumerate() {
                        repair(child, &format!("{here}/{i}"), false, notes);
                    }
                }
            }
            "items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains" => {
                repair(value, &here, false, notes);
            }
            _ => {}
        }
    }
}
