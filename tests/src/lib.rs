//! Cross-crate tests of brain, and what they start: the fault-injecting MCP test server
//! ([`server`]) and third-party MCP servers ([`peers`]). **Not built yet**: the conformance
//! client (issue 6).

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_owned()
}

pub mod peers;
pub mod process;
pub mod server;
