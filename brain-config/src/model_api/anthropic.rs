//! Anthropic's tools (the Messages API): `input_schema`, and `"strict": true` where the schema
//! can be written in strict mode's subset faithfully — a fixed point of the anthropic SDK's own
//! `transform_schema`: each node one `type` (a `type` list becomes `anyOf`), or an `enum`/`const`
//! without `type`, or an `anyOf`; objects closed with `additionalProperties: false`; only the
//! formats and keywords strict mode carries. Optional properties stay optional: nothing is
//! added that would need mapping back.

use serde_json::{Map, Value, json};

use super::projection::{
    ANNOTATIONS, NotStrict, Note, NoteKind, Notes, Projection, describe_moved, not_strict,
    strict_or_not, union,
};
use super::schema::{as_sent, free_form, types};
use crate::model::ToolBinding;
use crate::source::escape_token;

/// Strict mode's string formats.
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Anthropic's per-request limits on strict tools (all of a request's strict tools together).
const MAX_STRICT_TOOLS: usize = 20;
const MAX_OPTIONAL: usize = 24;
const MAX_UNIONS: usize = 16;

/// The keywords that belong to each type, carried into its branch when a `type` list becomes
/// `anyOf`.
fn belongs(kind: &str, key: &str) -> bool {
    match kind {
        "string" => matches!(
            key,
            "format"
                | "pattern"
                | "minLength"
                | "maxLength"
                | "contentEncoding"
                | "contentMediaType"
        ),
        "number" | "integer" => matches!(
            key,
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
        ),
        "array" => matches!(
            key,
            "items" | "prefixItems" | "minItems" | "maxItems" | "uniqueItems" | "contains"
        ),
        "object" => matches!(
            key,
            "properties"
                | "required"
                | "additionalProperties"
                | "patternProperties"
                | "propertyNames"
                | "minProperties"
                | "maxProperties"
        ),
        _ => false,
    }
}

/// The tool's `input_schema`, and whether it is strict.
pub(super) fn input_schema(
    input_schema: &Value,
    allowed: Result<(), &str>,
    notes: &mut Notes<'_>,
) -> (Value, bool) {
    strict_or_not(
        input_schema,
        allowed,
        notes,
        |schema, changes| node(schema, "", changes),
        |_, _| {},
    )
}

