//! The PostgreSQL journal's schema: its creation and migrations, and the drift each process
//! saw (`brain_drift`).

use tokio_postgres::Client;

use super::limits;
use super::sql::{self, MIGRATE_FROM_1, SCHEMA, SCHEMA_VERSION, describe_error};
use crate::state::Migration;
use crate::store::Drift;

/// The drift each process saw (schema version 6): its first sighting of each listing.
const DRIFT_SCHEMA: &str = r#"
CREATE TABLE brain_drift (
    binding TEXT COLLATE "C" NOT NULL,
    listed TEXT COLLATE "C" NOT NULL,
    process TEXT COLLATE "C" NOT NULL,
    pinned TEXT NOT NULL,
    fields TEXT NOT NULL,
    refused BOOL NOT NULL,
    first_seen INT8 NOT NULL,
    PRIMARY KEY (binding, listed, process)
);
"#;

/// Deletes drift first seen more than `$1` milliseconds ago.
pub(super) const PRUNE_DRIFT: &str = concat!(
    "DELETE FROM brain_drift WHERE first_seen < ",
    now!(),
    " - $1"
);

/// Records `drift` as its process's first sighting of that listing (kept when there is one).
pub(super) async fn record_drift(
    client: &Client,
    drift: &Drift,
) -> Result<bool, tokio_postgres::Error> {
    let sql = concat!(
        "INSERT INTO brain_drift (binding, listed, process, pinned, fields, refused, first_seen) ",
        "VALUES ($1, $2, $3, $4, $5, $6, ",
        now!(),
        ") ON CONFLICT DO NOTHING"
    );
    let fields = serde_json::to_string(&drift.fields).unwrap_or_default();
    let changed = client
        .execute(
            sql,
            &[
                &drift.binding,
                &drift.listed,
                &drift.process,
                &drift.pinned,
                &fields,
                &drift.refused,
            ],
        )
        .await?;
    Ok(changed > 0)
}

/// The drift recorded, newest first (`limit` 0: all).
pub(super) async fn drifts(
    client: &Client,
    limit: usize,
) -> Result<Vec<Drift>, tokio_postgres::Error> {
    let limit = (limit > 0).then_some(limit as i64);
    let rows = client
        .query(
            "SELECT binding, listed, process, pinned, fields, refused, first_seen FROM \
             brain_drift ORDER BY first_seen DESC, binding LIMIT $1",
            &[&limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| Drift {
            binding: row.get(0),
            listed: row.get(1),
            process: row.get(2),
            pinned: row.get(3),
            fields: serde_json::from_str(row.get(4)).unwrap_or_default(),
            refused: row.get(5),
            tenants: Vec::new(),
            first_seen_ms: row.get(6),
        })
        .collect())
}

pub(super) async fn migrate(client: &Client) -> Result<(), Migration> {
    let step = async {
        client.batch_execute("BEGIN").await?;
        // One key for brain's schema: concurrent starters wait here, then see it made.
        client
            .batch_execute("SELECT pg_advisory_xact_lock(7274827303)")
            .await?;
        client
            .batch_execute("CREATE TABLE IF NOT EXISTS brain_schema (version INT4 NOT NULL)")
            .await?;
        let version: Option<i32> = client
            .query_one("SELECT max(version) FROM brain_schema", &[])
            .await?
            .get(0);
        let checked = match version {
            None => {
                client.batch_execute(SCHEMA).await?;
                client.batch_execute(sql::GRANTS_SCHEMA).await?;
                client.batch_execute(limits::SCHEMA).await?;
                client.batch_execute(DRIFT_SCHEMA).await?;
                client
                    .batch_execute(crate::approvals::postgres::SCHEMA)
                    .await?;
                client.batch_execute(crate::audit::postgres::SCHEMA).await?;
                client
                    .execute(
                        "INSERT INTO brain_schema (version) VALUES ($1)",
                        &[&SCHEMA_VERSION],
                    )
                    .await?;
                Ok(())
            }
            Some(SCHEMA_VERSION) => Ok(()),
            Some(older @ 1..=8) => {
                if older == 1 {
                    client.batch_execute(MIGRATE_FROM_1).await?;
                }
                if older < 3 {
                    client.batch_execute(sql::GRANTS_SCHEMA).await?;
                }
                if older < 4 {
                    client.batch_execute(sql::TASKS_COLUMN).await?;
                }
                if older < 5 {
                    client.batch_execute(limits::SCHEMA).await?;
                }
                if older < 6 {
                    client.batch_execute(DRIFT_SCHEMA).await?;
                }
                if older < 7 {
                    client
                        .batch_execute(crate::approvals::postgres::SCHEMA)
                        .await?;
                } else {
                    client
                        .batch_execute(crate::approvals::postgres::SIGNATURE_COLUMNS)
                        .await?;
                }
                if older < 8 {
                    client.batch_execute(crate::audit::postgres::SCHEMA).await?;
                }
                client
                    .execute("UPDATE brain_schema SET version = $1", &[&SCHEMA_VERSION])
                    .await?;
                Ok(())
            }
            Some(newer) if newer > SCHEMA_VERSION => Err(Migration::Incompatible(format!(
                "the journal's schema is version {newer}, newer than this brain's \
                 ({SCHEMA_VERSION}): use a newer brain-harness, or another database"
            ))),
            Some(older) => Err(Migration::Incompatible(format!(
                "the journal's schema is version {older}, which no brain made: use another database"
            ))),
        };
        client.batch_execute("COMMIT").await?;
        Ok::<_, tokio_postgres::Error>(checked)
    };
    match step.await {
        Ok(checked) => checked,
        Err(error) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(Migration::Failed(format!(
                "cannot create the journal's schema: {}",
                describe_error(&error)
            )))
        }
    }
}
