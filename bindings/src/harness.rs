//! The `brain-harness` command line (a contract: tests and scripts drive brain through it):
//!
//! ```text
//! brain-harness [--config PATH] tools [--format table|json|mcp|openai|openai-chat|anthropic|gemini] [--json] [--tenant T]
//! brain-harness [--config PATH] [--state URL] call --tenant T [--session S] [--call-id C] [--from API] [--subject-token-env VAR] [--json] TOOL [ARGS_JSON | -]
//! brain-harness [--state URL] journal [--tenant T] [--session S] [--call-id C] [--since 1h] [--results] [--json]
//! brain-harness [--config PATH] [--state URL] login --tenant T TOOL
//! brain-harness [--config PATH] [--state URL] logout --tenant T TOOL
//! brain-harness [--state URL] tokens [--json]
//! brain-harness [--config PATH] [--state URL] drift [--live [--subject-token-env VAR]] [--json] [--limit N]
//! brain-harness [--config PATH] [--state URL] approvals [list [--all]|show ID|approve ID|deny ID] [--tenant T] [--json]
//! brain-harness [--config PATH] [--state URL] serve --stdio --tenant T [--session S]
//! brain-harness [--config PATH] [--state URL] serve --listen ADDR [--allow-origin O]… [--allow-host H]… [--session S] [--anonymous-tenant T]
//! ```
//!
//! `serve` offers the bindings as one MCP server (brain-serve, and the book's guide
//! "Serving brain's tools to any MCP host"): over stdio for one local host and one tenant, or
//! Streamable HTTP at `/mcp` for clients authenticated by the config's `serve` section. Every
//! `tools/call` goes through the same gate and journal as `call`; one line per call on stderr.
//!
//! Every call is journaled (see `brain_runtime::journal`): a call id is sent at most once
//! across retries, crashes and processes. The journal is `--state URL`, else
//! `$BRAIN_STATE_URL`, else the SQLite file `$XDG_STATE_HOME/brain/state.db` (or
//! `~/.local/state/brain/state.db`, created mode 0600): `sqlite:PATH[?synchronous=full]` or
//! `postgres://user@host:port/database` for several hosts. `$BRAIN_JOURNAL_RETENTION` (`24h`
//! by default) is how long finished entries are kept. `journal` lists the journaled calls
//! (never their arguments; results only with `--results`).
//!
//! `login` runs the OAuth authorization code flow (PKCE) for a binding whose `auth.type` is
//! `authorization_code`: it prints the authorization URL and opens it in `$BROWSER` (else
//! `xdg-open`/`open` when a desktop is there), receives the redirect on a loopback port, and
//! stores the tokens in the state's store (the journal's: one grant per binding server, client
//! and tenant; never printed). Calls use and refresh them — one refresh per grant across every
//! process on the store. `logout` leaves a tombstone. `tokens` lists the grants (never a
//! token). A `tokens.json` an earlier brain kept under `$XDG_CONFIG_HOME/brain` (or
//! `~/.config/brain`) is imported on first use and renamed `tokens.json.imported`;
//! `$BRAIN_TOKEN_STORE` is no longer read (a harness that finds it set says so).
//!
//! Events go to stdout as JSON Lines with `--json` or when stdout is not a terminal; on a
//! terminal, a progress bar and a readable result. Exit 0 for a non-error result, 1 for an error
//! result, 2 for usage or config errors, 130 after SIGINT (Ctrl-C) and 143 after SIGTERM: the
//! call is cancelled, its `tool.result` printed (`unknown_outcome: true` when `tools/call` had
//! been sent), and the process exits within 2 s, having waited at most 1.5 s for the server to
//! be told. A binding whose `token_env` variable is not set
//! does not stop the harness: calls to it are refused before any I/O, and `tools` marks it.
//! `RUST_LOG` (e.g. `RUST_LOG=brain_runtime=debug`) turns on logs, to stderr; tokens never
//! appear in them. `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`) exports the call's spans and brain's metrics over
//! OTLP/HTTP (see `telemetry.rs`); each call is the root span `brain-harness call TOOL`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use brain_config::{ConfigError, HostConfig, ToolBinding};
use brain_runtime::{CallRequest, Runtime, Scope};
use clap::{Parser, Subcommand};

use crate::output::text;