fn node(schema: &Value, pointer: &str, notes: &mut Notes<'_>) -> Result<Value, NotStrict> {
    let Value::Object(map) = schema else {
        return Err(not_strict(
            pointer,
            "a boolean schema (any value, or none), which strict mode cannot state",
        ));
    };
    if map.contains_key("allOf") {
        return Err(not_strict(
            pointer,
            "`allOf`, which brain does not make strict",
        ));
    }
    if map.contains_key("prefixItems") {
        return Err(not_strict(
            pointer,
            "a tuple (`prefixItems`, or draft-07's `items` array), which strict mode refuses",
        ));
    }
    let kinds = types(schema);
    let mut out = Map::new();
    for key in ["description", "title"] {
        if let Some(value) = map.get(key).filter(|v| v.is_string()) {
            out.insert(key.into(), value.clone());
        }
    }
    let moved: Vec<(String, Value)> = map
        .iter()
        .filter(|(key, _)| ANNOTATIONS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let primitive = |v: &Value| !v.is_object() && !v.is_array();
    if let Some(values) = map.get("enum") {
        if !values
            .as_array()
            .is_some_and(|values| !values.is_empty() && values.iter().all(primitive))
        {
            return Err(not_strict(
                &format!("{pointer}/enum"),
                "an `enum` with objects or lists (or none), which strict mode refuses",
            ));
        }
        out.insert("enum".into(), values.clone());
        drop_rest(map, pointer, &["enum", "type"], notes);
    } else if let Some(value) = map.get("const") {
        if !primitive(value) {
            return Err(not_strict(
                &format!("{pointer}/const"),
                "a `const` object or list, which strict mode refuses",
            ));
        }
        out.insert("const".into(), value.clone());
        drop_rest(map, pointer, &["const", "type"], notes);
    } else if let Some((key, branches)) = union(map, pointer, notes)? {
        let branches = branches
            .iter()
            .enumerate()
            .map(|(i, branch)| node(branch, &format!("{pointer}/{key}/{i}"), notes))
            .collect::<Result<Vec<_>, _>>()?;
        out.insert("anyOf".into(), Value::Array(branches));
        drop_rest(map, pointer, &[key], notes);
    } else if kinds.len() > 1 {
        type_list(&kinds, map, pointer, &mut out, notes)?;
    } else if let Some(&kind) = kinds.first() {
        one_type(kind, (schema, map), pointer, &mut out, notes)?;
    } else {
        return Err(not_strict(
            pointer,
            "a value of any type (no `type`, `enum` or `anyOf`), which strict mode cannot state",
        ));
    }
    let moved: Vec<(String, Value)> = moved
        .into_iter()
        .chain(
            map.get("format")
                .filter(|_| !out.contains_key("format") && kinds == ["string"])
                .map(|format| ("format".to_owned(), format.clone())),
        )
        .collect();
    describe_moved(&mut out, &moved, pointer, notes);
    Ok(Value::Object(out))
}

/// A `type` list made strict into `out`: an `anyOf` with one branch per type, each with the
/// keywords of `map` that belong to it.
fn type_list(
    kinds: &[&str],
    map: &Map<String, Value>,
    pointer: &str,
    out: &mut Map<String, Value>,
    notes: &mut Notes<'_>,
) -> Result<(), NotStrict> {
    let branches = kinds
        .iter()
        .map(|kind| {
            let mut branch: Map<String, Value> = map
                .iter()
                .filter(|(key, _)| belongs(kind, key))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            branch.insert("type".into(), json!(kind));
            node(&Value::Object(branch), pointer, notes)
        })
        .collect::<Result<Vec<_>, _>>()?;
    out.insert("anyOf".into(), Value::Array(branches));
    let carried: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|key| kinds.iter().any(|kind| belongs(kind, key)))
        .chain(["type"])
        .collect();
    drop_rest(map, pointer, &carried, notes);
    Ok(())
}

/// A schema of one type (`kind`; `map` is `schema`'s keywords) made strict into `out`: an
/// object's properties, closed; an array's items; a string's format when strict mode knows it.
/// The keywords left behind are noted (the gate still enforces them).
fn one_type(
    kind: &str,
    (schema, map): (&Value, &Map<String, Value>),
    pointer: &str,
    out: &mut Map<String, Value>,
    notes: &mut Notes<'_>,
) -> Result<(), NotStrict> {
    out.insert("type".into(), json!(kind));
    match kind {
        "object" => {
            if let Some(why) = free_form(schema) {
                return Err(not_strict(
                    pointer,
                    format!(
                        "a free-form object ({why}): strict mode would refuse every property \
                         it was not told of"
                    ),
                ));
            }
            let mut properties = Map::new();
            for (name, property) in map["properties"].as_object().into_iter().flatten() {
                let here = format!("{pointer}/properties/{}", escape_token(name));
                properties.insert(name.clone(), node(property, &here, notes)?);
            }
            out.insert("properties".into(), Value::Object(properties));
            out.insert("additionalProperties".into(), Value::Bool(false));
            if let Some(required) = map.get("required") {
                out.insert("required".into(), required.clone());
            }
            drop_rest(
                map,
                pointer,
                &["type", "properties", "additionalProperties", "required"],
                notes,
            );
        }
        "array" => {
            let Some(items) = map.get("items") else {
                return Err(not_strict(
                    pointer,
                    "an array without `items` (elements of any type), which strict mode \
                     cannot state",
                ));
            };
            out.insert(
                "items".into(),
                node(items, &format!("{pointer}/items"), notes)?,
            );
            let mut kept = vec!["type", "items"];
            if let Some(min) = map
                .get("minItems")
                .filter(|m| **m == json!(0) || **m == json!(1))
            {
                out.insert("minItems".into(), min.clone());
                kept.push("minItems");
            }
            drop_rest(map, pointer, &kept, notes);
        }
        "string" => {
            let mut kept = vec!["type"];
            match map.get("format").and_then(Value::as_str) {
                Some(format) if FORMATS.contains(&format) => {
                    out.insert("format".into(), json!(format));
                    kept.push("format");
                }
                _ => {}
            }
            drop_rest(map, pointer, &kept, notes);
        }
        _ => drop_rest(map, pointer, &["type"], notes),
    }
    Ok(())
}

