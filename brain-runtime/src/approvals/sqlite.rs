//! Approvals in the SQLite file (schema version 6; signatures from 8): the approvals' table
//! and every statement that reads or writes it. Each runs inside a transaction the journal
//! holds (the journal composes them with the claim and the audit chain's append).

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::store::clock::sqlite_now as now;
use crate::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalState, Asked, Claim, Decision,
    DecisionSignature, Granted, Key, new_id,
};

/// The approvals' table: found by id, and by their call's key.
pub(crate) const SCHEMA: &str = "
CREATE TABLE brain_approvals (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    call_id TEXT NOT NULL,
    binding TEXT NOT NULL,
    principal TEXT NOT NULL,
    digest TEXT NOT NULL,
    policies TEXT NOT NULL,
    arguments TEXT,
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    created INTEGER NOT NULL,
    expires INTEGER NOT NULL,
    decided_by TEXT,
    decided INTEGER,
    used INTEGER,
    decision_key TEXT,
    signature TEXT
) WITHOUT ROWID;
CREATE INDEX brain_approvals_call ON brain_approvals (tenant, session, call_id);
";

/// From schema version 6: a key approver's signature over its decision (version 8).
pub(crate) const SIGNATURE_COLUMNS: &str = "ALTER TABLE brain_approvals ADD COLUMN decision_key \
     TEXT; ALTER TABLE brain_approvals ADD COLUMN signature TEXT;";

/// An approval's columns, in [`approval`]'s order (the arguments only while it is open).
macro_rules! approval_columns {
    () => {
        concat!(
            "SELECT id, tenant, session, call_id, binding, principal, digest, policies, ",
            "CASE WHEN state = 'pending' AND expires > ",
            now!(),
            " THEN arguments END, reason, state, created, expires, decided_by, decided, used, ",
            now!(),
            ", decision_key, signature",
            " FROM brain_approvals "
        )
    };
}

fn approval(row: &Row<'_>) -> rusqlite::Result<Approval> {
    let state: String = row.get(10)?;
    Ok(Approval {
        id: row.get(0)?,
        key: Key {
            tenant: row.get(1)?,
            session: row.get(2)?,
            call_id: row.get(3)?,
        },
        binding: row.get(4)?,
        principal: row.get(5)?,
        digest: row.get(6)?,
        policies: row.get(7)?,
        arguments: row.get(8)?,
        reason: row.get(9)?,
        state: ApprovalState::parse(&state).unwrap_or(ApprovalState::Denied),
        created_ms: row.get(11)?,
        expires_ms: row.get(12)?,
        decided_by: row.get(13)?,
        decided_ms: row.get(14)?,
        used_ms: row.get(15)?,
        now_ms: row.get(16)?,
        signature: DecisionSignature::from_columns(row.get(17)?, row.get(18)?),
    })
}

