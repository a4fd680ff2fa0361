//! From tools a server lists to reviewed bindings: conversion, lints, merging into a config, and
//! drift between pinned bindings and what the server says now. Pure functions; the listing
//! itself is `brain_runtime::discover`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::check::is_valid_name;
use crate::model::{Auth, HostConfig, OnInputRequest, ToolBinding, ToolPin};
use crate::schema::remote_ref;

/// Where the tools' server is: at a URL, or started from a command (stdio).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Server {
    /// A remote server's endpoint.
    Url(String),
    /// An installed stdio server.
    Command {
        /// Program, then arguments.
        command: Vec<String>,
        /// Literal variables of the process.
        env: BTreeMap<String, String>,
        /// Child variable ← host variable.
        env_from: BTreeMap<String, String>,
        /// How the kernel confines it (the binding's `sandbox`; absent: the default sandbox).
        sandbox: Option<crate::sandbox::Sandbox>,
    },
}

impl std::fmt::Display for Server {
    /// The URL, or the command's words joined by spaces.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Server::Url(url) => f.write_str(url),
            Server::Command { command, .. } => f.write_str(&command.join(" ")),
        }
    }
}

/// What discovery puts in every binding besides the tool's own description and schemas.
#[derive(Debug, Clone)]
pub struct BindingSettings {
    /// The server.
    pub server: Server,
    /// The variable holding the server's token, if it needs one.
    pub token_env: Option<String>,
    /// The tenants allowed to call the tools.
    pub tenants: Vec<String>,
    /// `timeout_seconds` of each binding.
    pub timeout_seconds: u64,
    /// `max_output_bytes` of each binding.
    pub max_output_bytes: u64,
    /// The revision the server spoke at discovery.
    pub protocol_version: String,
    /// `on_input_request` of each binding (`None`: the default, fail).
    pub on_input_request: Option<OnInputRequest>,
    /// How brain obtains OAuth tokens for the server, if it requires authorization.
    pub auth: Option<Auth>,
    /// The server declared that it runs tool calls as MCP tasks (pinned as `server_tasks`).
    pub server_tasks: bool,
    /// `ca_file` of each binding: the CA trusted for the server beside the platform's roots.
    pub ca_file: Option<String>,
}

impl Server {
    /// The server a binding names, if it is an MCP binding.
    pub fn of(binding: &ToolBinding) -> Option<Server> {
        match (&binding.url, &binding.command) {
            (Some(url), None) => Some(Server::Url(url.clone())),
            (None, Some(command)) => Some(Server::Command {
                command: command.clone(),
                env: binding.env.clone().unwrap_or_default(),
                env_from: binding.env_from.clone().unwrap_or_default(),
                sandbox: binding.sandbox.clone(),
            }),
            _ => None,
        }
    }
}

/// The binding for one tool of a `tools/list` result, named as on the server.
pub fn binding_from_tool(tool: &Value, settings: &BindingSettings) -> ToolBinding {
    let name = tool["name"].as_str().unwrap_or_default().to_owned();
    ToolBinding {
        strict: None,
        limits: None,
        name: name.clone(),
        description: tool["description"].as_str().unwrap_or_default().to_owned(),
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new())),
        output_schema: tool.get("outputSchema").filter(|v| !v.is_null()).cloned(),
        url: match &settings.server {
            Server::Url(url) => Some(url.clone()),
            Server::Command { .. } => None,
        },
        command: match &settings.server {
            Server::Command { command, .. } => Some(command.clone()),
            Server::Url(_) => None,
        },
        env: match &settings.server {
            Server::Command { env, .. } if !env.is_empty() => Some(env.clone()),
            _ => None,
        },
        env_from: match &settings.server {
            Server::Command { env_from, .. } if !env_from.is_empty() => Some(env_from.clone()),
            _ => None,
        },
        ca_file: settings.ca_file.clone(),
        cwd: None,
        prewarm: None,
        sandbox: match &settings.server {
            Server::Command { sandbox, .. } => sandbox.clone(),
            Server::Url(_) => None,
        },
        mcp_tool: Some(name),
        token_env: settings.token_env.clone(),
        tenants: settings.tenants.clone(),
        timeout_seconds: settings.timeout_seconds,
        max_output_bytes: settings.max_output_bytes,
        inspect_session: None,
        transport: None,
        protocol_version: Some(settings.protocol_version.clone()),
        annotations: tool.get("annotations").and_then(Value::as_object).cloned(),
        execution: tool.get("execution").and_then(Value::as_object).cloned(),
        task: (tool["execution"]["taskSupport"] == "required").then_some(true),
        server_tasks: settings.server_tasks.then_some(true),
        pin: Some(ToolPin::of(tool)),
        on_input_request: settings.on_input_request,
        on_drift: None,
        auth: settings.auth.clone(),
    }
}

