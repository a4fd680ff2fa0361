//! OAuth grants in the journal's PostgreSQL database, shared by every replica. Each operation
//! is one statement on a read connection (grants change once per token lifetime, so they skip
//! the writer's batches): a compare-and-swap is an `UPDATE … WHERE generation = …` or an
//! `INSERT … ON CONFLICT DO UPDATE … WHERE`, atomic on the row. Leases are on the database's
//! clock.

use tokio_postgres::Row;

use super::sql::{
    GRANT_CLAIM, GRANT_CLAIM_NEW, GRANT_LIST, GRANT_LOAD, GRANT_RELEASE, GRANT_UPDATE, GRANT_UPSERT,
};
use super::{Postgres, describe_error};
use crate::auth::{Expected, Grant, GrantKey, GrantState, GrantWrite, TokenStore};
use crate::state::{StoreError, StoreFuture};

fn grant(row: &Row) -> Result<Grant, tokio_postgres::Error> {
    let state: String = row.try_get(3)?;
    let scopes: String = row.try_get(6)?;
    Ok(Grant {
        key: GrantKey {
            grant: row.try_get(0)?,
            tenant: row.try_get(1)?,
        },
        generation: row.try_get(2)?,
        written: GrantWrite {
            // An unknown state (a newer brain's) is not a grant to refresh.
            state: GrantState::parse(&state).unwrap_or(GrantState::NeedsLogin),
            binding: row.try_get(4)?,
            resource: row.try_get(5)?,
            scopes: scopes.split_whitespace().map(str::to_owned).collect(),
            expires_at: row.try_get(7)?,
            rotates: row.try_get(8)?,
            sealed: row.try_get(9)?,
        },
        refresher: row.try_get(10)?,
        claim_left_ms: row.try_get(11)?,
    })
}

impl Postgres {
    fn failed(&self, error: &tokio_postgres::Error) -> StoreError {
        self.error(describe_error(error))
    }
}

impl TokenStore for Postgres {
    fn describe(&self) -> &str {
        &self.describe
    }

    fn load<'a>(&'a self, key: &'a GrantKey) -> StoreFuture<'a, Option<Grant>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let row = c
                .client
                .query_opt(GRANT_LOAD, &[&key.grant, &key.tenant])
                .await
                .map_err(|e| self.failed(&e))?;
            row.as_ref()
                .map(grant)
                .transpose()
                .map_err(|e| self.failed(&e))
        })
    }

    fn write<'a>(
        &'a self,
        key: &'a GrantKey,
        expected: &'a Expected,
        write: &'a GrantWrite,
    ) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let state = write.state.as_str();
            let scopes = write.scopes.join(" ");
            let fields: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
                &key.grant,
                &key.tenant,
                &state,
                &write.binding,
                &write.resource,
                &scopes,
                &write.expires_at,
                &write.rotates,
                &write.sealed,
            ];
            let row = match expected {
                Expected::Any | Expected::Generation(0) => {
                    let any = *expected == Expected::Any;
                    let mut params = fields.to_vec();
                    params.push(&any);
                    c.client.query_opt(GRANT_UPSERT, &params).await
                }
                Expected::Generation(generation) => {
                    let owner: Option<&str> = None;
                    let mut params = fields.to_vec();
                    params.push(generation);
                    params.push(&owner);
                    c.client.query_opt(GRANT_UPDATE, &params).await
                }
                Expected::Claimed { generation, owner } => {
                    let owner = Some(owner.as_str());
                    let mut params = fields.to_vec();
                    params.push(generation);
                    params.push(&owner);
                    c.client.query_opt(GRANT_UPDATE, &params).await
                }
            }
            .map_err(|e| self.failed(&e))?;
            row.map(|row| row.try_get::<_, i64>(0))
                .transpose()
                .map_err(|e| self.failed(&e))
        })
    }

    fn claim<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
        lease_ms: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let c = self.connection().await?;
            let claimed = if generation == 0 {
                c.client
                    .query_opt(
                        GRANT_CLAIM_NEW,
                        &[&key.grant, &key.tenant, &owner, &lease_ms],
                    )
                    .await
                    .map(|row| row.is_some())
            } else {
                c.client
                    .execute(
                        GRANT_CLAIM,
                        &[&key.grant, &key.tenant, &owner, &lease_ms, &generation],
                    )
                    .await
                    .map(|rows| rows > 0)
            };
            claimed.map_err(|e| self.failed(&e))
        })
    }

    fn release<'a>(
        &'a self,
        key: &'a GrantKey,
        generation: i64,
        owner: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let c = self.connection().await?;
            c.client
                .execute(
                    GRANT_RELEASE,
                    &[&key.grant, &key.tenant, &generation, &owner],
                )
                .await
                .map_err(|e| self.failed(&e))?;
            Ok(())
        })
    }

    fn list(&self) -> StoreFuture<'_, Vec<Grant>> {
        Box::pin(async move {
            let c = self.connection().await?;
            let rows = c
                .client
                .query(GRANT_LIST, &[])
                .await
                .map_err(|e| self.failed(&e))?;
            rows.iter()
                .map(grant)
                .collect::<Result<_, _>>()
                .map_err(|e| self.failed(&e))
        })
    }
}
