//! `brain-harness approvals [list|show ID|approve ID|deny ID] [--tenant T] [--json]`: an
//! approver lists and decides the calls held for a person's approval in its tenants. A key
//! approver's private key is read from the file `BRAIN_APPROVER_KEY_FILE` names (each decision
//! signed with it); a token approver's token from `BRAIN_APPROVER_TOKEN`, else from stdin (one
//! line). Neither is ever printed. Listing needs one too: what an approver sees is the held
//! calls' arguments.

// The harness's output: the table or JSON Lines on stdout.
#![allow(clippy::print_stdout)]

use std::io::BufRead;

use brain_config::HostConfig;
use brain_runtime::journal::{Approval, Journal};
use brain_runtime::{Approver, ApproverKey};
use serde_json::{Value, json};

use crate::journal::timestamp;

/// The variable the approver's token is read from.
pub(crate) const APPROVER_TOKEN_ENV: &str = "BRAIN_APPROVER_TOKEN";

/// What `brain-harness approvals` does.
#[derive(clap::Subcommand, Debug, Clone)]
pub(crate) enum Action {
    /// The pending approvals (with `--all`, decided and expired ones too), newest first.
    List {
        /// Decided, used and expired approvals too.
        #[arg(long)]
        all: bool,
    },
    /// One approval, with the held call's arguments while it is pending.
    Show {
        /// The approval's id (`apr_…`).
        id: String,
    },
    /// Approve a pending approval: the held call, retried with the same call id and
    /// arguments, then runs once.
    Approve {
        /// The approval's id.
        id: String,
    },
    /// Deny a pending approval.
    Deny {
        /// The approval's id.
        id: String,
    },
}

/// Runs `action` as the approver whose token the environment (or stdin) holds.
pub(crate) async fn run(
    config: &HostConfig,
    journal: Journal,
    action: Action,
    tenant: Option<&str>,
    json: bool,
) -> Result<(), String> {
    let approver = match ApproverKey::from_env().map_err(|e| e.to_string())? {
        Some(key) => Approver::with_key(config, journal, key),
        None => Approver::new(config, journal, &token()?),
    }
    .map_err(|e| e.to_string())?;
    match action {
        Action::List { all } => {
            let approvals = approver
                .list(tenant, !all, 0)
                .await
                .map_err(|e| e.to_string())?;
            if !json {
                println!(
                    "{:<38} {:<10} {:<24} {:<20} {:<24} CALL",
                    "APPROVAL", "STATE", "ASKED", "BINDING", "PRINCIPAL"
                );
            }
            for approval in &approvals {
                if json {
                    println!("{}", record(approval));
                } else {
                    println!(
                        "{:<38} {:<10} {:<24} {:<20} {:<24} {}/{}/{}",
                        approval.id,
                        state(approval),
                        timestamp(approval.created_ms),
                        approval.binding,
                        approval.principal,
                        approval.key.tenant,
                        approval.key.session,
                        approval.key.call_id
                    );
                }
            }
            Ok(())
        }
        Action::Show { id } => {
            let approval = approver.show(&id).await.map_err(|e| e.to_string())?;
            show(&approval, json);
            Ok(())
        }
        Action::Approve { id } => {
            let approval = approver.approve(&id).await.map_err(|e| e.to_string())?;
            show(&approval, json);
            Ok(())
        }
        Action::Deny { id } => {
            let approval = approver.deny(&id).await.map_err(|e| e.to_string())?;
            show(&approval, json);
            Ok(())
        }
    }
}

/// The approver's token: `BRAIN_APPROVER_TOKEN`, else the first line of stdin.
fn token() -> Result<String, String> {
    if let Some(token) = std::env::var(APPROVER_TOKEN_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(token);
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the approver's token from stdin: {e}"))?;
    let token = line.trim().to_owned();
    if token.is_empty() {
        return Err(format!(
            "no approver token: set {APPROVER_TOKEN_ENV}, or write the token on stdin"
        ));
    }
    Ok(token)
}

/// An approval's state as shown: an open one past its expiry is `expired`.
fn state(approval: &Approval) -> &'static str {
    if approval.expired() {
        "expired"
    } else {
        approval.state.as_str()
    }
}

fn record(approval: &Approval) -> Value {
    let arguments = approval
        .arguments
        .as_deref()
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    json!({
        "id": approval.id,
        "state": state(approval),
        "tenant": approval.key.tenant,
        "session": approval.key.session,
        "call_id": approval.key.call_id,
        "binding": approval.binding,
        "principal": approval.principal,
        "arguments": arguments,
        "reason": approval.reason,
        "asked": timestamp(approval.created_ms),
        "expires": timestamp(approval.expires_ms),
        "decided_by": approval.decided_by,
        "decided": approval.decided_ms.map(timestamp),
        "used": approval.used_ms.map(timestamp),
    })
}

fn show(approval: &Approval, json: bool) {
    let record = record(approval);
    if json {
        println!("{record}");
        return;
    }
    for (field, value) in record.as_object().into_iter().flatten() {
        let text = match value {
            Value::Null => continue,
            Value::String(text) => text.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        println!("{field:<11}{text}");
    }
}
