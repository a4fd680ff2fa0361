//! Approvals in PostgreSQL (schema version 7; signatures from 9): the approvals' table and
//! every statement that reads or writes it. Each runs inside a transaction the journal holds
//! (the journal composes them with the claim and the audit chain's append).

use tokio_postgres::{Client, Row};

use crate::store::clock::postgres_now as now;
use crate::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalState, Asked, Claim, Decision,
    DecisionSignature, Granted, Key, new_id,
};

/// The approvals' table (schema version 7).
pub(crate) const SCHEMA: &str = r#"
CREATE TABLE brain_approvals (
    id TEXT COLLATE "C" PRIMARY KEY,
    tenant TEXT COLLATE "C" NOT NULL,
    session TEXT COLLATE "C" NOT NULL,
    call_id TEXT COLLATE "C" NOT NULL,
    binding TEXT NOT NULL,
    principal TEXT NOT NULL,
    digest TEXT NOT NULL,
    policies TEXT NOT NULL,
    arguments TEXT,
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    created INT8 NOT NULL,
    expires INT8 NOT NULL,
    decided_by TEXT,
    decided INT8,
    used INT8,
    decision_key TEXT,
    signature TEXT
);
CREATE INDEX brain_approvals_call ON brain_approvals (tenant, session, call_id);
"#;

/// From schema version 7: a key approver's signature over its decision (version 9).
pub(crate) const SIGNATURE_COLUMNS: &str = "ALTER TABLE brain_approvals ADD COLUMN IF NOT EXISTS \
     decision_key TEXT; ALTER TABLE brain_approvals ADD COLUMN IF NOT EXISTS signature TEXT;";

/// Uses approval `$1` of the call `$2, $3, $4` with digest `$5`, expiry `$6` and signature
/// `$7, $8` unless the journal has the call as sent: (whether it has, how many approvals it
/// used).
const USE: &str = concat!(
    "WITH j AS (SELECT EXISTS (SELECT 1 FROM brain_calls WHERE tenant = $2 AND session = $3 ",
    "AND call_id = $4 AND state <> 'not_sent') AS journaled), u AS (UPDATE brain_approvals SET state = 'used', used = ",
    now!(),
    " WHERE id = $1 AND tenant = $2 AND session = $3 AND call_id = $4 AND digest = $5 ",
    "AND state = 'approved' AND expires = $6 AND decision_key IS NOT DISTINCT FROM $7 ",
    "AND signature IS NOT DISTINCT FROM $8 AND expires > ",
    now!(),
    " AND NOT (SELECT journaled FROM j) RETURNING 1) ",
    "SELECT (SELECT journaled FROM j), (SELECT count(*) FROM u)::int8"
);

/// Deletes the arguments of every expired approval.
pub(crate) const FORGET: &str = concat!(
    "UPDATE brain_approvals SET arguments = NULL WHERE arguments IS NOT NULL AND expires <= ",
    now!()
);
/// Deletes approvals expired more than `$1` milliseconds ago.
pub(crate) const PRUNE: &str = concat!(
    "DELETE FROM brain_approvals WHERE expires < ",
    now!(),
    " - $1"
);

/// An approval's columns, in [`approval`]'s order (the arguments only while it is open).
macro_rules! approval_columns {
    () => {
        concat!(
            "SELECT id, tenant, session, call_id, binding, principal, digest, policies, ",
            "CASE WHEN state = 'pending' AND expires > ",
            now!(),
            " THEN arguments END, reason, state, created, expires, decided_by, decided, used, ",
            now!(),
            ", decision_key, signature FROM brain_approvals "
        )
    };
}

fn approval(row: &Row) -> Approval {
    let state: &str = row.get(10);
    Approval {
        id: row.get(0),
        key: Key {
            tenant: row.get(1),
            session: row.get(2),
            call_id: row.get(3),
        },
        binding: row.get(4),
        principal: row.get(5),
        digest: row.get(6),
        policies: row.get(7),
        arguments: row.get(8),
        reason: row.get(9),
        state: ApprovalState::parse(state).unwrap_or(ApprovalState::Denied),
        created_ms: row.get(11),
        expires_ms: row.get(12),
        decided_by: row.get(13),
        decided_ms: row.get(14),
        used_ms: row.get(15),
        now_ms: row.get(16),
        signature: DecisionSignature::from_columns(row.get(17), row.get(18)),
    }
}

/// Serialises the approvals asked for the call `key` until the transaction ends (an advisory
/// lock), so that two retries at once record one pending approval.
pub(crate) async fn lock(client: &Client, key: &Key) -> Result<(), tokio_postgres::Error> {
    // The key's parts with their lengths: unambiguous, and text PostgreSQL takes (no NUL). Two
    // keys hashing alike only wait for each other.
    let lock = format!(
        "{}:{}:{}{}{}",
        key.tenant.len(),
        key.session.len(),
        key.tenant,
        key.session,
        key.call_id
    );
    client
        .execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 7274827304))",
            &[&lock],
        )
        .await?;
    Ok(())
}

