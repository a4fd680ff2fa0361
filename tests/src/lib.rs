//! Cross-crate tests of brain, and what they start: the fault-injecting MCP test server
//! ([`server`], over Streamable HTTP or stdio: [`stdio`]; with HTTP and SSE tool endpoints:
//! [`http_tools`]), third-party MCP servers ([`peers`]), an OTLP collector ([`otlp`]), an OAuth
//! issuer of JWT access tokens ([`issuer`]) and processes of our own binaries ([`process`]). The
//! binaries: `brain-test-server`, `brain-conformance-client` (the official conformance suite's
//! client), `brain-bench` (`cargo xtask bench`) and `brain-soak` (`cargo xtask soak`).

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_owned()
}

pub mod audit;
pub mod client;
pub mod content;
pub mod counting;
pub mod drift;
pub mod http_tools;
pub mod issuer;
pub mod nested;
pub mod oauth;
pub mod otlp;
pub mod peers;
pub mod policies;
pub mod postgres;
pub mod process;
pub mod server;
pub mod stdio;
pub mod tasks;
pub mod tls;

/// The README's and the book's Rust snippets, compiled (and those not `no_run` run) as doc tests
/// of this crate, which depends on everything they use. A snippet that cannot be compiled here
/// is marked `rust,ignore` and says why (the tidy test holds both).
#[cfg(doctest)]
pub mod docs {
    #[doc = include_str!("../../README.md")]
    pub struct Readme;
    #[doc = include_str!("../../docs/src/rust.md")]
    pub struct UsingBrainFromRust;
}
