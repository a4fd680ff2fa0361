//! Typed calls: what generated bindings (`brain-codegen`) implement and use.

use std::sync::OnceLock;

use brain_config::{HostConfig, ModelApi, OnInputRequest, ToolBinding, Transport};
use serde_json::Value;

/// A call whose arguments are a typed struct: generated `ToolCall` enums implement it.
pub trait TypedCall {
    /// The binding's name.
    fn tool(&self) -> &'static str;
    /// The arguments as JSON (they are validated against the binding's schema again before
    /// anything is sent).
    fn arguments(&self) -> Value;
}

/// Why a name and JSON arguments are not a valid call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// No binding has this name.
    #[error("there is no tool named {0:?}")]
    UnknownTool(String),
    /// The arguments do not match the binding's `input_schema`.
    #[error("the arguments do not match the input schema of {tool:?}: {}", errors.join("; "))]
    Invalid {
        /// The binding.
        tool: &'static str,
        /// What is wrong, with JSON pointers.
        errors: Vec<String>,
    },
    /// The arguments validate, but do not fit the typed struct (a typify limitation).
    #[error("the arguments of {tool:?} validate but do not fit its typed struct: {message}")]
    Typed {
        /// The binding.
        tool: &'static str,
        /// serde's message.
        message: String,
    },
}

/// An unknown tool name, from `ToolName::from_str`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("there is no tool named {0:?}")]
pub struct UnknownTool(pub String);

impl From<UnknownTool> for ParseError {
    fn from(error: UnknownTool) -> Self {
        ParseError::UnknownTool(error.0)
    }
}

/// One binding compiled into the binary: everything the runtime needs, schemas embedded as
/// JSON text.
#[derive(Debug)]
pub struct StaticBinding {
    /// `name`.
    pub name: &'static str,
    /// `description`.
    pub description: &'static str,
    /// `input_schema`, as JSON.
    pub input_schema: &'static str,
    /// `output_schema`, as JSON.
    pub output_schema: Option<&'static str>,
    /// `url`.
    pub url: Option<&'static str>,
    /// `command`: program, then arguments.
    pub command: Option<&'static [&'static str]>,
    /// `env`, in name order.
    pub env: Option<&'static [(&'static str, &'static str)]>,
    /// `env_from` (child variable, host variable), in name order.
    pub env_from: Option<&'static [(&'static str, &'static str)]>,
    /// `cwd`.
    pub cwd: Option<&'static str>,
    /// `ca_file`.
    pub ca_file: Option<&'static str>,
    /// `prewarm`.
    pub prewarm: Option<u64>,
    /// `sandbox`, as JSON.
    pub sandbox: Option<&'static str>,
    /// `mcp_tool`.
    pub mcp_tool: Option<&'static str>,
    /// `token_env`.
    pub token_env: Option<&'static str>,
    /// `tenants`.
    pub tenants: &'static [&'static str],
    /// `timeout_seconds`.
    pub timeout_seconds: u64,
    /// `max_output_bytes`.
    pub max_output_bytes: u64,
    /// `inspect_session`.
    pub inspect_session: Option<bool>,
    /// `transport`: `"http"` or `"sse"`.
    pub transport: Option<&'static str>,
    /// `protocol_version`.
    pub protocol_version: Option<&'static str>,
    /// `annotations`, as JSON.
    pub annotations: Option<&'static str>,
    /// `execution`, as JSON.
    pub execution: Option<&'static str>,
    /// `task`.
    pub task: Option<bool>,
    /// `server_tasks`.
    pub server_tasks: Option<bool>,
    /// `pin`, as JSON.
    pub pin: Option<&'static str>,
    /// `on_input_request`: `"fail"` or `"decline"`.
    pub on_input_request: Option<&'static str>,
    /// `on_drift`: `"warn"` or `"refuse"`.
    pub on_drift: Option<&'static str>,
    /// `auth`, as JSON.
    pub auth: Option<&'static str>,
    /// `strict`.
    pub strict: Option<bool>,
    /// `limits`, as JSON.
    pub limits: Option<&'static str>,
    /// The compiled `input_schema`, built on first use.
    #[doc(hidden)]
    pub input_validator: OnceLock<jsonschema::Validator>,
}

