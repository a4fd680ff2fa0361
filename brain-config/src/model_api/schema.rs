//! What every projection needs from a binding's JSON Schema: local `$ref`s inlined (so that each
//! API sees one self-contained tree), draft-07's forms read as 2020-12's, and the questions the
//! rules ask — is this object free-form, does this schema accept `null`.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::source::escape_token;

/// How deep `$ref`s are followed while inlining: a schema whose references nest deeper is
/// treated as recursive.
const MAX_REF_DEPTH: usize = 32;

/// Keywords that only annotate: beside a `$ref` they are merged into what it resolves to.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

/// Why a schema could not be made self-contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unresolved {
    /// Where (a JSON pointer into the binding's `input_schema`).
    pub(crate) pointer: String,
    pub(crate) why: String,
}

/// `schema` with every local `$ref` (`#/$defs/…`, `#/definitions/…`, any `#/…` pointer)
/// replaced by what it names, `$defs`/`definitions`, `$schema`, `$id` and `$comment` removed,
/// and draft-07's tuple `items` (an array) read as `prefixItems`. A recursive or remote
/// reference, or a `$ref` beside keywords that constrain, cannot be inlined.
pub(crate) fn self_contained(root: &Value) -> Result<Cow<'_, Value>, Unresolved> {
    if already_self_contained(root, true) {
        return Ok(Cow::Borrowed(root));
    }
    inline(root, root, "", &mut Vec::new()).map(Cow::Owned)
}

/// The root's `$schema` aside, the keywords inlining would change: none means the schema is
/// self-contained as it is (most are), and a projection reads it without a copy. Projections
/// pass over a root `$schema`.
const INLINED: &[&str] = &["$ref", "$defs", "definitions", "$id", "$comment"];

fn already_self_contained(schema: &Value, root: bool) -> bool {
    match schema {
        Value::Object(map) => map.iter().all(|(key, value)| {
            !INLINED.contains(&key.as_str())
                && (root || key != "$schema")
                && !(key == "items" && value.is_array())
                && match key.as_str() {
                    // Values that are data, not schemas.
                    "enum" | "const" | "default" | "examples" | "required" => true,
                    "properties" | "patternProperties" | "dependentSchemas" => {
                        value.as_object().is_none_or(|children| {
                            children.values().all(|c| already_self_contained(c, false))
                        })
                    }
                    _ => already_self_contained(value, false),
                }
        }),
        Value::Array(items) => items.iter().all(|item| already_self_contained(item, false)),
        _ => true,
    }
}

/// The schema a non-strict projection sends: self-contained where it can be, else as written.
pub(crate) fn as_sent(schema: &Value) -> Value {
    self_contained(schema).map_or_else(|_| schema.clone(), owned)
}

/// `schema` owned, without a root `$schema` (a projection's output carries none).
pub(crate) fn owned(schema: Cow<'_, Value>) -> Value {
    let mut schema = schema.into_owned();
    if let Value::Object(map) = &mut schema {
        map.shift_remove("$schema");
    }
    schema
}

