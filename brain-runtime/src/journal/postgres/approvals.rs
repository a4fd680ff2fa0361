//! Approvals in PostgreSQL (schema version 7): asked for, decided, and used by one claim, each
//! in one transaction on a connection of their own, made on first use (a process whose
//! policies hold no call never opens it). A call's approvals are asked for under an advisory
//! lock on its key, so that two retries at once record one pending approval.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Mutex;
use tokio_postgres::{Client, Row};

use super::sql::describe_error;
use crate::journal::audit::Event;
use crate::journal::store::{
    Approval, ApprovalFilter, ApprovalRequest, ApprovalState, Asked, Decision, DecisionSignature,
    Granted, new_id,
};
use crate::journal::store::{Claim, Claimed, Key, StoreError};

/// The approvals' table (schema version 7).
pub(super) const SCHEMA: &str = r#"
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
pub(super) const SIGNATURE_COLUMNS: &str = "ALTER TABLE brain_approvals ADD COLUMN IF NOT EXISTS \
     decision_key TEXT; ALTER TABLE brain_approvals ADD COLUMN IF NOT EXISTS signature TEXT;";

/// Uses approval `$1` of the call `$2, $3, $4` with digest `$5`, expiry `$6` and signature
/// `$7, $8` unless the journal has the call as sent: (whether it has, how many approvals it
/// used).
pub(super) const USE: &str = concat!(
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
pub(super) const FORGET: &str = concat!(
    "UPDATE brain_approvals SET arguments = NULL WHERE arguments IS NOT NULL AND expires <= ",
    now!()
);
/// Deletes approvals expired more than `$1` milliseconds ago.
pub(super) const PRUNE: &str = concat!(
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

/// The connection of approvals and of the audit chain's own writes (a task handed over, a
/// drift, a denial, a checkpoint, pruning), made on first use.
pub(super) struct Approvals {
    url: String,
    describe: String,
    connection: Arc<Mutex<Option<Client>>>,
    /// Whether writes append to the audit chain.
    audit: Arc<AtomicBool>,
}

impl Approvals {
    pub(super) fn new(url: &str, describe: &str, audit: Arc<AtomicBool>) -> Approvals {
        Approvals {
            url: url.to_owned(),
            describe: describe.to_owned(),
            connection: Arc::default(),
            audit,
        }
    }

    fn audits(&self) -> bool {
        self.audit.load(Ordering::Relaxed)
    }

    /// Runs `step` in one transaction on the approvals' connection (on a task of its own: a
    /// caller that goes away does not leave it half done), committed when `step` says so,
    /// else rolled back.
    pub(super) fn transaction<T: Send + 'static>(
        &self,
        step: impl for<'c> FnOnce(
            &'c Client,
        ) -> futures_util::future::BoxFuture<
            'c,
            Result<(bool, T), tokio_postgres::Error>,
        > + Send
        + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'static {
        let (connection, url) = (Arc::clone(&self.connection), self.url.clone());
        let describe = self.describe.clone();
        let task = tokio::spawn(async move {
            let mut slot = connection.lock().await;
            if slot.as_ref().is_none_or(Client::is_closed) {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("cannot connect: {}", describe_error(&e)))?;
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::warn!(
                            error = %describe_error(&error),
                            "the approvals' database connection ended"
                        );
                    }
                });
                *slot = Some(client);
            }
            let client = slot.as_ref().expect("connected above");
            let outcome = async {
                client.batch_execute("BEGIN").await?;
                let (commit, value) = step(client).await?;
                client
                    .batch_execute(if commit { "COMMIT" } else { "ROLLBACK" })
                    .await?;
                Ok::<_, tokio_postgres::Error>(value)
            }
            .await;
            if outcome.is_err() {
                let _ = client.batch_execute("ROLLBACK").await;
                *slot = None;
            }
            outcome.map_err(|e| describe_error(&e))
        });
        async move {
            match task.await {
                Ok(outcome) => outcome.map_err(|e| StoreError::unavailable(describe, e)),
                Err(error) => Err(StoreError::unavailable(
                    describe,
                    format!("the approval's task failed: {error}"),
                )),
            }
        }
    }

    /// [`crate::journal::ApprovalStore::ask_approval`].
    pub(super) async fn ask(&self, request: &ApprovalRequest) -> Result<Asked, StoreError> {
        let request = request.clone();
        let audit = self.audits();
        self.transaction(move |client| {
            Box::pin(async move {
                let asked = ask(client, &request).await?;
                if let (Asked::Pending(id), true) = (&asked, audit) {
                    let event = Event::ApprovalAsked {
                        id: id.clone(),
                        key: request.key.clone(),
                        binding: request.binding.clone(),
                        principal: request.principal.clone(),
                        digest: request.digest.clone(),
                        policies: request.policies.clone(),
                    };
                    super::audit::append(client, &[(request.key.tenant.clone(), event)]).await?;
                }
                Ok((true, asked))
            })
        })
        .await
    }

    /// [`crate::journal::ApprovalStore::claim_approved`] without limits.
    pub(super) async fn claim(
        &self,
        claim: &Claim,
        approval: &Granted,
    ) -> Result<Claimed, StoreError> {
        let (claim, approval) = (claim.clone(), approval.clone());
        let audit = self.audits();
        self.transaction(move |client| {
            Box::pin(async move {
                if !used(client, &claim, &approval).await? {
                    return Ok((false, Claimed::Unapproved));
                }
                let statement = client.prepare(super::sql::CLAIM).await?;
                if super::sql::insert_claim(client, &statement, &claim).await? == 0 {
                    return Ok((false, Claimed::Taken));
                }
                if audit {
                    let event = Event::Claimed {
                        claim: claim.clone(),
                        approval: Some(approval.id.clone()),
                    };
                    super::audit::append(client, &[(claim.key.tenant.clone(), event)]).await?;
                }
                Ok((true, Claimed::Claimed))
            })
        })
        .await
    }

    /// [`crate::journal::ApprovalStore::approvals`].
    pub(super) async fn list(&self, filter: &ApprovalFilter) -> Result<Vec<Approval>, StoreError> {
        let filter = filter.clone();
        self.transaction(move |client| {
            Box::pin(async move {
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
                Ok((true, rows.iter().map(approval).collect()))
            })
        })
        .await
    }

    /// [`crate::journal::ApprovalStore::decide_approval`].
    pub(super) async fn decide(&self, decision: &Decision) -> Result<Option<Approval>, StoreError> {
        let decision = decision.clone();
        let state = if decision.approved {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        let audit = self.audits();
        self.transaction(move |client| {
            Box::pin(async move {
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
                    return Ok((false, None));
                }
                let row = client
                    .query_opt(
                        concat!(approval_columns!(), "WHERE id = $1"),
                        &[&decision.id],
                    )
                    .await?;
                let decided = row.as_ref().map(approval);
                if let (Some(decided), true) = (&decided, audit) {
                    let event = Event::decided(decided);
                    super::audit::append(client, &[(decided.key.tenant.clone(), event)]).await?;
                }
                Ok((true, decided))
            })
        })
        .await
    }
}

