//! The `policies` section of the host config, as written and as loaded (the files' text read in).
//! The policies themselves — their schema, checks and decisions — are `crate::policy`'s.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `policies` in the host config: Cedar files and their tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// The Cedar policy files: paths or globs (`policies/*.cedar`), relative to the host
    /// config's directory. A pattern that matches no file is an error.
    pub files: Vec<String>,
    /// The policy tests: JSON files (paths or globs, relative to the host config's directory),
    /// each a test or a list of tests `{"principal", "binding", "arguments", "expect"}`. Every
    /// load runs them; a failing one fails the load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<String>,
    /// The text of every file the patterns matched, read when the config was loaded (codegen
    /// embeds it, so a compiled-in config carries its policies). Never written in a host config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub sources: Vec<PolicySource>,
}

/// One policy or test file, read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySource {
    /// The file, relative to the host config's directory.
    pub path: String,
    /// What it holds.
    pub kind: SourceKind,
    /// Its text.
    pub text: String,
}

/// What a policy source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// Cedar policies.
    Policies,
    /// Policy tests (JSON).
    Tests,
}
