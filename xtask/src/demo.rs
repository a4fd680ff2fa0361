//! `cargo xtask demo`: the main job on the embedded default config, `bindings/host.json`.
//!
//! Validates the config and lists its bindings; shows what the compiler says about a copy with
//! typical mistakes; then starts the test MCP server on a free loopback port, discovers two of its
//! tools, points the bindings at it and calls tools through `brain-harness`: a plain call, one
//! with live progress, a 2026-07-28 call, a stdio server, an HTTP tool, an SSE tool with progress
//! and a session inspection token the server verifies, a refused call and a failing one with its
//! `unknown_outcome`; then one call id sent twice — the retry answered from the call journal
//! (SQLite, in the demo's directory), the server's count unchanged — the journal's listing and
//! the audit chain verified (checkpoints signed when `BRAIN_AUDIT_KEY_FILE` names a key); then
//! stops the server, and removes its directory unless `--keep`. It ends by naming the other commands: typed codegen, conformance, benchmarks, soak.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use brain_config::{BindingKind, ConfigError, HostConfig};
use serde_json::{Value, json};

use crate::workspace::workspace_root;

/// `cargo xtask demo`: the five steps of the module's doc, on the default config, then the test
/// server stopped and the demo's directory removed (unless `keep`).
pub(crate) fn run(keep: bool) -> anyhow::Result<ExitCode> {
    println!("== 1. validate the default config: cargo xtask check --config bindings/host.json");
    let Some(config) = validate_default()? else {
        return Ok(ExitCode::FAILURE);
    };
    print_bindings(&config);
    show_mistakes(&config)?;

    println!("\n== 3. discover tools from a live MCP server (the test server, on loopback)");
    build_binaries()?;
    // The key session inspection tokens are signed with (brain-harness) and verified with (the
    // test server's SSE tool): a fresh one per run, shared through BRAIN_SESSION_TOKEN_KEY.
    let session_key = uuid::Uuid::new_v4().simple().to_string();
    let server = TestServer::start(&session_key)?;
    discover_from(&server)?;

    println!("\n== 4. calls through brain-harness, against the same server");
    let dir = std::env::temp_dir().join(format!("brain-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let demo_config = dir.join("host.json");
    std::fs::write(&demo_config, retarget(&config, &server.url)?)?;
    // Every call is journaled; the harness's default journal is
    // `$XDG_STATE_HOME/brain/state.db`, the demo keeps its own.
    let state = format!("sqlite:{}", dir.join("state.db").display());
    let h = HarnessEnv {
        session_key: &session_key,
        state: &state,
        config: &demo_config,
    };
    call_tools(&h)?;
    retry_once(&h, &server)?;
    let verify = journal_and_audit(&h, &dir)?;
    drop(server);
    println!("\n   test server stopped");
    if keep {
        println!(
            "   the demo's config and journal are kept in {}: try\n   \
             BRAIN_STATE_URL={state} target/debug/brain-harness --config {} {}",
            dir.display(),
            demo_config.display(),
            verify.join(" ")
        );
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }

    println!("\n== more");
    println!("   typed bindings: bindings/src/generated (cargo xtask codegen); drift against live");
    println!(
        "   servers: cargo xtask discover --check bindings/host.json; the official MCP client"
    );
    println!("   conformance suite: cargo xtask conformance; performance targets measured side by");
    println!("   side: cargo xtask bench; many calls under random faults: cargo xtask soak");
    Ok(ExitCode::SUCCESS)
}

/// What each `brain-harness` run of the demo is given: the session token key, the journal's
/// URL and the demo's host config (pointed at the test server).
struct HarnessEnv<'a> {
    session_key: &'a str,
    state: &'a str,
    config: &'a std::path::Path,
}

/// Step 1: loads and validates the default host config, `bindings/host.json`; `None` (the
/// diagnostics printed) when it is invalid.
fn validate_default() -> anyhow::Result<Option<HostConfig>> {
    let path = workspace_root().join("bindings/host.json");
    let config = match brain_config::load_file(&path) {
        Ok(config) => config,
        Err(ConfigError::Invalid(diagnostics)) => {
            eprintln!("{diagnostics}");
            return Ok(None);
        }
        Err(error) => return Err(error.into()),
    };
    println!(
        "ok: bindings/host.json: {}\n",
        crate::check::summary(&config)
    );
    Ok(Some(config))
}

/// Step 2: what the config compiler says about a copy of `config` with three typical mistakes.
fn show_mistakes(config: &HostConfig) -> anyhow::Result<()> {
    println!("\n== 2. the same config with three mistakes a reviewer might miss");
    let broken = break_config(config)?;
    println!("   - `inspect_session` on an MCP binding");
    println!("   - `timeout_secs` instead of `timeout_seconds`");
    println!("   - a second binding named `echo`\n");
    match brain_config::parse(broken.as_bytes(), "broken-host.json") {
        Err(diagnostics) => println!("{diagnostics}"),
        Ok(_) => bail!("the broken config was accepted"),
    }
    Ok(())
}

/// Step 3: discovers two tools of the test `server` and shows the bindings made from them, and
/// that they pass every config rule.
fn discover_from(server: &TestServer) -> anyhow::Result<()> {
    println!(
        "   cargo xtask discover --url {} --tenant local --tools echo,weather\n",
        server.url
    );
    let discovery = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(brain_runtime::discover::discover(
            &brain_runtime::discover::DiscoverOptions {
                url: server.url.clone(),
                token: None,
                auth: None,
                timeout: std::time::Duration::from_secs(30),
                ca_file: None,
            },
        ))?;
    let settings = brain_config::discovery::BindingSettings {
        server: brain_config::discovery::Server::Url(server.url.clone()),
        token_env: None,
        tenants: vec!["local".into()],
        timeout_seconds: brain_config::DEFAULT_TIMEOUT_SECONDS,
        max_output_bytes: brain_config::DEFAULT_MAX_OUTPUT_BYTES,
        protocol_version: discovery.protocol_version.clone(),
        on_input_request: None,
        auth: None,
        server_tasks: discovery.server_tasks,
        ca_file: None,
    };
    let discovered: Vec<_> = ["echo", "weather"]
        .iter()
        .filter_map(|name| discovery.tools.iter().find(|t| t["name"] == *name))
        .map(|tool| brain_config::discovery::binding_from_tool(tool, &settings))
        .collect();
    println!("{}", serde_json::to_string_pretty(&discovered)?);
    let count = discovered.len();
    let errors = brain_config::validate(&HostConfig {
        model_apis: None,
        serve: None,
        tenant_limits: None,
        policies: None,
        approvals: None,
        audit: None,
        schema: None,
        tools: discovered,
    });
    println!(
        "   {} of the server's {} tools discovered (MCP {}); the bindings pass every config rule: {}",
        count,
        discovery.tools.len(),
        discovery.protocol_version,
        errors.is_empty()
    );
    Ok(())
}

/// Step 4: calls through `brain-harness`: a plain call, live progress, MCP 2026-07-28, a stdio
/// server, an HTTP tool, an SSE tool checking the session token, a refused and a failing call.
fn call_tools(h: &HarnessEnv<'_>) -> anyhow::Result<()> {
    let calls: [(&str, &str, &str, &str); 8] = [
        (
            "a plain call",
            "local",
            "echo",
            r#"{"message": "hello from brain"}"#,
        ),
        (
            "progress, streamed live",
            "local",
            "long_task",
            r#"{"steps": 8, "delay_ms": 150}"#,
        ),
        (
            "structured output, MCP 2026-07-28 (no session)",
            "local",
            "weather",
            r#"{"city": "Oslo"}"#,
        ),
        (
            "a stdio server: the test server as a process (`brain-test-server --stdio`), one \
             fresh process per call, a spare kept started (`prewarm: 1`)",
            "local",
            "echo_stdio",
            r#"{"message": "hello over stdio"}"#,
        ),
        (
            "an HTTP tool (no MCP): one POST of the arguments with the scope and an \
             Idempotency-Key as headers, a JSON answer",
            "local",
            "webhook_echo",
            r#"{"message": "hello over plain HTTP"}"#,
        ),
        (
            "an SSE tool with progress and inspect_session: the server verified the signed \
             session token brain sent and returns its claims",
            "local",
            "session_claims",
            "{}",
        ),
        (
            "refused: tenant not allowed (no I/O)",
            "intruder",
            "echo",
            r#"{"message": "x"}"#,
        ),
        (
            "failing: output breaks output_schema (unknown_outcome)",
            "local",
            "weather_unchecked",
            "{}",
        ),
    ];
    for (what, tenant, tool, args) in calls {
        println!("\n-- {what}: brain-harness call --tenant {tenant} {tool} '{args}'");
        let status = Command::new(harness())
            .env(brain_runtime::SESSION_TOKEN_KEY_ENV, h.session_key)
            .env("BRAIN_STATE_URL", h.state)
            .arg("--config")
            .arg(h.config)
            .args(["call", "--tenant", tenant, tool, args])
            .status()
            .context("cannot run brain-harness")?;
        println!("   (exit {})", status.code().unwrap_or(-1));
    }
    Ok(())
}

/// Step 5: one call id sent twice: the retry is answered from the call journal, and the
/// `server` runs the tool once.
fn retry_once(h: &HarnessEnv<'_>, server: &TestServer) -> anyhow::Result<()> {
    println!("\n== 5. at most once across retries: the call journal (SQLite, embedded)");
    let call_id = format!("demo-{}", std::process::id());
    let runs = || -> anyhow::Result<u64> {
        let stats = server.stats()?;
        Ok(stats["calls"].as_u64().unwrap_or(0))
    };
    for what in ["the call", "the host retries it with the same call id"] {
        println!(
            "\n-- {what}: brain-harness call --tenant local --call-id {call_id} echo '{{\"message\": \"once\"}}'"
        );
        let before = runs()?;
        let status = Command::new(harness())
            .env(brain_runtime::SESSION_TOKEN_KEY_ENV, h.session_key)
            .env("BRAIN_STATE_URL", h.state)
            .arg("--config")
            .arg(h.config)
            .args(["call", "--tenant", "local", "--call-id", &call_id, "echo"])
            .arg(r#"{"message": "once"}"#)
            .status()
            .context("cannot run brain-harness")?;
        println!(
            "   (exit {}; the server ran the tool {} time(s) for it)",
            status.code().unwrap_or(-1),
            runs()? - before
        );
    }
    Ok(())
}

/// The journal's listing and the audit chain verified (with the public half of
/// `BRAIN_AUDIT_KEY_FILE`'s key, written to `dir`, when set); the `verify` command's words.
fn journal_and_audit(h: &HarnessEnv<'_>, dir: &std::path::Path) -> anyhow::Result<Vec<String>> {
    println!("\n-- the calls journaled: brain-harness journal");
    Command::new(harness())
        .env("BRAIN_STATE_URL", h.state)
        .arg("journal")
        .status()
        .context("cannot run brain-harness")?;
    // With BRAIN_AUDIT_KEY_FILE, each harness above signed a checkpoint as it exited; verify
    // checks them with the key's public half.
    let mut verify = vec!["audit".to_owned(), "verify".to_owned()];
    if let Some(key) = brain_runtime::audit::AuditKey::from_env()? {
        let public = dir.join("audit.pub");
        std::fs::write(&public, key.public_pem())?;
        verify.extend(["--public-key".to_owned(), public.display().to_string()]);
    }
    println!(
        "\n-- the audit chain of what ran: brain-harness {}",
        verify.join(" ")
    );
    Command::new(harness())
        .env("BRAIN_STATE_URL", h.state)
        .arg("--config")
        .arg(h.config)
        .args(&verify)
        .status()
        .context("cannot run brain-harness")?;
    Ok(verify)
}

fn target_dir() -> std::path::PathBuf {
    crate::workspace::target_dir().join("debug")
}

fn harness() -> std::path::PathBuf {
    target_dir().join("brain-harness")
}

fn build_binaries() -> anyhow::Result<()> {
    crate::workspace::cargo_build(
        &[
            "--quiet",
            "--bin",
            "brain-harness",
            "--bin",
            "brain-test-server",
        ],
        "brain-harness and brain-test-server",
    )
}

/// The test server as a child process, killed when dropped.
struct TestServer {
    child: Child,
    url: String,
}

impl TestServer {
    fn start(session_key: &str) -> anyhow::Result<TestServer> {
        let mut child = Command::new(target_dir().join("brain-test-server"))
            .env(brain_runtime::SESSION_TOKEN_KEY_ENV, session_key)
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start brain-test-server")?;
        let mut url = String::new();
        BufReader::new(child.stdout.take().context("its stdout")?).read_line(&mut url)?;
        Ok(TestServer {
            child,
            url: url.trim().to_owned(),
        })
    }

    /// Its counters (`GET /stats`): what reached it.
    fn stats(&self) -> anyhow::Result<Value> {
        use std::io::{Read, Write};
        let authority = self
            .url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let mut stream = std::net::TcpStream::connect(&authority)?;
        write!(stream, "GET /stats HTTP/1.0\r\nHost: {authority}\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).context("the test server's /stats")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config with every MCP binding pointed at `url`, every HTTP and SSE tool at the same
/// server's tool endpoints, and every stdio binding of the test server at the binary just built.
fn retarget(config: &HostConfig, url: &str) -> anyhow::Result<String> {
    let mut config = config.clone();
    let test_server = target_dir().join("brain-test-server");
    let origin = url.trim_end_matches("/mcp");
    for binding in &mut config.tools {
        let kind = binding.kind();
        if let Some(target) = binding.url.as_mut() {
            // MCP bindings go to the server's MCP endpoint; HTTP and SSE tools keep their path
            // on its origin.
            *target = match kind {
                BindingKind::Mcp => url.to_owned(),
                _ => match target.find("/tools/") {
                    Some(at) => format!("{origin}{}", &target[at..]),
                    None => target.clone(),
                },
            };
        }
        if let Some(program) = binding.command.as_mut().and_then(|c| c.first_mut())
            && program == "brain-test-server"
        {
            *program = test_server.display().to_string();
        }
    }
    config.schema = None;
    Ok(serde_json::to_string_pretty(&config)?)
}

fn print_bindings(config: &HostConfig) {
    println!(
        "   {:<18} {:<5} {:<15} {:<10} {:<14} {:>7} {:>10}",
        "name", "kind", "mcp_tool", "protocol", "tenants", "timeout", "max output"
    );
    for binding in &config.tools {
        println!(
            "   {:<18} {:<5} {:<15} {:<10} {:<14} {:>6}s {:>10}",
            binding.name,
            if binding.is_stdio() {
                "stdio"
            } else {
                binding.kind().as_str()
            },
            binding.mcp_tool.as_deref().unwrap_or("-"),
            binding.pinned_revision().unwrap_or("any"),
            binding.tenants.join(","),
            binding.timeout_seconds,
            binding.max_output_bytes
        );
    }
}

/// The config's text with three mistakes put in.
fn break_config(config: &HostConfig) -> anyhow::Result<String> {
    let mut value = serde_json::to_value(config)?;
    let tools = value["tools"]
        .as_array_mut()
        .context("the config has a tools array")?;
    let first = tools
        .first()
        .cloned()
        .context("the default config has a binding")?;
    tools[0]["inspect_session"] = json!(true);
    if let Some(Value::Object(second)) = tools.get_mut(1) {
        let timeout = second.remove("timeout_seconds").unwrap_or(json!(30));
        second.insert("timeout_secs".into(), timeout);
    }
    tools.push(first);
    Ok(serde_json::to_string_pretty(&value)?)
}
