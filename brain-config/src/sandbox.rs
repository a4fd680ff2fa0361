//! A stdio binding's `sandbox`: how the kernel confines the server process brain starts (the
//! stdio guide's "Sandbox"). Absent or `true`, the default sandbox; an object widens it;
//! `false`, none.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most `memory_mb` may be (1 TiB).
pub const MAX_SANDBOX_MEMORY_MB: u64 = 1 << 20;
/// The least `memory_mb` may be: a runtime (Python, Node) starts in no less.
pub const MIN_SANDBOX_MEMORY_MB: u64 = 16;

/// A stdio binding's `sandbox`: `false` (none: a warning names the binding), `true` (the default
/// sandbox, as when absent), or the default sandbox widened by an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Sandbox {
    /// `false`: no sandbox; `true`: the default one.
    Enabled(bool),
    /// The default sandbox with these paths, network and memory.
    Rules(SandboxRules),
}

impl Sandbox {
    /// The rules the process runs under (an absent `sandbox` is the default sandbox); `None`
    /// when the sandbox is off.
    pub fn rules(sandbox: Option<&Sandbox>) -> Option<SandboxRules> {
        match sandbox {
            None | Some(Sandbox::Enabled(true)) => Some(SandboxRules::default()),
            Some(Sandbox::Enabled(false)) => None,
            Some(Sandbox::Rules(rules)) => Some(rules.clone()),
        }
    }
}

/// What a sandboxed server may do beyond the default: read the default system directories, its
/// own installation, the scripts its arguments name and a private temporary directory.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct SandboxRules {
    /// More absolute paths (files or directories, with everything beneath) the process may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Absolute paths the process may write (and read): create, change and remove files beneath.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// Its network: `"none"` (the default: a network namespace of its own, no interface up) or
    /// `{"connect": [ports]}` (TCP connections to these ports only; no listening).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<SandboxNetwork>,
    /// A limit on the process's data (`RLIMIT_DATA`, in MiB: 16 to 1048576), not its address
    /// space (Node and V8 reserve gigabytes they never use); no limit by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
}

/// A sandboxed server's network.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxNetwork {
    /// `"none"`.
    Named(NoNetwork),
    /// `{"connect": [ports]}`.
    Connect {
        /// The TCP ports it may connect to (on any address).
        connect: Vec<u16>,
    },
}

/// `"none"`: no network at all.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum NoNetwork {
    /// No network.
    #[serde(rename = "none")]
    None,
}

impl Sandbox {
    /// One line on how a stdio binding with this `sandbox` runs, e.g. `default, read
    /// /opt/mcp, write /srv, network: connect 443, memory 512 MiB`.
    pub fn summary(sandbox: Option<&Sandbox>) -> String {
        let rules = match sandbox {
            Some(Sandbox::Enabled(false)) => return "off: not confined".to_owned(),
            None | Some(Sandbox::Enabled(true)) => SandboxRules::default(),
            Some(Sandbox::Rules(rules)) => rules.clone(),
        };
        let mut parts = vec!["default".to_owned()];
        if !rules.read.is_empty() {
            parts.push(format!("read {}", rules.read.join(" ")));
        }
        if !rules.write.is_empty() {
            parts.push(format!("write {}", rules.write.join(" ")));
        }
        parts.push(match rules.connect() {
            None => "network: none".to_owned(),
            Some(ports) => {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                format!("network: connect {}", ports.join(","))
            }
        });
        if let Some(mb) = rules.memory_mb {
            parts.push(format!("memory {mb} MiB"));
        }
        parts.join(", ")
    }
}

impl SandboxRules {
    /// The TCP ports it may connect to; `None` for no network at all.
    pub fn connect(&self) -> Option<&[u16]> {
        match &self.network {
            Some(SandboxNetwork::Connect { connect }) => Some(connect),
            None | Some(SandboxNetwork::Named(NoNetwork::None)) => None,
        }
    }
}
