//! The journal's schema in the SQLite file, its migrations, and the statements of MCP tasks
//! (a task's record on its call, and a call's take-over by a retry that resumes its task).

use rusqlite::{Connection, params};

use crate::audit::record::Event;
use crate::state::Migration;
use crate::store::{Drift, Key};

/// The schema version this brain writes (2 added `brain_grants`, 3 `brain_calls.task`, 4 the
/// limits' tables, 5 `brain_drift`, 6 `brain_approvals`, 7 the audit chain's tables, 8 an
/// approval's signature).
pub(super) const SCHEMA_VERSION: i64 = 8;

/// Calls are rows in claim order (a rowid table: a claim appends to the last page, an outcome
/// updates a recent, cached one), found by their key through a unique index.
pub(super) const SCHEMA: &str = "
CREATE TABLE brain_calls (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    call_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    binding TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    created INTEGER NOT NULL,
    deadline INTEGER NOT NULL,
    finished INTEGER,
    is_error INTEGER,
    unknown_outcome INTEGER,
    result TEXT,
    result_bytes INTEGER,
    trace_id TEXT,
    task TEXT,
    UNIQUE (tenant, session, call_id)
);
CREATE TABLE brain_owners (
    owner TEXT PRIMARY KEY,
    expires INTEGER NOT NULL
) WITHOUT ROWID;
";

/// OAuth grants' table (schema version 2; `sqlite/grants.rs`).
const GRANTS_SCHEMA: &str = "
CREATE TABLE brain_grants (
    grant_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    generation INTEGER NOT NULL,
    state TEXT NOT NULL,
    binding TEXT NOT NULL,
    resource TEXT NOT NULL,
    scopes TEXT NOT NULL,
    expires_at INTEGER,
    rotates INTEGER,
    sealed TEXT,
    refresher TEXT,
    refresh_until INTEGER,
    updated INTEGER NOT NULL,
    PRIMARY KEY (grant_id, tenant)
) WITHOUT ROWID;
";

/// The drift each process saw (schema version 5): its first sighting of each listing.
const DRIFT_SCHEMA: &str = "
CREATE TABLE brain_drift (
    binding TEXT NOT NULL,
    listed TEXT NOT NULL,
    process TEXT NOT NULL,
    pinned TEXT NOT NULL,
    fields TEXT NOT NULL,
    refused INTEGER NOT NULL,
    first_seen INTEGER NOT NULL,
    PRIMARY KEY (binding, listed, process)
) WITHOUT ROWID;
";

/// From version 2: the task a call's server created, while it runs.
const TASKS_COLUMN: &str = "ALTER TABLE brain_calls ADD COLUMN task TEXT;";