/// Whether a listed tool runs only as an MCP task (`execution.taskSupport: "required"`): its
/// binding gets `task: true`, and can be bound only when its server declared tasks at the
/// revision whose tasks brain runs.
pub fn task_only(tool: &Value) -> bool {
    tool["execution"]["taskSupport"] == "required"
}

/// A warning about a discovered tool: worth a reviewer's look before the binding is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// A stable id, shown as `warning[id]`.
    pub id: &'static str,
    /// The tool.
    pub tool: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl std::fmt::Display for Lint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "warning[{}]: tool {:?}: {}",
            self.id, self.tool, self.message
        )
    }
}

/// Lints one discovered binding.
pub fn lint(binding: &ToolBinding) -> Vec<Lint> {
    let mut lints = Vec::new();
    let mut push = |id, message: String| {
        lints.push(Lint {
            id,
            tool: binding.name.clone(),
            message,
        });
    };
    if !is_valid_name(&binding.name) {
        push(
            "name-rejected",
            "model APIs accept only names matching ^[a-zA-Z0-9_-]{1,64}$: rename the binding \
             (keep `mcp_tool` as it is)"
                .into(),
        );
    }
    if binding.description.trim().is_empty() {
        push(
            "empty-description",
            "the server gives no description: write one before committing the binding".into(),
        );
    }
    for combinator in ["oneOf", "anyOf", "allOf"] {
        if binding.input_schema.get(combinator).is_some() {
            push(
                "top-level-combinator",
                format!(
                    "input_schema has `{combinator}` at its root, which model APIs reject: \
                     describe one object with optional properties instead"
                ),
            );
        }
    }
    let schemas = [
        ("input_schema", Some(&binding.input_schema)),
        ("output_schema", binding.output_schema.as_ref()),
    ];
    for (field, schema) in schemas {
        if let Some((_, reference)) = schema.and_then(remote_ref) {
            push(
                "remote-ref",
                format!(
                    "{field} refers to {reference:?}, outside the schema: brain never fetches \
                     it, so the config will be rejected; inline it under `$defs`"
                ),
            );
        }
    }
    if let Some(output) = &binding.output_schema
        && output.get("type") != Some(&Value::String("object".into()))
    {
        push(
            "output-root-not-object",
            "output_schema's root is not `\"type\": \"object\"`: structured content must be an \
             object, so the config will be rejected"
                .into(),
        );
    }
    lints
}

