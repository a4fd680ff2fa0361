//! The approval steps in the journal's SQLite transactions: asking (the journal consulted,
//! then the approvals' room, then the audit chain), the claim that uses an approval, and a
//! decision audited. The approvals' own SQL is [`crate::approvals::sqlite`].

use rusqlite::{Connection, OptionalExtension, params};

use crate::audit::record::Event;
use crate::limits::{Charge, Verdict};
use crate::store::{Approval, ApprovalRequest, Asked, Claim, Claimed, Decision, Granted, Key};

use super::calls::{Audit, insert_claim};

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
    if let Some(asked) = crate::approvals::sqlite::find(c, request)? {
        return Ok(asked);
    }
    let id = crate::approvals::sqlite::insert_pending(c, request)?;
    let key = &request.key;
    if audit {
        let event = Event::ApprovalAsked {
            id: id.clone(),
            key: key.clone(),
            binding: request.binding.clone(),
            principal: request.principal.clone(),
            digest: request.digest.clone(),
            policies: request.policies.clone(),
        };
        crate::audit::sqlite::append(c, &key.tenant, &event)?;
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
            let used = crate::approvals::sqlite::take(c, claim, granted)?;
            if !used {
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

/// [`crate::journal::ApprovalStore::decide_approval`]; the decision audited, with its
/// signature.
pub(super) fn decide(
    c: &Connection,
    decision: &Decision,
    audit: bool,
) -> rusqlite::Result<Option<Approval>> {
    let decided = crate::approvals::sqlite::decide(c, decision)?;
    if let Some(decided) = decided.as_ref().filter(|_| audit) {
        crate::audit::sqlite::append(c, &decided.key.tenant, &Event::decided(decided))?;
    }
    Ok(decided)
}