/// The newest usable approval of this very call (its key, digest, principal and policy set):
/// pending, approved or denied, not used and not expired.
pub(crate) fn find(c: &Connection, request: &ApprovalRequest) -> rusqlite::Result<Option<Asked>> {
    let sql = concat!(
        "SELECT id, state, decided_by, expires, decision_key, signature FROM brain_approvals ",
        "WHERE tenant = ?1 AND session = ?2 ",
        "AND call_id = ?3 AND digest = ?4 AND principal = ?5 AND policies = ?6 ",
        "AND state <> 'used' AND expires > ",
        now!(),
        " ORDER BY created DESC LIMIT 1"
    );
    let key = &request.key;
    c.prepare_cached(sql)?
        .query_row(
            params![
                key.tenant,
                key.session,
                key.call_id,
                request.digest,
                request.principal,
                request.policies
            ],
            |row| {
                Ok(Asked::of(
                    row.get(0)?,
                    &row.get::<_, String>(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    DecisionSignature::from_columns(row.get(4)?, row.get(5)?),
                ))
            },
        )
        .optional()
}

/// A new pending approval of `request`'s call; its id.
pub(crate) fn insert_pending(
    c: &Connection,
    request: &ApprovalRequest,
) -> rusqlite::Result<String> {
    let key = &request.key;
    let id = new_id();
    let sql = concat!(
        "INSERT INTO brain_approvals (id, tenant, session, call_id, binding, principal, digest, ",
        "policies, arguments, reason, state, created, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ",
        "?7, ?8, ?9, ?10, 'pending', ",
        now!(),
        ", ",
        now!(),
        " + ?11)"
    );
    c.prepare_cached(sql)?.execute(params![
        id,
        key.tenant,
        key.session,
        key.call_id,
        request.binding,
        request.principal,
        request.digest,
        request.policies,
        request.arguments,
        request.reason,
        request.expires_ms
    ])?;
    Ok(id)
}

/// Marks `granted` used by `claim` (the claim's step): whether it was approved, unused,
/// unexpired and signed as granted says, for this very call.
pub(crate) fn take(c: &Connection, claim: &Claim, granted: &Granted) -> rusqlite::Result<bool> {
    let sql = concat!(
        "UPDATE brain_approvals SET state = 'used', used = ",
        now!(),
        " WHERE id = ?1 AND tenant = ?2 AND session = ?3 AND call_id = ?4 ",
        "AND digest = ?5 AND state = 'approved' AND expires = ?6 ",
        "AND decision_key IS ?7 AND signature IS ?8 AND expires > ",
        now!()
    );
    let signed = granted.signature.as_ref();
    let used = c.prepare_cached(sql)?.execute(params![
        granted.id,
        claim.key.tenant,
        claim.key.session,
        claim.key.call_id,
        claim.digest,
        granted.expires_ms,
        signed.map(|s| &s.key_id),
        signed.map(|s| &s.signature),
    ])?;
    Ok(used > 0)
}

/// [`ApprovalStore::approvals`](crate::store::ApprovalStore::approvals) (`limit` -1: all).
pub(crate) fn list(c: &Connection, filter: &ApprovalFilter) -> rusqlite::Result<Vec<Approval>> {
    let sql = concat!(
        approval_columns!(),
        "WHERE tenant IN (SELECT value FROM json_each(?1)) AND (?2 IS NULL OR id = ?2) ",
        "AND (NOT ?3 OR (state = 'pending' AND expires > ",
        now!(),
        ")) ORDER BY created DESC, id LIMIT ?4"
    );
    let tenants = serde_json::to_string(&filter.tenants).unwrap_or_default();
    let limit = if filter.limit == 0 {
        -1
    } else {
        filter.limit as i64
    };
    let mut statement = c.prepare_cached(sql)?;
    let rows = statement.query_map(params![tenants, filter.id, filter.pending, limit], approval)?;
    rows.collect()
}

/// Records `decision` on a pending approval: the approval as decided, or `None` when no
/// pending approval matched (decided, expired, another digest or tenant).
pub(crate) fn decide(c: &Connection, decision: &Decision) -> rusqlite::Result<Option<Approval>> {
    let sql = concat!(
        "UPDATE brain_approvals SET state = ?4, decided_by = ?3, decided = ",
        now!(),
        ", arguments = NULL, decision_key = ?8, signature = ?9 WHERE id = ?1 ",
        "AND tenant IN (SELECT value FROM json_each(?2)) AND state = 'pending' ",
        "AND digest = ?5 AND policies = ?6 AND expires = ?7 AND expires > ",
        now!()
    );
    let tenants = serde_json::to_string(&decision.tenants).unwrap_or_default();
    let state = if decision.approved {
        ApprovalState::Approved
    } else {
        ApprovalState::Denied
    };
    let signed = decision.signature.as_ref();
    let changed = c.prepare_cached(sql)?.execute(params![
        decision.id,
        tenants,
        decision.approver,
        state.as_str(),
        decision.digest,
        decision.policies,
        decision.expires_ms,
        signed.map(|s| &s.key_id),
        signed.map(|s| &s.signature),
    ])?;
    if changed == 0 {
        return Ok(None);
    }
    c.prepare_cached(concat!(approval_columns!(), "WHERE id = ?1"))?
        .query_row(params![decision.id], approval)
        .optional()
}

/// Deletes the arguments of every expired approval, and approvals expired more than
/// `retention_ms` ago.
pub(crate) fn prune(c: &Connection, retention_ms: i64) -> rusqlite::Result<()> {
    let forget = concat!(
        "UPDATE brain_approvals SET arguments = NULL WHERE arguments IS NOT NULL AND expires <= ",
        now!()
    );
    let delete = concat!(
        "DELETE FROM brain_approvals WHERE expires < ",
        now!(),
        " - ?1"
    );
    c.prepare_cached(forget)?.execute([])?;
    c.prepare_cached(delete)?.execute(params![retention_ms])?;
    Ok(())
}
