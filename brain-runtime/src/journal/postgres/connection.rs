//! The journal's connections to PostgreSQL: each with its statements prepared once, the
//! writer's planned once.

use tokio_postgres::{Client, NoTls, Statement};

use super::sql::{
    CLAIM, CLAIM_MANY, LIST, LOOKUP, PRUNE_CALLS, PRUNE_OWNERS, RENEW, RENEW_CREATE, SETTLE,
    SETTLE_MANY, describe_error,
};
use crate::audit::postgres::{INSERT_RECORDS, LOCK_HEADS, MAKE_HEADS, UPDATE_HEADS};

/// One connection and its prepared statements.
pub(super) struct Connection {
    pub(super) client: Client,
    pub(super) renew_create: Statement,
    pub(super) renew: Statement,
    pub(super) claim: Statement,
    pub(super) claim_many: Statement,
    pub(super) lookup: Statement,
    pub(super) settle: Statement,
    pub(super) settle_many: Statement,
    pub(super) list: Statement,
    pub(super) prune_calls: Statement,
    pub(super) prune_owners: Statement,
    pub(super) make_heads: Statement,
    pub(super) lock_heads: Statement,
    pub(super) insert_records: Statement,
    pub(super) update_heads: Statement,
}

pub(super) async fn connect(url: &str) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("cannot connect: {}", describe_error(&e)))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(error = %describe_error(&error), "the journal's database connection ended");
        }
    });
    Ok(client)
}

/// The writer's session plans each statement once (a generic plan, kept), as a loop over the
/// batch's keys looking each up by its index: every statement it runs writes rows by key, so
/// a scan of a whole table or a join to it is never right — yet a generic plan made while the
/// table was empty would hash-join, and planning each batch anew (a custom plan) cost a
/// quarter of the writer's time.
pub(super) async fn plan_once(client: &Client) -> Result<(), String> {
    client
        .batch_execute(
            "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; \
             SET enable_hashjoin = off; SET enable_mergejoin = off",
        )
        .await
        .map_err(|e| describe_error(&e))
}

/// Prepares every statement, pipelined (one round trip, not one each: a harness process
/// connects for every call).
pub(super) async fn prepare(client: Client) -> Result<Connection, String> {
    let prepare = |sql: &'static str| client.prepare(sql);
    let prepared = futures_util::future::try_join_all([
        prepare(RENEW_CREATE),
        prepare(RENEW),
        prepare(CLAIM),
        prepare(CLAIM_MANY),
        prepare(LOOKUP),
        prepare(SETTLE),
        prepare(SETTLE_MANY),
        prepare(LIST),
        prepare(PRUNE_CALLS),
        prepare(PRUNE_OWNERS),
        prepare(MAKE_HEADS),
        prepare(LOCK_HEADS),
        prepare(INSERT_RECORDS),
        prepare(UPDATE_HEADS),
    ])
    .await
    .map_err(|e| format!("cannot prepare a statement: {}", describe_error(&e)))?;
    let mut prepared = prepared.into_iter();
    let mut next = || prepared.next().expect("one statement each");
    Ok(Connection {
        renew_create: next(),
        renew: next(),
        claim: next(),
        claim_many: next(),
        lookup: next(),
        settle: next(),
        settle_many: next(),
        list: next(),
        prune_calls: next(),
        prune_owners: next(),
        make_heads: next(),
        lock_heads: next(),
        insert_records: next(),
        update_heads: next(),
        client,
    })
}
