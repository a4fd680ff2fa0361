//! Approvals in the SQLite file (schema version 6): asked for, decided, and used by one claim,
//! each in one transaction on the journal's connection.

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::journal::audit::Event;
use crate::journal::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalState, Asked, Decision, DecisionSignature,
    Granted, new_id,
};
use crate::journal::store::{Claim, Claimed, Key};
use crate::limits::{Charge, Verdict};

use super::calls::{Audit, insert_claim};

/// The approvals' table: found by id, and by their call's key.
pub(super) const SCHEMA: &str = "
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
pub(super) const SIGNATURE_COLUMNS: &str = "ALTER TABLE brain_approvals ADD COLUMN decision_key \
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

/// Whether the journal has the call as sent (or ended after it was): a call id whose earlier
/// call was never sent is decided again, approval included, as a new call is.
fn journaled(c: &Connection, key: &Key) -> rusqlite::Result<bool> {
    let sql = concat!(
        "SELECT 1 FROM brain_calls WHERE tenant = ?1 AND session = ?2 AND call_id = ?3 ",
        "AND state <> 'not_sent'"
    );
    Ok(c.prepare_cached(sql)?
        .query_row(params![key.tenant, key.session, key.call_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// [`crate::journal::ApprovalStore::ask_approval`]; a new pending approval audited.
pub(super) fn ask(
    c: &Connection,
    request: &ApprovalRequest,
    audit: bool,
) -> rusqlite::Result<Asked> {
    if journaled(c, &request.key)? {
        return Ok(Asked::Journaled);
    }
    let sql = concat!(
        "SELECT id, state, decided_by, expires, decision_key, signature FROM brain_approvals ",
        "WHERE tenant = ?1 AND session = ?2 ",
        "AND call_id = ?3 AND digest = ?4 AND principal = ?5 AND policies = ?6 ",
        "AND state <> 'used' AND expires > ",
        now!(),
        " ORDER BY created DESC LIMIT 1"
    );
    let key = &request.key;
    let found = c
        .prepare_cached(sql)?
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
        .optional()?;
    if let Some(asked) = found {
        return Ok(asked);
    }
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
    if audit {
        let event = Event::ApprovalAsked {
            id: id.clone(),
            key: key.clone(),
            binding: request.binding.clone(),
            principal: request.principal.clone(),
            digest: request.digest.clone(),
            policies: request.policies.clone(),
        };
        super::audit::append(c, &key.tenant, &event)?;
    }
    Ok(Asked::Pending(id))
}

/// [`crate::journal::ApprovalStore::claim_approved`]: the approval used, the claim inserted
/// (audited with the approval it used) and the limits charged, or none of them.
pub(super) fn claim(
    c: &Connection,
    claim: &Claim,
    charge: Option<&Charge>,
    granted: &Granted,
    audit: bool,
) -> rusqlite::Result<Claimed> {
    super::limits::savepoint(c, |c| {
        if !journaled(c, &claim.key)? {
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
            if used == 0 {
                return Ok((false, Claimed::Unapproved));
            }
        }
        let audit = Audit {
            on: audit,
            approval: Some(&granted.id),
        };
        if !insert_claim(c, claim, audit)? {
            return Ok((false, Claimed::Taken));
        }
        Ok(match charge.map(|charge| super::limits::take(c, charge)) {
            None => (true, Claimed::Claimed),
            Some(verdict) => match verdict? {
                Verdict::Admitted => (true, Claimed::Claimed),
                Verdict::Refused(refusals) => (false, Claimed::Refused(refusals)),
            },
        })
    })
}

/// [`crate::journal::ApprovalStore::approvals`] (`limit` -1: all).
pub(super) fn list(c: &Connection, filter: &ApprovalFilter) -> rusqlite::Result<Vec<Approval>> {
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

/// [`crate::journal::ApprovalStore::decide_approval`]; the decision audited, with its
/// signature.
pub(super) fn decide(
    c: &Connection,
    decision: &Decision,
    audit: bool,
) -> rusqlite::Result<Option<Approval>> {
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
    let decided = c
        .prepare_cached(concat!(approval_columns!(), "WHERE id = ?1"))?
        .query_row(params![decision.id], approval)
        .optional()?;
    if let Some(decided) = decided.as_ref().filter(|_| audit) {
        super::audit::append(c, &decided.key.tenant, &Event::decided(decided))?;
    }
    Ok(decided)
}

/// Deletes the arguments of every expired approval, and approvals expired more than
/// `retention_ms` ago.
pub(super) fn prune(c: &Connection, retention_ms: i64) -> rusqlite::Result<()> {
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