/// The model-visible name of the server's tool `tool` bound with `prefix` (`--prefix`): binding
/// names must match `^[a-zA-Z0-9_-]{1,64}$`, so every other character becomes `_` and the name
/// is cut to 64 characters. `mcp_tool` keeps the server's name.
pub fn binding_name(prefix: &str, tool: &str) -> String {
    format!("{prefix}{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// A binding of a config that a discovered binding of the same name would replace although it
/// calls another server or another tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    /// The name both have.
    pub name: String,
    /// What the config's binding calls: `TOOL at SERVER`, or its kind and URL.
    pub existing: String,
    /// What the discovered binding calls.
    pub new: String,
}

/// What `binding` calls, for a [`Collision`]'s message.
fn target(binding: &ToolBinding) -> String {
    match (Server::of(binding), &binding.mcp_tool) {
        (Some(server), Some(tool)) => format!("MCP tool {tool:?} at {server}"),
        _ => format!(
            "{} tool at {}",
            binding.kind().as_str().to_uppercase(),
            binding.url.as_deref().unwrap_or_default()
        ),
    }
}

/// The bindings of `config` that `bindings` would replace although they call another server
/// (`url` or `command`) or another tool (`mcp_tool`): a merge replaces by name, and a name
/// taken by another server's tool is a collision, not an update.
pub fn collisions(config: &HostConfig, bindings: &[ToolBinding]) -> Vec<Collision> {
    let calls = |binding: &ToolBinding| {
        (
            binding.url.clone(),
            binding.command.clone(),
            binding.mcp_tool.clone(),
        )
    };
    bindings
        .iter()
        .filter_map(|binding| {
            let existing = config.tools.iter().find(|b| b.name == binding.name)?;
            (calls(existing) != calls(binding)).then(|| Collision {
                name: binding.name.clone(),
                existing: target(existing),
                new: target(binding),
            })
        })
        .collect()
}

/// How a merge changed a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Merged {
    /// Bindings replaced (same name).
    pub replaced: usize,
    /// Bindings added at the end.
    pub added: usize,
}

/// Merges `bindings` into `config` (callers refuse [`collisions`] first, unless told to replace):
/// a binding with the same name is replaced where it stands
/// (keeping its `on_input_request`, `on_drift`, `auth`, `limits`, `cwd` and `prewarm` unless the new binding
/// sets them:
/// those are a reviewer's choices, not something the server says), others are appended; every
/// other binding is kept.
pub fn merge(config: &mut HostConfig, bindings: Vec<ToolBinding>) -> Merged {
    let mut merged = Merged::default();
    for mut binding in bindings {
        match config.tools.iter_mut().find(|b| b.name == binding.name) {
            Some(existing) => {
                binding.on_input_request = binding.on_input_request.or(existing.on_input_request);
                binding.on_drift = binding.on_drift.or(existing.on_drift);
                binding.limits = binding.limits.take().or(existing.limits.take());
                if binding.auth.is_none() && binding.token_env.is_none() {
                    binding.auth = existing.auth.take();
                }
                if binding.is_stdio() && existing.is_stdio() {
                    binding.cwd = binding.cwd.take().or(existing.cwd.take());
                    binding.prewarm = binding.prewarm.or(existing.prewarm);
                }
                *existing = binding;
                merged.replaced += 1;
            }
            None => {
                config.tools.push(binding);
                merged.added += 1;
            }
        }
    }
    merged
}

/// What changed between a pinned binding and the tool the server lists now (`None`: the server
/// no longer has it), as readable lines; empty when nothing did.
pub fn drift(pinned: &ToolBinding, live: Option<&Value>) -> Vec<String> {
    let Some(live) = live else {
        return vec!["the server no longer has this tool".to_owned()];
    };
    let mut lines = Vec::new();
    let live_description = live["description"].as_str().unwrap_or_default();
    if pinned.description != live_description {
        lines.push("description:".to_owned());
        lines.push(format!("  - pinned: {:?}", pinned.description));
        lines.push(format!("  + live:   {live_description:?}"));
    }
    let null = Value::Null;
    let fields = [
        (
            "input_schema",
            &pinned.input_schema,
            live.get("inputSchema").unwrap_or(&null),
        ),
        (
            "output_schema",
            pinned.output_schema.as_ref().unwrap_or(&null),
            live.get("outputSchema").unwrap_or(&null),
        ),
    ];
    let object = |map: &Option<Map<String, Value>>| map.clone().map_or(Value::Null, Value::Object);
    let (pinned_annotations, pinned_execution) =
        (object(&pinned.annotations), object(&pinned.execution));
    let objects = [
        (
            "annotations",
            &pinned_annotations,
            live.get("annotations").unwrap_or(&null),
        ),
        (
            "execution",
            &pinned_execution,
            live.get("execution").unwrap_or(&null),
        ),
    ];
    for (field, pinned, live) in fields.into_iter().chain(objects) {
        let mut changes = Vec::new();
        diff(pinned, live, &mut String::new(), &mut changes);
        if !changes.is_empty() {
            lines.push(format!("{field}:"));
            lines.extend(changes.into_iter().map(|change| format!("  {change}")));
        }
    }
    // Every other field, by its pinned digest.
    if let Some(pin) = &pinned.pin {
        let changed = crate::pin::pinned_changes(pin, live);
        let live_fields = live.as_object();
        for name in changed.iter().filter(|n| !READABLE.contains(&n.as_str())) {
            let is = live_fields.and_then(|fields| fields.get(name.as_str()));
            match (pin.fields.contains_key(name), is) {
                (true, Some(is)) => {
                    lines.push(format!("{name}: changed (now {})", live_value(Some(is))))
                }
                (true, None) => lines.push(format!("{name}: removed")),
                (false, is) => lines.push(format!("{name}: added {}", live_value(is))),
            }
        }
    }
    lines
}

