//! brain-runtime: calls MCP tools, and the host's HTTP and SSE tools, through the gate the spec
//! describes.
//!
//! Every call: the tool exists and the tenant may call it, the arguments validate against the
//! binding's `input_schema` (a refusal does no I/O), then a fresh MCP session over one shared,
//! pooled HTTP client — or, for a stdio binding (`command`), a fresh server process;
//! `_meta["brain.dev/scope"]` and `progressToken` = the call id; progress streamed in wire order; the result converted and bounded; every failure classified with an
//! honest `unknown_outcome`. A call is never retried: `tools/call` goes out once, and again only
//! when a 2026-07-28 server answers `input_required`, saying the tool has not completed and
//! asking to be called again (bounded rounds), or when the server refused it for its OAuth token
//! before processing it (once per kind of refusal). A server that asks for user input fails the call
//! (`unknown_outcome: true`), unless the binding opted into declining elicitations
//! (`on_input_request: "decline"`).
//!
//! A binding that pins `protocol_version` requires exactly that revision; one that pins none
//! accepts any revision brain speaks (2024-11-05 to 2025-11-25 over a session, 2026-07-28
//! without).
//!
//! ```no_run
//! # async fn example(config: &brain_config::HostConfig) -> Result<(), Box<dyn std::error::Error>> {
//! use brain_runtime::{CallRequest, Runtime, Scope};
//! use futures_util::StreamExt;
//!
//! let runtime = Runtime::new(config)?;
//! let scope = Scope { tenant_id: "local".into(), session_id: "s1".into() };
//! let mut call = runtime.call(CallRequest::new("docs_search", scope, serde_json::json!({"query": "rust"})));
//! while let Some(event) = call.next().await {
//!     println!("{}", serde_json::to_string(&event)?);
//! }
//! # Ok(()) }
//! ```
//!
//! An HTTP or SSE tool (a binding without `mcp_tool`) is one POST of the arguments, with the
//! scope, an `Idempotency-Key` and, with `inspect_session`, a session inspection token
//! ([`verify_session_token`]) as headers; its answer is converted and classified by the same
//! rules (docs/src/guides/http-tools.md).
//!
//! A binding with `auth` gets OAuth access tokens from its server's authorization server (the MCP
//! authorization spec): see [`auth`] for the grants, the store every process shares them through
//! ([`auth::TokenStore`], [`RuntimeBuilder::token_store`], by default the journal's) and
//! [`auth::login`].
//!
//! A binding pinned to MCP 2026-07-28 is called without a session: one POST, the revision and
//! client capabilities in `_meta`, the SEP-2243 routing headers.
//!
//! Every call is a `tracing` span named by the OpenTelemetry semantic conventions for MCP
//! (`tools/call {binding}`, a child of [`CallRequest::parent`] or of the current span, with child
//! spans for `initialize`, `tools/call` and `session close`, and progress as events), and is
//! counted and timed through the `opentelemetry` metrics API (`mcp.client.operation.duration`,
//! `brain.client.calls`). With tracing-opentelemetry's layer installed, the span's W3C trace
//! context also goes to the server in `_meta` (`traceparent`, `tracestate`). brain installs no
//! subscriber and no exporter: the host does (as `brain-harness` does from the standard
//! `OTEL_EXPORTER_OTLP_*` variables), before building the runtime. Arguments, results and tokens
//! are never recorded.
//!
//! Call [`Runtime::wait_for_cleanup`] before the process exits: cancellations, session closes and
//! the shutdown of stdio server processes run off the caller's path.

mod approvals;
mod approver;
pub mod audit;
pub mod auth;
mod call;
mod convert;
pub mod discover;
pub mod escape;
mod event;
mod gate;
mod http;
pub mod journal;
mod keys;
pub mod limits;
mod mcp;
mod outcome;
mod pins;
mod request;
mod revision;
mod routing;
mod runtime;
mod session_token;
mod state;
mod store;
mod subject;
mod telemetry;
mod tool;
mod transport;
mod typed;
mod wire;

pub use approver::{APPROVER_KEY_FILE_VAR, ApprovalError, Approver, ApproverKey, ApproverKeys};
pub use brain_config::ModelApi;
pub use brain_config::policy::{Principal, Via};
pub use event::{ContentBlock, Event, OutcomeKind, Progress, Reason, ToolResult};
pub use gate::{InvalidId, MAX_ID_BYTES, check_id};
pub use http::raise_open_file_limit;
pub use outcome::Refusal;
pub use pins::{DEFAULT_LISTING_TTL, MAX_LISTING_TTL};
pub use request::CallRequest;
pub use runtime::{__bench, Call, Runtime, RuntimeBuilder, RuntimeError};
pub use session_token::{
    MIN_SESSION_TOKEN_KEY_BYTES, SESSION_TOKEN_HEADER, SESSION_TOKEN_KEY_ENV, SessionClaims,
    SessionTokenError, verify_session_token,
};
pub use subject::SubjectToken;
pub use tool::Scope;
pub use typed::{__codegen, ParseError, StaticBinding, TypedCall, UnknownTool};

/// Includes the typed bindings that `brain_codegen::compile_config` wrote to `OUT_DIR` from the
/// crate's `build.rs`: `ToolCall`, `ToolName`, `BINDINGS`, `host_config()` and one module per
/// binding with its `<Tool>Args`, as items wherever it is invoked.
///
/// A crate may include several sets: `brain_codegen::Builder::new().name("ops")` writes one that
/// `include_bindings!("ops")` includes (each in a module of its own, as their items share names).
///
/// ```ignore
/// // Not compiled here: it needs a build script that ran compile_config (see examples/typed-host).
/// mod tools {
///     brain_runtime::include_bindings!();
/// }
/// let call = tools::ToolCall::Echo(tools::echo::EchoArgs { message: "hello".into() });
/// ```
#[macro_export]
macro_rules! include_bindings {
    () => {
        ::std::include!(::std::concat!(::std::env!("OUT_DIR"), "/brain_bindings.rs"));
    };
    ($name:literal) => {
        ::std::include!(::std::concat!(::std::env!("OUT_DIR"), "/", $name, ".rs"));
    };
}
