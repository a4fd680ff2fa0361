//! `cargo xtask discover`: bindings from a live MCP server (printed, or merged into a config with
//! `--write`), and `--check`, which compares a config's pinned MCP bindings with their servers.
//!
//! The whole discovery is bounded by 30 s; `BRAIN_DISCOVER_TIMEOUT_SECONDS` sets another bound
//! (the tests shorten it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use brain_config::discovery::{
    BindingSettings, Server, binding_from_tool, binding_name, collisions, lint, merge,
};
use brain_config::{
    ConfigError, HostConfig, OnInputRequest, TASK_REVISION, TASKS_EXTENSION_REVISION, ToolBinding,
};
use brain_runtime::discover::Discovery;

mod check;

/// At most this many tools per discovery (the spec's limit).
const MAX_TOOLS: usize = 128;

/// The arguments of `cargo xtask discover`. The Go tool's single-dash spellings (`-url`,
/// `-command`, `-token-env`, `-tenant`, `-tools`) are accepted too.
#[derive(clap::Args)]
pub(crate) struct DiscoverArgs {
    /// The server's Streamable HTTP endpoint.
    #[arg(long, conflicts_with = "command")]
    url: Option<String>,
    /// An installed stdio server's command, e.g. 'node /opt/mcp/server-memory/dist/index.js':
    /// split into words as a POSIX shell splits them (quotes and backslashes), never run by a
    /// shell.
    #[arg(long)]
    command: Option<String>,
    /// stdio: a literal variable of the server process, `K=V` (repeatable).
    #[arg(long = "env", value_name = "K=V", requires = "command")]
    env: Vec<String>,
    /// stdio: a secret for the server process, `CHILD=HOST`: the process gets CHILD set to the
    /// value of brain's HOST variable, read now and whenever the binding is called (repeatable).
    #[arg(long = "env-from", value_name = "CHILD=HOST", requires = "command")]
    env_from: Vec<String>,
    /// stdio: the bindings' `sandbox` as JSON (`false`, or what widens the default sandbox, e.g.
    /// '{"read": ["/opt/mcp/server/node_modules"]}'); the server is discovered under it too.
    /// Without it, the default sandbox.
    #[arg(long, value_name = "JSON", requires = "command", value_parser = parse_sandbox)]
    sandbox: Option<brain_config::Sandbox>,
    /// The environment variable that holds the server's API key: used to connect, and named in
    /// the bindings so that brain sends it as a bearer token.
    #[arg(long, value_name = "VAR", conflicts_with = "auth")]
    token_env: Option<String>,
    /// A PEM file of the CA that issued an `https` server's certificate (a private CA): trusted
    /// for this server beside the platform's roots, now and as the bindings' `ca_file`.
    #[arg(long, value_name = "PEM", requires = "url")]
    ca_file: Option<String>,
    /// For a server that requires OAuth: the bindings' `auth` object as JSON, e.g.
    /// '{"type": "client_credentials", "client_id": "brain", "client_secret_env": "CRM_SECRET"}';
    /// its variables are read now to connect. With `authorization_code`, the authorization URL
    /// is printed (and opened in `$BROWSER`) and the tokens stored as `brain-harness login` does.
    #[arg(long, value_name = "JSON", value_parser = parse_auth)]
    auth: Option<Box<brain_config::Auth>>,
    /// For bindings on behalf of users (`auth.type` `token_exchange`, here or in `--check`'s
    /// config): the variable holding a user's own access token; brain exchanges it and lists the
    /// server as that user.
    #[arg(long, value_name = "VAR")]
    subject_token_env: Option<String>,
    /// The tenants allowed to use the tools (comma-separated).
    #[arg(long, value_name = "T[,T2]", value_delimiter = ',')]
    tenant: Vec<String>,
    /// The remote tools to include: 1 to 128 names, comma-separated.
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    tools: Vec<String>,
    /// `timeout_seconds` of each binding.
    #[arg(long, default_value_t = brain_config::DEFAULT_TIMEOUT_SECONDS)]
    timeout_seconds: u64,
    /// `max_output_bytes` of each binding.
    #[arg(long, default_value_t = brain_config::DEFAULT_MAX_OUTPUT_BYTES)]
    max_output_bytes: u64,
    /// `on_input_request` of each binding: `fail` (the default, left out of the binding) or
    /// `decline` (elicitations are declined and the call goes on).
    #[arg(long, value_name = "fail|decline", value_parser = parse_on_input_request)]
    on_input_request: Option<OnInputRequest>,
    /// Merge the bindings into this host config (a binding of the same name for the same server
    /// and tool replaced, others kept), written atomically once the result validates.
    #[arg(long, value_name = "CONFIG")]
    write: Option<PathBuf>,
    /// With `--write`: also replace a binding of the same name that calls another server or
    /// another tool (without it, such a collision is refused).
    #[arg(long, requires = "write")]
    replace: bool,
    /// Name the bindings PREFIX<tool> (the name the model sees; `mcp_tool` keeps the server's
    /// name), e.g. `--prefix github_`: how tools of several servers stay apart.
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// Compare every MCP binding of this config with its live server; exit 1 on drift.
    #[arg(long, value_name = "CONFIG", conflicts_with_all = ["url", "command", "tools", "tenant", "write", "token_env", "auth", "prefix"])]
    check: Option<PathBuf>,
}