/// The fields of a tool that drift shows in detail (the binding keeps them readable), and its
/// name (a rename is a missing tool, see [`likely_rename`]).
const READABLE: &[&str] = &[
    "name",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "execution",
];

/// A live value in a drift line, cut to 200 characters.
fn live_value(value: Option<&Value>) -> String {
    let text = value.map(Value::to_string).unwrap_or_default();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// When the server no longer lists `pinned`'s tool: the one of `live` tools, not bound already
/// (`bound`: the server's tool names that bindings pin), whose input schema is the pinned one
/// (and, when several have it, the only one whose description is the pinned one too) — most
/// likely the same tool under a new name.
pub fn likely_rename<'a>(
    pinned: &ToolBinding,
    live: &'a [Value],
    bound: &[&str],
) -> Option<&'a str> {
    let pin = pinned.pin.as_ref()?;
    pin.fields.get("inputSchema")?;
    let candidates: Vec<(&Value, std::collections::BTreeSet<String>)> = live
        .iter()
        .filter(|tool| !bound.contains(&tool["name"].as_str().unwrap_or_default()))
        .map(|tool| (tool, crate::pin::pinned_changes(pin, tool)))
        .filter(|(_, changed)| !changed.contains("inputSchema"))
        .collect();
    let only = |found: Vec<&'a Value>| match found.as_slice() {
        [one] => one["name"].as_str(),
        _ => None,
    };
    if candidates.len() == 1 {
        return only(candidates.iter().map(|(tool, _)| *tool).collect());
    }
    // Several with that schema: the one that also kept its description, if only one did.
    only(
        candidates
            .iter()
            .filter(|(_, changed)| !changed.contains("description"))
            .map(|(tool, _)| *tool)
            .collect(),
    )
}

/// Pointer-level differences between two JSON values.
fn diff(pinned: &Value, live: &Value, pointer: &mut String, out: &mut Vec<String>) {
    match (pinned, live) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let len = pointer.len();
                let _ = write!(pointer, "/{}", crate::source::escape_token(key));
                match b.get(key) {
                    Some(other) => diff(value, other, pointer, out),
                    None => out.push(format!("{pointer}: removed (was {value})")),
                }
                pointer.truncate(len);
            }
            for (key, value) in b {
                if !a.contains_key(key) {
                    let key = crate::source::escape_token(key);
                    out.push(format!("{pointer}/{key}: added {value}"));
                }
            }
        }
        (a, b) if crate::pin::same(a, b) => {}
        (Value::Null, b) => out.push(format!("{}: added {b}", shown(pointer))),
        (a, Value::Null) => out.push(format!("{}: removed (was {a})", shown(pointer))),
        (a, b) => out.push(format!("{}: {a} → {b}", shown(pointer))),
    }
}

