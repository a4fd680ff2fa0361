//! `brain-harness audit [verify|head|sign|export]`: the audit chain of the state's store —
//! checked, its newest signed checkpoint printed for an operator to anchor elsewhere, signed
//! now, or exported.

// The harness's output: the verdict, the checkpoint or the export on stdout.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use brain_runtime::ApproverKeys;
use brain_runtime::audit::{
    AuditKey, ExportFormat, Keyring, Signing, VerifyOptions, export, sign, verify,
};
use brain_runtime::journal::{Checkpoint, Journal};
use serde_json::{Value, json};

use crate::output;

/// What `brain-harness audit` does.
#[derive(clap::Subcommand, Debug, Clone)]
pub(crate) enum Action {
    /// Walk the chains and check every link and checkpoint: one line when they hold, else the
    /// first broken record of each (exit 1).
    Verify {
        /// Only this tenant's chain.
        #[arg(long)]
        tenant: Option<String>,
        /// From this seq on (the record before it trusted as stored).
        #[arg(long)]
        from: Option<i64>,
        /// A public key (SPKI PEM, as `openssl pkey -pubout` writes it) checkpoints may be
        /// signed by (repeatable), besides the config's `audit.public_keys`. Without any,
        /// signatures are not checked.
        #[arg(long = "public-key")]
        public_keys: Vec<PathBuf>,
        /// A checkpoint kept elsewhere (a line `brain-harness audit head` printed): the store
        /// must still have it, and every chain must still reach it.
        #[arg(long)]
        anchor: Option<PathBuf>,
        /// Warn when the newest checkpoint is older than twice this many seconds (default: the
        /// config's `audit.checkpoint_seconds`, else 60).
        #[arg(long)]
        checkpoint_seconds: Option<u64>,
    },
    /// Print the newest checkpoint as one JSON line (`{"id", "body", "signature"}`), to keep
    /// elsewhere and give to `verify --anchor`.
    Head,
    /// Sign a checkpoint now with the key in BRAIN_AUDIT_KEY_FILE, after checking every record
    /// since the last checkpoint it can verify (a tail that does not link is refused: exit 1).
    Sign {
        /// A public key of another signer whose checkpoints are trusted as a start (repeatable),
        /// besides the config's `audit.public_keys`.
        #[arg(long = "public-key")]
        public_keys: Vec<PathBuf>,
    },
    /// Write the chains and checkpoints: JSON Lines with each record's exact bytes, or OCSF.
    Export {
        /// Only this tenant's chain.
        #[arg(long)]
        tenant: Option<String>,
        /// Only records appended within this long (e.g. 24h, 90m, 3600).
        #[arg(long)]
        since: Option<String>,
        /// `jsonl` or `ocsf`.
        #[arg(long, default_value = "jsonl")]
        format: String,
    },
}

