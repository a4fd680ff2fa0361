//! The approval steps in the journal's PostgreSQL transactions: asked for, decided, and used by
//! one claim, each in one transaction on a connection of their own, made on first use (a
//! process whose policies hold no call never opens it). A call's approvals are asked for under
//! an advisory lock on its key, so that two retries at once record one pending approval. The
//! approvals' own SQL is [`crate::approvals::postgres`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Mutex;
use tokio_postgres::Client;

use super::sql::describe_error;
use crate::audit::record::Event;
use crate::store::{Approval, ApprovalFilter, ApprovalRequest, Asked, Decision, Granted};
use crate::store::{Claim, Claimed, Key, StoreError};

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
                    crate::audit::postgres::append(client, &[(request.key.tenant.clone(), event)])
                        .await?;
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
                    crate::audit::postgres::append(client, &[(claim.key.tenant.clone(), event)])
                        .await?;
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
                let listed = crate::approvals::postgres::list(client, &filter).await?;
                Ok((true, listed))
            })
        })
        .await
    }

    /// [`crate::journal::ApprovalStore::decide_approval`].
    pub(super) async fn decide(&self, decision: &Decision) -> Result<Option<Approval>, StoreError> {
        let decision = decision.clone();
        let audit = self.audits();
        self.transaction(move |client| {
            Box::pin(async move {
                let Some(decided) = crate::approvals::postgres::decide(client, &decision).await?
                else {
                    return Ok((false, None));
                };
                if audit {
                    let event = Event::decided(&decided);
                    let tenant = decided.key.tenant.clone();
                    crate::audit::postgres::append(client, &[(tenant, event)]).await?;
                }
                Ok((true, Some(decided)))
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
    let (journaled, used) = crate::approvals::postgres::take(client, claim, approval).await?;
    if journaled || used {
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
    crate::approvals::postgres::lock(client, key).await?;
    if journaled(client, key).await? {
        return Ok(Asked::Journaled);
    }
    if let Some(asked) = crate::approvals::postgres::find(client, request).await? {
        return Ok(asked);
    }
    // Each statement reads what is committed when it starts (READ COMMITTED), and a claim of
    // an approved call commits its entry and the approval's use at once, without this lock: an
    // approval used between the check above and the lookup means the call is journaled now.
    if journaled(client, key).await? {
        return Ok(Asked::Journaled);
    }
    crate::approvals::postgres::insert_pending(client, request)
        .await
        .map(Asked::Pending)
}
