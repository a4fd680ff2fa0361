//! The host config model: what `host.json` holds once it has been validated — its tool bindings,
//! each an MCP tool (over Streamable HTTP at a `url`, or a stdio `command`), an HTTP tool or an SSE
//! tool.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The largest config brain reads (16 MiB): a host config with hundreds of bindings and their
/// schemas is well under 1 MiB; anything this large is a mistake.
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// Largest allowed [`ToolBinding::prewarm`].
pub const MAX_PREWARM: u64 = 8;
/// Default for [`ToolBinding::timeout_seconds`].
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 300;
/// Largest allowed [`ToolBinding::timeout_seconds`] (one hour).
pub const MAX_TIMEOUT_SECONDS: u64 = 3600;
/// Default for [`ToolBinding::max_output_bytes`] (1 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1_048_576;
/// Largest allowed [`ToolBinding::max_output_bytes`] (64 MiB).
pub const MAX_MAX_OUTPUT_BYTES: u64 = 67_108_864;
/// The MCP protocol revisions a binding may pin in `protocol_version`, oldest first.
pub const PROTOCOL_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];
/// The session revision brain offers first when a binding pins none (the server may answer with
/// any older revision brain speaks).
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";
/// The first revision that defines the `MCP-Protocol-Version` header, `structuredContent` and
/// `outputSchema`.
pub const STRUCTURED_REVISION: &str = "2025-06-18";
/// The MCP session revision whose tasks brain runs (`tools/call` with `task`, then
/// `tasks/get`, `tasks/result`, `tasks/cancel`).
pub const TASK_REVISION: &str = "2025-11-25";
/// The revision of the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): the client
/// declares it, the server decides call by call whether to answer with a task (`tasks/get`,
/// `tasks/update`, `tasks/cancel`).
pub const TASKS_EXTENSION_REVISION: &str = "2026-07-28";

/// A host config: the tools that agent sessions may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "brain host config")]
pub struct HostConfig {
    /// Path or URL of this file's JSON Schema, for editors (ignored by brain).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The model APIs whose tool formats this host shows its model (`mcp`, `openai`,
    /// `openai-chat`, `anthropic`, `gemini`): a binding one of them would reject, and brain cannot
    /// repair without loss, fails the check. Unset: every format is still produced, a tool an API
    /// cannot take is left out of that API's definitions with a note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_apis: Option<Vec<ModelApi>>,
    /// How `brain-harness serve` serves these bindings to MCP hosts: its clients and bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<crate::serve::Serve>,
    /// Limits per tenant, across all of the tenant's bindings: `{"TENANT": {"calls": N,
    /// "per_seconds": S, "concurrent": C}}`. Each key is a tenant some binding allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_limits: Option<BTreeMap<String, crate::limits::TenantLimits>>,
    /// Cedar policies on calls and their arguments, checked against the bindings' schemas at
    /// every load and decided at the gate: `{"files": ["policies/*.cedar"], "tests":
    /// ["policies/tests/*.json"]}`, relative to this file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<crate::policy_config::PolicyConfig>,
    /// Who may approve a call an `@approval` policy holds for a person, and for how long an
    /// approval lasts: `{"approvers": [{"name": "ops", "tenants": ["acme"], "token_sha256":
    /// "<hex>"}], "expires_seconds": 3600}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<crate::approvals::ApprovalsConfig>,
    /// The audit chain of what ran: kept or not, its retention, how often a checkpoint is
    /// signed, and the public keys verification trusts: `{"retention_days": 400,
    /// "checkpoint_records": 1000, "checkpoint_seconds": 60, "public_keys":
    /// ["keys/audit.pub"]}`, relative to this file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<crate::audit::AuditConfig>,
    /// The tool bindings: one per tool the model can see.
    pub tools: Vec<ToolBinding>,
}

/// A model API's tool format: what its request's `tools` field takes. One value set names the
/// APIs everywhere: the config's `model_apis`, `brain-harness tools --format` and `call --from`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[non_exhaustive]
pub enum ModelApi {
    /// MCP's own `tools/list` Tool objects (what an MCP host shows its model).
    #[serde(rename = "mcp")]
    Mcp,
    /// OpenAI's Responses API: `{"type": "function", "name", "description", "parameters",
    /// "strict"}`.
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI's Chat Completions API: `{"type": "function", "function": {...}}`, with the
    /// Responses API's rules.
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// Anthropic's Messages API: `{"name", "description", "input_schema"}`, `"strict": true`
    /// where it applies.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Google's Gemini API: one Tool of `functionDeclarations` with `parametersJsonSchema`.
    #[serde(rename = "gemini")]
    Gemini,
}

