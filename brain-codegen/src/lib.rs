//! brain-codegen: typed argument and output structs, `ToolName`/`ToolCall` dispatch and the static
//! `BINDINGS` table, generated from a validated host config.
//!
//! **Not built yet** (issue 5). Today the only generated artifact is the host config's JSON
//! Schema, which `brain-config` derives from its own types.
