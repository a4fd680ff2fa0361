//! Gemini's function declarations: `parametersJsonSchema` (JSON Schema, in Gemini's documented
//! subset) under a name Gemini accepts. Gemini has no strict mode.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::projection::{ANNOTATIONS, NoteKind, Notes, describe_moved, object};
use super::schema::self_contained;
use crate::model::ToolBinding;
use crate::source::escape_token;

/// The keywords of Gemini's documented JSON Schema subset that brain passes on.
const KEPT: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "oneOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
];

/// The longest function name Gemini takes.
const MAX_NAME: usize = 128;

/// Whether Gemini takes `name` as a function name: it starts with a letter or an underscore,
/// then letters, digits, `_`, `.`, `:` and `-`, at most 128 in all.
pub(crate) fn valid_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// The tool's function declaration, or `None` (with a note) when Gemini cannot take it.
pub(super) fn declaration(binding: &ToolBinding, notes: &mut Notes<'_>) -> Option<Value> {
    if !valid_name(&binding.name) {
        notes.push(
            NoteKind::Rejected,
            "",
            format!(
                "Gemini's function names start with a letter or an underscore; {:?} does not: \
                 rename the binding",
                binding.name
            ),
        );
        return None;
    }
    // A schema that cannot be inlined (a recursive one) keeps its `$defs` and `$ref`s, which
    // Gemini's subset has.
    let schema = self_contained(&binding.input_schema)
        .unwrap_or_else(|_| Cow::Borrowed(&binding.input_schema));
    let parameters = subset(&schema, "", notes);
    Some(object([
        ("name", Value::String(binding.name.clone())),
        ("description", Value::String(binding.description.clone())),
        ("parametersJsonSchema", parameters),
    ]))
}

/// `schema` in Gemini's subset: keywords outside it dropped (the gate enforces them) or moved
/// into the description (nothing enforces them).
fn subset(schema: &Value, pointer: &str, notes: &mut Notes<'_>) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    if let Some(reference) = map.get("$ref") {
        // Gemini takes a `$ref` alone.
        for key in map.keys().filter(|key| *key != "$ref") {
            notes.push(
                NoteKind::Dropped,
                &format!("{pointer}/{}", escape_token(key)),
                format!("`{key}` beside a `$ref`, which Gemini takes alone"),
            );
        }
        return object([("$ref", reference.clone())]);
    }
    let mut out = Map::new();
    let mut moved = Vec::new();
    for (key, value) in map {
        let here = format!("{pointer}/{}", escape_token(key));
        match key.as_str() {
            "$schema" => {}
            "properties" | "$defs" => {
                let children = value
                    .as_object()
                    .map(|children| {
                        children
                            .iter()
                            .map(|(name, child)| {
                                let there = format!("{here}/{}", escape_token(name));
                                (name.clone(), subset(child, &there, notes))
                            })
                            .collect::<Map<_, _>>()
                    })
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(children));
            }
            "anyOf" | "oneOf" | "prefixItems" => {
                let children = value
                    .as_array()
                    .map(|children| {
                        children
                            .iter()
                            .enumerate()
                            .map(|(i, child)| subset(child, &format!("{here}/{i}"), notes))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Array(children));
            }
            "items" | "additionalProperties" => {
                out.insert(key.clone(), subset(value, &here, notes));
            }
            "const" => {
                out.insert("enum".into(), Value::Array(vec![value.clone()]));
                notes.push(
                    NoteKind::Repaired,
                    &here,
                    "`const` written as a one-value `enum` (Gemini's subset has no `const`)",
                );
            }
            "enum"
                if !value.as_array().is_some_and(|values| {
                    values.iter().all(|v| v.is_string() || v.is_number())
                }) =>
            {
                notes.push(
                    NoteKind::Dropped,
                    &here,
                    "an `enum` of values other than strings and numbers, outside Gemini's subset \
                     (the gate still enforces it)",
                );
            }
            k if KEPT.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            k if ANNOTATIONS.contains(&k) => moved.push((key.clone(), value.clone())),
            _ => notes.push(
                NoteKind::Dropped,
                &here,
                format!("`{key}`, outside Gemini's schema subset (the gate still enforces it)"),
            ),
        }
    }
    describe_moved(&mut out, &moved, pointer, notes);
    Value::Object(out)
}
