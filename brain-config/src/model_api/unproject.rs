//! The model's arguments mapped back to the binding's own schema: a strict projection makes
//! every optional property required and nullable, so a model says "absent" with `null`.

use serde_json::Value;

use super::schema::{accepts_null, resolved};

/// Maps arguments a model produced from a projected definition back to the binding's
/// `input_schema`: a `null` for a property that is optional and does not accept `null` in the
/// original becomes absent, at every depth of `properties` and `items`; a `null` the original
/// accepts stays; nothing else changes. Arguments that were never projected pass unchanged, and
/// the gate then validates the result against the original schema as for any call.
///
/// ```
/// use serde_json::json;
/// let schema = json!({"type": "object", "required": ["q", "tag"], "properties": {
///     "q": {"type": "string"}, "limit": {"type": "integer"},
///     "tag": {"type": ["string", "null"]}}});
/// let mut arguments = json!({"q": "rust", "limit": null, "tag": null});
/// brain_config::model_api::unproject(&schema, &mut arguments);
/// assert_eq!(arguments, json!({"q": "rust", "tag": null}));
/// ```
pub fn unproject(input_schema: &Value, arguments: &mut Value) {
    walk(input_schema, input_schema, arguments, 0);
}

/// Deeper than any schema a config can hold (the loader's nesting limit is 128).
const MAX_DEPTH: usize = 128;

fn walk(root: &Value, schema: &Value, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolved(root, schema);
    match value {
        Value::Object(map) => {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                return;
            };
            let required = |name: &str| {
                schema
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|required| required.iter().any(|r| r == name))
            };
            map.retain(|name, value| {
                !(value.is_null()
                    && !required(name)
                    && properties
                        .get(name)
                        .is_some_and(|property| !accepts_null(root, property)))
            });
            for (name, value) in map.iter_mut() {
                if let Some(property) = properties.get(name) {
                    walk(root, property, value, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let prefix = schema
                .get("prefixItems")
                .or_else(|| schema.get("items").filter(|items| items.is_array()))
                .and_then(Value::as_array);
            let rest = schema.get("items").filter(|items| items.is_object());
            for (index, item) in items.iter_mut().enumerate() {
                if let Some(item_schema) = prefix.and_then(|prefix| prefix.get(index)).or(rest) {
                    walk(root, item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::unproject;

    #[test]
    fn nulls_become_absent_only_where_the_original_has_no_null() {
        let schema = json!({"type": "object", "properties": {
            "filter": {"$ref": "#/$defs/filter"},
            "rows": {"type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "integer"}, "note": {"type": "string"},
                "any": {}}}}},
            "$defs": {"filter": {"type": "object", "required": ["kind"], "properties": {
                "kind": {"type": ["string", "null"]}, "limit": {"type": "integer"}}}}});
        let mut arguments = json!({
            "filter": {"kind": null, "limit": null},
            "rows": [{"id": 1, "note": null, "any": null}, {"id": null}]});
        unproject(&schema, &mut arguments);
        assert_eq!(
            arguments,
            json!({"filter": {"kind": null}, "rows": [{"id": 1, "any": null}, {}]})
        );
        // Not an object where one is expected: left for the gate to refuse.
        let mut odd = json!({"filter": "x", "rows": null});
        unproject(&schema, &mut odd);
        assert_eq!(odd, json!({"filter": "x"}));
    }
}
