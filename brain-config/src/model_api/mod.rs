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
pub(crate) mod schema;
#[cfg(test)]
mod tests;
mod unproject;

use serde_json::{Map, Value, json};

pub use unproject::unproject;

use crate::model::{HostConfig, ModelApi, ToolBinding};

/// What a projection did to one tool beyond copying it, or why it did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The binding's name.
    pub tool: String,
    /// What kind of note.
    pub kind: NoteKind,
    /// Where, as a JSON pointer into the binding's `input_schema` (empty: the whole tool).
    pub pointer: String,
    /// What, and why.
    pub message: String,
}

/// The kinds of [`Note`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum NoteKind {
    /// The tool is not strict: making it strict would not be faithful (or a limit is passed).
    NotStrict,
    /// A lossless repair (e.g. `items: {}` on an array without `items`).
    Repaired,
    /// A keyword the API refuses and the gate enforces was dropped: brain still validates every
    /// call against the original schema before any I/O.
    Dropped,
    /// A keyword the gate does not enforce (`default`, `examples`, a `format`) was moved into
    /// the description.
    Moved,
    /// The API cannot take the tool: it is left out of the definitions.
    Rejected,
}

impl NoteKind {
    /// A word for messages: `not strict`, `repaired`, `dropped`, `moved`, `left out`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::NotStrict => "not strict",
            NoteKind::Repaired => "repaired",
            NoteKind::Dropped => "dropped",
            NoteKind::Moved => "moved",
            NoteKind::Rejected => "left out",
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.tool, self.kind.as_str())?;
        if !self.pointer.is_empty() {
            write!(f, " at {}", self.pointer)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// One tool projected for one API.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    /// The binding's name (the name the model sees).
    pub name: String,
    /// The tool definition, exactly as the API's `tools` takes it; `None` when the API cannot
    /// take the tool.
    pub definition: Option<Value>,
    /// Whether the definition is strict (the model's arguments constrained to the schema).
    pub strict: bool,
    /// Everything the projection changed, and why it is not strict.
    pub notes: Vec<Note>,
}

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
    let document = match api {
        ModelApi::Gemini if definitions.is_empty() => json!({"tools": []}),
        ModelApi::Gemini => json!({"tools": [{"functionDeclarations": definitions}]}),
        _ => json!({"tools": definitions}),
    };
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
            let (parameters, strict) = openai::parameters(&binding.input_schema, &mut notes);
            let definition = parameters.map(|parameters| {
                let function = json!({
                    "name": binding.name,
                    "description": binding.description,
                    "parameters": parameters,
                    "strict": strict,
                });
                if api == ModelApi::OpenAi {
                    let mut tool = Map::new();
                    tool.insert("type".into(), "function".into());
                    tool.extend(function.as_object().cloned().unwrap_or_default());
                    Value::Object(tool)
                } else {
                    json!({"type": "function", "function": function})
                }
            });
            (definition, strict)
        }
        ModelApi::Anthropic => {
            let (input_schema, strict) = anthropic::input_schema(&binding.input_schema, &mut notes);
            let definition = input_schema.map(|input_schema| {
                let mut tool = json!({
                    "name": binding.name,
                    "description": binding.description,
                    "input_schema": input_schema,
                });
                if strict {
                    tool["strict"] = Value::Bool(true);
                }
                tool
            });
            (definition, strict)
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

/// The pinned MCP Tool object: `name` is the binding's name.
fn mcp(binding: &ToolBinding) -> Value {
    let mut tool = json!({
        "name": binding.name,
        "description": binding.description,
        "inputSchema": binding.input_schema,
    });
    if let Some(output) = &binding.output_schema {
        tool["outputSchema"] = output.clone();
    }
    if let Some(annotations) = &binding.annotations {
        tool["annotations"] = Value::Object(annotations.clone());
    }
    tool
}

/// Keywords nothing enforces (the gate validates with them as annotations): a projection that
/// cannot pass them on moves them into the description.
pub(crate) const ANNOTATIONS: &[&str] =
    &["default", "examples", "deprecated", "readOnly", "writeOnly"];

/// Appends `moved` keywords to `schema`'s description as `(key: value; …)`, with a note each.
pub(crate) fn describe_moved(
    schema: &mut Map<String, Value>,
    moved: &[(String, Value)],
    pointer: &str,
    notes: &mut Notes<'_>,
) {
    if moved.is_empty() {
        return;
    }
    let said: Vec<String> = moved.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let description = match schema.get("description").and_then(Value::as_str) {
        Some(description) if !description.is_empty() => {
            format!("{description} ({})", said.join("; "))
        }
        _ => format!("({})", said.join("; ")),
    };
    schema.insert("description".into(), Value::String(description));
    for (key, _) in moved {
        notes.push(
            NoteKind::Moved,
            &format!("{pointer}/{}", crate::source::escape_token(key)),
            format!("`{key}` moved into the description (nothing enforces it)"),
        );
    }
}

/// The notes of one tool's projection, as it goes.
pub(crate) struct Notes<'a> {
    pub(crate) tool: &'a str,
    pub(crate) notes: Vec<Note>,
}

impl Notes<'_> {
    pub(crate) fn push(&mut self, kind: NoteKind, pointer: &str, message: impl Into<String>) {
        self.notes.push(Note {
            tool: self.tool.to_owned(),
            kind,
            pointer: pointer.to_owned(),
            message: message.into(),
        });
    }
}
