//! The transports, one module each, behind the lifecycle's `Transport` trait
//! (`call/exchange.rs`): each supplies the open, write and read steps and the cleanup, and
//! reports facts; none decides the order of the phases or a failure's `unknown_outcome`, and
//! none names another.
//!
//! - `session.rs` — MCP sessions (2024-11-05 to 2025-11-25) over Streamable HTTP;
//! - `stateless.rs` — MCP 2026-07-28 over Streamable HTTP, without a session;
//! - `streamable.rs` — what those two share: the `tools/call` POST and its answer;
//! - `stdio.rs` — MCP over a child process's stdin/stdout (`stdio/process.rs`: the process);
//! - `http_tool.rs` — the host's plain HTTP and SSE tools (brain's own wire contract).
//!
//! A binding's [`Route`] is the one value of its transport's own type that the runtime keeps
//! beside the binding's shared facts (`tool::Tool`).

mod http_tool;
pub(crate) mod session;
mod stateless;
pub(crate) mod stdio;
mod streamable;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::call::{Started, run};
use crate::event::ToolResult;
use crate::session_token::SessionTokenKey;
use brain_config::{BindingKind, ToolBinding};
use http_tool::HttpTool;
use session::Session;
use stateless::Stateless;
use stdio::{Launch, Spares, Stdio, StdioServer};
use streamable::McpHttp;

/// How one binding's calls travel, with what only that transport needs.
pub(crate) enum Route {
    /// An MCP server over Streamable HTTP: a session, or 2026-07-28 without one.
    Mcp(Arc<McpHttp>),
    /// An MCP server started as a process (`command`).
    Stdio(Arc<StdioServer>),
    /// An HTTP or SSE tool.
    HttpTool(Arc<HttpTool>),
}

/// What building a binding's route found missing (only allowed with
/// `RuntimeBuilder::allow_missing_tokens`).
#[derive(Default)]
pub(crate) struct Missing {
    /// `env_from` host variables that were not set.
    pub(crate) env: Vec<String>,
    /// `inspect_session` is set but the session token key is not.
    pub(crate) session_key: bool,
}

impl Route {
    /// The route of `binding`: its stdio launch resolved (`env_from` read through `env`), its
    /// routing headers computed, its session token key given. Every missing variable is
    /// recorded in `missing_vars` (variable → where it is named).
    pub(crate) fn of(
        binding: &ToolBinding,
        env: &dyn Fn(&str) -> Option<String>,
        session_key: Option<&Arc<SessionTokenKey>>,
        missing_vars: &mut BTreeMap<String, Vec<String>>,
    ) -> (Route, Missing) {
        let mut missing = Missing::default();
        let route = match (binding.kind(), &binding.command) {
            (BindingKind::Mcp, Some(command)) => {
                let mut vars: Vec<(String, String)> = binding
                    .env
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut secrets = Vec::new();
                for (child, host) in binding.env_from.iter().flatten() {
                    match env(host) {
                        Some(value) => {
                            secrets.push(value.clone());
                            vars.push((child.clone(), value));
                        }
                        None => {
                            missing_vars
                                .entry(host.clone())
                                .or_default()
                                .push(format!("env_from of {}", binding.name));
                            missing.env.push(host.clone());
                        }
                    }
                }
                let launch = Arc::new(Launch {
                    command: command.clone(),
                    env: vars,
                    secrets,
                    cwd: binding.cwd.clone(),
                    sandbox: brain_config::Sandbox::rules(binding.sandbox.as_ref()),
                });
                let spares = match binding.prewarm {
                    Some(wanted) if wanted > 0 && missing.env.is_empty() => {
                        Some(Arc::new(Spares::new(wanted as usize)))
                    }
                    _ => None,
                };
                Route::Stdio(Arc::new(StdioServer {
                    launch,
                    spares,
                    pinned: binding.protocol_version.clone(),
                    tool_name: binding.mcp_tool.clone().unwrap_or_default(),
                }))
            }
            (BindingKind::Mcp, None) => Route::Mcp(Arc::new(McpHttp {
                param_headers: crate::routing::param_headers(&binding.input_schema),
                stateless_only: AtomicBool::new(false),
            })),
            (BindingKind::Http | BindingKind::Sse, _) => {
                let inspects = binding.inspect_session == Some(true);
                missing.session_key = inspects && session_key.is_none();
                Route::HttpTool(Arc::new(HttpTool {
                    session_key: session_key.filter(|_| inspects).cloned(),
                }))
            }
        };
        (route, missing)
    }

    /// Starts the spares a stdio binding with `prewarm` keeps, in the background.
    pub(crate) fn refill(&self, tool: &Arc<crate::tool::Tool>, pins: &Arc<crate::pins::Pins>) {
        if let Route::Stdio(server) = self {
            server.refill(tool, pins);
        }
    }

    /// Runs one call through the lifecycle on this route's transport: a session, or — for a
    /// binding pinned to 2026-07-28, or whose server refused a session before — none; a
    /// process; one POST. Each transport's lifecycle is boxed: a call in flight holds its own
    /// transport's state, not the largest of the four (figures in the performance log).
    pub(crate) async fn call(&self, started: Started<'_>) -> ToolResult {
        match self {
            Route::HttpTool(route) => Box::pin(run(Arc::clone(route), started)).await,
            Route::Stdio(server) => {
                let pins = Arc::clone(started.pins);
                Box::pin(run(Stdio::new(Arc::clone(server), pins), started)).await
            }
            Route::Mcp(route) => {
                let stateless = match started.tool.binding.pinned_revision() {
                    Some(revision) => revision == crate::revision::STATELESS,
                    None => route.stateless_only.load(Ordering::Relaxed),
                };
                let route = Arc::clone(route);
                if stateless {
                    Box::pin(run(Stateless { route }, started)).await
                } else {
                    Box::pin(run(Session { route }, started)).await
                }
            }
        }
    }

    /// The routing headers of a 2026-07-28 call (for the per-call benchmark).
    pub(crate) fn param_headers(&self) -> &[crate::routing::ParamHeader] {
        match self {
            Route::Mcp(route) => &route.param_headers,
            _ => &[],
        }
    }
}