/// The newest usable approval of this very call (its key, digest, principal and policy set):
/// pending, approved or denied, not used and not expired.
pub(crate) async fn find(
    client: &Client,
    request: &ApprovalRequest,
) -> Result<Option<Asked>, tokio_postgres::Error> {
    let key = &request.key;
    let sql = concat!(
        "SELECT id, state, decided_by, expires, decision_key, signature FROM brain_approvals ",
        "WHERE tenant = $1 AND session = $2 ",
        "AND call_id = $3 AND digest = $4 AND principal = $5 AND policies = $6 ",
        "AND state <> 'used' AND expires > ",
        now!(),
        " ORDER BY created DESC LIMIT 1"
    );
    let found = client
        .query_opt(
            sql,
            &[
                &key.tenant,
                &key.session,
                &key.call_id,
                &request.digest,
                &request.principal,
                &request.policies,
            ],
        )
        .await?;
    Ok(found.map(|row| {
        let signature = DecisionSignature::from_columns(row.get(4), row.get(5));
        Asked::of(row.get(0), row.get(1), row.get(2), row.get(3), signature)
    }))
}

/// A new pending approval of `request`'s call; its id.
pub(crate) async fn insert_pending(
    client: &Client,
    request: &ApprovalRequest,
) -> Result<String, tokio_postgres::Error> {
    let key = &request.key;
    let id = new_id();
    let sql = concat!(
        "INSERT INTO brain_approvals (id, tenant, session, call_id, binding, principal, digest, ",
        "policies, arguments, reason, state, created, expires) VALUES ($1, $2, $3, $4, $5, $6, ",
        "$7, $8, $9, $10, 'pending', ",
        now!(),
        ", ",
        now!(),
        " + $11)"
    );
    client
        .execute(
            sql,
            &[
                &id,
                &key.tenant,
                &key.session,
                &key.call_id,
                &request.binding,
                &request.principal,
                &request.digest,
                &request.policies,
                &request.arguments,
                &request.reason,
                &request.expires_ms,
            ],
        )
        .await?;
    Ok(id)
}

/// Marks `approval` used by `claim` (the claim's step) unless the journal has the call as
/// sent: (whether it has, whether the approval was used now).
pub(crate) async fn take(
    client: &Client,
    claim: &Claim,
    approval: &Granted,
) -> Result<(bool, bool), tokio_postgres::Error> {
    let key = &claim.key;
    let signed = approval.signature.as_ref();
    let (key_id, signature) = (
        signed.map(|s| s.key_id.as_str()),
        signed.map(|s| s.signature.as_str()),
    );
    let row = client
        .query_one(
            USE,
            &[
                &approval.id,
                &key.tenant,
                &key.session,
                &key.call_id,
                &claim.digest,
                &approval.expires_ms,
                &key_id,
                &signature,
            ],
        )
        .await?;
    let (journaled, used): (bool, i64) = (row.get(0), row.get(1));
    Ok((journaled, used > 0))
}

/// The approvals `filter` selects, newest first.
pub(crate) async fn list(
    client: &Client,
    filter: &ApprovalFilter,
) -> Result<Vec<Approval>, tokio_postgres::Error> {
    let sql = concat!(
        approval_columns!(),
        "WHERE tenant = ANY($1) AND ($2::text IS NULL OR id = $2) AND (NOT $3 OR ",
        "(state = 'pending' AND expires > ",
        now!(),
        ")) ORDER BY created DESC, id LIMIT $4"
    );
    let limit = (filter.limit > 0).then_some(filter.limit as i64);
    let rows = client
        .query(sql, &[&filter.tenants, &filter.id, &filter.pending, &limit])
        .await?;
    Ok(rows.iter().map(approval).collect())
}

/// Records `decision` on a pending approval: the approval as decided, or `None` when no
/// pending approval matched (decided, expired, another digest or tenant).
pub(crate) async fn decide(
    client: &Client,
    decision: &Decision,
) -> Result<Option<Approval>, tokio_postgres::Error> {
    let state = if decision.approved {
        ApprovalState::Approved
    } else {
        ApprovalState::Denied
    };
    let sql = concat!(
        "UPDATE brain_approvals SET state = $4, decided_by = $3, decided = ",
        now!(),
        ", arguments = NULL, decision_key = $8, signature = $9 WHERE id = $1 ",
        "AND tenant = ANY($2) AND state = 'pending' AND digest = $5 ",
        "AND policies = $6 AND expires = $7 AND expires > ",
        now!()
    );
    let signed = decision.signature.as_ref();
    let (key_id, signature) = (
        signed.map(|s| s.key_id.as_str()),
        signed.map(|s| s.signature.as_str()),
    );
    let changed = client
        .execute(
            sql,
            &[
                &decision.id,
                &decision.tenants,
                &decision.approver,
                &state.as_str(),
                &decision.digest,
                &decision.policies,
                &decision.expires_ms,
                &key_id,
                &signature,
            ],
        )
        .await?;
    if changed == 0 {
        return Ok(None);
    }
    let row = client
        .query_opt(
            concat!(approval_columns!(), "WHERE id = $1"),
            &[&decision.id],
        )
        .await?;
    Ok(row.as_ref().map(approval))
}
