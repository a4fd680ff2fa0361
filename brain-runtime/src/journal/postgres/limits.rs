//! Limits in PostgreSQL: one transaction per charge on a connection of their own (a
//! transaction cannot share the pipelined connections). The bucket rows are made if missing,
//! locked in the order of their names (`SELECT … ORDER BY bucket FOR UPDATE`: two replicas'
//! charges that meet wait for each other, never deadlock, and neither reads a value the other
//! is about to change — a plain select-then-update would race under READ COMMITTED), decided
//! by [`crate::limits::decide`] on the database's clock, then written by a conditional
//! `UPDATE … RETURNING` that changes only the TATs it read. A charge commits without waiting
//! for the WAL flush (a lost charge only under-counts); a claim that charges commits durably.
//! Each charge runs on a task of its own, so that a call cancelled meanwhile never leaves the
//! connection inside a transaction.

use std::sync::Arc;

use tokio::sync::Mutex;
use tokio_postgres::{Client, Statement};

use super::sql::{CLAIM, describe_error};
use crate::audit::record::Event;
use crate::limits::{BucketState, Charge, Limit, Usage, Verdict, decide};
use crate::store::{Claim, Claimed, Granted, StoreError};

/// The limits' tables (schema version 5).
pub(super) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS brain_limit_buckets (
    bucket TEXT COLLATE "C" PRIMARY KEY,
    tat_us INT8 NOT NULL
);
CREATE TABLE IF NOT EXISTS brain_limit_slots (
    bucket TEXT COLLATE "C" NOT NULL,
    holder TEXT COLLATE "C" NOT NULL,
    owner TEXT COLLATE "C" NOT NULL,
    until_ms INT8 NOT NULL,
    PRIMARY KEY (bucket, holder)
);
CREATE INDEX IF NOT EXISTS brain_limit_slots_by_holder ON brain_limit_slots (holder);
"#;

/// The rows a charge needs, made in name order.
const ENSURE: &str = "INSERT INTO brain_limit_buckets (bucket, tat_us) \
     SELECT b, 0 FROM unnest($1::text[]) AS b ORDER BY b ON CONFLICT DO NOTHING";
/// The buckets, locked in name order, with each rate's TAT (a row another transaction changed
/// while this one waited for its lock is read as that one left it).
const LOCK: &str = "SELECT b.bucket, b.tat_us FROM brain_limit_buckets b \
     WHERE b.bucket = ANY($1) ORDER BY b.bucket FOR UPDATE OF b";
/// After the locks, in a statement of its own (so a snapshot taken after them, under READ
/// COMMITTED: a slot another charge inserted before it released the lock is counted): each
/// quota's slots held by live owners within their time, and the database's clock.
const COUNT: &str = "SELECT n, \
     (SELECT count(*) FROM brain_limit_slots s JOIN brain_owners o ON o.owner = s.owner \
      WHERE s.bucket = n \
      AND s.until_ms > (extract(epoch FROM clock_timestamp()) * 1000)::int8 \
      AND o.expires > (extract(epoch FROM clock_timestamp()) * 1000)::int8)::int8, \
     (extract(epoch FROM clock_timestamp()) * 1000000)::int8 FROM unnest($1::text[]) AS n";
/// The new TATs, each only where the TAT is still the one read.
const UPDATE: &str = "UPDATE brain_limit_buckets AS b SET tat_us = t.new \
     FROM unnest($1::text[], $2::int8[], $3::int8[]) AS t (bucket, old, new) \
     WHERE b.bucket = t.bucket AND b.tat_us = t.old RETURNING b.bucket";
const SLOTS: &str = "INSERT INTO brain_limit_slots (bucket, holder, owner, until_ms) \
     SELECT unnest($1::text[]), $2, $3, (extract(epoch FROM clock_timestamp()) * 1000)::int8 + $4";
pub(super) const RELEASE: &str = "DELETE FROM brain_limit_slots WHERE holder = $1";
/// Slots whose owner's lease has expired, or held past their call's deadline.
pub(super) const PRUNE_SLOTS: &str = "DELETE FROM brain_limit_slots AS s \
     WHERE s.until_ms <= (extract(epoch FROM now()) * 1000)::int8 OR NOT EXISTS \
     (SELECT 1 FROM brain_owners o WHERE o.owner = s.owner \
      AND o.expires > (extract(epoch FROM now()) * 1000)::int8)";
