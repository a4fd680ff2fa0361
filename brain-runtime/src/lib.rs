//! brain-runtime: calls MCP tools through the gate the spec describes (tenant allowlist, argument
//! validation, a fresh MCP session per call, progress, result conversion, limits, timeouts and an
//! honest `unknown_outcome`).
//!
//! **Not built yet** (issue 3). Nothing here calls a tool today.
