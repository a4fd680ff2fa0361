//! The typed bindings of every tool of the corpus of real MCP servers' `tools/list` answers
//! (`brain-codegen/tests/corpus`), generated into `src/generated` from `host.json` by
//! brain-codegen's `corpus` test, and compiled here as a deployment's bindings crate compiles
//! its own: a library under the workspace's lints, with every warning an error (and clippy
//! `-D warnings` in `cargo xtask ci`).
#![deny(warnings)]

/// The generated bindings (rustfmt leaves them alone: they are compared byte for byte).
#[rustfmt::skip]
pub mod generated;
