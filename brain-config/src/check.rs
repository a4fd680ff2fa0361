//! The validation rules of DESIGN.md §2: one function per rule, its doc comment the rule.
//!
//! Rules see bindings that have already been read field by field; a field that was missing or had
//! the wrong type is marked unusable and has been reported, so the rules about it stay silent
//! instead of piling a second error on the first.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use serde_json::Value;
use url::{Host, Url};

use crate::diagnostic::{Diagnostic, Rule};
use crate::ident::{module_ident, type_ident};
use crate::model::{
    BindingKind, HostConfig, MAX_MAX_OUTPUT_BYTES, MAX_PREWARM, MAX_TIMEOUT_SECONDS,
    PROTOCOL_VERSIONS, STRUCTURED_REVISION, ToolBinding,
};
use crate::schema::compile_schema;

/// A binding as the rules see it: where it is, and which of its fields are not usable.
#[derive(Debug)]
pub(crate) struct Draft {
    /// Its index in `tools`.
    pub(crate) index: usize,
    pub(crate) binding: ToolBinding,
    /// Fields that were missing or mistyped (already reported).
    pub(crate) unusable: BTreeSet<String>,
}

impl Draft {
    fn usable(&self, field: &str) -> bool {
        !self.unusable.contains(field)
    }

    fn pointer(&self, field: &str) -> String {
        if field.is_empty() {
            return format!("/tools/{}", self.index);
        }
        format!("/tools/{}/{field}", self.index)
    }

    fn error(
        &self,
        rule: Rule,
        field: &str,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::new(rule, self.pointer(field), message, help)
    }
}

/// Checks a config built in code (for example by discovery) against every rule. Positions are not
/// known, so the diagnostics carry pointers only.
pub fn validate(config: &HostConfig) -> Vec<Diagnostic> {
    let drafts: Vec<Draft> = config
        .tools
        .iter()
        .enumerate()
        .map(|(index, binding)| Draft {
            index,
            binding: binding.clone(),
            unusable: BTreeSet::new(),
        })
        .collect();
    check(&drafts)
}

/// Runs every rule over the bindings.
pub(crate) fn check(drafts: &[Draft]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for draft in drafts {
        name_pattern(draft, &mut out);
        empty_description(draft, &mut out);
        schemas(draft, &mut out);
        x_mcp_headers(draft, &mut out);
        endpoint(draft, &mut out);
        url(draft, &mut out);
        token_over_plain_http(draft, &mut out);
        command(draft, &mut out);
        stdio_fields(draft, &mut out);
        env(draft, &mut out);
        prewarm_range(draft, &mut out);
        empty_mcp_tool(draft, &mut out);
        token_env_name(draft, &mut out);
        tenants(draft, &mut out);
        timeout_range(draft, &mut out);
        max_output_range(draft, &mut out);
        inspect_session_on_mcp(draft, &mut out);
        transport_on_mcp(draft, &mut out);
        protocol_version(draft, &mut out);
        output_schema_before_structured(draft, &mut out);
        task_required(draft, &mut out);
        on_input_request_on_http(draft, &mut out);
        auth(draft, &mut out);
    }
    duplicate_names(drafts, &mut out);
    ident_collisions(drafts, &mut out);
    out
}