impl ModelApi {
    /// Every API, in the order the docs list them.
    pub const ALL: &'static [ModelApi] = &[
        ModelApi::Mcp,
        ModelApi::OpenAi,
        ModelApi::OpenAiChat,
        ModelApi::Anthropic,
        ModelApi::Gemini,
    ];

    /// The API's name as written in the config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelApi::Mcp => "mcp",
            ModelApi::OpenAi => "openai",
            ModelApi::OpenAiChat => "openai-chat",
            ModelApi::Anthropic => "anthropic",
            ModelApi::Gemini => "gemini",
        }
    }

    /// Whether the API has a strict mode (the model's arguments constrained to the schema):
    /// OpenAI's two APIs and Anthropic's.
    pub fn has_strict_mode(self) -> bool {
        matches!(
            self,
            ModelApi::OpenAi | ModelApi::OpenAiChat | ModelApi::Anthropic
        )
    }
}

impl std::fmt::Display for ModelApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of [`ModelApi::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown model API {name:?}: one of mcp, openai, openai-chat, anthropic, gemini")]
pub struct UnknownModelApi {
    /// The name given.
    pub name: String,
}

impl std::str::FromStr for ModelApi {
    type Err = UnknownModelApi;

    fn from_str(name: &str) -> Result<ModelApi, UnknownModelApi> {
        ModelApi::ALL
            .iter()
            .copied()
            .find(|api| api.as_str() == name)
            .ok_or_else(|| UnknownModelApi { name: name.into() })
    }
}

/// One tool the model can see, and where and how brain calls it.
///
/// The binding is an MCP binding when `mcp_tool` is set (on a remote server at `url`, or on a
/// stdio server started from `command`); otherwise an HTTP tool, or an SSE tool when `transport`
/// is `"sse"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolBinding {
    /// The name the model sees: 1 to 64 of `a-z A-Z 0-9 _ -`, unique in the config (also once
    /// turned into a Rust identifier).
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]{1,64}$"))]
    pub name: String,
    /// What the tool does, for the model. Must not be empty.
    #[schemars(length(min = 1))]
    pub description: String,
    /// JSON Schema of the tool's arguments; its root is `"type": "object"`.
    #[schemars(extend("type" = "object"))]
    pub input_schema: Value,
    /// JSON Schema of the tool's structured output; successful results are validated against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "object"))]
    pub output_schema: Option<Value>,
    /// The endpoint: an absolute `http` or `https` URL, without user info or fragment. A binding
    /// has exactly one of `url` and `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(url)]
    pub url: Option<String>,
    /// `https` urls only: a PEM file of CA certificates trusted for this binding's server beside
    /// the platform's roots (a server whose certificate a private CA issued). A relative path is
    /// resolved against brain's working directory; the file is read when the runtime starts.
    /// `SSL_CERT_FILE`/`SSL_CERT_DIR`, by contrast, replace the platform's roots for every
    /// binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub ca_file: Option<String>,
    /// stdio MCP bindings: the server's command, program then arguments, never run through a
    /// shell. brain starts a fresh process for every call. A binding has exactly one of `url` and
    /// `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub command: Option<Vec<String>>,
    /// stdio bindings only: literal, non-secret environment variables of the server process.
    /// The process gets `PATH`, `HOME`, `LANG`, these and `env_from`, nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// stdio bindings only: secrets for the server process, as `{"CHILD_VAR": "HOST_VAR"}`: each
    /// host variable is read when the runtime starts, and its value is never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<BTreeMap<String, String>>,
    /// stdio bindings only: the server process's working directory (default: brain's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// stdio bindings only: how many spare server processes (0 to 8, default 0) brain keeps
    /// started and initialized; each serves exactly one call, then is discarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 8))]
    pub prewarm: Option<u64>,
    /// stdio bindings only: how the kernel confines the server process. Absent (or `true`): the
    /// default sandbox — read-only system directories, the command's own installation and the
    /// scripts its arguments name, a private temporary directory, no network; an object widens
    /// it (`read`, `write`, `network`, `memory_mb`); `false` turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// The tool's name on the MCP server; its presence makes this an MCP binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub mcp_tool: Option<String>,
    /// Name of the environment variable whose value is sent as a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub token_env: Option<String>,
    /// The tenants allowed to call the tool (at least one).
    #[schemars(length(min = 1))]
    pub tenants: Vec<String>,
    /// Bound on the whole call, in seconds (1 to 3600).
    #[serde(default = "default_timeout_seconds")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: u64,
    /// Bound on the converted result, in bytes (1 to 67108864).
    #[serde(default = "default_max_output_bytes")]
    #[schemars(range(min = 1, max = 67_108_864))]
    pub max_output_bytes: u64,
    /// HTTP and SSE tools only: send the session inspection token. Rejected on MCP bindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inspect_session: Option<bool>,
    /// HTTP and SSE tools only: `"http"` (the default: one POST, a JSON or text answer) or
    /// `"sse"` (one POST answered with `progress` and `result` events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// MCP bindings only: the protocol revision negotiated at discovery, pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = PROTOCOL_VERSIONS))]
    pub protocol_version: Option<String>,
    /// The tool's MCP annotations as discovered, pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Map<String, Value>>,
    /// The tool's MCP `execution` as discovered, pinned: its `taskSupport` (`"forbidden"`,
    /// `"optional"` or `"required"`). A tool that requires a task is bound with `task: true`
    /// (rule `task-required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Map<String, Value>>,
    /// MCP bindings only: call the tool as an MCP task. At 2025-11-25: `tools/call` with
    /// `task`, then `tasks/get` until it ends and `tasks/result`; discovery sets it for a tool
    /// whose `taskSupport` is `"required"`, and setting it on one whose `taskSupport` is
    /// `"optional"` runs that tool as a task too. At 2026-07-28 (the tasks extension, where the
    /// server decides): the binding's requests declare the extension, so that the server may
    /// answer with a task, followed with `tasks/get`; discovery leaves it unset. Needs
    /// `server_tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<bool>,
    /// MCP bindings only, pinned by discovery: the server declared that it runs tool calls as
    /// tasks (its `tasks.requests.tools.call` capability at 2025-11-25, the tasks extension
    /// `io.modelcontextprotocol/tasks` at 2026-07-28). At 2025-11-25 a task binding whose server
    /// no longer declares it is refused before `tools/call` is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tasks: Option<bool>,
    /// The whole tool object as the server sent it, pinned by discovery: what
    /// `cargo xtask discover --check` compares beside the readable fields above, so that a
    /// change of any field (`title`, `_meta`, `icons`, ...) is drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<ToolPin>,
    /// MCP bindings only: what brain does when the server asks for user input during a call.
    /// `"fail"` (the default, the spec's rule): the call fails with `unknown_outcome: true`.
    /// `"decline"`: an elicitation is declined and the call goes on (sampling and roots still
    /// fail it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_input_request: Option<OnInputRequest>,
    /// MCP bindings only: what a change the server makes to the tool after review does, when
    /// only its texts changed (`description`, `title`, `icons`, `_meta`). `"warn"` (the
    /// default): the call goes on, with the pinned texts, and the change is reported.
    /// `"refuse"`: the call is refused (`pin_drift`), as any other change always is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_drift: Option<OnDrift>,
    /// MCP bindings at a `url` only: how brain obtains OAuth access tokens for the server (the
    /// MCP authorization spec). Secrets are named by environment variable. Not with `token_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Auth>,
    /// `true`: the tool must be strict (the model's arguments constrained to its schema) for
    /// every model API with a strict mode (OpenAI's and Anthropic's, or those `model_apis`
    /// names); the check fails, saying why, when its schema cannot be made strict faithfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// How often and how many at once the tool may be called (per tenant by default): refused
    /// before anything is sent, or waited for with `wait_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::limits::Limits>,
}

