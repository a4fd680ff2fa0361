//! brain-codegen: typed bindings from a validated host config.
//!
//! For each binding, one module with a typed argument struct `<Name>Args` (typify) and, when the
//! binding has an `output_schema`, `<Name>Output`; then a `ToolName` enum, a `ToolCall` enum with
//! one variant per binding carrying its typed arguments, `ToolCall::parse` (jsonschema first,
//! then the typed parse), the static `BINDINGS` table the runtime needs and `host_config()`. The
//! code is one file of inline modules without inner attributes (so that `include!` takes it, as
//! it takes prost's and tonic's), names only `::brain_runtime::…` and `::std` paths (a host's
//! crate depends on brain-runtime alone), and is deterministic: same config, same bytes.
//!
//! Three ways to run the one engine:
//! - a host's `build.rs`: [`compile_config`] (or a [`Builder`]) writes the module to `OUT_DIR`,
//!   and `brain_runtime::include_bindings!()` includes it;
//! - `cargo xtask codegen --config PATH --out DIR`, for a host that commits its generated code
//!   ([`Builder::write_dir`]; the workspace's own `bindings` crate does so);
//! - [`generate`], the module as a string.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     brain_codegen::compile_config("host.json")?;
//!     Ok(())
//! }
//! ```
//!
//! jsonschema is the contract; typed structs are a convenience, and send what they were given.
//! typify ignores some keywords (fine: arguments are validated first) but drops keys kept by
//! `additionalProperties: true` and the `null` of an optional nullable property, rejects some
//! valid `oneOf`/`anyOf` inputs, and panics on `not` and on enum values it cannot name apart; a
//! schema using those (in what it uses: unused definitions do not count) gets a JSON-object type
//! instead, with the reason in its doc. An optional array or map without a default is an
//! `Option`, so that an empty one is sent.
//!
//! ```
//! let config = brain_config::parse(br#"{"tools": [{"name": "get-page", "description": "Fetch a page.",
//!     "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
//!     "url": "https://mcp.example.com/mcp", "mcp_tool": "fetch", "tenants": ["local"]}]}"#, "host.json").unwrap();
//! let module = brain_codegen::generate(&config, "host.json").unwrap();
//! assert!(module.contains("pub mod get_page {"));
//! assert!(module.contains("pub struct GetPageArgs"));
//! ```

mod build;
mod error;
mod generate;
mod module;
mod schema;

pub use build::{Builder, DirMode, DirReport, compile_config};
pub use error::{CodegenError, Error};
pub use generate::{DIGEST_PREFIX, HEADER_PREFIX, generate};