/// `name` matches `^[a-zA-Z0-9_-]{1,64}$`: the names model APIs accept.
fn name_pattern(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let name = &draft.binding.name;
    if !draft.usable("name") || is_valid_name(name) {
        return;
    }
    let bad: BTreeSet<char> = name
        .chars()
        .filter(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        .collect();
    let message = if name.is_empty() {
        "the name is empty".to_owned()
    } else if name.chars().count() > 64 {
        format!("the name is {} characters long", name.chars().count())
    } else {
        let bad: String = bad.into_iter().map(|c| format!("{c:?} ")).collect();
        format!(
            "the name {name:?} has characters model APIs reject: {}",
            bad.trim_end()
        )
    };
    out.push(draft.error(
        Rule::NamePattern,
        "name",
        message,
        "use 1 to 64 of a-z, A-Z, 0-9, `_` and `-`; the name the model sees may differ from \
         `mcp_tool`, the name on the server",
    ));
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `description` is not empty or blank: the model chooses tools by it.
fn empty_description(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.usable("description") && draft.binding.description.trim().is_empty() {
        out.push(draft.error(
            Rule::EmptyDescription,
            "description",
            "the description is empty",
            "say what the tool does and when to use it; the model picks tools by their description",
        ));
    }
}

/// `input_schema` and `output_schema` are valid JSON Schemas (checked against their meta-schema,
/// local `$ref`s only) whose root is an object schema (`"type": "object"`).
fn schemas(draft: &Draft, out: &mut Vec<Diagnostic>) {
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
fn x_mcp_headers(draft: &Draft, out: &mut Vec<Diagnostic>) {
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

/// `url` is an absolute `http` or `https` URL, with no user name or password (use `token_env`)
/// and no fragment (it is never sent).
fn url(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(raw) = &draft.binding.url else {
        return;
    };
    if !draft.usable("url") {
        return;
    }
    let url = match Url::parse(raw) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => url,
        Ok(url) => {
            out.push(draft.error(
                Rule::UrlInvalid,
                "url",
                format!("the url {raw:?} has scheme `{}`", url.scheme()),
                "use an `http://` or `https://` URL of the server's endpoint",
            ));
            return;
        }
        Err(error) => {
            out.push(draft.error(
                Rule::UrlInvalid,
                "url",
                format!("the url {raw:?} is not an absolute URL: {error}"),
                "write the full endpoint, e.g. `https://mcp.example.com/mcp`",
            ));
            return;
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        out.push(draft.error(
            Rule::UrlCredentials,
            "url",
            "the url carries a user name or password",
            "remove them from the url; put the API key in an environment variable and name it in \
             `token_env`",
        ));
    }
    if let Some(fragment) = url.fragment() {
        out.push(draft.error(
            Rule::UrlFragment,
            "url",
            format!("the url has a fragment `#{fragment}`, which is never sent to the server"),
            "remove the `#...` part",
        ));
    }
}

/// A binding has exactly one of `url` (a remote server or HTTP tool) and `command` (a stdio
/// server).
fn endpoint(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    match (&binding.url, &binding.command) {
        (None, None) if draft.usable("url") && draft.usable("command") => {
            out.push(draft.error(
                Rule::MissingEndpoint,
                "",
                "the binding has neither `url` nor `command`",
                "add `url` (the endpoint of a remote MCP server or HTTP tool, e.g. \
                 `https://mcp.example.com/mcp`) or `command` (an installed stdio MCP server, e.g. \
                 `[\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]`)",
            ));
        }
        (Some(_), Some(_)) => out.push(draft.error(
            Rule::UrlAndCommand,
            "command",
            "the binding has both `url` and `command`",
            "keep `url` for a remote server, or `command` for a server brain starts as a process",
        )),
        _ => {}
    }
}

/// `command` names a program (a non-empty array whose first element is not blank), on an MCP
/// binding (`mcp_tool` set), without `token_env`: a stdio server gets secrets from `env_from`.
fn command(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(command) = &draft.binding.command else {
        return;
    };
    if !draft.usable("command") {
        return;
    }
    if command
        .first()
        .is_none_or(|program| program.trim().is_empty())
    {
        out.push(draft.error(
            Rule::CommandEmpty,
            "command",
            "`command` names no program",
            "write the program, then its arguments, each as one string, e.g. `[\"node\", \
             \"/opt/mcp/server-memory/dist/index.js\"]` (no shell runs it)",
        ));
    }
    if draft.binding.mcp_tool.is_none() && draft.usable("mcp_tool") {
        out.push(draft.error(
            Rule::CommandWithoutMcpTool,
            "command",
            "`command` is set on a binding without `mcp_tool`",
            "add `mcp_tool` (the tool's name on the stdio server; `cargo xtask discover --command \
             ...` prints it): a command is always an MCP server",
        ));
    }
    if draft.binding.token_env.is_some() {
        out.push(draft.error(
            Rule::TokenEnvOnStdio,
            "token_env",
            "`token_env` is set on a stdio binding, which has no HTTP header to send it in",
            "pass the secret to the process with `env_from`, e.g. `\"env_from\": \
             {\"API_KEY\": \"MY_HOST_VAR\"}`, and remove `token_env`",
        ));
    }
}

/// `env`, `env_from`, `cwd` and `prewarm` apply to stdio bindings (`command`) only.
fn stdio_fields(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    if binding.command.is_some() || !draft.usable("command") {
        return;
    }
    let set = [
        ("env", binding.env.is_some()),
        ("env_from", binding.env_from.is_some()),
        ("cwd", binding.cwd.is_some()),
        ("prewarm", binding.prewarm.is_some()),
    ];
    for (field, _) in set.iter().filter(|(_, set)| *set) {
        out.push(draft.error(
            Rule::StdioFieldOnUrl,
            field,
            format!("`{field}` is set on a binding without `command`"),
            "remove it: it applies to stdio servers that brain starts as processes",
        ));
    }
}

/// Every `env` and `env_from` name (and every `env_from` host variable) is an environment
/// variable name; no value holds a NUL byte (a process cannot receive it); no variable is set by
/// both.
fn env(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    if let Some(env) = binding.env.as_ref().filter(|_| draft.usable("env")) {
        for (name, value) in env {
            let field = format!("env/{}", crate::source::escape_token(name));
            if !is_env_name(name) {
                out.push(draft.error(
                    Rule::EnvInvalid,
                    &field,
                    format!("{name:?} is not an environment variable name"),
                    "use letters, digits and `_`, not starting with a digit, e.g. `MEMORY_FILE_PATH`",
                ));
            } else if value.contains('\0') {
                out.push(draft.error(
                    Rule::EnvInvalid,
                    &field,
                    format!("the value of {name} holds a NUL byte, which no process can receive"),
                    "remove the NUL byte",
                ));
            }
        }
    }
    let Some(env_from) = binding
        .env_from
        .as_ref()
        .filter(|_| draft.usable("env_from"))
    else {
        return;
    };
    for (name, host) in env_from {
        let field = format!("env_from/{}", crate::source::escape_token(name));
        if !is_env_name(name) {
            out.push(draft.error(
                Rule::EnvInvalid,
                &field,
                format!("{name:?} is not an environment variable name"),
                "name the server's variable: letters, digits and `_`, not starting with a digit",
            ));
        } else if !is_env_name(host) {
            out.push(draft.error(
                Rule::EnvInvalid,
                &field,
                format!(
                    "{host:?} (the host variable for {name}) is not an environment variable name"
                ),
                "name the host variable that holds the secret, e.g. `GH_TOKEN`; never put the \
                 secret itself here",
            ));
        } else if binding
            .env
            .as_ref()
            .is_some_and(|env| env.contains_key(name))
        {
            out.push(draft.error(
                Rule::EnvInvalid,
                &field,
                format!("{name} is set by both `env` and `env_from`"),
                "keep one of them",
            ));
        }
    }
}

/// Whether `name` is an environment variable name: `^[A-Za-z_][A-Za-z0-9_]*$`.
fn is_env_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `prewarm` is between 0 and 8.
fn prewarm_range(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if let Some(value) = draft.binding.prewarm
        && value > MAX_PREWARM
    {
        out.push(draft.error(
            Rule::PrewarmRange,
            "prewarm",
            format!("`prewarm` is {value}, outside 0..={MAX_PREWARM}"),
            "use 0 (the default: a process starts for each call) to 8 spare processes",
        ));
    }
}

/// A bearer token (`token_env`, or OAuth tokens with `auth`) is sent over `http` only to a
/// loopback host (`localhost`, 127.0.0.0/8, `::1`); anywhere else it needs `https`.
fn token_over_plain_http(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let field = if draft.binding.token_env.is_some() {
        "token_env"
    } else if draft.binding.auth.is_some() {
        "auth"
    } else {
        return;
    };
    if !draft.usable("url") || !draft.usable(field) {
        return;
    }
    let Some(Ok(url)) = draft.binding.url.as_deref().map(Url::parse) else {
        return;
    };
    let loopback = match url.host() {
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    };
    if url.scheme() == "http" && !loopback {
        out.push(draft.error(
            Rule::TokenOverPlainHttp,
            "url",
            format!(
                "the token{} would be sent in clear text to {}",
                if field == "auth" {
                    "s brain obtains with `auth`"
                } else {
                    " in `token_env`"
                },
                url.host_str().unwrap_or_default()
            ),
            format!("use `https://`, or drop `{field}` if the server needs no token"),
        ));
    }
}

/// `mcp_tool`, when present, names a tool: it is not empty or blank.
fn empty_mcp_tool(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if let Some(tool) = &draft.binding.mcp_tool
        && draft.usable("mcp_tool")
        && tool.trim().is_empty()
    {
        out.push(draft.error(
            Rule::EmptyMcpTool,
            "mcp_tool",
            "`mcp_tool` is empty",
            "set it to the tool's name on the MCP server (`cargo xtask discover` prints it), or \
             remove it for an HTTP tool",
        ));
    }
}

/// `token_env` is a valid environment variable name: `^[A-Za-z_][A-Za-z0-9_]*$`.
fn token_env_name(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(var) = &draft.binding.token_env else {
        return;
    };
    if draft.usable("token_env") && !is_env_name(var) {
        out.push(draft.error(
            Rule::TokenEnvName,
            "token_env",
            format!("`token_env` {var:?} is not an environment variable name"),
            "name the variable that holds the token (letters, digits and `_`, not starting with a \
             digit), e.g. `MCP_API_KEY`; never put the token itself here",
        ));
    }
}

/// `tenants` lists at least one tenant; no tenant is empty or blank, and none is listed twice.
fn tenants(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if !draft.usable("tenants") {
        return;
    }
    let tenants = &draft.binding.tenants;
    if tenants.is_empty() {
        out.push(draft.error(
            Rule::EmptyTenants,
            "tenants",
            "`tenants` is empty, so no session could call the tool",
            "list the tenants allowed to call it, e.g. `[\"local\"]`",
        ));
    }
    let mut seen = HashSet::new();
    for (i, tenant) in tenants.iter().enumerate() {
        let field = format!("tenants/{i}");
        if tenant.trim().is_empty() {
            out.push(draft.error(
                Rule::BlankTenant,
                &field,
                format!("tenant {tenant:?} is blank"),
                "remove it or write the tenant's id",
            ));
        } else if !seen.insert(tenant) {
            out.push(draft.error(
                Rule::DuplicateTenant,
                &field,
                format!("tenant {tenant:?} is listed twice"),
                "remove the repeat",
            ));
        }
    }
}

/// `timeout_seconds` is between 1 and 3600.
fn timeout_range(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let value = draft.binding.timeout_seconds;
    if !(1..=MAX_TIMEOUT_SECONDS).contains(&value) {
        out.push(draft.error(
            Rule::TimeoutRange,
            "timeout_seconds",
            format!("`timeout_seconds` is {value}, outside 1..={MAX_TIMEOUT_SECONDS}"),
            "use a whole number of seconds from 1 to 3600 (default 300)",
        ));
    }
}

/// `max_output_bytes` is between 1 and 67108864 (64 MiB).
fn max_output_range(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let value = draft.binding.max_output_bytes;
    if !(1..=MAX_MAX_OUTPUT_BYTES).contains(&value) {
        out.push(draft.error(
            Rule::MaxOutputRange,
            "max_output_bytes",
            format!("`max_output_bytes` is {value}, outside 1..={MAX_MAX_OUTPUT_BYTES}"),
            "use a number of bytes from 1 to 67108864 (default 1048576)",
        ));
    }
}

/// `inspect_session` applies to HTTP and SSE tools only: an MCP binding must not set it (brain
/// never sends session inspection tokens to MCP servers).
fn inspect_session_on_mcp(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.kind() == BindingKind::Mcp && draft.binding.inspect_session.is_some() {
        out.push(draft.error(
            Rule::InspectSessionOnMcp,
            "inspect_session",
            "`inspect_session` is not allowed on an MCP binding",
            "remove `inspect_session`: it applies to HTTP and SSE tools, and brain never sends \
             session inspection tokens to MCP servers",
        ));
    }
}

/// `transport` chooses between HTTP and SSE tools: an MCP binding must not set it (it speaks
/// Streamable HTTP with `url`, or stdio with `command`).
fn transport_on_mcp(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.kind() == BindingKind::Mcp && draft.binding.transport.is_some() {
        out.push(draft.error(
            Rule::TransportOnMcp,
            "transport",
            "`transport` is not allowed on an MCP binding",
            "remove `transport`: MCP bindings use Streamable HTTP (`url`) or stdio (`command`)",
        ));
    }
}

/// `protocol_version` is set only on MCP bindings, and names a revision brain speaks.
fn protocol_version(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(version) = &draft.binding.protocol_version else {
        return;
    };
    if draft.binding.kind() != BindingKind::Mcp {
        out.push(draft.error(
            Rule::ProtocolVersionOnHttp,
            "protocol_version",
            format!(
                "`protocol_version` is set on an {} tool, which is not MCP",
                draft.binding.kind().as_str().to_uppercase()
            ),
            "remove it, or add `mcp_tool` if this is an MCP binding",
        ));
    } else if !PROTOCOL_VERSIONS.contains(&version.as_str()) {
        out.push(draft.error(
            Rule::ProtocolVersionUnknown,
            "protocol_version",
            format!("`protocol_version` {version:?} is not an MCP revision brain speaks"),
            format!(
                "use one of {}, or remove it to accept whichever of them the server speaks; \
                 `cargo xtask discover` records the revision the server negotiated",
                PROTOCOL_VERSIONS.join(", ")
            ),
        ));
    }
}

/// A binding pinned to a revision older than 2025-06-18 has no `output_schema`: those
/// revisions have no structured content, so no result could ever be checked against it.
fn output_schema_before_structured(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(version) = draft.binding.pinned_revision() else {
        return;
    };
    let known = PROTOCOL_VERSIONS.contains(&version);
    if draft.binding.output_schema.is_some() && known && version < STRUCTURED_REVISION {
        out.push(draft.error(
            Rule::OutputSchemaBeforeStructured,
            "output_schema",
            format!(
                "`output_schema` is set, but the binding pins {version}, which has no structured \
                 content (from {STRUCTURED_REVISION} on)"
            ),
            "remove `output_schema`, or re-run `cargo xtask discover` if the server now speaks a \
             newer revision",
        ));
    }
}

/// A tool whose pinned `execution.taskSupport` is `required` runs only as an MCP task, and brain
/// calls tools without tasks: every call would fail, so the binding is refused.
fn task_required(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let required = draft
        .binding
        .execution
        .as_ref()
        .and_then(|execution| execution.get("taskSupport"))
        .and_then(Value::as_str)
        == Some("required");
    if required {
        out.push(draft.error(
            Rule::TaskRequired,
            "execution/taskSupport",
            "the tool requires MCP task augmentation (`taskSupport: \"required\"`), and brain \
             does not run MCP tasks: every call would fail",
            "remove this binding; brain can bind the server's tools whose `taskSupport` is \
             \"optional\" or \"forbidden\" (or absent)",
        ));
    }
}

/// `on_input_request` is set only on MCP bindings: only MCP servers ask for user input.
fn on_input_request_on_http(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.binding.on_input_request.is_some() && draft.binding.kind() != BindingKind::Mcp {
        out.push(draft.error(
            Rule::OnInputRequestOnHttp,
            "on_input_request",
            format!(
                "`on_input_request` is set on an {} tool, which is not MCP",
                draft.binding.kind().as_str().to_uppercase()
            ),
            "remove it, or add `mcp_tool` if this is an MCP binding",
        ));
    }
}

/// Binding names are unique: the model calls a tool by its name.
fn duplicate_names(drafts: &[Draft], out: &mut Vec<Diagnostic>) {
    let mut first: HashMap<&str, usize> = HashMap::new();
    for draft in drafts.iter().filter(|d| d.usable("name")) {
        let name = draft.binding.name.as_str();
        if let Some(&index) = first.get(name) {
            out.push(draft.error(
                Rule::DuplicateName,
                "name",
                format!("the name {name:?} is already used by /tools/{index}"),
                "give each binding its own name, e.g. prefix it with the server: `docs_search`",
            ));
        } else {
            first.insert(name, draft.index);
        }
    }
}

/// Distinct names stay distinct as Rust identifiers (module `snake_case` and type
/// `UpperCamelCase`, see [`crate::ident`]): `foo-bar` and `foo_bar` would generate the same items.
fn ident_collisions(drafts: &[Draft], out: &mut Vec<Diagnostic>) {
    let mut by_ident: HashMap<String, (usize, &str)> = HashMap::new();
    for draft in drafts
        .iter()
        .filter(|d| d.usable("name") && is_valid_name(&d.binding.name))
    {
        let name = draft.binding.name.as_str();
        let idents = [module_ident(name), type_ident(name)];
        let clash = idents.iter().find_map(|ident| {
            by_ident
                .get(ident)
                .filter(|(_, other)| *other != name)
                .map(|&(index, other)| (ident.clone(), index, other))
        });
        if let Some((ident, index, other)) = clash {
            out.push(draft.error(
                Rule::IdentCollision,
                "name",
                format!(
                    "the name {name:?} and {other:?} (/tools/{index}) both become the Rust \
                     identifier `{ident}`"
                ),
                "rename one of them so they differ by more than case, `-` and `_`",
            ));
            continue;
        }
        for ident in idents {
            by_ident.entry(ident).or_insert((draft.index, name));
        }
    }
}

/// `auth` (OAuth) is on an MCP binding at a `url`, without `token_env`, with exactly the fields its
/// grant uses, each usable: variable names, `https`/`http` URLs, scopes without spaces.
fn auth(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    let Some(auth) = binding.auth.as_ref().filter(|_| draft.usable("auth")) else {
        return;
    };
    if binding.kind() != BindingKind::Mcp || binding.is_stdio() {
        let what = if binding.is_stdio() {
            "a stdio server, which gets its secrets from `env_from`".to_owned()
        } else {
            format!(
                "an {} tool, which takes `token_env`",
                binding.kind().as_str()
            )
        };
        out.push(draft.error(
            Rule::AuthNotRemoteMcp,
            "auth",
            format!("`auth` is set on {what}"),
            "remove `auth`: OAuth applies to MCP servers at a `url`",
        ));
    }
    if binding.token_env.is_some() {
        out.push(draft.error(
            Rule::AuthAndTokenEnv,
            "auth",
            "the binding has both `auth` and `token_env`",
            "keep `token_env` for a static API key, or `auth` for tokens from an authorization \
             server, not both",
        ));
    }
    use crate::model::Grant;
    let fields: [(&str, bool); 11] = [
        ("client_id", auth.client_id.is_some()),
        ("client_secret_env", auth.client_secret_env.is_some()),
        ("private_key_env", auth.private_key_env.is_some()),
        ("signing_algorithm", auth.signing_algorithm.is_some()),
        ("scopes", auth.scopes.is_some()),
        ("assertion_env", auth.assertion_env.is_some()),
        ("id_token_env", auth.id_token_env.is_some()),
        ("idp_token_endpoint", auth.idp_token_endpoint.is_some()),
        ("idp_client_id", auth.idp_client_id.is_some()),
        ("client_metadata_url", auth.client_metadata_url.is_some()),
        ("dpop", auth.dpop.is_some()),
    ];
    let (required, allowed): (&[&str], &[&str]) = match auth.grant {
        Grant::ClientCredentials => (
            &["client_id"],
            &[
                "client_secret_env",
                "private_key_env",
                "signing_algorithm",
                "scopes",
                "dpop",
            ],
        ),
        Grant::AuthorizationCode => (
            &[],
            &[
                "client_id",
                "client_secret_env",
                "client_metadata_url",
                "scopes",
                "dpop",
            ],
        ),
        Grant::JwtBearer => (
            &["assertion_env"],
            &["client_id", "client_secret_env", "scopes", "dpop"],
        ),
        Grant::EnterpriseManaged => (
            &[
                "client_id",
                "client_secret_env",
                "id_token_env",
                "idp_token_endpoint",
            ],
            &["idp_client_id", "scopes", "dpop"],
        ),
    };
    let grant = auth.grant.as_str();
    for (field, set) in fields {
        if !set && required.contains(&field) {
            out.push(draft.error(
                Rule::AuthFieldMissing,
                "auth",
                format!("`auth` of type {grant} has no `{field}`"),
                format!("add `auth.{field}`: {}", auth_field_help(field)),
            ));
        } else if set && !required.contains(&field) && !allowed.contains(&field) {
            out.push(draft.error(
                Rule::AuthFieldUnused,
                &format!("auth/{field}"),
                format!("`auth.{field}` is not used by the {grant} grant"),
                "remove it, or change `auth.type` to the grant it belongs to",
            ));
        }
    }
    let mut invalid = |field: &str, message: String, help: &str| {
        out.push(draft.error(Rule::AuthInvalid, &format!("auth/{field}"), message, help));
    };
    if auth.grant == Grant::ClientCredentials
        && auth.client_secret_env.is_some() == auth.private_key_env.is_some()
    {
        invalid(
            "private_key_env",
            "`auth` of type client_credentials needs exactly one of `client_secret_env` and \
             `private_key_env`"
                .into(),
            "name the variable that holds the client secret, or the one that holds the PEM \
             private key the client signs its assertions with",
        );
    }
    if auth.signing_algorithm.is_some() && auth.private_key_env.is_none() {
        invalid(
            "signing_algorithm",
            "`auth.signing_algorithm` is set without `private_key_env`".into(),
            "remove it, or add `private_key_env`",
        );
    }
    if auth.client_secret_env.is_some() && auth.client_id.is_none() {
        invalid(
            "client_secret_env",
            "`auth.client_secret_env` is set without `client_id`".into(),
            "add the client id the secret belongs to",
        );
    }
    for (field, var) in auth.env_vars() {
        if !is_env_name(var) {
            invalid(
                field,
                format!("`auth.{field}` {var:?} is not an environment variable name"),
                "name the variable that holds the secret (letters, digits and `_`, not starting \
                 with a digit); never put the secret itself here",
            );
        }
    }
    for (field, value) in [
        ("client_id", &auth.client_id),
        ("idp_client_id", &auth.idp_client_id),
    ] {
        if value.as_deref().is_some_and(|id| id.trim().is_empty()) {
            invalid(
                field,
                format!("`auth.{field}` is empty"),
                "write the client's id, or remove the field",
            );
        }
    }
    for (field, value, https_only) in [
        ("idp_token_endpoint", &auth.idp_token_endpoint, false),
        ("client_metadata_url", &auth.client_metadata_url, true),
    ] {
        let Some(raw) = value else { continue };
        let ok = match Url::parse(raw) {
            Ok(url) if https_only => url.scheme() == "https" && url.path() != "/",
            Ok(url) => matches!(url.scheme(), "http" | "https") && url.fragment().is_none(),
            Err(_) => false,
        };
        if !ok {
            invalid(
                field,
                format!("`auth.{field}` {raw:?} is not a usable URL"),
                if https_only {
                    "use the `https://` URL (with a path) where the client's metadata document is \
                     served"
                } else {
                    "use the IdP's token endpoint, an absolute `https://` URL"
                },
            );
        }
    }
    for (i, scope) in auth.scopes.iter().flatten().enumerate() {
        if scope.is_empty()
            || scope
                .chars()
                .any(|c| c.is_whitespace() || c == '"' || c == '\\')
        {
            invalid(
                &format!("scopes/{i}"),
                format!("scope {scope:?} is not an OAuth scope"),
                "write one scope per string, without spaces, e.g. `[\"mcp:read\", \"mcp:write\"]`",
            );
        }
    }
}

/// What an `auth` field holds, for a missing field's help.
fn auth_field_help(field: &str) -> &'static str {
    match field {
        "client_id" => "the client's id at the authorization server",
        "client_secret_env" => "the environment variable that holds the client secret",
        "assertion_env" => "the environment variable that holds the workload's JWT",
        "id_token_env" => "the environment variable that holds the user's ID token from the IdP",
        "idp_token_endpoint" => "the IdP's token endpoint, where the ID token is exchanged",
        _ => "see the config's JSON Schema",
    }
}