/// How brain obtains access tokens for an MCP server that requires OAuth authorization.
///
/// brain finds the authorization server from the server's `401` (protected resource metadata,
/// RFC 9728, then the authorization server's metadata, RFC 8414), asks it for a token for the
/// server (the `resource` parameter, RFC 8707), caches it and refreshes it before it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// The grant: `client_credentials`, `authorization_code`, `jwt_bearer`, `enterprise_managed`
    /// or `token_exchange`.
    #[serde(rename = "type")]
    pub grant: Grant,
    /// The client's id at the authorization server. Optional for `authorization_code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub client_id: Option<String>,
    /// Environment variable holding the client secret (`client_secret_basic` or `_post`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub client_secret_env: Option<String>,
    /// Environment variable holding a PEM private key: the client signs assertions (`private_key_jwt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub private_key_env: Option<String>,
    /// With `private_key_env`: the signing algorithm, `ES256` (the default and only one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_algorithm: Option<SigningAlgorithm>,
    /// Scopes to request, besides those the server asks for in its challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// `jwt_bearer`: environment variable holding the workload's JWT (RFC 7523 assertion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub assertion_env: Option<String>,
    /// `enterprise_managed`: environment variable holding the user's ID token from the IdP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub id_token_env: Option<String>,
    /// `enterprise_managed`: the IdP's token endpoint, where the ID token is exchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(url)]
    pub idp_token_endpoint: Option<String>,
    /// `enterprise_managed`: the client's id at the IdP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub idp_client_id: Option<String>,
    /// `token_exchange`: the authorization server's token endpoint, where the caller's own token
    /// is exchanged (RFC 8693) for one issued to brain for this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(url)]
    pub token_endpoint: Option<String>,
    /// `token_exchange`: the `audience` to ask for (the logical name of the upstream service), when
    /// the authorization server wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub audience: Option<String>,
    /// `token_exchange`: the `resource` to ask for (the upstream's resource URI, RFC 8707); by
    /// default the resource the server's protected-resource metadata names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(url)]
    pub resource: Option<String>,
    /// `authorization_code`: an `https` client ID metadata document URL, used as the client id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(url)]
    pub client_metadata_url: Option<String>,
    /// Bind tokens to a key brain holds (DPoP, RFC 9449); default `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop: Option<bool>,
}

