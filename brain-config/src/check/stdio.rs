//! stdio bindings, servers brain starts as processes: `command`, and the fields that apply to
//! it alone (`env`, `env_from`, `cwd`, `prewarm`, `sandbox`).

use super::context::{Draft, is_env_name};
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::MAX_PREWARM;
use crate::sandbox::{MAX_SANDBOX_MEMORY_MB, MIN_SANDBOX_MEMORY_MB, Sandbox};

/// `command` names a program (a non-empty array whose first element is not blank), on an MCP
/// binding (`mcp_tool` set), without `token_env`: a stdio server gets secrets from `env_from`.
pub(super) fn command(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(command) = &draft.binding.command else {
        return;
    };
    if !draft.usable("command") {
        return;
    }
    if command
        .first()
        .is_none_or(|program| program.trim().is_empty())
    {
        out.push(draft.error(
            Rule::CommandEmpty,
            "command",
            "`command` names no program",
            "write the program, then its arguments, each as one string, e.g. `[\"node\", \
             \"/opt/mcp/server-memory/dist/index.js\"]` (no shell runs it)",
        ));
    }
    if draft.binding.mcp_tool.is_none() && draft.usable("mcp_tool") {
        out.push(draft.error(
            Rule::CommandWithoutMcpTool,
            "command",
            "`command` is set on a binding without `mcp_tool`",
            "add `mcp_tool` (the tool's name on the stdio server; `cargo xtask discover --command \
             ...` prints it): a command is always an MCP server",
        ));
    }
    if draft.binding.token_env.is_some() {
        out.push(draft.error(
            Rule::TokenEnvOnStdio,
            "token_env",
            "`token_env` is set on a stdio binding, which has no HTTP header to send it in",
            "pass the secret to the process with `env_from`, e.g. `\"env_from\": \
             {\"API_KEY\": \"MY_HOST_VAR\"}`, and remove `token_env`",
        ));
    }
}

/// `env`, `env_from`, `cwd`, `prewarm` and `sandbox` apply to stdio bindings (`command`) only.
pub(super) fn stdio_fields(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    if binding.command.is_some() || !draft.usable("command") {
        return;
    }
    let set = [
        ("env", binding.env.is_some()),
        ("env_from", binding.env_from.is_some()),
        ("cwd", binding.cwd.is_some()),
        ("prewarm", binding.prewarm.is_some()),
        ("sandbox", binding.sandbox.is_some()),
    ];
    for (field, _) in set.iter().filter(|(_, set)| *set) {
        out.push(draft.error(
            Rule::StdioFieldOnUrl,
            field,
            format!("`{field}` is set on a binding without `command`"),
            "remove it: it applies to stdio servers that brain starts as processes",
        ));
    }
}

/// Every `env` and `env_from` name (and every `env_from` host variable) is an environment
/// variable name; no value holds a NUL byte (a process cannot receive it); no variable is set by
/// both.
pub(super) fn env(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    if let Some(env) = binding.env.as_ref().filter(|_| draft.usable("env")) {
        for (name, value) in env {
            let field = format!("env/{}", crate::source::escape_token(name));
            if !is_env_name(name) {
                out.push(draft.error(
                    Rule::EnvInvalid,
                    &field,
                    format!("{name:?} is not an environment variable name"),
                    "use letters, digits and `_`, not starting with a digit, e.g. `MEMORY_FILE_PATH`",
                ));
            } else if value.contains('\0') {
                out.push(draft.error(
                    Rule::EnvInvalid,
                    &field,
                    format!("the value of {name} holds a NUL byte, which no process can receive"),
                    "remove the NUL byte",
                ));
            }
        }
    }
    let Some(env_from) = binding
        .env_from
        .as_ref()
        .filter(|_| draft.usable("env_from"))
    else {
        return;
    };
    for (name, host) in env_from {
        let field = format!("env_from/{}", crate::source::escape_token(name));
        if !is_env_name(name) {
            out.push(draft.error(
                Rule::EnvInvalid,
                &field,
                format!("{name:?} is not an environment variable name"),
                "name the server's variable: letters, digits and `_`, not starting with a digit",
            ));
        } else if !is_env_name(host) {
            out.push(draft.error(
                Rule::EnvInvalid,
                &field,
                format!(
                    "{host:?} (the host variable for {name}) is not an environment variable name"
                ),
                "name the host variable that holds the secret, e.g. `GH_TOKEN`; never put the \
                 secret itself here",
            ));
        } else if binding
            .env
            .as_ref()
            .is_some_and(|env| env.contains_key(name))
        {
            out.push(draft.error(
                Rule::EnvInvalid,
                &field,
                format!("{name} is set by both `env` and `env_from`"),
                "keep one of them",
            ));
        }
    }
}

