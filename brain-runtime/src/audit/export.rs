//! Exporting the chains: JSON Lines that carry each record's exact canonical bytes (to be
//! hashed as given, offline), or OCSF API Activity events with the record embedded. Streamed a
//! page at a time: memory does not grow with the number of records. Each line's control and
//! format characters are JSON `\u` escapes ([`escape_json`]): the same JSON, safe on a terminal.

use std::io::Write;

use serde_json::{Value, json};

use crate::audit::record::{Kind, genesis};
use crate::escape::escape_json;
use crate::store::{JournalStore, StoreError};

/// Records read per page.
const PAGE: usize = 10_000;

/// How [`export`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportFormat {
    /// One JSON object per line: `{"type": "audit.record", "tenant", "seq", "previous",
    /// "hash", "record"}` with `record` the exact bytes hashed, and `{"type":
    /// "audit.checkpoint", "id", "body", "signature"}`.
    Jsonl,
    /// OCSF API Activity (class 6003) events, the record embedded in `unmapped.brain_audit`.
    Ocsf,
}

/// Writes `tenant`'s chain (or every chain) from `since_ms` on (the store's clock; 0: all),
/// then the checkpoints, to `out`. Returns how many records it wrote.
pub async fn export(
    store: &dyn JournalStore,
    tenant: Option<&str>,
    since_ms: i64,
    format: ExportFormat,
    out: &mut dyn Write,
) -> Result<u64, StoreError> {
    let failed = |e: std::io::Error| StoreError::unavailable("the export's output", e.to_string());
    let tenants = match tenant {
        Some(tenant) => vec![tenant.to_owned()],
        None => store.audit_tenants().await?,
    };
    let mut written = 0;
    for tenant in tenants {
        let mut next = 1;
        let mut previous: Option<String> = None;
        loop {
            let page = store.audit_records(&tenant, next, PAGE).await?;
            let full = page.len() == PAGE;
            for record in page {
                next = record.seq + 1;
                let before = previous.replace(record.hash.clone());
                if record.at_ms < since_ms {
                    continue;
                }
                let before = match before {
                    Some(hash) => hash,
                    None if record.seq == 1 => genesis(&tenant),
                    None => String::new(),
                };
                let line = match format {
                    ExportFormat::Jsonl => json!({"type": "audit.record", "tenant": tenant,
                        "seq": record.seq, "previous": before, "hash": record.hash,
                        "record": record.record}),
                    ExportFormat::Ocsf => ocsf(&record.record, &record.hash, &before),
                };
                writeln!(out, "{}", escape_json(&line.to_string())).map_err(failed)?;
                written += 1;
            }
            if !full {
                break;
            }
        }
    }
    for checkpoint in store.audit_checkpoints().await? {
        let at = serde_json::from_str::<Value>(&checkpoint.body)
            .ok()
            .and_then(|body| body["at"].as_i64())
            .unwrap_or(0);
        if at < since_ms {
            continue;
        }
        let line = json!({"type": "audit.checkpoint", "id": checkpoint.id,
            "body": checkpoint.body, "signature": checkpoint.signature});
        let line = match format {
            ExportFormat::Jsonl => line,
            ExportFormat::Ocsf => json!({"class_uid": 6003, "category_uid": 6,
                "activity_id": 99, "type_uid": 600399, "severity_id": 1, "status_id": 1,
                "time": at, "api": {"operation": "audit.checkpoint"},
                "actor": {"user": {"name": "brain"}}, "src_endpoint": {"name": "brain"},
                "metadata": {"version": "1.3.0", "product": {"name": "brain", "vendor_name": "brain"}},
                "unmapped": {"brain_audit": line}}),
        };
        writeln!(out, "{}", escape_json(&line.to_string())).map_err(failed)?;
    }
    out.flush().map_err(failed)?;
    Ok(written)
}

/// An OCSF API Activity event of one record: `time` its time, `api.operation` its kind,
/// `api.service.name` its binding, `actor.user.name` its principal, approver or owner,
/// `status_id` 2 for a call that ended in an error, `metadata.uid` `tenant/seq`; the record's
/// bytes, hash and predecessor's hash in `unmapped.brain_audit`.
fn ocsf(record: &str, hash: &str, previous: &str) -> Value {
    let r: Value = serde_json::from_str(record).unwrap_or(Value::Null);
    let known = Kind::of(&r);
    let kind = r["kind"].as_str().unwrap_or("unknown");
    let activity = match known {
        Some(Kind::Claimed | Kind::ApprovalAsked) => 1,
        Some(
            Kind::Finished
            | Kind::NotSent
            | Kind::TakenOverAsUnknown
            | Kind::Resumed
            | Kind::ApprovalApproved
            | Kind::ApprovalDenied,
        ) => 3,
        Some(Kind::PrunedThrough) => 4,
        Some(Kind::Drift | Kind::PolicyDenied) | None => 99,
    };
    let failed = r["is_error"] == json!(true) || known == Some(Kind::PolicyDenied);
    let actor = ["principal", "approver", "owner", "process"]
        .iter()
        .find_map(|field| r[*field].as_str())
        .unwrap_or("brain");
    json!({
        "class_uid": 6003, "category_uid": 6, "activity_id": activity,
        "type_uid": 600300 + activity, "severity_id": 1,
        "status_id": if failed { 2 } else { 1 },
        "time": r["at"], "api": {"operation": kind, "service": {"name": r["binding"]}},
        "actor": {"user": {"name": actor}},
        "src_endpoint": {"name": actor.split(':').next().unwrap_or(actor)},
        "metadata": {"version": "1.3.0", "uid": format!("{}/{}", r["tenant"].as_str().unwrap_or(""), r["seq"]),
            "product": {"name": "brain", "vendor_name": "brain"}},
        "unmapped": {"brain_audit": {"record": record, "hash": hash, "previous": previous}},
    })
}