/// How brain obtains a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// Machine to machine: the client's own credentials (secret or signed assertion).
    ClientCredentials,
    /// User-delegated: tokens from `brain-harness login` (authorization code with PKCE).
    AuthorizationCode,
    /// Workload identity federation: a JWT from the workload's identity provider (RFC 7523).
    JwtBearer,
    /// Enterprise-managed: the user's ID token exchanged at the IdP for an ID-JAG, then a JWT bearer grant.
    EnterpriseManaged,
    /// On behalf of the caller: the user's own token exchanged (RFC 8693) for one issued to brain
    /// for this server, per user; the user's token is never sent upstream.
    TokenExchange,
}

impl Grant {
    /// The grant as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::ClientCredentials => "client_credentials",
            Grant::AuthorizationCode => "authorization_code",
            Grant::JwtBearer => "jwt_bearer",
            Grant::EnterpriseManaged => "enterprise_managed",
            Grant::TokenExchange => "token_exchange",
        }
    }
}

/// The algorithm of a signed client assertion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SigningAlgorithm {
    /// ECDSA with P-256 and SHA-256.
    #[default]
    ES256,
}

impl Auth {
    /// Every environment variable the auth config names, with its field.
    pub fn env_vars(&self) -> Vec<(&'static str, &str)> {
        [
            ("client_secret_env", &self.client_secret_env),
            ("private_key_env", &self.private_key_env),
            ("assertion_env", &self.assertion_env),
            ("id_token_env", &self.id_token_env),
        ]
        .into_iter()
        .filter_map(|(field, var)| Some((field, var.as_deref()?)))
        .collect()
    }

    /// Whether each call needs its caller's own token (a subject token) to obtain one.
    pub fn on_behalf_of_users(&self) -> bool {
        self.grant == Grant::TokenExchange
    }

    /// Whether tokens are bound to a key (DPoP).
    pub fn uses_dpop(&self) -> bool {
        self.dpop.unwrap_or(false)
    }
}

/// What brain does when an MCP server asks for user input (elicitation, sampling, roots) during
/// a call. No user is ever asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnInputRequest {
    /// The call fails, `unknown_outcome: true` (the spec: handle approval inside the tool).
    #[default]
    Fail,
    /// An elicitation is answered `{"action": "decline"}` and the call continues; the server
    /// decides what a declined request means. Sampling and roots still fail the call.
    Decline,
}