const USAGE: &str = "SELECT n, coalesce((SELECT tat_us FROM brain_limit_buckets WHERE bucket = n), 0), \
     (SELECT count(*) FROM brain_limit_slots s JOIN brain_owners o ON o.owner = s.owner \
      WHERE s.bucket = n AND s.until_ms > (extract(epoch FROM now()) * 1000)::int8 \
      AND o.expires > (extract(epoch FROM now()) * 1000)::int8)::int8, \
     (extract(epoch FROM clock_timestamp()) * 1000000)::int8 FROM unnest($1::text[]) AS n";

/// The connection charges run on, and its statements.
struct Charging {
    client: Client,
    claim: Statement,
    ensure: Statement,
    lock: Statement,
    count: Statement,
    update: Statement,
    slots: Statement,
}

/// The limits' connection, made on first use (a process whose bindings have no limits never
/// opens it).
pub(super) struct Limits {
    url: String,
    describe: String,
    connection: Arc<Mutex<Option<Charging>>>,
    /// Whether a claim appends to the audit chain.
    audit: Arc<std::sync::atomic::AtomicBool>,
}

impl Limits {
    pub(super) fn new(
        url: &str,
        describe: &str,
        audit: Arc<std::sync::atomic::AtomicBool>,
    ) -> Limits {
        Limits {
            url: url.to_owned(),
            describe: describe.to_owned(),
            connection: Arc::default(),
            audit,
        }
    }

    fn error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::unavailable(&*self.describe, message.to_string())
    }

    /// The charge (with the claim first, when there is one), on a task of its own.
    /// With `approval`, the claim of a call held for approval uses it first (see
    /// [`super::approvals::used`]).
    pub(super) async fn charge(
        &self,
        claim: Option<Claim>,
        charge: Charge,
        approval: Option<Granted>,
    ) -> Result<Claimed, StoreError> {
        let connection = Arc::clone(&self.connection);
        let url = self.url.clone();
        let audit = self.audit.load(std::sync::atomic::Ordering::Relaxed);
        let task = tokio::spawn(async move {
            let mut slot = connection.lock().await;
            if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
                *slot = Some(
                    connect(&url)
                        .await
                        .map_err(|e| format!("cannot connect: {}", describe_error(&e)))?,
                );
            }
            let c = slot.as_ref().expect("connected above");
            let outcome = transaction(c, claim.as_ref(), &charge, approval.as_ref(), audit).await;
            if outcome.is_err() {
                // Whatever state it is in, it is not used again.
                let _ = c.client.batch_execute("ROLLBACK").await;
                *slot = None;
            }
            outcome
        });
        match task.await {
            Ok(outcome) => outcome.map_err(|e| self.error(e)),
            Err(error) => Err(self.error(format!("the charge's task failed: {error}"))),
        }
    }
}

impl Limits {
    /// [`crate::journal::LimitStore::charge`].
    pub(super) async fn verdict(&self, charge: &Charge) -> Result<Verdict, StoreError> {
        Ok(match self.charge(None, charge.clone(), None).await? {
            Claimed::Refused(refusals) => Verdict::Refused(refusals),
            _ => Verdict::Admitted,
        })
    }
}

async fn connect(url: &str) -> Result<Charging, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(error = %describe_error(&error), "the limits' database connection ended");
        }
    });
    let (claim, ensure, lock, count, update, slots) = futures_util::try_join!(
        client.prepare(CLAIM),
        client.prepare(ENSURE),
        client.prepare(LOCK),
        client.prepare(COUNT),
        client.prepare(UPDATE),
        client.prepare(SLOTS),
    )?;
    Ok(Charging {
        client,
        claim,
        ensure,
        lock,
        count,
        update,
        slots,
    })
}