/// Notes every keyword of `map` not kept (`kept`), not carried as description or title and not
/// an annotation (moved): the gate still enforces them.
fn drop_rest(map: &Map<String, Value>, pointer: &str, kept: &[&str], notes: &mut Notes<'_>) {
    for key in map.keys() {
        let key = key.as_str();
        if kept.contains(&key)
            || matches!(key, "description" | "title" | "format" | "$schema")
            || ANNOTATIONS.contains(&key)
        {
            continue;
        }
        notes.push(
            NoteKind::Dropped,
            &format!("{pointer}/{}", escape_token(key)),
            format!("`{key}`, which strict mode does not carry (the gate still enforces it)"),
        );
    }
}

/// How much of the per-request limits a strict `input_schema` uses: optional properties and
/// unions.
fn usage(schema: &Value) -> (usize, usize) {
    let Value::Object(map) = schema else {
        return (0, 0);
    };
    let mut optional = 0;
    let mut unions = usize::from(map.contains_key("anyOf"));
    if let Some(Value::Object(properties)) = map.get("properties") {
        let required = map.get("required").and_then(Value::as_array);
        optional += properties
            .keys()
            .filter(|name| !required.is_some_and(|r| r.iter().any(|n| n == name.as_str())))
            .count();
    }
    let children = map
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values())
        .chain(map.get("items"))
        .chain(
            map.get("anyOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        );
    for child in children {
        let (o, u) = usage(child);
        optional += o;
        unions += u;
    }
    (optional, unions)
}

/// Anthropic's per-request limits: strict tools past them (in config order) are sent
/// non-strict, with a note.
pub(super) fn request_limits(tools: &mut [Projection], bindings: &[&ToolBinding]) {
    let (mut strict, mut optional, mut unions) = (0, 0, 0);
    for (tool, binding) in tools.iter_mut().zip(bindings) {
        let Some(definition) = tool.definition.as_mut().filter(|_| tool.strict) else {
            continue;
        };
        let (o, u) = usage(&definition["input_schema"]);
        let over = if strict + 1 > MAX_STRICT_TOOLS {
            Some(format!("{MAX_STRICT_TOOLS} strict tools"))
        } else if optional + o > MAX_OPTIONAL {
            Some(format!("{MAX_OPTIONAL} optional properties in all"))
        } else if unions + u > MAX_UNIONS {
            Some(format!("{MAX_UNIONS} union-typed properties in all"))
        } else {
            None
        };
        match over {
            None => {
                strict += 1;
                optional += o;
                unions += u;
            }
            Some(limit) => {
                definition["input_schema"] = as_sent(&binding.input_schema);
                if let Value::Object(fields) = definition {
                    fields.remove("strict");
                }
                tool.strict = false;
                tool.notes
                    .retain(|note| !matches!(note.kind, NoteKind::Dropped | NoteKind::Moved));
                tool.notes.push(Note {
                    tool: tool.name.clone(),
                    kind: NoteKind::NotStrict,
                    pointer: String::new(),
                    message: format!(
                        "past Anthropic's per-request limit of {limit} (the tools before it in \
                         the config are strict)"
                    ),
                });
            }
        }
    }
}