impl OnInputRequest {
    /// `fail` or `decline`, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            OnInputRequest::Fail => "fail",
            OnInputRequest::Decline => "decline",
        }
    }
}

/// What a change to a pinned tool's texts alone does at run time (a change to anything else is
/// always refused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDrift {
    /// The call goes on; the change is reported (event `tool.drift`, a metric, the store).
    #[default]
    Warn,
    /// The call is refused (`pin_drift`), nothing sent.
    Refuse,
}

impl OnDrift {
    /// `warn` or `refuse`, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            OnDrift::Warn => "warn",
            OnDrift::Refuse => "refuse",
        }
    }
}

/// How a non-MCP tool is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A plain HTTP request and response.
    Http,
    /// An HTTP request answered with a server-sent event stream.
    Sse,
}

/// Digests of a tool object as a server listed it (SHA-256 of canonical JSON: keys sorted, no
/// whitespace, numbers by value — see [`ToolPin::of`], in `pin/digest.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolPin {
    /// The whole object's, `sha256:` and 64 hex digits.
    pub digest: String,
    /// Each top-level field's, by the field's name as the server spells it.
    pub fields: BTreeMap<String, String>,
}

/// `sha256:` and the hex SHA-256 of `text`.
pub(crate) fn sha256(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex(Sha256::digest(text.as_bytes()).as_slice())
}

/// `sha256:` and the hex of `hash`.
pub(crate) fn hex(hash: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in hash {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// The kind of a binding, from its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingKind {
    /// `mcp_tool` is set: a tool on a remote MCP server.
    Mcp,
    /// An HTTP tool.
    Http,
    /// An HTTP tool that answers with server-sent events.
    Sse,
}

impl HostConfig {
    /// A digest of the config (everything but `$schema`), in canonical JSON: generated code
    /// records it, and `bindings/build.rs` compares it to prove the code fresh.
    pub fn digest(&self) -> String {
        let config = HostConfig {
            schema: None,
            ..self.clone()
        };
        sha256(&serde_json::to_string(&config).expect("a config serializes"))
    }
}

impl ToolBinding {
    /// The binding's kind: MCP when `mcp_tool` is present, else SSE or HTTP by `transport`.
    pub fn kind(&self) -> BindingKind {
        match (&self.mcp_tool, self.transport) {
            (Some(_), _) => BindingKind::Mcp,
            (None, Some(Transport::Sse)) => BindingKind::Sse,
            (None, _) => BindingKind::Http,
        }
    }

    /// The MCP revision the binding pins, if any. A binding that pins none accepts any revision
    /// brain speaks (see [`PROTOCOL_VERSIONS`]).
    pub fn pinned_revision(&self) -> Option<&str> {
        self.protocol_version.as_deref()
    }

    /// Whether brain starts the server as a process (`command`) rather than calling a URL.
    pub fn is_stdio(&self) -> bool {
        self.command.is_some()
    }

    /// What brain does when the server asks for user input (default: fail the call).
    pub fn on_input_request(&self) -> OnInputRequest {
        self.on_input_request.unwrap_or_default()
    }

    /// What a change to the tool's texts alone does at run time (default: warn).
    pub fn on_drift(&self) -> OnDrift {
        self.on_drift.unwrap_or_default()
    }

    /// The pinned `execution.taskSupport`, if any.
    pub fn task_support(&self) -> Option<&str> {
        self.execution
            .as_ref()
            .and_then(|execution| execution.get("taskSupport"))
            .and_then(Value::as_str)
    }

    /// Whether calls of this binding run as MCP tasks (`task: true`).
    pub fn runs_as_task(&self) -> bool {
        self.task == Some(true)
    }
}

impl BindingKind {
    /// A lowercase word for messages: `mcp`, `http` or `sse`.
    pub fn as_str(self) -> &'static str {
        match self {
            BindingKind::Mcp => "mcp",
            BindingKind::Http => "http",
            BindingKind::Sse => "sse",
        }
    }
}

fn default_timeout_seconds() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}

fn default_max_output_bytes() -> u64 {
    DEFAULT_MAX_OUTPUT_BYTES
}
