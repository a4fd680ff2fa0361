//! Cross-crate tests of brain. Today: the deployment's config against both of its contracts, the
//! validation rules and the committed JSON Schema that editors use. **Not built yet**: the
//! fault-injecting MCP test server and the end-to-end, interop and conformance tests (issues 3-6).

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_owned()
}

pub mod server;