/// `-url x` → `--url x`: the spec's Go-style flags.
pub(crate) fn go_style_flags(args: impl Iterator<Item = String>) -> Vec<String> {
    const FLAGS: &[&str] = &["url", "command", "token-env", "tenant", "tools"];
    args.map(|arg| {
        let name = arg.strip_prefix('-').filter(|rest| !rest.starts_with('-'));
        match name {
            Some(rest) if FLAGS.contains(&rest.split('=').next().unwrap_or_default()) => {
                format!("-{arg}")
            }
            _ => arg,
        }
    })
    .collect()
}

/// `cargo xtask discover`: the bindings of the named tools of a live server, printed or written
/// into a host config (or, with `--check`, a config's bindings checked against their servers).
pub(crate) fn run(args: DiscoverArgs) -> anyhow::Result<ExitCode> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if let Some(config) = &args.check {
        return tokio.block_on(args.check_config(config));
    }
    let (server, names) = match requested(&args) {
        Ok(requested) => requested,
        Err(message) => return usage(&message),
    };
    let access = Access {
        token_env: args.token_env.as_deref(),
        auth: args.auth.as_deref(),
        tenant: &args.tenant[0],
        subject_token_env: args.subject_token_env.as_deref(),
    };
    let discovery = tokio
        .block_on(list(&server, &access, args.ca_file.as_deref()))
        .map_err(|error| match (&server, &args.sandbox) {
            // A stdio server that cannot start may be missing what the sandbox hides.
            (Server::Command { .. }, None) => error.context(
                "the server ran under the default stdio sandbox (its installation, the scripts \
                 its arguments name, a private TMPDIR, no network): if it needs more, pass \
                 --sandbox '{\"read\": [\"/its/node_modules\"]}' (the stdio guide's \"Sandbox\")",
            ),
            _ => error,
        })?;
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !discovery.tools.iter().any(|t| t["name"] == name.as_str()))
        .collect();
    if !missing.is_empty() {
        report_missing(&server, &missing, &discovery);
        return Ok(ExitCode::FAILURE);
    }
    let settings = BindingSettings {
        server,
        token_env: args.token_env.clone(),
        tenants: args.tenant.clone(),
        timeout_seconds: args.timeout_seconds,
        max_output_bytes: args.max_output_bytes,
        protocol_version: discovery.protocol_version.clone(),
        on_input_request: args
            .on_input_request
            .filter(|choice| *choice != OnInputRequest::Fail),
        auth: args.auth.as_deref().cloned(),
        server_tasks: discovery.server_tasks,
        ca_file: args.ca_file.clone(),
    };
    eprintln!(
        "the server {} speaks MCP {}; the bindings pin it in `protocol_version`",
        where_(&settings.server),
        discovery.protocol_version
    );
    if discovery.server_tasks && discovery.protocol_version == TASKS_EXTENSION_REVISION {
        eprintln!(
            "the server declares the tasks extension (io.modelcontextprotocol/tasks): add \
             `\"task\": true` to a binding to let the server answer its calls with a task, which \
             brain follows (and resumes after a crash, with a journal)"
        );
    }
    let mut bindings: Vec<ToolBinding> = names
        .iter()
        .filter_map(|name| discovery.tools.iter().find(|t| t["name"] == name.as_str()))
        .map(|tool| binding_from_tool(tool, &settings))
        .collect();
    if !runnable(&bindings, &discovery, &settings.server) {
        return Ok(ExitCode::FAILURE);
    }
    let prefix = args.prefix.as_deref().unwrap_or_default();
    if !name_bindings(prefix, &mut bindings) {
        return Ok(ExitCode::FAILURE);
    }
    for lint in bindings.iter().flat_map(lint) {
        eprintln!("{lint}");
    }
    match &args.write {
        Some(path) => write(path, bindings, args.replace),
        None => {
            println!("{}", serde_json::to_string_pretty(&bindings)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The server and the tool names (each once) that `args` asks to bind; `Err` says what is missing
/// or does not fit.
fn requested(args: &DiscoverArgs) -> Result<(Server, Vec<String>), String> {
    let server = match (&args.url, &args.command) {
        (Some(url), _) => Server::Url(url.clone()),
        (None, Some(command)) => {
            stdio_server(command, &args.env, &args.env_from, args.sandbox.clone())?
        }
        (None, None) => {
            return Err(
                "--url or --command is required: the server's Streamable HTTP endpoint, \
                        or the command that starts a stdio server"
                    .to_owned(),
            );
        }
    };
    if matches!(server, Server::Command { .. }) && args.auth.is_some() {
        return Err(
            "--auth is for servers at a URL; a stdio server gets its secrets from --env-from"
                .to_owned(),
        );
    }
    let on_behalf = args
        .auth
        .as_ref()
        .is_some_and(|auth| auth.on_behalf_of_users());
    if args.subject_token_env.is_some() && !on_behalf {
        return Err(
            "--subject-token-env is for servers called on behalf of users: with \
                    --auth '{\"type\": \"token_exchange\", ...}'"
                .to_owned(),
        );
    }
    if matches!(server, Server::Command { .. }) && args.token_env.is_some() {
        return Err(
            "--token-env is for servers at a URL; pass a stdio server's secrets with \
                    --env-from CHILD=HOST"
                .to_owned(),
        );
    }
    if args.tenant.is_empty() {
        return Err("--tenant is required: the tenant(s) allowed to use the tools".to_owned());
    }
    let mut names: Vec<String> = Vec::new();
    for name in args
        .tools
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
    {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    if names.is_empty() || names.len() > MAX_TOOLS {
        return Err(format!(
            "--tools names {} tools; name 1 to {MAX_TOOLS}, comma-separated",
            names.len()
        ));
    }
    Ok((server, names))
}

/// Reports the tools named that the `server` does not have, and the tools it has.
fn report_missing(server: &Server, missing: &[&String], discovery: &Discovery) {
    let list = |names: Vec<&str>| {
        names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "error: the server {} has no tool named {}\n  help: it has {}",
        where_(server),
        list(missing.iter().map(|s| s.as_str()).collect()),
        list(
            discovery
                .tools
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect()
        )
    );
}

/// Whether `bindings` can run: a tool that runs only as an MCP task is bound only where brain
/// can run its tasks (the revision and the `server`'s declaration); else reports why not.
fn runnable(bindings: &[ToolBinding], discovery: &Discovery, server: &Server) -> bool {
    // A tool that runs only as an MCP task is bound only where brain can run its tasks.
    let unrunnable: Vec<String> = bindings
        .iter()
        .filter(|binding| binding.runs_as_task())
        .map(|binding| format!("{:?}", binding.mcp_tool.as_deref().unwrap_or_default()))
        .collect();
    let revision = discovery.protocol_version.as_str();
    let why = if ![TASK_REVISION, TASKS_EXTENSION_REVISION].contains(&revision) {
        Some(format!(
            "brain runs MCP tasks at {TASK_REVISION} and {TASKS_EXTENSION_REVISION}, and the \
             server speaks {revision}"
        ))
    } else if !discovery.server_tasks {
        Some(
            "the server does not declare that it runs tool calls as tasks \
             (`tasks.requests.tools.call` at 2025-11-25, the tasks extension at 2026-07-28)"
                .to_owned(),
        )
    } else {
        None
    };
    if let Some(why) = why.filter(|_| !unrunnable.is_empty()) {
        eprintln!(
            "error: the server {} runs {} only as MCP tasks (`execution.taskSupport: \
             \"required\"`), and brain cannot run them there: {why}\n  help: leave {} out of \
             --tools; tools whose taskSupport is \"optional\" or \"forbidden\" (or absent) can \
             be bound",
            where_(server),
            unrunnable.join(", "),
            if unrunnable.len() == 1 { "it" } else { "them" }
        );
        return false;
    }
    true
}

/// Gives `bindings` their model-visible names: `prefix`, and the characters a binding name
/// cannot hold rewritten (noted); `false` (reported) when two would have the same name.
fn name_bindings(prefix: &str, bindings: &mut [ToolBinding]) -> bool {
    // The model-visible names: the prefix, and characters a binding name cannot hold rewritten.
    for binding in bindings.iter_mut() {
        let wanted = format!("{prefix}{}", binding.name);
        binding.name = binding_name(prefix, &binding.name);
        if binding.name != wanted {
            eprintln!(
                "note: tool {:?} is bound as {:?}: a binding's name (the name the model sees) \
                 is 1 to 64 of a-z, A-Z, 0-9, `_` and `-`; other characters become `_` and the \
                 rest is cut ({:?} stays the server's name in `mcp_tool`)",
                binding.mcp_tool.as_deref().unwrap_or_default(),
                binding.name,
                binding.mcp_tool.as_deref().unwrap_or_default(),
            );
        }
    }
    for (index, binding) in bindings.iter().enumerate() {
        if let Some(other) = bindings[..index].iter().find(|b| b.name == binding.name) {
            eprintln!(
                "error: tools {:?} and {:?} would both be bound as {:?}\n  help: bind them in \
                 two runs with different --prefix values",
                other.mcp_tool.as_deref().unwrap_or_default(),
                binding.mcp_tool.as_deref().unwrap_or_default(),
                binding.name
            );
            return false;
        }
    }
    true
}

fn parse_on_input_request(text: &str) -> Result<OnInputRequest, String> {
    match text {
        "fail" => Ok(OnInputRequest::Fail),
        "decline" => Ok(OnInputRequest::Decline),
        other => Err(format!("{other:?} is neither `fail` nor `decline`")),
    }
}

fn usage(message: &str) -> anyhow::Result<ExitCode> {
    eprintln!(
        "error: {message}\n  usage: cargo xtask discover (--url URL [--token-env VAR] | --command 'PROGRAM ARGS' \
         [--env K=V] [--env-from CHILD=HOST]) --tenant T[,T2] --tools a,b"
    );
    Ok(ExitCode::from(2))
}

/// `at URL`, or the command in backquotes.
fn where_(server: &Server) -> String {
    match server {
        Server::Url(url) => format!("at {url}"),
        Server::Command { .. } => format!("`{server}`"),
    }
}

/// `--command`, `--env` and `--env-from` as a stdio server.
fn stdio_server(
    command: &str,
    env: &[String],
    env_from: &[String],
    sandbox: Option<brain_config::Sandbox>,
) -> Result<Server, String> {
    let words = shlex::split(command)
        .filter(|words| !words.is_empty())
        .ok_or_else(|| {
            format!(
                "--command {command:?} is empty or has an unclosed quote or a trailing backslash"
            )
        })?;
    let pairs = |flag: &str, items: &[String]| -> Result<BTreeMap<String, String>, String> {
        items
            .iter()
            .map(|item| match item.split_once('=') {
                Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
                _ => Err(format!("{flag} {item:?} is not NAME=VALUE")),
            })
            .collect()
    };
    Ok(Server::Command {
        command: words,
        env: pairs("--env", env)?,
        env_from: pairs("--env-from", env_from)?,
        sandbox,
    })
}

fn parse_sandbox(text: &str) -> Result<brain_config::Sandbox, String> {
    serde_json::from_str(text).map_err(|error| {
        format!(
            "not a `sandbox` ({error}): `false`, `true`, or an object of `read`, `write`, \
             `network` and `memory_mb` (the stdio guide's \"Sandbox\")"
        )
    })
}

/// Bound on one discovery: 30 s, or `BRAIN_DISCOVER_TIMEOUT_SECONDS`.
fn parse_auth(text: &str) -> Result<Box<brain_config::Auth>, String> {
    serde_json::from_str(text).map_err(|error| {
        format!(
            "not an `auth` object ({error}); see the `auth` of brain-config/host-config.schema.json"
        )
    })
}

/// How discovery obtains OAuth tokens: `auth`'s variables read now; user-delegated tokens from
/// (and into) the state's store `brain-harness login` uses (`BRAIN_STATE_URL`, else SQLite in
/// the state directory), the user asked through a browser.
async fn discover_auth(
    auth: &brain_config::Auth,
    tenant: &str,
    subject_token_env: Option<&str>,
) -> anyhow::Result<brain_runtime::discover::DiscoverAuth> {
    use brain_runtime::auth::{LoopbackAgent, TokenStore, UserAgent};
    let mut secrets = BTreeMap::new();
    let mut missing = Vec::new();
    for (field, var) in auth.env_vars() {
        match std::env::var(var) {
            Ok(value) => {
                secrets.insert(var.to_owned(), value);
            }
            Err(_) => missing.push(format!("{var} (auth.{field})")),
        }
    }
    if !missing.is_empty() {
        bail!("not set: {}; export them to connect", missing.join(", "));
    }
    let subject = match (auth.on_behalf_of_users(), subject_token_env) {
        (false, _) => None,
        (true, None) => bail!(
            "the server is called on behalf of users (`auth.type` `token_exchange`): pass \
             --subject-token-env VAR, VAR holding a user's access token, to list it as that user"
        ),
        (true, Some(var)) => match std::env::var(var) {
            Ok(token) if !token.trim().is_empty() => {
                Some(brain_runtime::SubjectToken::new(token.trim()))
            }
            _ => bail!("--subject-token-env: {var} is not set; set it to a user's access token"),
        },
    };
    let user = auth.grant == brain_config::Grant::AuthorizationCode;
    let store: Option<std::sync::Arc<dyn TokenStore>> = if user {
        let url = match std::env::var("BRAIN_STATE_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            Some(url) => url,
            None => match brain_runtime::journal::default_path() {
                Some(path) => format!("sqlite:{}", path.display()),
                None => bail!(
                    "no place for the state's store: set BRAIN_STATE_URL, XDG_STATE_HOME or HOME"
                ),
            },
        };
        let journal = brain_runtime::journal::Journal::open(&url)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open the state's store: {e}"))?;
        Some(journal.grants())
    } else {
        None
    };
    let agent: Option<std::sync::Arc<dyn UserAgent>> = if user {
        let agent = LoopbackAgent::bind(|url| {
            eprintln!("Open this URL to authorize brain (waiting for the redirect):\n  {url}");
            if let Ok(browser) = std::env::var("BROWSER") {
                let _ = std::process::Command::new(browser).arg(url).spawn();
            }
        })?;
        Some(std::sync::Arc::new(agent))
    } else {
        None
    };
    Ok(brain_runtime::discover::DiscoverAuth {
        config: auth.clone(),
        secrets,
        tenant: tenant.to_owned(),
        store,
        agent,
        subject,
    })
}

fn timeout() -> Duration {
    let seconds = std::env::var("BRAIN_DISCOVER_TIMEOUT_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    Duration::from_secs(seconds)
}

/// How discovery reaches a server: its API key's variable, or its `auth` (tokens for `tenant`;
/// on behalf of the user whose token `subject_token_env` holds).
struct Access<'a> {
    token_env: Option<&'a str>,
    auth: Option<&'a brain_config::Auth>,
    tenant: &'a str,
    subject_token_env: Option<&'a str>,
}

/// Lists the tools of `server` (see [`brain_runtime::discover::list_server`]) as `access` says.
async fn list(
    server: &Server,
    access: &Access<'_>,
    ca_file: Option<&str>,
) -> anyhow::Result<Discovery> {
    let token_env = access.token_env;
    let auth = match access.auth {
        Some(auth) => Some(discover_auth(auth, access.tenant, access.subject_token_env).await?),
        None => None,
    };
    Ok(brain_runtime::discover::list_server(server, token_env, auth, ca_file, timeout()).await?)
}

/// Merges into the config at `path` (created if absent), validates, writes atomically.
fn write(path: &Path, bindings: Vec<ToolBinding>, replace: bool) -> anyhow::Result<ExitCode> {
    let mut config = if path.exists() {
        match brain_config::load_file(path) {
            Ok(config) => config,
            Err(ConfigError::Invalid(diagnostics)) => {
                eprintln!(
                    "{diagnostics}\nerror: fix {} before merging into it",
                    path.display()
                );
                return Ok(ExitCode::FAILURE);
            }
            Err(error) => return Err(error.into()),
        }
    } else {
        HostConfig {
            model_apis: None,
            serve: None,
            tenant_limits: None,
            policies: None,
            approvals: None,
            audit: None,
            schema: None,
            tools: Vec::new(),
        }
    };
    let collided = collisions(&config, &bindings);
    if !collided.is_empty() && !replace {
        for collision in &collided {
            eprintln!(
                "error: {} already has a binding {:?} that calls {}; the new one calls {}",
                path.display(),
                collision.name,
                collision.existing,
                collision.new
            );
        }
        eprintln!(
            "  help: name the new bindings apart with --prefix (e.g. --prefix server_), or \
             replace the old ones with --replace; {} was not changed",
            path.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    for collision in &collided {
        eprintln!(
            "note: {:?} replaced: it called {}, it now calls {} (--replace)",
            collision.name, collision.existing, collision.new
        );
    }
    let merged = merge(&mut config, bindings);
    let errors = brain_config::validate(&config);
    if !errors.is_empty() {
        let file = path.display().to_string();
        for error in &errors {
            eprint!("{}", error.render(&file));
        }
        eprintln!("error: the merged config would be invalid; {file} was not changed");
        return Ok(ExitCode::FAILURE);
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Err(errors) = brain_config::policy::Policies::compile_in(&config, dir) {
        let file = path.display().to_string();
        for error in &errors {
            eprint!("{}", error.render(&file));
        }
        eprintln!("error: the merged bindings break the config's policies; {file} was not changed");
        return Ok(ExitCode::FAILURE);
    }
    // The policies' and public keys' text stays in their files.
    if let Some(policies) = &mut config.policies {
        policies.sources.clear();
    }
    if let Some(audit) = &mut config.audit {
        audit.public_key_sources.clear();
    }
    let mut text = serde_json::to_string_pretty(&config)?;
    text.push('\n');
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut temp, text.as_bytes())?;
    temp.as_file().sync_all()?;
    temp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    // What landed is what `cargo xtask check` reads.
    if let Err(error) = brain_config::load_file(path) {
        bail!("{} was written but does not load: {error}", path.display());
    }
    println!(
        "wrote {}: {} replaced, {} added, {} bindings in all",
        path.display(),
        merged.replaced,
        merged.added,
        config.tools.len()
    );
    Ok(ExitCode::SUCCESS)
}