/// Whether `table` has the column `column`.
fn has_column(connection: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let mut statement = connection.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = statement.query_map([], |row| row.get::<_, String>(1))?;
    for name in names {
        if name? == column {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Creates the schema, or checks its version, inside one write transaction: several processes
/// starting at once create it once.
pub(super) fn migrate(connection: &Connection) -> Result<(), Migration> {
    let step = || -> rusqlite::Result<Result<(), Migration>> {
        connection.execute_batch("BEGIN IMMEDIATE")?;
        let version: i64 = connection.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let checked = match version {
            0..=7 => {
                if version == 0 {
                    connection.execute_batch(SCHEMA)?;
                } else if version < 3 {
                    connection.execute_batch(TASKS_COLUMN)?;
                }
                if version < 2 {
                    connection.execute_batch(GRANTS_SCHEMA)?;
                }
                if version < 4 {
                    connection.execute_batch(super::limits::SCHEMA)?;
                }
                if version < 5 {
                    connection.execute_batch(DRIFT_SCHEMA)?;
                }
                if version < 6 {
                    connection.execute_batch(crate::approvals::sqlite::SCHEMA)?;
                } else if !has_column(connection, "brain_approvals", "signature")? {
                    connection.execute_batch(crate::approvals::sqlite::SIGNATURE_COLUMNS)?;
                }
                if version < 7 {
                    connection.execute_batch(crate::audit::sqlite::SCHEMA)?;
                }
                connection.pragma_update(None, "user_version", SCHEMA_VERSION)?;
                Ok(())
            }
            SCHEMA_VERSION => Ok(()),
            newer => Err(Migration::Incompatible(format!(
                "the journal's schema is version {newer}, newer than this brain's \
                 ({SCHEMA_VERSION}): use a newer brain-harness, or another state file"
            ))),
        };
        connection.execute_batch("COMMIT")?;
        Ok(checked)
    };
    match step() {
        Ok(checked) => checked,
        Err(error) => {
            let _ = connection.execute_batch("ROLLBACK");
            Err(Migration::Failed(format!(
                "cannot create the journal's schema: {error}"
            )))
        }
    }
}

/// Records `task` on the call of `key`, while it is `sent` by `owner`.
pub(super) fn record_task(
    c: &Connection,
    key: &Key,
    owner: &str,
    task: &str,
) -> rusqlite::Result<bool> {
    let sql = "UPDATE brain_calls SET task = ?5 WHERE tenant = ?1 AND session = ?2 \
               AND call_id = ?3 AND state = 'sent' AND owner = ?4";
    let changed = c.prepare_cached(sql)?.execute(params![
        key.tenant,
        key.session,
        key.call_id,
        owner,
        task
    ])?;
    Ok(changed > 0)
}

/// Hands the call of `key` over from `from` to `to`: while it is `sent` by `from` with a task,
/// `from`'s lease has expired, and `to`'s is live.
pub(super) fn take_over(
    c: &Connection,
    key: &Key,
    from: &str,
    to: &str,
    audit: bool,
) -> rusqlite::Result<bool> {
    let sql = concat!(
        "UPDATE brain_calls AS c SET owner = ?5 WHERE c.tenant = ?1 AND c.session = ?2 ",
        "AND c.call_id = ?3 AND c.state = 'sent' AND c.owner = ?4 AND c.task IS NOT NULL ",
        "AND NOT EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = ?4 AND o.expires > ",
        now!(),
        ") AND EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = ?5 AND o.expires > ",
        now!(),
        ")"
    );
    let changed =
        c.prepare_cached(sql)?
            .execute(params![key.tenant, key.session, key.call_id, from, to])?;
    if changed > 0 && audit {
        let event = Event::Resumed {
            key: key.clone(),
            from: from.to_owned(),
            to: to.to_owned(),
        };
        crate::audit::sqlite::append(c, &key.tenant, &event)?;
    }
    Ok(changed > 0)
}

/// Records `drift` as its process's first sighting of that listing (kept when there is one),
/// and audits it in the chain of each tenant the binding lists.
pub(super) fn record_drift(c: &Connection, drift: &Drift, audit: bool) -> rusqlite::Result<bool> {
    let sql = concat!(
        "INSERT INTO brain_drift (binding, listed, process, pinned, fields, refused, first_seen) ",
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ",
        now!(),
        ") ON CONFLICT DO NOTHING"
    );
    let fields = serde_json::to_string(&drift.fields).unwrap_or_default();
    let changed = c.prepare_cached(sql)?.execute(params![
        drift.binding,
        drift.listed,
        drift.process,
        drift.pinned,
        fields,
        drift.refused
    ])?;
    if changed > 0 && audit {
        let event = Event::drift(drift);
        for tenant in &drift.tenants {
            crate::audit::sqlite::append(c, tenant, &event)?;
        }
    }
    Ok(changed > 0)
}

/// The drift recorded, newest first (`limit` -1: all).
pub(super) fn drifts(c: &Connection, limit: i64) -> rusqlite::Result<Vec<Drift>> {
    let sql = "SELECT binding, listed, process, pinned, fields, refused, first_seen \
               FROM brain_drift ORDER BY first_seen DESC, binding LIMIT ?1";
    let mut statement = c.prepare_cached(sql)?;
    let rows = statement.query_map(params![limit], |row| {
        let fields: String = row.get(4)?;
        Ok(Drift {
            binding: row.get(0)?,
            listed: row.get(1)?,
            process: row.get(2)?,
            pinned: row.get(3)?,
            fields: serde_json::from_str(&fields).unwrap_or_default(),
            refused: row.get(5)?,
            tenants: Vec::new(),
            first_seen_ms: row.get(6)?,
        })
    })?;
    rows.collect()
}

/// Deletes the tokens issued on behalf of users ([`crate::auth::GrantKey::ISSUED`]) that expired
/// more than `retention_ms` ago and no process is renewing.
pub(super) fn prune_issued(c: &Connection, retention_ms: i64) -> rusqlite::Result<usize> {
    let sql = concat!(
        "DELETE FROM brain_grants WHERE grant_id LIKE 'issued:%' AND expires_at * 1000 < ",
        now!(),
        " - ?1 AND NOT coalesce(refresh_until > ",
        now!(),
        ", FALSE)"
    );
    c.prepare_cached(sql)?.execute(params![retention_ms])
}

/// Deletes drift first seen more than `retention_ms` ago.
pub(super) fn prune_drift(c: &Connection, retention_ms: i64) -> rusqlite::Result<usize> {
    let sql = concat!(
        "DELETE FROM brain_drift WHERE first_seen < ",
        now!(),
        " - ?1"
    );
    c.prepare_cached(sql)?.execute(params![retention_ms])
}

#[cfg(test)]
mod tests {
    use crate::journal::Drift;
    use crate::state::StoreError;

    /// A state file of version 4 (before `brain_drift`) is migrated: drift is recorded once per
    /// process and listing, listed newest first, and pruned with the retention.
    #[tokio::test]
    async fn a_version_4_file_gains_the_drift_table() {
        let dir = std::env::temp_dir().join(format!("brain-schema-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.db");
        {
            let old = rusqlite::Connection::open(&path).unwrap();
            old.execute_batch(super::SCHEMA).unwrap();
            old.execute_batch(super::GRANTS_SCHEMA).unwrap();
            old.execute_batch(crate::journal::sqlite::limits::SCHEMA)
                .unwrap();
            old.pragma_update(None, "user_version", 4).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let journal = crate::journal::Journal::open(&format!("sqlite:{}", path.display()))
            .await
            .unwrap();
        let drift = |process: &str| Drift {
            binding: "echo".into(),
            pinned: "sha256:p".into(),
            listed: "sha256:l".into(),
            fields: vec!["inputSchema".into()],
            refused: true,
            tenants: vec!["t".into()],
            process: process.into(),
            first_seen_ms: 0,
        };
        let store = journal.store();
        assert!(store.record_drift(&drift("a")).await.unwrap());
        assert!(
            !store.record_drift(&drift("a")).await.unwrap(),
            "once per process"
        );
        assert!(store.record_drift(&drift("b")).await.unwrap());
        let recorded = journal.drifts(0).await.unwrap();
        assert_eq!(recorded.len(), 2, "{recorded:?}");
        assert_eq!(recorded[0].fields, ["inputSchema"]);
        assert!(recorded.iter().all(|d| d.first_seen_ms > 0), "{recorded:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        store.prune(10).await.unwrap();
        assert!(journal.drifts(0).await.unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A state file from a newer brain is refused as incompatible (retrying cannot help),
    /// and a state URL brain cannot read is a configuration error, not an unavailable store.
    #[tokio::test]
    async fn a_newer_schema_and_a_bad_state_url_have_their_own_kinds() {
        let dir = std::env::temp_dir().join(format!("brain-schema-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.db");
        {
            let newer = rusqlite::Connection::open(&path).unwrap();
            newer
                .pragma_update(None, "user_version", super::SCHEMA_VERSION + 1)
                .unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let refused = crate::journal::Journal::open(&format!("sqlite:{}", path.display()))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, StoreError::Incompatible { .. }),
            "{refused:?}"
        );
        assert!(
            refused.message().contains("newer than this brain's"),
            "{refused}"
        );
        assert_eq!(
            refused.store(),
            Some(&*format!("SQLite {}", path.display()))
        );
        std::fs::remove_dir_all(&dir).unwrap();

        for url in [
            "sqlite:",
            "sqlite:/tmp/x?synchronous=off",
            "redis://127.0.0.1",
        ] {
            let refused = crate::journal::Journal::open(url).await.unwrap_err();
            assert!(
                matches!(refused, StoreError::InvalidUrl { .. }),
                "{url}: {refused:?}"
            );
            assert_eq!(refused.store(), None);
        }
    }
}