/// Whether the claim may go on: the journal has the call, or its approval was used now.
pub(super) async fn used(
    client: &Client,
    claim: &Claim,
    approval: &Granted,
) -> Result<bool, tokio_postgres::Error> {
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
    if journaled || used > 0 {
        return Ok(true);
    }
    // A concurrent claim of the same call may have used the approval and committed while this
    // statement waited for its row (its snapshot predates that claim): look again, with a new
    // snapshot. The claim then meets that entry and gets the journal's answer.
    let again = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM brain_calls WHERE tenant = $1 AND session = $2 \
             AND call_id = $3 AND state <> 'not_sent')",
            &[&key.tenant, &key.session, &key.call_id],
        )
        .await?;
    Ok(again.get(0))
}

/// Whether the call `key` is in the journal (claimed, not merely `not_sent`), as committed now.
async fn journaled(client: &Client, key: &Key) -> Result<bool, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT 1 FROM brain_calls WHERE tenant = $1 AND session = $2 AND call_id = $3 \
             AND state <> 'not_sent'",
            &[&key.tenant, &key.session, &key.call_id],
        )
        .await?;
    Ok(row.is_some())
}

async fn ask(client: &Client, request: &ApprovalRequest) -> Result<Asked, tokio_postgres::Error> {
    let key = &request.key;
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
    if journaled(client, key).await? {
        return Ok(Asked::Journaled);
    }
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
    if let Some(row) = found {
        let signature = DecisionSignature::from_columns(row.get(4), row.get(5));
        return Ok(Asked::of(
            row.get(0),
            row.get(1),
            row.get(2),
            row.get(3),
            signature,
        ));
    }
    // Each statement reads what is committed when it starts (READ COMMITTED), and a claim of
    // an approved call commits its entry and the approval's use at once, without this lock: an
    // approval used between the check above and the lookup means the call is journaled now.
    if journaled(client, key).await? {
        return Ok(Asked::Journaled);
    }
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
    Ok(Asked::Pending(id))
}