/// `expanding`: the references being inlined around this node (one that comes back is
/// recursive).
fn inline<'a>(
    root: &'a Value,
    node: &'a Value,
    pointer: &str,
    expanding: &mut Vec<&'a str>,
) -> Result<Value, Unresolved> {
    let Value::Object(map) = node else {
        return Ok(node.clone());
    };
    if let Some(reference) = map.get("$ref") {
        let unresolved = |why: String| Unresolved {
            pointer: format!("{pointer}/$ref"),
            why,
        };
        let Some(target) = reference.as_str() else {
            return Err(unresolved("`$ref` is not a string".into()));
        };
        if expanding.contains(&target) || expanding.len() >= MAX_REF_DEPTH {
            return Err(unresolved(format!(
                "`$ref` {target:?} is recursive (a schema that contains itself)"
            )));
        }
        let Some(resolved) = target.strip_prefix('#').and_then(|path| root.pointer(path)) else {
            return Err(unresolved(format!(
                "`$ref` {target:?} does not name a part of this schema"
            )));
        };
        expanding.push(target);
        let merged = inline(root, resolved, pointer, expanding);
        expanding.pop();
        let mut merged = match merged? {
            Value::Object(merged) => merged,
            other => return Ok(other),
        };
        for (key, value) in map {
            if key == "$ref" {
                continue;
            }
            if !ANNOTATIONS.contains(&key.as_str()) {
                return Err(unresolved(format!(
                    "`$ref` {target:?} has `{key}` beside it, which constrains too"
                )));
            }
            merged.insert(key.clone(), value.clone());
        }
        return Ok(Value::Object(merged));
    }
    let mut out = Map::new();
    for (key, value) in map {
        let here = format!("{pointer}/{}", escape_token(key));
        match key.as_str() {
            "$defs" | "definitions" | "$schema" | "$id" | "$comment" => {}
            "properties" | "patternProperties" | "dependentSchemas" => {
                let Value::Object(children) = value else {
                    out.insert(key.clone(), value.clone());
                    continue;
                };
                let mut inlined = Map::new();
                for (name, child) in children {
                    let there = format!("{here}/{}", escape_token(name));
                    inlined.insert(name.clone(), inline(root, child, &there, expanding)?);
                }
                out.insert(key.clone(), Value::Object(inlined));
            }
            "items" if value.is_array() => {
                // Draft-07's tuple form is 2020-12's `prefixItems`.
                let items = each(root, value, &here, expanding)?;
                out.insert("prefixItems".into(), items);
                if let Some(additional) = map.get("additionalItems") {
                    let there = format!("{pointer}/additionalItems");
                    out.insert("items".into(), inline(root, additional, &there, expanding)?);
                }
            }
            "additionalItems" if map.get("items").is_some_and(Value::is_array) => {}
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                out.insert(key.clone(), each(root, value, &here, expanding)?);
            }
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedProperties"
            | "unevaluatedItems" => {
                out.insert(key.clone(), inline(root, value, &here, expanding)?);
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

fn each<'a>(
    root: &'a Value,
    value: &'a Value,
    pointer: &str,
    expanding: &mut Vec<&'a str>,
) -> Result<Value, Unresolved> {
    let Value::Array(items) = value else {
        return Ok(value.clone());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| inline(root, item, &format!("{pointer}/{i}"), expanding))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// The `type`s a schema names: one, a list, or none.
pub(crate) fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Why an object schema is free-form (the model could send properties it was not told of), if
/// it is: `additionalProperties` is `true` or a schema (`{}` included), it has
/// `patternProperties`, or it has no `properties`. An absent `additionalProperties` counts as
/// closed: the model is only ever told of the declared properties.
pub(crate) fn free_form(schema: &Value) -> Option<&'static str> {
    match schema.get("additionalProperties") {
        Some(Value::Bool(true)) => return Some("`additionalProperties` is true"),
        Some(Value::Object(_)) => return Some("`additionalProperties` is a schema"),
        _ => {}
    }
    if schema.get("patternProperties").is_some() {
        return Some("it has `patternProperties`");
    }
    if !schema.get("properties").is_some_and(Value::is_object) {
        return Some("it declares no `properties`");
    }
    None
}

/// Whether `null` is valid against `schema`, a part of `root` (its `$ref`s are followed).
/// Decided by `type`, `enum`, `const` and the combinators; a schema that constrains none of
/// them accepts it. A reference that cannot be followed counts as accepting it.
pub(crate) fn accepts_null(root: &Value, schema: &Value) -> bool {
    accepts_null_within(root, schema, 0)
}

fn accepts_null_within(root: &Value, schema: &Value, depth: usize) -> bool {
    let Value::Object(map) = schema else {
        return schema.as_bool().unwrap_or(true);
    };
    let within = |schema: &Value| accepts_null_within(root, schema, depth + 1);
    if depth > MAX_REF_DEPTH {
        return true;
    }
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        match target.strip_prefix('#').and_then(|path| root.pointer(path)) {
            Some(resolved) if !within(resolved) => return false,
            _ => {}
        }
    }
    if map.contains_key("type") && !types(schema).contains(&"null") {
        return false;
    }
    if let Some(Value::Array(values)) = map.get("enum")
        && !values.contains(&Value::Null)
    {
        return false;
    }
    if map.get("const").is_some_and(|constant| !constant.is_null()) {
        return false;
    }
    for any in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(any)
            && !branches.iter().any(within)
        {
            return false;
        }
    }
    if let Some(Value::Array(all)) = map.get("allOf")
        && !all.iter().all(within)
    {
        return false;
    }
    true
}

/// `schema` with its `$ref` followed (a part of `root`), as far as it can be.
pub(crate) fn resolved<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..MAX_REF_DEPTH {
        match schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|target| target.strip_prefix('#'))
            .and_then(|path| root.pointer(path))
        {
            Some(next) => schema = next,
            None => break,
        }
    }
    schema
}

#[cfg(test)]
/// The names along `properties` and `items` of a schema, as JSON pointers of the instance
/// (`/a`, `/a/*/b`): the shape a projection must keep.
pub(crate) fn property_tree(schema: &Value) -> Vec<String> {
    fn walk(schema: &Value, at: &str, out: &mut Vec<String>) {
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (name, child) in properties {
                let here = format!("{at}/{}", escape_token(name));
                out.push(here.clone());
                walk(child, &here, out);
            }
        }
        if let Some(items) = schema.get("items").filter(|items| items.is_object()) {
            walk(items, &format!("{at}/*"), out);
        }
        for any in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = schema.get(any) {
                for branch in branches {
                    walk(branch, at, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(schema, "", &mut out);
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn refs_are_inlined_and_draft_07_read_as_2020_12() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "definitions": {"point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}], "additionalItems": false}},
            "properties": {"at": {"$ref": "#/definitions/point", "description": "Where."}}
        });
        assert_eq!(
            self_contained(&schema).unwrap().into_owned(),
            json!({"type": "object", "properties": {"at": {
                "type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                "items": false, "description": "Where."}}})
        );
        let recursive = json!({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node"});
        let error = self_contained(&recursive).unwrap_err();
        assert!(error.why.contains("recursive"), "{error:?}");
        let constrained = json!({"properties": {"a": {"$ref": "#/$defs/a", "maxLength": 3}}, "$defs": {"a": {"type": "string"}}});
        assert_eq!(
            self_contained(&constrained).unwrap_err().pointer,
            "/properties/a/$ref"
        );
    }

    #[test]
    fn null_and_free_form() {
        let null = |schema: Value| accepts_null(&schema, &schema);
        assert!(null(json!({})));
        assert!(null(json!({"type": ["string", "null"]})));
        assert!(null(
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        ));
        assert!(!null(json!({"type": "string"})));
        assert!(!null(json!({"enum": ["a", "b"]})));
        assert!(null(json!({"enum": ["a", null]})));
        assert!(!null(
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
        ));
        assert!(!null(
            json!({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"})
        ));
        assert_eq!(
            free_form(&json!({"type": "object", "properties": {}})),
            None
        );
        assert!(free_form(&json!({"type": "object"})).is_some());
        assert!(
            free_form(&json!({"type": "object", "properties": {}, "additionalProperties": {}}))
                .is_some()
        );
        assert_eq!(
            property_tree(&json!({"properties": {"a": {"items": {"properties": {"b": {}}}}}})),
            vec!["/a", "/a/*/b"]
        );
    }
}
