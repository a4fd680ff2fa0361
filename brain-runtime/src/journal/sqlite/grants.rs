//! OAuth grants in the journal's SQLite file: one row per grant and tenant. Writes and claims
//! run in the journal's transactions (`BEGIN IMMEDIATE`: one writer across the host's
//! processes, so a compare-and-swap is a read and a write in one transaction); loads read
//! inline. Leases are on SQLite's clock.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::Sqlite;
use crate::auth::{Expected, Grant, GrantKey, GrantState, GrantWrite, TokenStore};
use crate::state::StoreFuture;

/// A row's columns, in [`grant`]'s order; `$sealed` is the tokens' column (or `NULL`).
macro_rules! grant_columns {
    ($sealed:literal) => {
        concat!(
            "SELECT grant_id, tenant, generation, state, binding, resource, scopes, expires_at, ",
            "rotates, ",
            $sealed,
            ", CASE WHEN refresh_until > ",
            now!(),
            " THEN refresher END, CASE WHEN refresh_until > ",
            now!(),
            " THEN refresh_until - ",
            now!(),
            " END FROM brain_grants "
        )
    };
}

fn grant(row: &Row<'_>) -> rusqlite::Result<Grant> {
    let state: String = row.get(3)?;
    let scopes: String = row.get(6)?;
    Ok(Grant {
        key: GrantKey {
            grant: row.get(0)?,
            tenant: row.get(1)?,
        },
        generation: row.get(2)?,
        written: GrantWrite {
            // An unknown state (a newer brain's) is not a grant to refresh.
            state: GrantState::parse(&state).unwrap_or(GrantState::NeedsLogin),
            binding: row.get(4)?,
            resource: row.get(5)?,
            scopes: scopes.split_whitespace().map(str::to_owned).collect(),
            expires_at: row.get(7)?,
            rotates: row.get(8)?,
            sealed: row.get(9)?,
        },
        refresher: row.get(10)?,
        claim_left_ms: row.get(11)?,
    })
}

/// The generation of `key`'s row (0 when there is none), and whether `owner` holds its live
/// claim.
fn current(c: &Connection, key: &GrantKey, owner: &str) -> rusqlite::Result<(i64, bool)> {
    let sql = concat!(
        "SELECT generation, refresher = ?3 AND refresh_until > ",
        now!(),
        " FROM brain_grants WHERE grant_id = ?1 AND tenant = ?2"
    );
    Ok(c.prepare_cached(sql)?
        .query_row(params![key.grant, key.tenant, owner], |r| {
            Ok((r.get(0)?, r.get::<_, Option<bool>>(1)?.unwrap_or(false)))
        })
        .optional()?
        .unwrap_or((0, false)))
}

impl TokenStore for Sqlite {
    fn describe(&self) -> &str {
        &self.describe
    }

    /// A file only its owner reads (0600, checked at open).
    fn shared(&self) -> bool {
        false
    }

    fn load<'a>(&'a self, key: &'a GrantKey) -> StoreFuture<'a, Option<Grant>> {
        let sql = concat!(
            grant_columns!("sealed"),
            "WHERE grant_id = ?1 AND tenant = ?2"
        );
        let read = self.read(|c| {
            c.prepare_cached(sql)?
                .query_row(params![key.grant, key.tenant], grant)
                .optional()
        });
        Box::pin(std::future::ready(read))
    }

