//! The journal's own statements in the SQLite file: a claim and an outcome, each with its
//! audit record in the same transaction (when the store audits), and an entry as read.

use rusqlite::{Connection, Row, params};

use crate::audit::record::Event;
use crate::store::{Claim, Entry, EntryState, Key, Record};

/// Whether a write is recorded in the audit chain, and what it adds to its record.
#[derive(Debug, Clone, Copy)]
pub(super) struct Audit<'a> {
    /// The store audits.
    pub(super) on: bool,
    /// The approval a claim uses.
    pub(super) approval: Option<&'a str>,
}

impl Audit<'_> {
    pub(super) fn on(on: bool) -> Audit<'static> {
        Audit { on, approval: None }
    }
}

/// The claim's statement: `sent` for a new key, or for one recorded `not_sent` with the same
/// digest, while the owner's lease is live; audited as `claimed` when it did.
pub(super) fn insert_claim(
    c: &Connection,
    claim: &Claim,
    audit: Audit<'_>,
) -> rusqlite::Result<bool> {
    let sql = concat!(
        "INSERT INTO brain_calls (tenant, session, call_id, digest, binding, state, owner, ",
        "created, deadline, trace_id) SELECT ?1, ?2, ?3, ?4, ?5, 'sent', ?6, ",
        now!(),
        ", ",
        now!(),
        " + ?7, ?8 WHERE EXISTS (SELECT 1 FROM brain_owners WHERE owner = ?6 AND expires > ",
        now!(),
        ") ON CONFLICT (tenant, session, call_id) DO UPDATE SET state = 'sent', ",
        "owner = excluded.owner, created = excluded.created, deadline = excluded.deadline, ",
        "trace_id = excluded.trace_id, finished = NULL, is_error = NULL, ",
        "unknown_outcome = NULL, result = NULL, result_bytes = NULL ",
        "WHERE brain_calls.state = 'not_sent' AND brain_calls.digest = excluded.digest"
    );
    let changed = c.prepare_cached(sql)?.execute(params![
        claim.key.tenant,
        claim.key.session,
        claim.key.call_id,
        claim.digest,
        claim.binding,
        claim.owner,
        claim.timeout_ms,
        claim.trace_id,
    ])?;
    if changed > 0 && audit.on {
        let event = Event::Claimed {
            claim: claim.clone(),
            approval: audit.approval.map(str::to_owned),
        };
        crate::audit::sqlite::append(c, &claim.key.tenant, &event)?;
    }
    Ok(changed > 0)
}

/// The outcome's statement: how the call ended, when it is still `sent` by `owner` (with
/// `only_if_expired`, only when that owner's lease has expired); audited when it did, as
/// `taken_over_as_unknown` when a retry (`taken_over`) recorded it.
pub(super) fn update_outcome(
    c: &Connection,
    key: &Key,
    owner: &str,
    record: &Record,
    only_if_expired: bool,
    taken_over: bool,
    audit: bool,
) -> rusqlite::Result<bool> {
    let sql = concat!(
        "UPDATE brain_calls AS c SET state = ?4, is_error = ?5, unknown_outcome = ?6, ",
        "result = ?7, result_bytes = ?8, finished = ",
        now!(),
        " WHERE c.tenant = ?1 AND c.session = ?2 AND c.call_id = ?3 AND c.state = 'sent' ",
        "AND c.owner = ?9 AND (?10 = 0 OR NOT ",
        "EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = c.owner AND o.expires > ",
        now!(),
        "))"
    );
    let changed = c.prepare_cached(sql)?.execute(params![
        key.tenant,
        key.session,
        key.call_id,
        record.state.as_str(),
        record.is_error,
        record.unknown_outcome,
        record.result,
        record.result_bytes,
        owner,
        only_if_expired,
    ])?;
    if changed > 0 && audit {
        let event = Event::Settled {
            key: key.clone(),
            owner: owner.to_owned(),
            record: record.clone(),
            taken_over,
        };
        crate::audit::sqlite::append(c, &key.tenant, &event)?;
    }
    Ok(changed > 0)
}

/// An entry of [`columns!`]'s row.
pub(super) fn entry(row: &Row<'_>) -> rusqlite::Result<Entry> {
    let state: String = row.get(5)?;
    Ok(Entry {
        key: Key {
            tenant: row.get(0)?,
            session: row.get(1)?,
            call_id: row.get(2)?,
        },
        binding: row.get(3)?,
        digest: row.get(4)?,
        state: EntryState::parse(&state).unwrap_or(EntryState::Sent),
        owner: row.get(6)?,
        owner_live: row.get(7)?,
        now_ms: row.get(8)?,
        created_ms: row.get(9)?,
        deadline_ms: row.get(10)?,
        finished_ms: row.get(11)?,
        is_error: row.get(12)?,
        unknown_outcome: row.get(13)?,
        result: row.get(14)?,
        result_bytes: row.get(15)?,
        trace_id: row.get(16)?,
        task: row.get(17)?,
    })
}
