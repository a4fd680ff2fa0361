//! `brain-harness drift`: what the runtimes on the state's store saw — each process's first
//! sighting of a server listing a bound tool otherwise than its pin (the store's `brain_drift`
//! table) — and, with `--live`, each MCP binding's server listed now and compared with its
//! pin. The call path never reads the table: each process refuses drift from its own listing.

// The harness's output: the table or JSON Lines on stdout.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::time::Duration;

use brain_config::discovery::Server;
use brain_config::pin::{self, PinCheck};
use brain_config::{BindingKind, HostConfig, OnDrift, ToolBinding};
use brain_runtime::discover::{DiscoverAuth, list_server};
use brain_runtime::journal::Journal;
use serde_json::json;

use crate::journal::timestamp;
use crate::output::{self, text};

/// What `brain-harness drift` shows.
pub(crate) struct Report {
    /// List the servers now too.
    pub(crate) live: bool,
    /// The user's own token the servers of bindings on behalf of users are listed with.
    pub(crate) subject: Option<brain_runtime::SubjectToken>,
    /// JSON Lines.
    pub(crate) json: bool,
    /// At most this many recorded (0: all).
    pub(crate) limit: usize,
}

/// Prints the drift recorded in `journal`'s store (and, with `live`, found now); returns
/// whether any recorded concerns a binding's current pin (with `live`: whether any binding
/// differs from its pin now).
pub(crate) async fn show(
    config: &HostConfig,
    journal: &Journal,
    report: &Report,
) -> Result<bool, String> {
    let recorded = journal
        .drifts(report.limit)
        .await
        .map_err(|error| format!("cannot read the drift: {error}"))?;
    let pins: BTreeMap<&str, String> = config
        .tools
        .iter()
        .map(|b| (b.name.as_str(), pin_of(b)))
        .collect();
    let mut current = false;
    if !report.json {
        println!(
            "{:<24} {:<24} {:<8} {:<40} {:<20} PROCESS",
            "FIRST SEEN", "BINDING", "ACTION", "FIELDS", "LISTED"
        );
    }
    for drift in &recorded {
        // A record under another pin: re-pinned since, or another config's binding.
        let now = pins.get(drift.binding.as_str()) == Some(&drift.pinned);
        current |= now;
        if report.json {
            output::json(&json!({"binding": drift.binding, "fields": drift.fields,
                "refused": drift.refused, "listed": drift.listed, "pinned": drift.pinned,
                "current_pin": now, "process": drift.process,
                "first_seen": timestamp(drift.first_seen_ms)}));
        } else {
            println!(
                "{:<24} {:<24} {:<8} {:<40} {:<20} {}{}",
                timestamp(drift.first_seen_ms),
                text(&drift.binding),
                action(drift.refused),
                text(&drift.fields.join(",")),
                text(short(&drift.listed)),
                text(&drift.process),
                if now { "" } else { " (not the config's pin)" }
            );
        }
    }
    if report.live {
        return live(config, journal, report).await;
    } else if recorded.is_empty() && !report.json {
        output::line(&format!("no drift recorded in {}", journal.describe()));
    }
    Ok(current)
}

/// Lists each MCP binding's server now (one listing per server and access, as `cargo xtask
/// discover --check` does) and prints each binding that differs from its pin; returns whether
/// any does. A binding on behalf of users is listed as the user whose token `report.subject` is.
async fn live(config: &HostConfig, journal: &Journal, report: &Report) -> Result<bool, String> {
    type Access = (Option<String>, Option<String>);
    let mut servers: BTreeMap<(Server, Access), Vec<&ToolBinding>> = BTreeMap::new();
    for binding in config.tools.iter().filter(|b| b.kind() == BindingKind::Mcp) {
        if let Some(server) = Server::of(binding) {
            let auth =
                (binding.auth.as_ref()).map(|a| serde_json::to_string(a).unwrap_or_default());
            let access = (binding.token_env.clone(), auth);
            servers.entry((server, access)).or_default().push(binding);
        }
    }
    let mut drifted = false;
    for ((server, _), bindings) in servers {
        let first = bindings[0];
        let on_behalf = first.auth.as_ref().is_some_and(|a| a.on_behalf_of_users());
        if on_behalf && report.subject.is_none() {
            return Err(format!(
                "{server} is called on behalf of users (`auth.type` `token_exchange` of {:?}): \
                 pass --subject-token-env VAR, VAR holding a user's access token, to list it",
                first.name
            ));
        }
        let auth = first.auth.as_ref().map(|auth| DiscoverAuth {
            config: auth.clone(),
            secrets: (auth.env_vars().into_iter())
                .filter_map(|(_, var)| Some((var.to_owned(), std::env::var(var).ok()?)))
                .collect(),
            tenant: first.tenants.first().cloned().unwrap_or_default(),
            store: Some(journal.grants()),
            agent: None,
            subject: report.subject.clone().filter(|_| on_behalf),
        });
        let listed = list_server(
            &server,
            first.token_env.as_deref(),
            auth,
            first.ca_file.as_deref(),
            Duration::from_secs(30),
        )
        .await
        .map_err(|error| format!("cannot list the tools of {server}: {error}"))?;
        for binding in bindings {
            let name = binding.mcp_tool.as_deref().unwrap_or(&binding.name);
            let entries: Vec<&serde_json::Value> = (listed.tools.iter())
                .filter(|t| t["name"] == name)
                .collect();
            let check = pin::check(binding, &entries, binding.on_drift() == OnDrift::Refuse);
            drifted |= !check.unchanged();
            print_live(binding, &check, report.json);
        }
    }
    Ok(drifted)
}

fn print_live(binding: &ToolBinding, check: &PinCheck, json: bool) {
    let fields: Vec<&String> = check.refused.iter().chain(&check.warned).collect();
    if json {
        output::json(
            &json!({"binding": binding.name, "live": true, "fields": fields,
            "refused": !check.refused.is_empty(), "pinned": pin_of(binding)}),
        );
    } else if check.unchanged() {
        println!("live: {:<24} matches its pin", text(&binding.name));
    } else {
        let fields: Vec<&str> = fields.iter().map(|f| f.as_str()).collect();
        println!(
            "live: {:<24} {:<8} {} (review with `cargo xtask discover --check`)",
            text(&binding.name),
            action(!check.refused.is_empty()),
            text(&fields.join(","))
        );
    }
}

/// A binding's pin digest, as the drift records name it (empty: unpinned).
fn pin_of(binding: &ToolBinding) -> String {
    binding
        .pin
        .as_ref()
        .map_or_else(String::new, |p| p.digest.clone())
}

fn action(refused: bool) -> &'static str {
    if refused { "refused" } else { "warned" }
}

/// `sha256:` and the first 12 hex digits.
fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}