fn shown(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings() -> BindingSettings {
        BindingSettings {
            server: Server::Url("http://127.0.0.1:1/mcp".into()),
            token_env: Some("MCP_API_KEY".into()),
            tenants: vec!["local".into()],
            timeout_seconds: 300,
            max_output_bytes: 1_048_576,
            protocol_version: "2025-11-25".into(),
            on_input_request: None,
            auth: None,
            server_tasks: false,
            ca_file: None,
        }
    }

    #[test]
    fn binding_names_are_model_visible_names() {
        assert_eq!(binding_name("", "echo"), "echo");
        assert_eq!(
            binding_name("github_", "create-issue"),
            "github_create-issue"
        );
        assert_eq!(binding_name("srv.v2.", "list files"), "srv_v2_list_files");
        assert_eq!(binding_name("", "añadir"), "a_adir");
        let long = binding_name("p_", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(is_valid_name(&long));
    }

    #[test]
    fn collisions_are_other_servers_or_tools_under_a_name() {
        let tool =
            json!({"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}});
        let ours = binding_from_tool(&tool, &settings());
        let mut config = HostConfig {
            serve: None,
            tenant_limits: None,
            policies: None,
            approvals: None,
            audit: None,
            model_apis: None,
            schema: None,
            tools: vec![ours.clone()],
        };
        // The same server's same tool: an update, not a collision.
        assert!(collisions(&config, std::slice::from_ref(&ours)).is_empty());
        let mut elsewhere = ours.clone();
        elsewhere.url = Some("http://127.0.0.1:9/mcp".into());
        let mut renamed = ours.clone();
        renamed.mcp_tool = Some("echo2".into());
        let found = collisions(&config, &[elsewhere, renamed]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].new.contains("127.0.0.1:9"), "{found:?}");
        assert!(found[1].new.contains("\"echo2\""), "{found:?}");
        config.tools[0].name = "other".into();
        assert!(collisions(&config, std::slice::from_ref(&ours)).is_empty());
    }

    #[test]
    fn drift_names_every_other_field_by_its_pin() {
        let tool = json!({"name": "search", "title": "Search", "description": "Search.", "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "x-mcp-header": "Query"}}}, "_meta": {"a": 1, "b": 2}, "icons": []});
        let pinned = binding_from_tool(&tool, &settings());
        // Key order is not a change: the pin is over canonical JSON.
        let reordered = json!({"icons": [], "_meta": {"b": 2, "a": 1}, "inputSchema": {"properties": {"q": {"x-mcp-header": "Query", "type": "string"}}, "type": "object"}, "description": "Search.", "title": "Search", "name": "search"});
        assert!(drift(&pinned, Some(&reordered)).is_empty());
        let live = json!({"name": "search", "title": "Search everything", "description": "Search.", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}, "_meta": {"a": 1, "b": 3}, "outputSchema": null, "execution": {"taskSupport": "optional"}});
        assert_eq!(
            drift(&pinned, Some(&live)),
            [
                "input_schema:",
                "  /properties/q/x-mcp-header: removed (was \"Query\")",
                "execution:",
                "  /: added {\"taskSupport\":\"optional\"}",
                "_meta: changed (now {\"a\":1,\"b\":3})",
                "icons: removed",
                "title: changed (now \"Search everything\")",
            ]
        );
    }

    #[test]
    fn a_tool_gone_with_its_schema_under_a_new_name_is_a_likely_rename() {
        let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let tool = json!({"name": "search", "description": "Search.", "inputSchema": schema});
        let pinned = binding_from_tool(&tool, &settings());
        let renamed = json!({"name": "find", "description": "Find.", "inputSchema": schema});
        let other =
            json!({"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}});
        let live = [other.clone(), renamed.clone()];
        assert_eq!(likely_rename(&pinned, &live, &["echo"]), Some("find"));
        // Already bound, or ambiguous: no guess.
        assert_eq!(likely_rename(&pinned, &live, &["find"]), None);
        let twice = [
            renamed.clone(),
            json!({"name": "lookup", "inputSchema": schema}),
        ];
        assert_eq!(likely_rename(&pinned, &twice, &[]), None);
        // ... unless only one of them kept the description too.
        let kept = [
            renamed,
            json!({"name": "lookup", "description": "Search.", "inputSchema": schema}),
        ];
        assert_eq!(likely_rename(&pinned, &kept, &[]), Some("lookup"));
    }

    #[test]
    fn drift_lists_every_change() {
        let tool = json!({"name": "search", "description": "Search.", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}});
        let pinned = binding_from_tool(&tool, &settings());
        assert!(drift(&pinned, Some(&tool)).is_empty());
        let live = json!({"name": "search", "description": "Search it all.", "inputSchema": {"type": "object", "properties": {"q": {"type": "integer"}, "limit": {"type": "integer"}}}, "annotations": {"readOnlyHint": true}});
        assert_eq!(
            drift(&pinned, Some(&live)),
            [
                "description:",
                "  - pinned: \"Search.\"",
                "  + live:   \"Search it all.\"",
                "input_schema:",
                "  /properties/q/type: \"string\" → \"integer\"",
                "  /properties/limit: added {\"type\":\"integer\"}",
                "annotations:",
                "  /: added {\"readOnlyHint\":true}",
            ]
        );
        assert_eq!(drift(&pinned, None), ["the server no longer has this tool"]);

        // `execution` is pinned, and a change of it is drift.
        let tool = json!({"name": "search", "description": "Search.", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}});
        let pinned = binding_from_tool(&tool, &settings());
        assert!(drift(&pinned, Some(&tool)).is_empty());
        let live = json!({"name": "search", "description": "Search.", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}});
        assert_eq!(
            drift(&pinned, Some(&live)),
            ["execution:", "  /taskSupport: \"optional\" → \"required\"",]
        );
    }

    #[test]
    fn lints() {
        let tool = json!({"name": "get.page", "inputSchema": {"oneOf": [{"type": "object"}], "$defs": {"x": {"$ref": "https://example.com/s.json"}}}, "outputSchema": {"type": "array"}});
        let ids: Vec<&str> = lint(&binding_from_tool(&tool, &settings()))
            .iter()
            .map(|l| l.id)
            .collect();
        assert_eq!(
            ids,
            [
                "name-rejected",
                "empty-description",
                "top-level-combinator",
                "remote-ref",
                "output-root-not-object"
            ]
        );
    }

    #[test]
    fn merge_replaces_by_name_and_keeps_the_rest() {
        let a = binding_from_tool(&json!({"name": "a", "description": "A."}), &settings());
        let b = binding_from_tool(&json!({"name": "b", "description": "B."}), &settings());
        let mut config = HostConfig {
            serve: None,
            tenant_limits: None,
            policies: None,
            approvals: None,
            audit: None,
            model_apis: None,
            schema: None,
            tools: vec![a.clone(), b.clone()],
        };
        let mut new_a = a.clone();
        new_a.description = "New A.".into();
        let c = binding_from_tool(&json!({"name": "c", "description": "C."}), &settings());
        let merged = merge(&mut config, vec![new_a.clone(), c.clone()]);
        assert_eq!(
            merged,
            Merged {
                replaced: 1,
                added: 1
            }
        );
        assert_eq!(config.tools, [new_a, b, c]);
    }

    #[test]
    fn merge_keeps_a_reviewers_on_input_request() {
        let mut a = binding_from_tool(&json!({"name": "a", "description": "A."}), &settings());
        a.on_input_request = Some(OnInputRequest::Decline);
        let mut config = HostConfig {
            serve: None,
            tenant_limits: None,
            policies: None,
            approvals: None,
            audit: None,
            model_apis: None,
            schema: None,
            tools: vec![a],
        };
        let rediscovered =
            binding_from_tool(&json!({"name": "a", "description": "A!"}), &settings());
        merge(&mut config, vec![rediscovered]);
        assert_eq!(config.tools[0].description, "A!");
        assert_eq!(
            config.tools[0].on_input_request,
            Some(OnInputRequest::Decline)
        );
        // A new choice, given with --on-input-request, wins.
        let mut failing =
            binding_from_tool(&json!({"name": "a", "description": "A."}), &settings());
        failing.on_input_request = Some(OnInputRequest::Fail);
        merge(&mut config, vec![failing]);
        assert_eq!(config.tools[0].on_input_request, Some(OnInputRequest::Fail));
    }
}
