//! `audit`: its numbers in range, and each public key an Ed25519 public key (never a private
//! key: a config, and every binary built from it, holds public keys only).

use crate::audit::{
    AuditConfig, MAX_AUDIT_RETENTION_DAYS, MAX_CHECKPOINT_RECORDS, MAX_CHECKPOINT_SECONDS,
    public_key,
};
use crate::diagnostic::{Diagnostic, Rule};

pub(super) fn audit(config: &AuditConfig, out: &mut Vec<Diagnostic>) {
    let ranges = [
        (
            "retention_days",
            config.retention_days,
            MAX_AUDIT_RETENTION_DAYS,
            "days: from 1 to 3650, or remove it for 400",
        ),
        (
            "checkpoint_records",
            config.checkpoint_records,
            MAX_CHECKPOINT_RECORDS,
            "records: from 1 to 1000000, or remove it for 1000",
        ),
        (
            "checkpoint_seconds",
            config.checkpoint_seconds,
            MAX_CHECKPOINT_SECONDS,
            "seconds: from 1 to 86400, or remove it for 60",
        ),
    ];
    for (field, value, max, help) in ranges {
        if let Some(value) = value
            && !(1..=max).contains(&value)
        {
            out.push(Diagnostic::new(
                Rule::AuditRange,
                format!("/audit/{field}"),
                format!("`{field}` is {value}, outside 1..={max}"),
                format!("use a number of {help}"),
            ));
        }
    }
    for source in &config.public_key_sources {
        let index = config
            .public_keys
            .iter()
            .position(|path| *path == source.path)
            .unwrap_or_default();
        if let Err(why) = public_key(&source.text) {
            out.push(Diagnostic::new(
                Rule::AuditPublicKey,
                format!("/audit/public_keys/{index}"),
                format!("{}: {why}", source.path),
                "name the SPKI PEM public key that `openssl pkey -in audit.pem -pubout -out \
                 audit.pub` writes",
            ));
        }
    }
}
