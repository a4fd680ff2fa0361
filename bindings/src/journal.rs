//! The harness's call journal: where it is (`--state URL`, `BRAIN_STATE_URL`, else SQLite in
//! the XDG state directory) and `brain-harness journal`, the audit of journaled calls.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use brain_runtime::journal::{Entry, Filter, Journal};

use crate::output::{self, text};

/// The variable naming the state URL.
pub(crate) const STATE_URL_ENV: &str = "BRAIN_STATE_URL";
/// The variable setting how long finished entries are kept (e.g. `24h`, `30m`).
pub(crate) const RETENTION_ENV: &str = "BRAIN_JOURNAL_RETENTION";

/// The journal `--state` (else `$BRAIN_STATE_URL`, else the SQLite file in the state
/// directory) names, with `$BRAIN_JOURNAL_RETENTION` and the config's `audit` applied, and the
/// key `$BRAIN_AUDIT_KEY_FILE` names to sign checkpoints.
pub(crate) async fn open(
    config: &brain_config::HostConfig,
    state: Option<&str>,
) -> Result<Journal, String> {
    let url = match state.map(str::to_owned).or_else(|| {
        std::env::var(STATE_URL_ENV)
            .ok()
            .filter(|url| !url.is_empty())
    }) {
        Some(url) => url,
        None => {
            let path = brain_runtime::journal::default_path().ok_or(
                "no place for the call journal: set XDG_STATE_HOME or HOME, or choose one with \
                 --state sqlite:PATH (or BRAIN_STATE_URL)",
            )?;
            format!("sqlite:{}", path.display())
        }
    };
    let mut journal = Journal::open(&url)
        .await
        .map_err(|error| format!("cannot open the call journal: {error}"))?;
    if let Ok(text) = std::env::var(RETENTION_ENV) {
        let retention =
            parse_duration(&text).map_err(|error| format!("{RETENTION_ENV}={text:?}: {error}"))?;
        journal = journal.retention(retention);
    }
    let key = brain_runtime::audit::AuditKey::from_env().map_err(|e| e.to_string())?;
    let settings = brain_runtime::audit::AuditSettings::from_config(config.audit.as_ref(), key)
        .map_err(|e| format!("the config's audit.public_keys: {e}"))?;
    Ok(journal.audit(settings))
}

/// The harness's tokio runtime.
pub(crate) fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

/// The state's store (journal and tokens), with an earlier brain's token file imported.
pub(crate) async fn state_store(
    config: &brain_config::HostConfig,
    state: Option<&str>,
) -> Result<Journal, String> {
    if std::env::var_os("BRAIN_TOKEN_STORE").is_some() {
        return Err(
            "BRAIN_TOKEN_STORE is no longer read: tokens live in the state's store with the call \
             journal (--state URL or BRAIN_STATE_URL; SQLite in the state directory by default), \
             and a tokens.json is imported from there on first use — unset BRAIN_TOKEN_STORE"
                .into(),
        );
    }
    let journal = open(config, state).await?;
    if let Some(path) =
        brain_runtime::auth::FileTokenStore::default_path().filter(|path| path.exists())
    {
        let file = brain_runtime::auth::FileTokenStore::new(&path);
        let env = |var: &str| std::env::var(var).ok();
        let imported =
            brain_runtime::auth::import_token_file(&file, &config.tools, journal.grants(), env)
                .await
                .map_err(|e| format!("cannot import {}: {e}", path.display()))?;
        eprintln!(
            "imported {imported} grant(s) from {} into {}; it is now {}.imported",
            path.display(),
            journal.describe(),
            path.display()
        );
    }
    Ok(journal)
}

/// `90s`, `30m`, `24h`, `7d`, or seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| "a duration is a number and a unit: 90s, 30m, 24h, 7d".to_owned())?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => {
            return Err(format!(
                "unknown unit {other:?}: a duration is a number and a unit: 90s, 30m, 24h, 7d"
            ));
        }
    };
    Ok(Duration::from_secs(number.saturating_mul(seconds)))
}

/// What `brain-harness journal` lists.
pub(crate) struct Audit {
    pub(crate) filter: Filter,
    pub(crate) json: bool,
}

