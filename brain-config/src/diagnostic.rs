//! Diagnostics: what is wrong, where, and how to fix it.

use std::fmt;

use crate::source::Location;

macro_rules! rules {
    ($($(#[$doc:meta])* $variant:ident = $id:literal,)*) => {
        /// Every rule a host config can break. Each has a stable id, shown as `error[id]` (or
        /// `warning[id]`, [`Rule::is_warning`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Rule {
            $($(#[$doc])* $variant,)*
        }

        impl Rule {
            /// Every rule, in declaration order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The rule's stable id, e.g. `inspect-session-on-mcp`.
            pub fn id(self) -> &'static str {
                match self {
                    $(Rule::$variant => $id,)*
                }
            }
        }
    };
}

rules! {
    /// The file is larger than [`crate::model::MAX_CONFIG_BYTES`].
    TooLarge = "too-large",
    /// The file is not UTF-8.
    InvalidUtf8 = "invalid-utf8",
    /// The file is not JSON.
    Syntax = "syntax",
    /// The JSON nests deeper than serde_json's limit (128).
    TooDeep = "too-deep",
    /// An object has the same key twice (JSON parsers silently keep only one).
    DuplicateKey = "duplicate-key",
    /// A field has the wrong JSON type.
    InvalidType = "invalid-type",
    /// A required field is missing.
    MissingField = "missing-field",
    /// A field the config format does not have.
    UnknownField = "unknown-field",
    /// `inspect_session` is set on an MCP binding.
    InspectSessionOnMcp = "inspect-session-on-mcp",
    /// Two bindings have the same name.
    DuplicateName = "duplicate-name",
    /// Two names become the same Rust identifier.
    IdentCollision = "ident-collision",
    /// A name does not match `^[a-zA-Z0-9_-]{1,64}$`.
    NamePattern = "name-pattern",
    /// A description is empty.
    EmptyDescription = "empty-description",
    /// A url is not an absolute http(s) URL.
    UrlInvalid = "url-invalid",
    /// A url carries a user name or password.
    UrlCredentials = "url-credentials",
    /// A url has a fragment.
    UrlFragment = "url-fragment",
    /// A bearer token would be sent over plain http to a host that is not loopback.
    TokenOverPlainHttp = "token-over-plain-http",
    /// `ca_file` on a binding without an `https` url.
    CaFileNotHttps = "ca-file-not-https",
    /// `mcp_tool` is empty.
    EmptyMcpTool = "empty-mcp-tool",
    /// `token_env` is not a valid environment variable name.
    TokenEnvName = "token-env-name",
    /// `tenants` is empty.
    EmptyTenants = "empty-tenants",
    /// A tenant is empty or only whitespace.
    BlankTenant = "blank-tenant",
    /// A tenant is listed twice.
    DuplicateTenant = "duplicate-tenant",
    /// `timeout_seconds` is outside 1..=3600.
    TimeoutRange = "timeout-range",
    /// `max_output_bytes` is outside 1..=67108864.
    MaxOutputRange = "max-output-range",
    /// `limits` (or a tenant's in `tenant_limits`) sets no limit: no rate and no `concurrent`.
    LimitsEmpty = "limits-empty",
    /// A limit is zero or larger than its maximum.
    LimitsRange = "limits-range",
    /// `calls` without `per_seconds`, or `per_seconds` without `calls`.
    LimitsRateIncomplete = "limits-rate-incomplete",
    /// `wait_seconds` is not less than the binding's `timeout_seconds`.
    LimitsWaitTimeout = "limits-wait-timeout",
    /// A `tenant_limits` key is a tenant that no binding allows.
    TenantLimitsUnknown = "tenant-limits-unknown",
    /// An approver's name, tenants or `token_sha256` is unusable, or two approvers share a name
    /// or a token.
    ApproverInvalid = "approver-invalid",
    /// An approver's tenant is allowed by no binding.
    ApproverTenantUnknown = "approver-tenant-unknown",
    /// `approvals.expires_seconds` is outside 1..=86400.
    ApprovalsExpiryRange = "approvals-expiry-range",
    /// An `@approval` policy, and no approver for a tenant it could hold a call of.
    ApprovalWithoutApprover = "approval-without-approver",
    /// `audit.retention_days`, `checkpoint_records` or `checkpoint_seconds` is out of range.
    AuditRange = "audit-range",
    /// An `audit.public_keys` file is outside the config's directory, cannot be read, is not an
    /// Ed25519 public key, or is a private key.
    AuditPublicKey = "audit-public-key",
    /// A schema is not a valid JSON Schema, or names a remote `$ref`.
    SchemaInvalid = "schema-invalid",
    /// A schema's root is not `"type": "object"`.
    SchemaRootNotObject = "schema-root-not-object",
    /// An `x-mcp-header` annotation (SEP-2243) is not one brain can send.
    InvalidXMcpHeader = "invalid-x-mcp-header",
    /// `transport` is set on an MCP binding.
    TransportOnMcp = "transport-on-mcp",
    /// `transport` is neither `http` nor `sse`.
    TransportUnknown = "transport-unknown",
    /// `protocol_version` is set on a binding that is not MCP.
    ProtocolVersionOnHttp = "protocol-version-on-http",
    /// `protocol_version` is not an MCP revision brain knows.
    ProtocolVersionUnknown = "protocol-version-unknown",
    /// `output_schema` on a binding pinned to a revision without structured content.
    OutputSchemaBeforeStructured = "output-schema-before-structured",
    /// `on_input_request` is set on a binding that is not MCP.
    OnInputRequestOnHttp = "on-input-request-on-http",
    /// `on_input_request` is neither `fail` nor `decline`.
    OnInputRequestUnknown = "on-input-request-unknown",
    /// `on_drift` is set on a binding that is not MCP.
    OnDriftOnHttp = "on-drift-on-http",
    /// `on_drift` is neither `warn` nor `refuse`.
    OnDriftUnknown = "on-drift-unknown",
    /// The pinned `execution.taskSupport` is `required`: the tool runs only as an MCP task.
    TaskRequired = "task-required",
    /// `task` or `server_tasks` where no task can run: not MCP, stdio, a revision without
    /// tasks, a tool that forbids them, a server that did not declare them.
    TaskInvalid = "task-invalid",
    /// A binding has neither `url` nor `command`.
    MissingEndpoint = "missing-endpoint",
    /// A binding has both `url` and `command`.
    UrlAndCommand = "url-and-command",
    /// `command` is empty, or its program is blank.
    CommandEmpty = "command-empty",
    /// `command` is set on a binding without `mcp_tool` (stdio bindings are MCP bindings).
    CommandWithoutMcpTool = "command-without-mcp-tool",
    /// `token_env` is set on a stdio binding (there is no HTTP header to send it in).
    TokenEnvOnStdio = "token-env-on-stdio",
    /// `env`, `env_from`, `cwd` or `prewarm` is set on a binding that is not stdio.
    StdioFieldOnUrl = "stdio-field-on-url",
    /// An `env` or `env_from` name is not an environment variable name, a value cannot be passed
    /// to a process, or a variable is set twice.
    EnvInvalid = "env-invalid",
    /// `prewarm` is outside 0..=8.
    PrewarmRange = "prewarm-range",
    /// A `sandbox` value is unusable: a relative or empty path, `memory_mb` out of range, no
    /// port or port 0 in `connect`.
    SandboxInvalid = "sandbox-invalid",
    /// A warning: `"sandbox": false` runs a stdio server unconfined, with everything the user
    /// who runs brain may do.
    SandboxOff = "sandbox-off",
    /// `auth` is set on a binding that is not an MCP binding at a `url`.
    AuthNotRemoteMcp = "auth-not-remote-mcp",
    /// A binding has both `auth` and `token_env`.
    AuthAndTokenEnv = "auth-and-token-env",
    /// `auth` lacks a field its grant needs.
    AuthFieldMissing = "auth-field-missing",
    /// `auth` has a field its grant does not use.
    AuthFieldUnused = "auth-field-unused",
    /// An `auth` value is unusable: a variable name, a URL, a scope or an id.
    AuthInvalid = "auth-invalid",
    /// `model_apis` names an API brain does not know, or is not a list of names.
    ModelApiUnknown = "model-api-unknown",
    /// A model API that `model_apis` names would reject the binding, and brain cannot repair it
    /// without loss (a Gemini function name that starts with a digit, ...).
    ModelApiRejects = "model-api-rejects",
    /// The binding says `"strict": true`, and its schema cannot be made strict faithfully for a
    /// model API with a strict mode.
    StrictNotFaithful = "strict-not-faithful",
    /// A `serve` client's tenant is allowed by no binding.
    ServeTenantUnknown = "serve-tenant-unknown",
    /// Two `serve` clients read their token from one variable.
    ServeTokenEnvDuplicate = "serve-token-env-duplicate",
    /// A `serve` client's variable is also a binding's upstream secret (`token_env`, or an
    /// `auth` variable): one name would mean an inbound secret here and an upstream one there.
    ServeTokenEnvUpstream = "serve-token-env-upstream",
    /// A `serve` bound is below its least value (1 for most; 5 for `jwks_max_age_seconds`, 0
    /// for `jwks_max_stale_seconds`) or above its maximum.
    ServeBoundRange = "serve-bound-range",
    /// `serve.authorization` is unusable: an issuer or resource that is not an `https` URL
    /// (`http` on loopback), or a blank `tenant_claim`.
    ServeAuthorizationInvalid = "serve-authorization-invalid",
    /// `policies.files` or `policies.tests` names a file that cannot be read, or a glob that
    /// matches no file.
    PolicyFiles = "policy-files",
    /// A policy file is not Cedar.
    PolicySyntax = "policy-syntax",
    /// A policy does not validate strictly against the schema brain derives from the bindings
    /// (Cedar's warnings count as errors: an always-false policy is one).
    PolicyInvalid = "policy-invalid",
    /// A policy Cedar accepts that would not do what it says: a `forbid` guarded by `has` on an
    /// argument, `context.call.approval` outside an `@approval` policy, an `@approval` permit
    /// that does not test `context.call.approval.granted == true`, a policy that names an
    /// argument with no faithful Cedar type.
    PolicyTrap = "policy-trap",
    /// A policy without a unique `@id`, or with an annotation brain does not know.
    PolicyAnnotation = "policy-annotation",
    /// A policy test is malformed, or its decision is not the one it expects.
    PolicyTest = "policy-test",
    /// A warning: a `forbid` names one binding's action, and another binding calls the same
    /// upstream tool (the same server and tool there): the forbid does not stop that tool
    /// called through the other binding.
    PolicyLookAlike = "policy-look-alike",
}

impl Rule {
    /// Whether the rule warns rather than refuses the config (`warning[id]`): the config loads,
    /// and `cargo xtask check` shows it.
    pub fn is_warning(self) -> bool {
        matches!(self, Rule::PolicyLookAlike | Rule::SandboxOff)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One error in a host config (or a warning, when its rule is one: [`Rule::is_warning`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule that was broken.
    pub rule: Rule,
    /// JSON pointer to the offending value (`""` for the whole document).
    pub pointer: String,
    /// The name of the binding it is in, when that binding has a usable name.
    pub tool: Option<String>,
    /// What is wrong: lowercase, no trailing period.
    pub message: String,
    /// How to fix it.
    pub help: String,
    /// Line and column in the file, when the text is known.
    pub location: Option<Location>,
    /// The file it is in, when that is not the host config itself (a policy file).
    pub file: Option<String>,
}

impl Diagnostic {
    pub(crate) fn new(
        rule: Rule,
        pointer: impl Into<String>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        Diagnostic {
            rule,
            pointer: pointer.into(),
            tool: None,
            message: message.into(),
            help: help.into(),
            location: None,
            file: None,
        }
    }

    /// Renders the diagnostic rustc-style, for a config read from `file`:
    ///
    /// ```text
    /// error[inspect-session-on-mcp]: host.json:14:7 /tools/3/inspect_session (tool "docs_search"): ...
    ///   help: ...
    /// ```
    pub fn render(&self, file: &str) -> String {
        let file = self.file.as_deref().unwrap_or(file);
        let level = if self.rule.is_warning() {
            "warning"
        } else {
            "error"
        };
        let mut out = format!("{level}[{}]: {file}", self.rule);
        if let Some(location) = self.location {
            out += &format!(":{location}");
        }
        if !self.pointer.is_empty() {
            out += &format!(" {}", self.pointer);
        }
        if let Some(tool) = &self.tool {
            out += &format!(" (tool {tool:?})");
        }
        out += &format!(": {}\n  help: {}\n", self.message, self.help);
        out
    }
}

/// All the errors found in one config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics {
    /// The file as the user named it.
    pub file: String,
    /// The errors, in the order of the file (those without a position first).
    pub errors: Vec<Diagnostic>,
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for diagnostic in &self.errors {
            f.write_str(&diagnostic.render(&self.file))?;
        }
        let n = self.errors.len();
        write!(
            f,
            "error: {} has {n} error{}",
            self.file,
            if n == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for Diagnostics {}