/// `prewarm` is between 0 and 8.
pub(super) fn prewarm_range(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if let Some(value) = draft.binding.prewarm
        && value > MAX_PREWARM
    {
        out.push(draft.error(
            Rule::PrewarmRange,
            "prewarm",
            format!("`prewarm` is {value}, outside 0..={MAX_PREWARM}"),
            "use 0 (the default: a process starts for each call) to 8 spare processes",
        ));
    }
}

/// A `sandbox` object's values: absolute paths, `memory_mb` in range, real ports to connect to.
pub(super) fn sandbox(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(Sandbox::Rules(rules)) = &draft.binding.sandbox else {
        return;
    };
    let paths =
        (rules.read.iter().map(|p| ("read", p))).chain(rules.write.iter().map(|p| ("write", p)));
    for (list, path) in paths {
        if !path.starts_with('/') {
            out.push(draft.error(
                Rule::SandboxInvalid,
                "sandbox",
                format!("`sandbox.{list}` names {path:?}, not an absolute path"),
                "write the whole path, e.g. `/srv/data` (a relative path would depend on where \
                 brain runs)",
            ));
        }
    }
    if let Some(mb) = rules.memory_mb
        && !(MIN_SANDBOX_MEMORY_MB..=MAX_SANDBOX_MEMORY_MB).contains(&mb)
    {
        out.push(draft.error(
            Rule::SandboxInvalid,
            "sandbox",
            format!(
                "`sandbox.memory_mb` is {mb}, outside {MIN_SANDBOX_MEMORY_MB}..={MAX_SANDBOX_MEMORY_MB}"
            ),
            "give the process's data limit in MiB, e.g. 512, or leave it out for no limit",
        ));
    }
    if let Some(ports) = rules.connect()
        && (ports.is_empty() || ports.contains(&0))
    {
        out.push(draft.error(
            Rule::SandboxInvalid,
            "sandbox",
            "`sandbox.network.connect` names no port, or port 0",
            "list the TCP ports the server may connect to, e.g. `{\"connect\": [443]}`, or write \
             `\"none\"`",
        ));
    }
}

/// The warnings of a config's stdio bindings: each one whose `sandbox` is `false` runs its
/// server unconfined ([`Rule::SandboxOff`]).
pub fn sandbox_warnings(config: &crate::model::HostConfig) -> Vec<Diagnostic> {
    (config.tools.iter().enumerate())
        .filter(|(_, binding)| {
            binding.command.is_some() && binding.sandbox == Some(Sandbox::Enabled(false))
        })
        .map(|(index, binding)| Diagnostic {
            tool: Some(binding.name.clone()),
            ..Diagnostic::new(
                Rule::SandboxOff,
                format!("/tools/{index}/sandbox"),
                "`sandbox` is false: the server runs unconfined, with everything the user who \
                 runs brain may read, write and reach",
                "remove `sandbox` for the default sandbox, and open what the server needs with \
                 `read`, `write` and `network` (the stdio guide's \"Sandbox\")",
            )
        })
        .collect()
}
