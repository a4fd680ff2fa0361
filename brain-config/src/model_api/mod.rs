//! Tools as each model API accepts them: a pure projection of the bindings into the `tools`
//! field of a model API's request (OpenAI's Responses and Chat Completions, Anthropic's
//! Messages, Gemini, or MCP's own Tool objects), strict where that is faithful to the binding's
//! schema, with a [`Note`] for every tool that is not strict, every repair, every keyword
//! dropped or moved, and every tool left out. Codegen, `cargo xtask check` and the runtime share
//! it; [`unproject`] maps a model's arguments back.
//!
//! ```
//! use brain_config::{ModelApi, model_api};
//! let config = brain_config::parse(br#"{"tools": [{"name": "search", "description": "Search.",
//!     "url": "https://mcp.example.com/mcp", "mcp_tool": "search", "tenants": ["local"],
//!     "input_schema": {"type": "object", "required": ["q"], "properties": {
//!         "q": {"type": "string"}, "limit": {"type": "integer"}}}}]}"#, "host.json").unwrap();
//! let definitions = model_api::definitions(ModelApi::OpenAi, config.tools.iter());
//! let tool = &definitions.document["tools"][0];
//! assert_eq!(tool["strict"], true);
//! assert_eq!(tool["parameters"]["required"], serde_json::json!(["q", "limit"]));
//! assert_eq!(
//!     tool["parameters"]["properties"]["limit"],
//!     serde_json::json!({"anyOf": [{"type": "integer"}, {"type": "null"}]})
//! );
//! ```

mod anthropic;
mod gemini;
mod openai;
mod projection;
pub(crate) mod schema;
#[cfg(test)]
mod tests;
mod unproject;

use serde_json::Value;

pub use projection::{Note, NoteKind, Projection};
pub use unproject::unproject;

use projection::{Notes, object};

use crate::model::{HostConfig, ModelApi, ToolBinding};

/// The definitions of a set of bindings for one API.
#[derive(Debug, Clone, PartialEq)]
pub struct Definitions {
    /// The API.
    pub api: ModelApi,
    /// `{"tools": [...]}`, ready to splice into a request.
    pub document: Value,
    /// Each binding's projection, in config order (left-out tools included).
    pub tools: Vec<Projection>,
}

impl Definitions {
    /// Every note, tool by tool.
    pub fn notes(&self) -> impl Iterator<Item = &Note> {
        self.tools.iter().flat_map(|tool| &tool.notes)
    }
}

/// The definitions of `bindings` (in their order) for `api`, with the API's per-request limits
/// applied: past them, tools are made non-strict in order, with a note.
pub fn definitions<'a>(
    api: ModelApi,
    bindings: impl IntoIterator<Item = &'a ToolBinding>,
) -> Definitions {
    let bindings: Vec<&ToolBinding> = bindings.into_iter().collect();
    let mut tools: Vec<Projection> = bindings
        .iter()
        .map(|binding| project(api, binding))
        .collect();
    if api == ModelApi::Anthropic {
        anthropic::request_limits(&mut tools, &bindings);
    }
    let definitions: Vec<Value> = tools
        .iter()
        .filter_map(|tool| tool.definition.clone())
        .collect();
    let definitions = match api {
        ModelApi::Gemini if definitions.is_empty() => Vec::new(),
        ModelApi::Gemini => vec![object([(
            "functionDeclarations",
            Value::Array(definitions),
        )])],
        _ => definitions,
    };
    let document = object([("tools", Value::Array(definitions))]);
    Definitions {
        api,
        document,
        tools,
    }
}

/// What `cargo xtask check` and `compile_config` report as notes: each tool that cannot be
/// strict for a model API with a strict mode (those `model_apis` names, else OpenAI's and
/// Anthropic's), and why — each tool alone, before any per-request limit.
pub fn strictness_notes(config: &HostConfig) -> Vec<(ModelApi, Note)> {
    let apis: Vec<ModelApi> = match &config.model_apis {
        Some(apis) => apis
            .iter()
            .copied()
            .filter(|api| api.has_strict_mode())
            .collect(),
        None => vec![ModelApi::OpenAi, ModelApi::Anthropic],
    };
    let mut out = Vec::new();
    for api in apis {
        for binding in &config.tools {
            out.extend(
                project(api, binding)
                    .notes
                    .into_iter()
                    .filter(|note| note.kind == NoteKind::NotStrict)
                    .map(|note| (api, note)),
            );
        }
    }
    out
}

/// One binding projected for `api`, alone (no per-request limits).
pub fn project(api: ModelApi, binding: &ToolBinding) -> Projection {
    let mut notes = Notes {
        tool: &binding.name,
        notes: Vec::new(),
    };
    let (definition, strict) = match api {
        ModelApi::Mcp => (Some(mcp(binding)), false),
        ModelApi::OpenAi | ModelApi::OpenAiChat => {
            let (parameters, strict) =
                openai::parameters(&binding.input_schema, strict_allowed(binding), &mut notes);
            let definition = {
                let function = [
                    ("name", Value::String(binding.name.clone())),
                    ("description", Value::String(binding.description.clone())),
                    ("parameters", parameters),
                    ("strict", Value::Bool(strict)),
                ];
                if api == ModelApi::OpenAi {
                    object(
                        [("type", Value::from("function"))]
                            .into_iter()
                            .chain(function),
                    )
                } else {
                    object([
                        ("type", Value::from("function")),
                        ("function", object(function)),
                    ])
                }
            };
            (Some(definition), strict)
        }
        ModelApi::Anthropic => {
            let (input_schema, strict) =
                anthropic::input_schema(&binding.input_schema, strict_allowed(binding), &mut notes);
            let definition = {
                let tool = [
                    ("name", Value::String(binding.name.clone())),
                    ("description", Value::String(binding.description.clone())),
                    ("input_schema", input_schema),
                ];
                let strict = strict.then_some(("strict", Value::Bool(true)));
                object(tool.into_iter().chain(strict))
            };
            (Some(definition), strict)
        }
        ModelApi::Gemini => (gemini::declaration(binding, &mut notes), false),
    };
    let strict = strict && definition.is_some();
    Projection {
        name: binding.name.clone(),
        definition,
        strict,
        notes: notes.notes,
    }
}

/// `Err(why)` when the binding opts out of strict mode (`"strict": false`).
fn strict_allowed(binding: &ToolBinding) -> Result<(), &'static str> {
    match binding.strict {
        Some(false) => Err("the binding says `\"strict\": false`"),
        _ => Ok(()),
    }
}

/// The pinned MCP Tool object: `name` is the binding's name.
fn mcp(binding: &ToolBinding) -> Value {
    let fields = [
        ("name", Some(Value::String(binding.name.clone()))),
        (
            "description",
            Some(Value::String(binding.description.clone())),
        ),
        ("inputSchema", Some(binding.input_schema.clone())),
        ("outputSchema", binding.output_schema.clone()),
        (
            "annotations",
            binding.annotations.clone().map(Value::Object),
        ),
    ];
    object(
        fields
            .into_iter()
            .filter_map(|(key, value)| Some((key, value?))),
    )
}
