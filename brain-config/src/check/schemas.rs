//! A binding's schemas: `input_schema` and `output_schema` compile as JSON Schemas and describe
//! objects, and `input_schema`'s `x-mcp-header` annotations name headers brain can send.

use std::collections::HashMap;

use serde_json::Value;

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::schema::compile_schema;

/// `input_schema` and `output_schema` are valid JSON Schemas (checked against their meta-schema,
/// local `$ref`s only) whose root is an object schema (`"type": "object"`).
pub(super) fn schemas(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    let schemas = [
        ("input_schema", Some(&binding.input_schema)),
        ("output_schema", binding.output_schema.as_ref()),
    ];
    for (field, schema) in schemas {
        let Some(schema) = schema.filter(|_| draft.usable(field)) else {
            continue;
        };
        if let Err(error) = compile_schema(schema) {
            let pointer = format!("{}{}", draft.pointer(field), error.pointer);
            out.push(Diagnostic::new(
                Rule::SchemaInvalid,
                pointer,
                format!("`{field}` is not a valid JSON Schema: {}", error.message),
                "fix the schema (it is checked against its JSON Schema meta-schema, 2020-12 unless \
                 `$schema` names another draft); put shared parts under `$defs` and refer to them \
                 with `#/$defs/...`",
            ));
        }
        schema_root_not_object(draft, field, schema, out);
    }
}

/// A tool's schemas describe an object: their root has `"type": "object"`, as MCP requires and
/// model APIs expect.
fn schema_root_not_object(draft: &Draft, field: &str, schema: &Value, out: &mut Vec<Diagnostic>) {
    let root_type = schema.get("type");
    if root_type == Some(&Value::String("object".to_owned())) {
        return;
    }
    let found = match (schema, root_type) {
        (Value::Object(_), None) => "the root has no `type`".to_owned(),
        (Value::Object(_), Some(found)) => format!("the root has `\"type\": {found}`"),
        (other, _) => format!("the schema is `{other}`, not a JSON object"),
    };
    out.push(draft.error(
        Rule::SchemaRootNotObject,
        field,
        format!("`{field}` must describe an object: {found}"),
        "make the root `{\"type\": \"object\", \"properties\": {...}}`; wrap a single value in a \
         property",
    ));
}

/// `x-mcp-header` annotations in `input_schema` (MCP 2026-07-28, SEP-2243) each name one header
/// an argument travels in: a non-empty HTTP token (RFC 9110 `tchar`s), unique ignoring case, on
/// a property of type `string`, `integer` or `boolean` reached from the root through
/// `properties` alone. Clients must refuse tools that break this.
pub(super) fn x_mcp_headers(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if !draft.usable("input_schema") {
        return;
    }
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut stack = vec![(String::new(), &draft.binding.input_schema, true)];
    while let Some((pointer, schema, on_chain)) = stack.pop() {
        let Value::Object(map) = schema else { continue };
        if let Some(header) = map.get("x-mcp-header") {
            let at = format!("input_schema{pointer}/x-mcp-header");
            let problem = x_mcp_header_problem(header, map, &pointer, on_chain, &mut seen);
            if let Some(message) = problem {
                out.push(draft.error(
                    Rule::InvalidXMcpHeader,
                    &at,
                    message,
                    "fix the tool's schema on the server (or remove the annotation from the pinned \
                     binding): servers and clients reject tools with invalid x-mcp-header",
                ));
            }
        }
        for (keyword, value) in map {
            let child = format!("{pointer}/{}", crate::source::escape_token(keyword));
            match (keyword.as_str(), value) {
                ("enum" | "const" | "default" | "examples", _) => {}
                ("properties", Value::Object(properties)) => {
                    for (name, property) in properties {
                        let path = format!("{child}/{}", crate::source::escape_token(name));
                        stack.push((path, property, on_chain));
                    }
                }
                (_, Value::Object(_)) => stack.push((child, value, false)),
                (_, Value::Array(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        stack.push((format!("{child}/{i}"), item, false));
                    }
                }
                _ => {}
            }
        }
    }
}

/// What is wrong with one `x-mcp-header` annotation, if anything.
fn x_mcp_header_problem(
    header: &Value,
    property: &serde_json::Map<String, Value>,
    pointer: &str,
    on_chain: bool,
    seen: &mut HashMap<String, String>,
) -> Option<String> {
    let Value::String(name) = header else {
        return Some(format!("`x-mcp-header` is {header}, not a string"));
    };
    if pointer.is_empty() || !on_chain {
        return Some(
            "`x-mcp-header` must annotate a property reached from the root through `properties` \
             alone"
                .into(),
        );
    }
    if name.is_empty() {
        return Some("`x-mcp-header` is empty".into());
    }
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if !name.chars().all(tchar) {
        return Some(format!(
            "`x-mcp-header` {name:?} is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"
        ));
    }
    let primitive = matches!(
        property.get("type").and_then(Value::as_str),
        Some("string" | "integer" | "boolean")
    );
    if !primitive {
        return Some(format!(
            "`x-mcp-header` {name:?} is on a property whose type is not string, integer or boolean"
        ));
    }
    if let Some(first) = seen.insert(name.to_ascii_lowercase(), pointer.to_owned()) {
        return Some(format!(
            "`x-mcp-header` {name:?} repeats the header of {first} (header names ignore case)"
        ));
    }
    None
}