/// Runs `action` on `journal`'s store (with `config`'s approvers, whose keys each decision in
/// the chains is checked against); `Ok(false)`: the chains do not hold, or a chain was refused
/// (exit 1).
pub(crate) async fn run(
    config: &brain_config::HostConfig,
    journal: Journal,
    action: Action,
) -> Result<bool, String> {
    let store = journal.store();
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    // The config's public keys, and those named on the command line.
    let settings = journal.audit_settings();
    let keyring = |paths: &[PathBuf]| -> Result<Keyring, String> {
        let mut keys = Keyring::from_pem_files(paths).map_err(|e| fail(&e))?;
        keys.extend(&settings.keys);
        Ok(keys)
    };
    match action {
        Action::Verify {
            tenant,
            from,
            public_keys,
            anchor,
            checkpoint_seconds,
        } => {
            let keys = keyring(&public_keys)?;
            let anchor = anchor.map(|path| read_checkpoint(&path)).transpose()?;
            let checkpoint_every = checkpoint_seconds
                .map_or(settings.checkpoint_every, std::time::Duration::from_secs);
            let options = VerifyOptions {
                tenant,
                from,
                keys,
                anchor,
                checkpoint_every: Some(checkpoint_every),
                approvers: Some(ApproverKeys::from_config(config)),
            };
            let verification = verify(store, &options).await.map_err(|e| fail(&e))?;
            if let Some(since) = verification.since_ms {
                println!(
                    "the chains start at {}: a call journaled before then is not in them",
                    brain_runtime::journal::rfc3339(since)
                );
            }
            // What verify says quotes the store (tenants, records): each line escaped whole.
            for warning in &verification.warnings {
                output::line(&format!("warning: {warning}"));
            }
            for open in &verification.open {
                output::line(&format!("open: {open}"));
            }
            for broken in verification.broken.iter().skip(1) {
                output::line(&format!("broken: {broken}"));
            }
            output::line(&verification.summary());
            Ok(verification.holds())
        }
        Action::Head => {
            let newest = store.audit_checkpoints().await.map_err(|e| fail(&e))?;
            let newest = newest
                .last()
                .ok_or("no checkpoint yet: a runtime with BRAIN_AUDIT_KEY_FILE signs them")?;
            output::json(
                &json!({"id": newest.id, "body": newest.body, "signature": newest.signature}),
            );
            Ok(true)
        }
        Action::Sign { public_keys } => {
            let key = AuditKey::from_env()
                .map_err(|e| fail(&e))?
                .ok_or("no key: set BRAIN_AUDIT_KEY_FILE to an Ed25519 private key (PKCS#8 PEM)")?;
            let keys = keyring(&public_keys)?;
            let Signing { signed, refused } = sign(store, &key, &keys, settings.retention)
                .await
                .map_err(|e| fail(&e))?;
            for broken in &refused {
                output::line(&format!("refused: {broken}"));
            }
            match (signed, refused.is_empty()) {
                (Some(heads), true) => {
                    output::line(&format!(
                        "signed checkpoint #{} ({}) of {} chains",
                        heads.id,
                        heads.key_id,
                        heads.heads.len()
                    ));
                    Ok(true)
                }
                (Some(heads), false) => {
                    output::line(&format!(
                        "signed checkpoint #{} ({}): the other chains; the {} refused above were \
                         not signed past their last checkpoint",
                        heads.id,
                        heads.key_id,
                        refused.len()
                    ));
                    Ok(false)
                }
                (None, false) => {
                    println!(
                        "nothing signed: the chains above do not link, or lost records no \
                         retention explains"
                    );
                    Ok(false)
                }
                (None, true) => {
                    println!("nothing signed: no chain has records yet");
                    Ok(true)
                }
            }
        }
        Action::Export {
            tenant,
            since,
            format,
        } => {
            let format = match format.as_str() {
                "jsonl" => ExportFormat::Jsonl,
                "ocsf" => ExportFormat::Ocsf,
                other => return Err(format!("--format {other:?}: use jsonl or ocsf")),
            };
            let since_ms = match since {
                Some(text) => {
                    let within = crate::journal::parse_duration(&text)
                        .map_err(|error| format!("--since {text:?}: {error}"))?;
                    let now = store.audit_heads().await.map_err(|e| fail(&e))?.now_ms;
                    now - i64::try_from(within.as_millis()).unwrap_or(i64::MAX / 2)
                }
                None => 0,
            };
            // Each line escaped by `export` itself (JSON `\u` escapes).
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            export(store, tenant.as_deref(), since_ms, format, &mut out)
                .await
                .map_err(|e| fail(&e))?;
            Ok(true)
        }
    }
}

/// A checkpoint line `brain-harness audit head` printed.
fn read_checkpoint(path: &std::path::Path) -> Result<Checkpoint, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("{}: not a checkpoint line: {e}", path.display()))?;
    match (
        value["id"].as_i64(),
        value["body"].as_str(),
        value["signature"].as_str(),
    ) {
        (Some(id), Some(body), Some(signature)) => Ok(Checkpoint {
            id,
            body: body.to_owned(),
            signature: signature.to_owned(),
        }),
        _ => Err(format!(
            "{}: a checkpoint line has id, body and signature (as `brain-harness audit head` \
             prints it)",
            path.display()
        )),
    }
}
