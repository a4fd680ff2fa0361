//! brain-config: the host config (`host.json`) of brain — its model, loading with line:column
//! positions, the validation rules every binding must meet (one [`Rule`] each, with a stable id),
//! rustc-style diagnostics, and the config's own JSON Schema.
//!
//! Loading reports every error at once, each with a rule id, the JSON pointer, the binding's
//! name, a message and a help line:
//!
//! ```
//! let text = br#"{"tools": [{
//!     "name": "docs_search", "description": "Search the knowledge base.",
//!     "input_schema": {"type": "object"}, "url": "https://mcp.example.com/mcp",
//!     "mcp_tool": "search", "tenants": ["local"], "inspect_session": true
//! }]}"#;
//! let errors = brain_config::parse(text, "host.json").unwrap_err();
//! assert_eq!(errors.errors[0].rule, brain_config::Rule::InspectSessionOnMcp);
//! assert_eq!(
//!     errors.errors[0].render(&errors.file),
//!     "error[inspect-session-on-mcp]: host.json:4:49 /tools/0/inspect_session \
//!      (tool \"docs_search\"): `inspect_session` is not allowed on an MCP binding\n  help: remove \
//!      `inspect_session`: it applies to HTTP and SSE tools, and brain never sends session \
//!      inspection tokens to MCP servers\n",
//! );
//! ```
//!
//! No tokio, no network: a remote `$ref` in a tool's schema is an error, never a fetch.

pub mod approvals;
pub mod audit;
mod check;
mod diagnostic;
pub mod discovery;
pub mod ident;
mod limits;
mod load;
mod model;
pub mod model_api;
pub mod pin;
pub mod policy;
mod policy_config;
mod sandbox;
mod schema;
mod serve;
mod source;

pub use check::{is_valid_name, sandbox_warnings, validate};
pub use diagnostic::{Diagnostic, Diagnostics, Rule};
pub use limits::{
    LimitScope, Limits, MAX_LIMIT_CALLS, MAX_LIMIT_CONCURRENT, MAX_LIMIT_PER_SECONDS, TenantLimits,
};
pub use load::{ConfigError, load_file, parse};
pub use model::{
    Auth, BindingKind, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_PROTOCOL_VERSION, DEFAULT_TIMEOUT_SECONDS,
    Grant, HostConfig, MAX_CONFIG_BYTES, MAX_MAX_OUTPUT_BYTES, MAX_PREWARM, MAX_TIMEOUT_SECONDS,
    ModelApi, OnDrift, OnInputRequest, PROTOCOL_VERSIONS, STRUCTURED_REVISION, SigningAlgorithm,
    TASK_REVISION, TASKS_EXTENSION_REVISION, ToolBinding, ToolPin, Transport, UnknownModelApi,
};
pub use sandbox::{
    MAX_SANDBOX_MEMORY_MB, MIN_SANDBOX_MEMORY_MB, NoNetwork, Sandbox, SandboxNetwork, SandboxRules,
};
pub use schema::{SchemaError, compile_schema, host_config_schema};
pub use serve::{
    DEFAULT_CONCURRENT_CALLS, DEFAULT_CONCURRENT_CALLS_PER_CLIENT, DEFAULT_CONNECTIONS_PER_SOURCE,
    DEFAULT_FAILED_AUTHENTICATIONS_PER_MINUTE, DEFAULT_HEADER_READ_TIMEOUT_SECONDS,
    DEFAULT_IDLE_TIMEOUT_SECONDS, DEFAULT_JWKS_MAX_AGE_SECONDS, DEFAULT_JWKS_MAX_STALE_SECONDS,
    DEFAULT_MAX_CONCURRENT_STREAMS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_SECONDS, DEFAULT_SESSIONS_PER_CLIENT, Serve,
    ServeAuthorization, ServeClient,
};
pub use source::Location;