fn pairs(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl StaticBinding {
    /// The binding as the config model has it.
    pub fn to_binding(&self) -> ToolBinding {
        let json = |text: &str| serde_json::from_str(text).expect("codegen embeds valid JSON");
        let object = |text: &str| match json(text) {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        ToolBinding {
            name: self.name.to_owned(),
            description: self.description.to_owned(),
            input_schema: json(self.input_schema),
            output_schema: self.output_schema.map(json),
            url: self.url.map(str::to_owned),
            command: self
                .command
                .map(|words| words.iter().map(|w| (*w).to_owned()).collect()),
            env: self.env.map(pairs),
            env_from: self.env_from.map(pairs),
            cwd: self.cwd.map(str::to_owned),
            ca_file: self.ca_file.map(str::to_owned),
            prewarm: self.prewarm,
            sandbox: self
                .sandbox
                .map(|text| serde_json::from_str(text).expect("codegen embeds a valid sandbox")),
            mcp_tool: self.mcp_tool.map(str::to_owned),
            token_env: self.token_env.map(str::to_owned),
            tenants: self.tenants.iter().map(|t| (*t).to_owned()).collect(),
            timeout_seconds: self.timeout_seconds,
            max_output_bytes: self.max_output_bytes,
            inspect_session: self.inspect_session,
            transport: self.transport.map(|t| match t {
                "sse" => Transport::Sse,
                _ => Transport::Http,
            }),
            protocol_version: self.protocol_version.map(str::to_owned),
            annotations: self.annotations.map(object),
            execution: self.execution.map(object),
            task: self.task,
            server_tasks: self.server_tasks,
            pin: self
                .pin
                .map(|text| serde_json::from_str(text).expect("codegen embeds a valid pin")),
            on_input_request: self.on_input_request.map(|choice| match choice {
                "decline" => OnInputRequest::Decline,
                _ => OnInputRequest::Fail,
            }),
            on_drift: self.on_drift.map(|choice| match choice {
                "refuse" => brain_config::OnDrift::Refuse,
                _ => brain_config::OnDrift::Warn,
            }),
            auth: self
                .auth
                .map(|text| serde_json::from_str(text).expect("codegen embeds valid auth JSON")),
            strict: self.strict,
            limits: self
                .limits
                .map(|text| serde_json::from_str(text).expect("codegen embeds valid limits JSON")),
        }
    }

    /// The host config of a table of bindings, the config's `model_apis`, and its `serve`,
    /// `tenant_limits`, `policies` (with the policies' text), `approvals` and `audit` (with its
    /// public keys' text) as JSON.
    pub fn host_config(
        bindings: &[StaticBinding],
        model_apis: Option<&[ModelApi]>,
        serve: Option<&str>,
        tenant_limits: Option<&str>,
        policies: Option<&str>,
        approvals: Option<&str>,
        audit: Option<&str>,
    ) -> HostConfig {
        HostConfig {
            tenant_limits: tenant_limits.map(|text| {
                serde_json::from_str(text).expect("codegen embeds valid tenant_limits JSON")
            }),
            model_apis: model_apis.map(<[ModelApi]>::to_vec),
            serve: serve
                .map(|text| serde_json::from_str(text).expect("codegen embeds valid serve JSON")),
            policies: policies.map(|text| {
                serde_json::from_str(text).expect("codegen embeds valid policies JSON")
            }),
            approvals: approvals.map(|text| {
                serde_json::from_str(text).expect("codegen embeds valid approvals JSON")
            }),
            audit: audit
                .map(|text| serde_json::from_str(text).expect("codegen embeds valid audit JSON")),
            schema: None,
            tools: bindings.iter().map(StaticBinding::to_binding).collect(),
        }
    }

    /// Maps arguments a model produced from `api`'s definitions back to `input_schema` (see
    /// [`brain_config::model_api::unproject`]); MCP's arguments are the schema's own.
    pub fn unproject(&self, api: ModelApi, arguments: &mut Value) {
        if api != ModelApi::Mcp {
            let schema: Value = serde_json::from_str(self.input_schema).expect("valid JSON");
            brain_config::model_api::unproject(&schema, arguments);
        }
    }

    /// Validates arguments against `input_schema` (compiled once).
    pub fn validate(&self, arguments: &Value) -> Result<(), ParseError> {
        let validator = self.input_validator.get_or_init(|| {
            let schema = serde_json::from_str(self.input_schema).expect("valid JSON");
            brain_config::compile_schema(&schema).expect("codegen embeds valid schemas")
        });
        let errors: Vec<String> = validator
            .iter_errors(arguments)
            .take(5)
            .map(|error| format!("at `{}`: {error}", error.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ParseError::Invalid {
                tool: self.name,
                errors,
            })
        }
    }
}

/// What generated code may name: `use brain_runtime::__codegen::*` and nothing else.
#[doc(hidden)]
pub mod __codegen {
    pub use super::{ParseError, StaticBinding, TypedCall, UnknownTool};
    pub use brain_config::HostConfig;

    /// The document of `api` for `tenant` (or every tool) from a generated table.
    pub fn definitions(
        table: &[(brain_config::ModelApi, Option<&str>, &str)],
        api: brain_config::ModelApi,
        tenant: Option<&str>,
    ) -> serde_json::Value {
        table
            .iter()
            .find(|(a, t, _)| *a == api && *t == tenant)
            .map(|(_, _, text)| serde_json::from_str(text).expect("codegen embeds valid JSON"))
            .unwrap_or_else(|| serde_json::json!({"tools": []}))
    }
    pub use serde;
    pub use serde_json;

    /// `serde_json::from_value`, with the error generated code reports.
    pub fn from_value<T: serde::de::DeserializeOwned>(
        tool: &'static str,
        arguments: serde_json::Value,
    ) -> Result<T, ParseError> {
        serde_json::from_value(arguments).map_err(|error| ParseError::Typed {
            tool,
            message: error.to_string(),
        })
    }

    /// `serde_json::to_value` of a generated struct (cannot fail for them).
    pub fn to_value<T: serde::Serialize>(arguments: &T) -> serde_json::Value {
        serde_json::to_value(arguments).unwrap_or_default()
    }
}