    fn write<'a>(
        &'a self,
        key: &'a GrantKey,
        expected: &'a Expected,
        write: &'a GrantWrite,
    ) -> StoreFuture<'a, Option<i64>> {
        let (key, expected, write) = (key.clone(), expected.clone(), write.clone());
        self.run(move |c| {
            let owner = match &expected {
                Expected::Claimed { owner, .. } => owner.as_str(),
                _ => "",
            };
            let (generation, claimed) = current(c, &key, owner)?;
            let holds = match &expected {
                Expected::Any => true,
                Expected::Generation(at) => *at == generation,
                Expected::Claimed { generation: at, .. } => *at == generation && claimed,
            };
            if !holds {
                return Ok(None);
            }
            let sql = concat!(
                "INSERT INTO brain_grants (grant_id, tenant, generation, state, binding, resource, ",
                "scopes, expires_at, rotates, sealed, refresher, refresh_until, updated) ",
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, NULL, ",
                now!(),
                ") ON CONFLICT (grant_id, tenant) DO UPDATE SET generation = excluded.generation, ",
                "state = excluded.state, binding = excluded.binding, resource = excluded.resource, ",
                "scopes = excluded.scopes, expires_at = excluded.expires_at, ",
                "rotates = excluded.rotates, sealed = excluded.sealed, refresher = NULL, ",
                "refresh_until = NULL, updated = excluded.updated"
            );
            c.prepare_cached(sql)?.execute(params![
                key.grant,
                key.tenant,
                generation + 1,
                write.state.as_str(),
                write.binding,
                write.resource,
                write.scopes.join(" "),
                write.expires_at,
                write.rotates,
                write.sealed,
            ])?;
            Ok(Some(generation + 1))
        })
    }

    fn claim<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
        lease_ms: i64,
    ) -> StoreFuture<'a, bool> {
        let (key, owner) = (key.clone(), owner.to_owned());
        self.run(move |c| {
            if generation == 0 {
                let sql = concat!(
                    "INSERT INTO brain_grants (grant_id, tenant, generation, state, binding, ",
                    "resource, scopes, updated) VALUES (?1, ?2, 0, 'valid', '', '', '', ",
                    now!(),
                    ") ON CONFLICT (grant_id, tenant) DO NOTHING"
                );
                c.prepare_cached(sql)?
                    .execute(params![key.grant, key.tenant])?;
            }
            let sql = concat!(
                "UPDATE brain_grants SET refresher = ?4, refresh_until = ",
                now!(),
                " + ?5 WHERE grant_id = ?1 AND tenant = ?2 AND generation = ?3 AND (refresher ",
                "IS NULL OR refresher = ?4 OR refresh_until <= ",
                now!(),
                ")"
            );
            let changed = c
                .prepare_cached(sql)?
                .execute(params![key.grant, key.tenant, generation, owner, lease_ms])?;
            Ok(changed > 0)
        })
    }

    fn release<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
    ) -> StoreFuture<'a, ()> {
        let (key, owner) = (key.clone(), owner.to_owned());
        self.run(move |c| {
            let sql = concat!(
                "UPDATE brain_grants SET refresher = NULL, refresh_until = NULL ",
                "WHERE grant_id = ?1 AND tenant = ?2 AND generation = ?3 AND refresher = ?4"
            );
            c.prepare_cached(sql)?
                .execute(params![key.grant, key.tenant, generation, owner])?;
            Ok(())
        })
    }

    fn list(&self) -> StoreFuture<'_, Vec<Grant>> {
        let sql = concat!(grant_columns!("NULL"), "ORDER BY grant_id, tenant");
        let read = self.read(|c| {
            c.prepare_cached(sql)?
                .query_map([], grant)?
                .collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(std::future::ready(read))
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use crate::auth::{Expected, GrantKey, GrantState, GrantWrite, TokenStore};

    #[tokio::test]
    async fn a_journal_of_the_first_schema_gets_the_grants_table() {
        let dir = std::env::temp_dir().join(format!("brain-grants-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.db");
        {
            let first = Connection::open(&path).unwrap();
            // The first schema: today's calls without their task column.
            first.execute_batch(super::super::schema::SCHEMA).unwrap();
            first
                .execute_batch("ALTER TABLE brain_calls DROP COLUMN task")
                .unwrap();
            first.pragma_update(None, "user_version", 1).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let store = super::Sqlite::open(&path, super::super::Durability::Normal).unwrap();
        let key = GrantKey {
            grant: "g".into(),
            tenant: "t".into(),
        };
        let write = GrantWrite {
            state: GrantState::Valid,
            binding: "b".into(),
            resource: "http://127.0.0.1:9/mcp".into(),
            scopes: Vec::new(),
            expires_at: None,
            rotates: None,
            sealed: None,
        };
        let written = store.write(&key, &Expected::Any, &write).await.unwrap();
        assert_eq!(written, Some(1));
        let version: i64 = Connection::open(&path)
            .unwrap()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, super::super::schema::SCHEMA_VERSION);
        // And the calls' task column.
        Connection::open(&path)
            .unwrap()
            .execute_batch("SELECT task FROM brain_calls")
            .unwrap();
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