/// Prints the entries `audit` selects, newest first: one line each, or JSON Lines.
pub(crate) async fn list(journal: &Journal, audit: &Audit) -> Result<(), String> {
    let entries = journal
        .list(&audit.filter)
        .await
        .map_err(|error| error.to_string())?;
    if audit.json {
        for entry in &entries {
            output::json(&to_json(entry, audit.filter.results));
        }
        return Ok(());
    }
    println!(
        "{:<24} {:<12} {:<12} {:<36} {:<20} {:<9} {:<8} {:<7} {:>9} TRACE",
        "TIME",
        "TENANT",
        "SESSION",
        "CALL ID",
        "BINDING",
        "STATE",
        "IS_ERROR",
        "UNKNOWN",
        "DURATION"
    );
    for entry in &entries {
        let flag = |value: Option<bool>| value.map_or("-", |v| if v { "true" } else { "false" });
        let duration = entry
            .finished_ms
            .map_or("-".to_owned(), |f| format!("{}ms", f - entry.created_ms));
        println!(
            "{:<24} {:<12} {:<12} {:<36} {:<20} {:<9} {:<8} {:<7} {:>9} {}",
            timestamp(entry.created_ms),
            text(&entry.key.tenant),
            text(&entry.key.session),
            text(&entry.key.call_id),
            text(&entry.binding),
            entry.state.as_str(),
            flag(entry.is_error),
            flag(entry.unknown_outcome),
            duration,
            text(entry.trace_id.as_deref().unwrap_or("-")),
        );
        if audit.filter.results
            && let Some(result) = &entry.result
        {
            // The stored result is JSON: its escapes stay JSON's; a row that is not, escaped.
            match serde_json::from_str::<serde_json::Value>(result) {
                Ok(_) => println!("  result: {}", output::escape_json(result)),
                Err(_) => println!("  result (not JSON): {}", text(result)),
            }
        }
    }
    Ok(())
}

fn to_json(entry: &Entry, results: bool) -> serde_json::Value {
    let mut object = serde_json::json!({
        "time": timestamp(entry.created_ms),
        "tenant": entry.key.tenant,
        "session": entry.key.session,
        "call_id": entry.key.call_id,
        "binding": entry.binding,
        "state": entry.state.as_str(),
        "is_error": entry.is_error,
        "unknown_outcome": entry.unknown_outcome,
        "duration_ms": entry.finished_ms.map(|f| f - entry.created_ms),
        "trace_id": entry.trace_id,
        "owner": entry.owner,
    });
    if results {
        let stored = entry.result.as_deref();
        match stored.map(serde_json::from_str::<serde_json::Value>) {
            Some(Ok(result)) => object["result"] = result,
            // A row not written by brain: shown as the text it is, never hidden.
            Some(Err(_)) => {
                object["result"] = serde_json::Value::Null;
                object["result_text"] = serde_json::json!(stored);
            }
            None => object["result"] = serde_json::Value::Null,
        }
    }
    object
}

/// Prints the OAuth grants in `journal`'s store: binding, tenant, scopes, the access token's
/// expiry and the grant's state (`valid`, `refreshing` while a process holds its refresh
/// claim, `needs_login`, `logged_out`); never a token.
pub(crate) async fn list_grants(journal: &Journal, json: bool) -> Result<(), String> {
    let grants = journal
        .grants()
        .list()
        .await
        .map_err(|error| format!("cannot list the grants: {error}"))?;
    let state = |grant: &brain_runtime::auth::Grant| match (&grant.refresher, grant.written.state) {
        (Some(_), brain_runtime::auth::GrantState::Valid) => "refreshing",
        (_, state) => state.as_str(),
    };
    let expires = |grant: &brain_runtime::auth::Grant| {
        grant
            .written
            .expires_at
            .map_or("-".to_owned(), |at| timestamp(at.saturating_mul(1000)))
    };
    if json {
        for grant in &grants {
            let object = serde_json::json!({
                "binding": grant.written.binding,
                "tenant": grant.key.tenant,
                "resource": grant.written.resource,
                "scopes": grant.written.scopes,
                "expires": grant.written.expires_at.map(|_| expires(grant)),
                "state": state(grant),
                "generation": grant.generation,
                "rotates": grant.written.rotates,
            });
            output::json(&object);
        }
        return Ok(());
    }
    println!(
        "{:<20} {:<12} {:<11} {:<24} {:<5} SCOPES",
        "BINDING", "TENANT", "STATE", "EXPIRES", "GEN"
    );
    for grant in &grants {
        println!(
            "{:<20} {:<12} {:<11} {:<24} {:<5} {}",
            text(&grant.written.binding),
            if grant.key.tenant.is_empty() {
                text("-")
            } else {
                text(&grant.key.tenant)
            },
            state(grant),
            expires(grant),
            grant.generation,
            text(&grant.written.scopes.join(" ")),
        );
    }
    Ok(())
}

/// Milliseconds since the epoch as an RFC 3339 UTC time, to the millisecond.
pub(crate) fn timestamp(ms: i64) -> String {
    brain_runtime::journal::rfc3339(ms)
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_and_times_read_and_print() {
        assert_eq!(super::parse_duration("24h").unwrap().as_secs(), 86_400);
        assert_eq!(super::parse_duration("90").unwrap().as_secs(), 90);
        assert!(super::parse_duration("1w").is_err());
        assert_eq!(super::timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::timestamp(1_796_169_600_123),
            "2026-12-02T00:00:00.123Z"
        );
    }
}