/// One charge's transaction: two round trips (begin, claim, rows made and locked; then the
/// writes and the commit, or the rollback).
async fn transaction(
    c: &Charging,
    claim: Option<&Claim>,
    charge: &Charge,
    approval: Option<&Granted>,
    audit: bool,
) -> Result<Claimed, String> {
    let pg = |error: tokio_postgres::Error| describe_error(&error);
    let names: Vec<&str> = charge.buckets.iter().map(|b| b.name.as_str()).collect();
    let begin = if claim.is_some() {
        "BEGIN"
    } else {
        "BEGIN; SET LOCAL synchronous_commit TO OFF"
    };
    // `None`: the call's approval could not be used, so nothing is claimed.
    let claimed = async {
        match claim {
            Some(claim) => {
                if let Some(approval) = approval
                    && !super::approvals::used(&c.client, claim, approval).await?
                {
                    return Ok(None);
                }
                super::sql::insert_claim(&c.client, &c.claim, claim)
                    .await
                    .map(Some)
            }
            None => Ok(Some(1)),
        }
    };
    let names: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&names];
    let (_, claimed, _, rows, counts) = futures_util::try_join!(
        c.client.batch_execute(begin),
        claimed,
        c.client.execute(&c.ensure, &names),
        c.client.query(&c.lock, &names),
        c.client.query(&c.count, &names),
    )
    .map_err(pg)?;
    let Some(claimed) = claimed else {
        c.client.batch_execute("ROLLBACK").await.map_err(pg)?;
        return Ok(Claimed::Unapproved);
    };
    if claimed == 0 {
        c.client.batch_execute("ROLLBACK").await.map_err(pg)?;
        return Ok(Claimed::Taken);
    }
    let now_us: i64 = counts.first().map_or(0, |row| row.get(2));
    let states = bucket_states(charge, &rows, &counts);
    let decision = decide(&charge.buckets, &states, now_us);
    let Verdict::Admitted = decision.verdict else {
        c.client.batch_execute("ROLLBACK").await.map_err(pg)?;
        let Verdict::Refused(refusals) = decision.verdict else {
            unreachable!("not admitted")
        };
        return Ok(Claimed::Refused(refusals));
    };
    let (mut rates, mut old, mut new, mut quotas) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((bucket, state), tat) in charge.buckets.iter().zip(&states).zip(&decision.tats) {
        match (bucket.limit, tat) {
            (Limit::Rate { .. }, Some(tat)) => {
                rates.push(bucket.name.as_str());
                old.push(state.tat_us);
                new.push(*tat);
            }
            (Limit::Concurrent(_), _) => quotas.push(bucket.name.as_str()),
            _ => {}
        }
    }
    let update: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&rates, &old, &new];
    let slots: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&quotas, &charge.holder, &charge.owner, &charge.hold_ms];
    let (updated, _) = futures_util::try_join!(
        c.client.query(&c.update, &update),
        c.client.execute(&c.slots, &slots),
    )
    .map_err(pg)?;
    if updated.len() != rates.len() {
        // Cannot happen under the locks; never admit on a value that moved.
        return Err("a bucket changed under its lock; the call was not charged".to_owned());
    }
    if let (Some(claim), true) = (claim, audit) {
        let event = Event::Claimed {
            claim: claim.clone(),
            approval: approval.map(|granted| granted.id.clone()),
        };
        crate::audit::postgres::append(&c.client, &[(claim.key.tenant.clone(), event)])
            .await
            .map_err(pg)?;
    }
    c.client.batch_execute("COMMIT").await.map_err(pg)?;
    Ok(Claimed::Claimed)
}

/// Each of `charge`'s buckets as the locked `rows` (name, theoretical arrival time) and the
/// `counts` of held slots (name, count) say it stands; a bucket without a row is empty.
fn bucket_states(
    charge: &Charge,
    rows: &[tokio_postgres::Row],
    counts: &[tokio_postgres::Row],
) -> Vec<BucketState> {
    let find = |rows: &[tokio_postgres::Row], name: &str| {
        rows.iter()
            .find(|row| row.get::<_, &str>(0) == name)
            .cloned()
    };
    charge
        .buckets
        .iter()
        .map(|bucket| BucketState {
            tat_us: find(rows, &bucket.name).map_or(0, |row| row.get(1)),
            held: find(counts, &bucket.name)
                .map_or(0, |row| u32::try_from(row.get::<_, i64>(1)).unwrap_or(0)),
        })
        .collect()
}

/// [`crate::journal::LimitStore::usage`], on a read connection.
pub(super) async fn usage(
    client: &Client,
    names: &[String],
) -> Result<Vec<Usage>, tokio_postgres::Error> {
    let rows = client.query(USAGE, &[&names]).await?;
    Ok(rows
        .iter()
        .map(|row| Usage {
            bucket: row.get(0),
            state: BucketState {
                tat_us: row.get(1),
                held: u32::try_from(row.get::<_, i64>(2)).unwrap_or(0),
            },
            now_us: row.get(3),
        })
        .collect())
}
