//! Content the test servers send: the MCP test server ([`crate::server`]) and its HTTP and SSE
//! tool endpoints ([`crate::http_tools`]).

/// A 1×1 PNG, base64.
pub const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
