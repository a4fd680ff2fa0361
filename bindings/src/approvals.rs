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
use crate::output::{self, text};

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
                    output::json(&record(approval));
                } else {
                    println!(
                        "{:<38} {:<10} {:<24} {:<20} {:<24} {}/{}/{}",
                        text(&approval.id),
                        state(approval),
                        timestamp(approval.created_ms),
                        text(&approval.binding),
                        text(&approval.principal),
                        text(&approval.key.tenant),
                        text(&approval.key.session),
                        text(&approval.key.call_id)
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

/// An approval as JSON: its arguments parsed, or — a row not written by brain — the stored
/// text as `arguments_text`, never hidden.
fn record(approval: &Approval) -> Value {
    let mut record = json!({
        "id": approval.id,
        "state": state(approval),
        "tenant": approval.key.tenant,
        "session": approval.key.session,
        "call_id": approval.key.call_id,
        "binding": approval.binding,
        "principal": approval.principal,
    });
    let fields = record.as_object_mut().expect("an object");
    match approval
        .arguments
        .as_deref()
        .map(serde_json::from_str::<Value>)
    {
        Some(Err(_)) => {
            fields.insert("arguments".into(), Value::Null);
            fields.insert("arguments_text".into(), json!(approval.arguments));
        }
        parsed => {
            fields.insert("arguments".into(), parsed.and_then(Result::ok).into());
        }
    }
    let rest = json!({
        "reason": approval.reason,
        "asked": timestamp(approval.created_ms),
        "expires": timestamp(approval.expires_ms),
        "decided_by": approval.decided_by,
        "decided": approval.decided_ms.map(timestamp),
        "used": approval.used_ms.map(timestamp),
    });
    if let Value::Object(rest) = rest {
        fields.extend(rest);
    }
    record
}

/// One approval: JSON, or a line per field, every value escaped; the arguments a line per
/// top-level key (each key and value as JSON, every key even when a tampered row repeats one),
/// or, when they are not JSON, one escaped string marked so.
fn show(approval: &Approval, json: bool) {
    let record = record(approval);
    if json {
        output::json(&record);
        return;
    }
    for (field, value) in record.as_object().into_iter().flatten() {
        match (field.as_str(), value) {
            (_, Value::Null) => {}
            ("arguments", _) => arguments(approval.arguments.as_deref().unwrap_or_default()),
            ("arguments_text", Value::String(text)) => {
                println!("arguments (not JSON): {}", output::json_text(text));
            }
            (_, Value::String(value)) => println!("{field:<11}{}", text(value)),
            (_, other) => println!("{field:<11}{}", output::json_text(other)),
        }
    }
}

/// A held call's arguments (JSON), a line per top-level key of an object.
fn arguments(stored: &str) {
    match output::entries(stored) {
        Some(entries) => {
            println!("arguments  ({} keys)", entries.len());
            for (key, value) in &entries {
                println!("  {}: {}", output::json_text(key), output::json_text(value));
            }
        }
        None => {
            let value: Value = serde_json::from_str(stored).unwrap_or_default();
            println!("arguments  {}", output::json_text(&value));
        }
    }
}