/// Calls the tools of a brain host config.
#[derive(Parser)]
#[command(name = "brain-harness", version)]
struct Cli {
    /// A host config to use instead of the bindings compiled in; validated at start.
    #[arg(long, value_name = "PATH", global = true)]
    config: Option<PathBuf>,
    /// The call journal: `sqlite:PATH` or `postgres://…` (default: `$BRAIN_STATE_URL`, else
    /// SQLite in `$XDG_STATE_HOME/brain/state.db`).
    #[arg(long, value_name = "URL", global = true)]
    state: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the bindings, or print each model API's tool definitions.
    Tools {
        /// `table` (for people, the default), `json` (brain's own listing, one object per
        /// binding), or a model API's `tools`: `mcp`, `openai`, `openai-chat`, `anthropic`,
        /// `gemini` (stdout is exactly `{"tools": [...]}`; notes go to stderr).
        #[arg(long, default_value = "table")]
        format: ToolsFormat,
        /// Same as `--format json`.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Only the tools this tenant may call.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Call a tool and print its events.
    Call {
        /// The calling session's tenant (checked against the binding's `tenants`).
        #[arg(long)]
        tenant: String,
        /// The calling session's id.
        #[arg(long, default_value = "harness")]
        session: String,
        /// The call's id (default: a new UUID).
        #[arg(long)]
        call_id: Option<String>,
        /// Print events as JSON Lines even on a terminal.
        #[arg(long)]
        json: bool,
        /// The model API whose tool definitions the arguments were produced from (`openai`,
        /// `openai-chat`, `anthropic`, `gemini`): a `null` for an optional property is read as
        /// absent. Without it, the arguments follow the binding's own schema.
        #[arg(long, value_name = "API")]
        from: Option<brain_config::ModelApi>,
        /// The environment variable holding the calling user's own access token, for a binding
        /// that acts on behalf of users (`auth.type` `token_exchange`): brain exchanges it and
        /// never sends it upstream. Without it such a binding refuses the call.
        #[arg(long, value_name = "VAR")]
        subject_token_env: Option<String>,
        /// The binding's name.
        tool: String,
        /// The arguments as a JSON object, or `-` to read them from stdin.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// List the journaled calls, newest first (never their arguments).
    Journal {
        /// Only this tenant's calls.
        #[arg(long)]
        tenant: Option<String>,
        /// Only this session's calls.
        #[arg(long)]
        session: Option<String>,
        /// Only this call id.
        #[arg(long)]
        call_id: Option<String>,
        /// Only calls claimed within this long (`90s`, `30m`, `1h`, `7d`).
        #[arg(long)]
        since: Option<String>,
        /// Print the recorded results too.
        #[arg(long)]
        results: bool,
        /// Print JSON Lines.
        #[arg(long)]
        json: bool,
        /// At most this many (0: all).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Authorize brain at a binding's authorization server for a tenant (OAuth authorization
    /// code flow) and store the tokens.
    Login {
        /// The tenant the tokens are for.
        #[arg(long)]
        tenant: String,
        /// The binding's name (its `auth.type` is `authorization_code`).
        tool: String,
    },
    /// Remove the tokens `login` stored for a binding and tenant.
    Logout {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The binding's name.
        tool: String,
    },
    /// Serve the bindings as one MCP server, over stdio or Streamable HTTP.
    Serve(crate::serve::ServeArgs),
    /// Show the limits' buckets as the state store has them now: tokens left (and when the
    /// next comes) of each rate, slots in use of each quota.
    Limits {
        /// Only this tenant's buckets (and the bindings' shared ones it may use).
        #[arg(long)]
        tenant: Option<String>,
        /// Print JSON Lines.
        #[arg(long)]
        json: bool,
    },
    /// List the drift the runtimes on the state's store saw: each process's first sighting of
    /// a server listing a bound tool otherwise than its pin. Exits 1 when any concerns a
    /// binding's current pin (with `--live`: when a server differs from a pin now).
    Drift {
        /// List each MCP binding's server now too, and compare it with the pin.
        #[arg(long)]
        live: bool,
        /// With `--live`: the variable holding a user's own access token, with which the
        /// servers of bindings on behalf of users (`auth.type` `token_exchange`) are listed.
        #[arg(long, value_name = "VAR", requires = "live")]
        subject_token_env: Option<String>,
        /// Print JSON Lines.
        #[arg(long)]
        json: bool,
        /// At most this many recorded (0: all).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// List and decide the calls held for a person's approval in the approver's tenants (the
    /// approver's token: BRAIN_APPROVER_TOKEN, else stdin). Without an action: `list`.
    Approvals {
        /// What to do.
        #[command(subcommand)]
        action: Option<crate::approvals::Action>,
        /// Only this tenant's (one the approver decides for).
        #[arg(long, global = true)]
        tenant: Option<String>,
        /// Print JSON Lines.
        #[arg(long, global = true)]
        json: bool,
    },
    /// The audit chain of the state's store: verify it, print its newest checkpoint, sign one
    /// now (BRAIN_AUDIT_KEY_FILE), or export it.
    Audit {
        /// What to do.
        #[command(subcommand)]
        action: crate::audit::Action,
    },
    /// List the OAuth grants in the state's store (binding, tenant, scopes, expiry, state;
    /// never a token).
    Tokens {
        /// Print JSON Lines.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the harness; returns its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let telemetry = crate::telemetry::install(
        std::env::var_os("RUST_LOG").is_some(),
        std::io::stderr().is_terminal(),
    );
    // Calls in flight over HTTP/1.1 hold a socket each: use all the descriptors the host allows.
    if let Err(error) = brain_runtime::raise_open_file_limit() {
        tracing::debug!(%error, "the open-file limit stays as it was");
    }
    let code = run(cli);
    telemetry.shut_down(
        if crate::call::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            crate::telemetry::INTERRUPTED_FLUSH_BOUND
        } else {
            crate::telemetry::FLUSH_BOUND
        },
    );
    code
}

fn run(cli: Cli) -> ExitCode {
    let config = match load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let state = cli.state.as_deref();
    match cli.command {
        Command::Journal {
            tenant,
            session,
            call_id,
            since,
            results,
            json,
            limit,
        } => {
            let filter = brain_runtime::journal::Filter {
                tenant,
                session,
                call_id,
                within_ms: None,
                results,
                limit,
            };
            list_journal(&config, state, filter, since.as_deref(), json)
        }
        Command::Serve(args) => match journaled_runtime(&config, state) {
            Ok((tokio, journal, runtime)) => {
                crate::serve::run(&config, Some(journal), runtime, tokio, args)
            }
            Err(code) => code,
        },
        Command::Limits { tenant, json } => finish(crate::journal::tokio().block_on(async {
            let journal = crate::journal::open(&config, state).await?;
            crate::limits::show(&config, &journal, tenant.as_deref(), json).await
        })),
        Command::Drift {
            live,
            subject_token_env,
            json,
            limit,
        } => show_drift(
            &config,
            state,
            live,
            subject_token_env.as_deref(),
            json,
            limit,
        ),
        Command::Approvals {
            action,
            tenant,
            json,
        } => finish(crate::journal::tokio().block_on(async {
            let journal = crate::journal::open(&config, state).await?;
            let action = action.unwrap_or(crate::approvals::Action::List { all: false });
            crate::approvals::run(&config, journal, action, tenant.as_deref(), json).await
        })),
        Command::Audit { action } => audit(&config, state, action),
        Command::Login { tenant, tool } => crate::login::login(&config, state, &tenant, &tool),
        Command::Logout { tenant, tool } => crate::login::logout(&config, state, &tenant, &tool),
        Command::Tokens { json } => finish(crate::journal::tokio().block_on(async {
            let journal = crate::journal::state_store(&config, state).await?;
            crate::journal::list_grants(&journal, json).await
        })),
        Command::Tools {
            format,
            json,
            tenant,
        } => list_tools(&config, format, json, tenant.as_deref()),
        Command::Call {
            tenant,
            session,
            call_id,
            json,
            from,
            subject_token_env,
            tool,
            args,
        } => {
            let scope = Scope {
                tenant_id: tenant,
                session_id: session,
            };
            match crate::call::call_request(tool, scope, &args, from, subject_token_env.as_deref())
            {
                Ok(request) => {
                    call_tool(&config, state, request.with_optional_call_id(call_id), json)
                }
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// `brain-harness journal`: the state's call journal, filtered (`since` parsed into the
/// filter's window; a bad one exits 2).
fn list_journal(
    config: &HostConfig,
    state: Option<&str>,
    mut filter: brain_runtime::journal::Filter,
    since: Option<&str>,
    json: bool,
) -> ExitCode {
    filter.within_ms = match since.map(crate::journal::parse_duration) {
        None => None,
        Some(Ok(since)) => Some(i64::try_from(since.as_millis()).unwrap_or(i64::MAX)),
        Some(Err(error)) => {
            eprintln!("error: --since: {error}");
            return ExitCode::from(2);
        }
    };
    let audit = crate::journal::Audit { filter, json };
    finish(crate::journal::tokio().block_on(async {
        let journal = crate::journal::open(config, state).await?;
        crate::journal::list(&journal, &audit).await
    }))
}

/// `brain-harness drift`: the drift recorded (and, with `live`, found now; servers on behalf of
/// users listed as the user whose token `subject_token_env` names); exits 1 when a current pin
/// drifted.
fn show_drift(
    config: &HostConfig,
    state: Option<&str>,
    live: bool,
    subject_token_env: Option<&str>,
    json: bool,
    limit: usize,
) -> ExitCode {
    let report = match subject_token_env
        .map(crate::call::subject_token)
        .transpose()
    {
        Ok(subject) => crate::drift::Report {
            live,
            subject,
            json,
            limit,
        },
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let shown = crate::journal::tokio().block_on(async {
        let journal = crate::journal::state_store(config, state).await?;
        crate::drift::show(config, &journal, &report).await
    });
    match shown {
        Ok(drifted) => ExitCode::from(u8::from(drifted)),
        Err(message) => finish(Err(message)),
    }
}

/// `brain-harness audit`: the audit chain's `action`; exits 1 when the chain does not hold.
fn audit(config: &HostConfig, state: Option<&str>, action: crate::audit::Action) -> ExitCode {
    let done = crate::journal::tokio().block_on(async {
        let journal = crate::journal::open(config, state).await?;
        crate::audit::run(config, journal, action).await
    });
    match done {
        Ok(holds) => ExitCode::from(u8::from(!holds)),
        Err(message) => finish(Err(message)),
    }
}

/// `brain-harness tools`: the bindings as `tenant` would see them, in `format` (JSON with
/// `json`).
fn list_tools(
    config: &HostConfig,
    format: ToolsFormat,
    json: bool,
    tenant: Option<&str>,
) -> ExitCode {
    match runtime(config, None) {
        Ok(runtime) => {
            let format = if json { ToolsFormat::Json } else { format };
            tools(config, &runtime, format, tenant);
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `brain-harness call`: runs `request` on the journaled runtime, as the root of its trace, and
/// prints its result (JSON with `json`, or when stdout is not a terminal); exits 1 on an error
/// result, with the signal's code when interrupted.
fn call_tool(
    config: &HostConfig,
    state: Option<&str>,
    request: CallRequest,
    json: bool,
) -> ExitCode {
    let (tokio, runtime) = match journaled_runtime(config, state) {
        Ok((tokio, _, runtime)) => (tokio, runtime),
        Err(code) => return code,
    };
    // The root of the call's trace: the runtime's `tools/call` span is its child.
    let root = tracing::info_span!(
        "brain-harness call",
        otel.name = format!("brain-harness call {}", request.tool),
    );
    let request = request.with_parent(root);
    let json = json || !std::io::stdout().is_terminal();
    let (result, interrupted) = tokio.block_on(crate::call::call(&runtime, request, json));
    match interrupted {
        Some(signal) => ExitCode::from(signal.exit_code()),
        None if result.is_error => ExitCode::FAILURE,
        None => ExitCode::SUCCESS,
    }
}

/// Exit 0, or 2 after saying why not.
fn finish(done: Result<(), String>) -> ExitCode {
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // It may quote the store or a server: escaped.
            crate::output::error(&message);
            ExitCode::from(2)
        }
    }
}

/// A tokio runtime, the state's store, and a runtime journaling to it; or the exit code after
/// saying why not.
fn journaled_runtime(
    config: &HostConfig,
    state: Option<&str>,
) -> Result<
    (
        tokio::runtime::Runtime,
        brain_runtime::journal::Journal,
        Runtime,
    ),
    ExitCode,
> {
    let tokio = crate::journal::tokio();
    let journal = tokio
        .block_on(crate::journal::state_store(config, state))
        .map_err(|message| {
            crate::output::error(&message);
            ExitCode::from(2)
        })?;
    let runtime = tokio.block_on(async { runtime(config, Some(journal.clone())) })?;
    Ok((tokio, journal, runtime))
}

/// The config from `--config` (validated with every rule), or the bindings compiled in.
fn load(path: Option<&std::path::Path>) -> Result<HostConfig, String> {
    let loaded = match path {
        Some(path) => brain_config::load_file(path),
        None => Ok(crate::generated::host_config()),
    };
    loaded.map_err(|error| match error {
        ConfigError::Invalid(diagnostics) => diagnostics.to_string(),
        other => format!("error: {other}"),
    })
}

/// The runtime; an unset token variable refuses calls to its bindings only (before any I/O).
/// OAuth grants live in the journal's store (`login` writes there); without a journal
/// (`tools`), in memory.
fn runtime(
    config: &HostConfig,
    journal: Option<brain_runtime::journal::Journal>,
) -> Result<Runtime, ExitCode> {
    let mut builder = Runtime::builder(config).allow_missing_tokens();
    if let Some(journal) = journal {
        builder = builder.journal(journal);
    }
    builder.build().map_err(|error| {
        eprintln!("error: {error}");
        ExitCode::from(2)
    })
}

/// What `tools` prints.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ToolsFormat {
    Table,
    Json,
    Api(brain_config::ModelApi),
}

impl std::str::FromStr for ToolsFormat {
    type Err = String;

    fn from_str(format: &str) -> Result<ToolsFormat, String> {
        match format {
            "table" => Ok(ToolsFormat::Table),
            "json" => Ok(ToolsFormat::Json),
            api => api.parse().map(ToolsFormat::Api).map_err(|_| {
                format!(
                    "unknown format {api:?}: table, json, or a model API (mcp, openai, \
                     openai-chat, anthropic, gemini)"
                )
            }),
        }
    }
}

/// `tools`: the table, brain's JSON listing, or an API's definitions (stdout exactly
/// `{"tools": [...]}`, every note on stderr).
fn tools(config: &HostConfig, runtime: &Runtime, format: ToolsFormat, tenant: Option<&str>) {
    // A tenant's listing hides what its policies hide (by scope and context-free forbids only).
    let allowed = |binding: &ToolBinding| {
        tenant.is_none_or(|t| {
            runtime.visible(
                &brain_runtime::Principal::Tenant(t.to_owned()),
                &binding.name,
            )
        })
    };
    match format {
        ToolsFormat::Table => list(config.tools.iter().filter(|b| allowed(b)), runtime),
        ToolsFormat::Json => {
            for binding in config.tools.iter().filter(|b| allowed(b)) {
                let line = serde_json::json!({
                    "name": binding.name,
                    "kind": if binding.is_stdio() { "stdio" } else { binding.kind().as_str() },
                    "description": binding.description,
                    "tenants": binding.tenants,
                    "input_schema": binding.input_schema,
                    "unavailable": runtime.unavailable(&binding.name),
                });
                crate::output::json(&line);
            }
        }
        ToolsFormat::Api(api) => {
            let definitions = runtime.definitions(api, tenant);
            for note in definitions.notes() {
                eprintln!("note: {api}: {note}");
            }
            let strict = definitions.tools.iter().filter(|t| t.strict).count();
            let shown = definitions
                .tools
                .iter()
                .filter(|t| t.definition.is_some())
                .count();
            eprintln!(
                "{api}: {shown} of {} tools, {strict} strict",
                definitions.tools.len()
            );
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let document = crate::output::json_text(&definitions.document);
            let written = std::io::Write::write_all(&mut out, document.as_bytes())
                .and_then(|()| std::io::Write::write_all(&mut out, b"\n"))
                .and_then(|()| std::io::Write::flush(&mut out));
            if let Err(error) = written {
                eprintln!("error: cannot write the definitions: {error}");
            }
        }
    }
}

fn list<'a>(bindings: impl Iterator<Item = &'a ToolBinding>, runtime: &Runtime) {
    for binding in bindings {
        let unset = runtime
            .unavailable(&binding.name)
            .map(|why| format!(" (unavailable: {why}, calls are refused)"))
            .unwrap_or_default();
        let (kind, server) = match (&binding.url, &binding.command) {
            (Some(url), _) => (binding.kind().as_str(), url.clone()),
            (None, Some(command)) => ("stdio", command.join(" ")),
            (None, None) => (binding.kind().as_str(), String::new()),
        };
        println!(
            "{:<24} {:<5} {} [{}] {}{}",
            text(&binding.name),
            kind,
            text(&server),
            text(&binding.tenants.join(",")),
            text(&binding.description),
            text(&unset)
        );
        if binding.command.is_some() {
            let sandbox = brain_config::Sandbox::summary(binding.sandbox.as_ref());
            println!("{:<24} sandbox: {}", "", text(&sandbox));
        }
    }
}
