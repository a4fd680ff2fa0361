//! JSON Schemas: the host config's own (generated from the model's types), and the compilation of
//! the schemas a config carries (`input_schema`, `output_schema`) without ever fetching a remote
//! `$ref`.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::model::HostConfig;
use crate::source::escape_token;

/// The JSON Schema of the host config, as committed in `brain-config/host-config.schema.json`
/// (pretty-printed, with a trailing newline). Point a `host.json` at it with `"$schema"` and
/// editors autocomplete and check the file.
pub fn host_config_schema() -> String {
    let schema = schemars::schema_for!(HostConfig);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    text.push('\n');
    text
}

/// One field of an object in the config format, read from the generated schema.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) required: bool,
    /// The field's doc comment, from the schema's `description`.
    pub(crate) description: String,
    /// A value of the right type that stands in for a missing or mistyped required field, so that
    /// the rest of the binding can still be checked.
    pub(crate) placeholder: Value,
}

/// The fields of the host config's root object and of a tool binding.
#[derive(Debug)]
pub(crate) struct Fields {
    pub(crate) root: Vec<Field>,
    pub(crate) binding: Vec<Field>,
}

/// The field tables, derived once from the types through their schema: one source of truth for
/// which fields exist and which are required.
pub(crate) static FIELDS: LazyLock<Fields> = LazyLock::new(|| {
    let schema = schemars::schema_for!(HostConfig).to_value();
    let binding = &schema["$defs"]["ToolBinding"];
    Fields {
        root: fields_of(&schema),
        binding: fields_of(binding),
    }
});

fn fields_of(object_schema: &Value) -> Vec<Field> {
    let required: Vec<&str> = object_schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = object_schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| Field {
            name: name.clone(),
            required: required.contains(&name.as_str()),
            description: property["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            placeholder: match property["type"].as_str() {
                Some("string") => Value::String(String::new()),
                Some("array") => Value::Array(Vec::new()),
                _ => Value::Object(Map::new()),
            },
        })
        .collect()
}

impl Fields {
    pub(crate) fn binding_field(&self, name: &str) -> Option<&Field> {
        self.binding.iter().find(|field| field.name == name)
    }
}

/// Why a schema in the config cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON pointer inside the schema (`""` for its root).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// Compiles a tool's JSON Schema the way brain uses it everywhere: checked against its
/// meta-schema (draft from `$schema`, 2020-12 by default), local `$ref`s resolved, and every
/// remote `$ref` refused — brain never fetches a schema at build or call time.
pub fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    jsonschema::options()
        .with_retriever(NoRemoteSchemas)
        .build(schema)
        .map_err(|error| {
            let message = error.to_string();
            if message.contains(REMOTE_REFUSED) {
                let (pointer, uri) = remote_ref(schema).unwrap_or_default();
                return SchemaError {
                    pointer,
                    message: format!("`$ref` {uri:?} points outside the schema: {REMOTE_REFUSED}"),
                };
            }
            SchemaError {
                pointer: error.instance_path().to_string(),
                message,
            }
        })
}

const REMOTE_REFUSED: &str = "brain never fetches remote schemas";

struct NoRemoteSchemas;

impl jsonschema::Retrieve for NoRemoteSchemas {
    fn retrieve(
        &self,
        _uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(REMOTE_REFUSED.into())
    }
}

/// The first `$ref` in `schema` that does not start with `#`, and the pointer to it.
pub(crate) fn remote_ref(schema: &Value) -> Option<(String, String)> {
    let mut stack = vec![(String::new(), schema)];
    while let Some((pointer, value)) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(uri)) = map.get("$ref")
                    && !uri.starts_with('#')
                {
                    return Some((format!("{pointer}/$ref"), uri.clone()));
                }
                stack.extend(
                    map.iter()
                        .map(|(key, v)| (format!("{pointer}/{}", escape_token(key)), v)),
                );
            }
            Value::Array(items) => stack.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{pointer}/{i}"), v)),
            ),
            _ => {}
        }
    }
    None
}
