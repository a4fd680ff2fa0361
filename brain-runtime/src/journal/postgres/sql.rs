//! The PostgreSQL journal's schema and statements. Every lease and deadline is judged by the
//! database's `now()`.

/// The store's clock, in milliseconds ([`crate::store::clock`]).
macro_rules! now {
    () => {
        crate::store::clock::postgres_now!()
    };
}

macro_rules! live {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = c.owner AND o.expires > ",
            now!(),
            ")"
        )
    };
}

/// An entry's columns, in the order `entry` reads them.
macro_rules! columns {
    ($result:literal) => {
        concat!(
            "SELECT c.tenant, c.session, c.call_id, c.binding, c.digest, c.state, c.owner, ",
            live!(),
            ", ",
            now!(),
            ", c.created, c.deadline, c.finished, c.is_error, c.unknown_outcome, ",
            $result,
            ", c.result_bytes, c.trace_id, c.task FROM brain_calls c "
        )
    };
}

/// 2: bytewise keys, no index on `created`; 3: `brain_grants`; 4: `brain_calls.task`; 5: the
/// limits' tables; 6: `brain_drift`; 7: `brain_approvals`; 8: the audit chain's tables; 9: an
/// approval's signature.
pub(super) const SCHEMA_VERSION: i32 = 9;

/// The schema, as a new database gets it. Keys compare bytewise (`COLLATE "C"`: no locale's
/// rules on every index lookup). The table leaves a fifth of each page free, so that recording
/// an outcome rewrites the row in its page without touching the index (a HOT update).
pub(super) const SCHEMA: &str = r#"
CREATE TABLE brain_calls (
    tenant TEXT COLLATE "C" NOT NULL,
    session TEXT COLLATE "C" NOT NULL,
    call_id TEXT COLLATE "C" NOT NULL,
    digest TEXT NOT NULL,
    binding TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    created INT8 NOT NULL,
    deadline INT8 NOT NULL,
    finished INT8,
    is_error BOOLEAN,
    unknown_outcome BOOLEAN,
    result TEXT,
    result_bytes INT8,
    trace_id TEXT,
    task TEXT,
    PRIMARY KEY (tenant, session, call_id)
) WITH (fillfactor = 80);
CREATE TABLE brain_owners (
    owner TEXT COLLATE "C" PRIMARY KEY,
    expires INT8 NOT NULL
);
"#;

/// From version 1 (an index on `created`, which every claim and outcome paid for and only the
/// audit list's order used; keys in the database's collation; full pages) to
/// [`SCHEMA_VERSION`].
pub(super) const MIGRATE_FROM_1: &str = r#"
DROP INDEX IF EXISTS brain_calls_created;
ALTER TABLE brain_calls SET (fillfactor = 80),
    ALTER COLUMN tenant TYPE TEXT COLLATE "C",
    ALTER COLUMN session TYPE TEXT COLLATE "C",
    ALTER COLUMN call_id TYPE TEXT COLLATE "C";
ALTER TABLE brain_owners ALTER COLUMN owner TYPE TEXT COLLATE "C";
"#;

/// From version 3: the task a call's server created, while it runs.
pub(super) const TASKS_COLUMN: &str = "ALTER TABLE brain_calls ADD COLUMN task TEXT;";

/// Records a task on its call, while the call is `sent` by its owner.
pub(super) const RECORD_TASK: &str = "UPDATE brain_calls SET task = $5 WHERE tenant = $1 \
     AND session = $2 AND call_id = $3 AND state = 'sent' AND owner = $4";
/// Hands a call with a task over from an owner whose lease expired to a live one.
pub(super) const TAKE_OVER: &str = concat!(
    "UPDATE brain_calls AS c SET owner = $5 WHERE c.tenant = $1 AND c.session = $2 ",
    "AND c.call_id = $3 AND c.state = 'sent' AND c.owner = $4 AND c.task IS NOT NULL ",
    "AND NOT EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = $4 AND o.expires > ",
    now!(),
    ") AND EXISTS (SELECT 1 FROM brain_owners o WHERE o.owner = $5 AND o.expires > ",
    now!(),
    ")"
);

pub(super) const RENEW_CREATE: &str = concat!(
    "INSERT INTO brain_owners (owner, expires) VALUES ($1, ",
    now!(),
    " + $2) ON CONFLICT (owner) DO UPDATE SET expires = excluded.expires"
);
pub(super) const RENEW: &str = concat!(
    "UPDATE brain_owners SET expires = ",
    now!(),
    " + $2 WHERE owner = $1 AND expires > ",
    now!()
);
pub(super) const CLAIM: &str = concat!(
    "INSERT INTO brain_calls AS c (tenant, session, call_id, digest, binding, state, owner, ",
    "created, deadline, trace_id) SELECT $1, $2, $3, $4, $5, 'sent', $6, ",
    now!(),
    ", ",
    now!(),
    " + $7, $8 WHERE EXISTS (SELECT 1 FROM brain_owners WHERE owner = $6 AND expires > ",
    now!(),
    ") ON CONFLICT (tenant, session, call_id) DO UPDATE SET state = 'sent', ",
    "owner = excluded.owner, created = excluded.created, deadline = excluded.deadline, ",
    "trace_id = excluded.trace_id, finished = NULL, is_error = NULL, ",
    "unknown_outcome = NULL, result = NULL, result_bytes = NULL ",
    "WHERE c.state = 'not_sent' AND c.digest = excluded.digest"
);
/// The claim's insert ([`CLAIM`], prepared as `statement`): 1 when the claim is new, 0 when
/// it met an existing entry.
pub(super) async fn insert_claim(
    client: &tokio_postgres::Client,
    statement: &tokio_postgres::Statement,
    claim: &crate::store::Claim,
) -> Result<u64, tokio_postgres::Error> {
    let key = &claim.key;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
        &key.tenant,
        &key.session,
        &key.call_id,
        &claim.digest,
        &claim.binding,
        &claim.owner,
        &claim.timeout_ms,
        &claim.trace_id,
    ];
    client.execute(statement, &params).await
}
/// [`CLAIM`] for a batch of claims in one statement (their keys distinct): the keys it claimed.
pub(super) const CLAIM_MANY: &str = concat!(
    "INSERT INTO brain_calls AS c (tenant, session, call_id, digest, binding, state, owner, ",
    "created, deadline, trace_id) SELECT t.tenant, t.session, t.call_id, t.digest, t.binding, ",
    "'sent', t.owner, ",
    now!(),
    ", ",
    now!(),
    " + t.timeout_ms, t.trace_id FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], ",
    "$5::text[], $6::text[], $7::int8[], $8::text[]) AS t (tenant, session, call_id, digest, ",
    "binding, owner, timeout_ms, trace_id) WHERE EXISTS (SELECT 1 FROM brain_owners o ",
    "WHERE o.owner = t.owner AND o.expires > ",
    now!(),
    ") ON CONFLICT (tenant, session, call_id) DO UPDATE SET state = 'sent', ",
    "owner = excluded.owner, created = excluded.created, deadline = excluded.deadline, ",
    "trace_id = excluded.trace_id, finished = NULL, is_error = NULL, ",
    "unknown_outcome = NULL, result = NULL, result_bytes = NULL ",
    "WHERE c.state = 'not_sent' AND c.digest = excluded.digest ",
    "RETURNING c.tenant, c.session, c.call_id"
);
pub(super) const LOOKUP: &str = concat!(
    columns!("c.result"),
    "WHERE c.tenant = $1 AND c.session = $2 AND c.call_id = $3"
);
pub(super) const SETTLE: &str = concat!(
    "UPDATE brain_calls AS c SET state = $4, is_error = $5, unknown_outcome = $6, ",
    "result = $7, result_bytes = $8, finished = ",
    now!(),
    " WHERE c.tenant = $1 AND c.session = $2 AND c.call_id = $3 AND c.state = 'sent' ",
    "AND c.owner = $9 AND (NOT $10 OR NOT ",
    live!(),
    ")"
);
/// [`SETTLE`] for a batch of outcomes in one statement (their keys distinct): the keys it
/// settled.
pub(super) const SETTLE_MANY: &str = concat!(
    "UPDATE brain_calls AS c SET state = t.state, is_error = t.is_error, ",
    "unknown_outcome = t.unknown_outcome, result = t.result, result_bytes = t.result_bytes, ",
    "finished = ",
    now!(),
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::bool[], ",
    "$7::text[], $8::int8[], $9::text[], $10::bool[]) AS t (tenant, session, call_id, state, ",
    "is_error, unknown_outcome, result, result_bytes, owner, only_if_expired) ",
    "WHERE c.tenant = t.tenant AND c.session = t.session AND c.call_id = t.call_id ",
    "AND c.state = 'sent' AND c.owner = t.owner AND (NOT t.only_if_expired OR NOT ",
    live!(),
    ") RETURNING c.tenant, c.session, c.call_id"
);
pub(super) const LIST: &str = concat!(
    columns!("CASE WHEN $6 THEN c.result END"),
    "WHERE ($1::text IS NULL OR c.tenant = $1) AND ($2::text IS NULL OR c.session = $2) ",
    "AND ($3::text IS NULL OR c.call_id = $3) AND ($4::int8 IS NULL OR c.created >= ",
    now!(),
    " - $4) ORDER BY c.created DESC, c.tenant, c.session, c.call_id LIMIT $5"
);
pub(super) const PRUNE_CALLS: &str = concat!(
    "DELETE FROM brain_calls AS c WHERE coalesce(c.finished, c.created) < ",
    now!(),
    " - $1 AND NOT (c.state = 'sent' AND ",
    live!(),
    ")"
);
pub(super) const PRUNE_OWNERS: &str =
    concat!("DELETE FROM brain_owners WHERE expires < ", now!(), " - $1");

/// The OAuth grants' table (schema version 3): one row per grant and tenant.
pub(super) const GRANTS_SCHEMA: &str = r#"
CREATE TABLE brain_grants (
    grant_id TEXT COLLATE "C" NOT NULL,
    tenant TEXT COLLATE "C" NOT NULL,
    generation INT8 NOT NULL,
    state TEXT NOT NULL,
    binding TEXT NOT NULL,
    resource TEXT NOT NULL,
    scopes TEXT NOT NULL,
    expires_at INT8,
    rotates BOOLEAN,
    sealed TEXT,
    refresher TEXT,
    refresh_until INT8,
    updated INT8 NOT NULL,
    PRIMARY KEY (grant_id, tenant)
);
"#;

/// A grant's columns, in the order `grant` reads them; `$sealed` is the tokens' column.
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

pub(super) const GRANT_LOAD: &str = concat!(
    grant_columns!("sealed"),
    "WHERE grant_id = $1 AND tenant = $2"
);

pub(super) const GRANT_LIST: &str = concat!(grant_columns!("NULL"), "ORDER BY grant_id, tenant");

/// A write to a new row or, when `$11` (any) or the row is at generation 0, over it.
pub(super) const GRANT_UPSERT: &str = concat!(
    "INSERT INTO brain_grants AS g (grant_id, tenant, generation, state, binding, resource, ",
    "scopes, expires_at, rotates, sealed, updated) VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8, ",
    "$9, ",
    now!(),
    ") ON CONFLICT (grant_id, tenant) DO UPDATE SET generation = g.generation + 1, ",
    "state = excluded.state, binding = excluded.binding, resource = excluded.resource, ",
    "scopes = excluded.scopes, expires_at = excluded.expires_at, rotates = excluded.rotates, ",
    "sealed = excluded.sealed, refresher = NULL, refresh_until = NULL, updated = excluded.updated ",
    "WHERE $10::bool OR g.generation = 0 RETURNING g.generation"
);

/// A write over the row at generation `$10` (and, when `$11` is not null, claimed by `$11`).
pub(super) const GRANT_UPDATE: &str = concat!(
    "UPDATE brain_grants SET generation = generation + 1, state = $3, binding = $4, ",
    "resource = $5, scopes = $6, expires_at = $7, rotates = $8, sealed = $9, refresher = NULL, ",
    "refresh_until = NULL, updated = ",
    now!(),
    " WHERE grant_id = $1 AND tenant = $2 AND generation = $10 AND ($11::text IS NULL OR ",
    "(refresher = $11 AND refresh_until > ",
    now!(),
    ")) RETURNING generation"
);

/// A first claim: creates the empty row (generation 0) or claims it when free.
pub(super) const GRANT_CLAIM_NEW: &str = concat!(
    "INSERT INTO brain_grants AS g (grant_id, tenant, generation, state, binding, resource, ",
    "scopes, refresher, refresh_until, updated) VALUES ($1, $2, 0, 'valid', '', '', '', $3, ",
    now!(),
    " + $4, ",
    now!(),
    ") ON CONFLICT (grant_id, tenant) DO UPDATE SET refresher = excluded.refresher, ",
    "refresh_until = excluded.refresh_until WHERE g.generation = 0 AND (g.refresher IS NULL ",
    "OR g.refresher = $3 OR g.refresh_until <= ",
    now!(),
    ") RETURNING 1"
);

/// A claim of the row at generation `$5`, when free.
pub(super) const GRANT_CLAIM: &str = concat!(
    "UPDATE brain_grants SET refresher = $3, refresh_until = ",
    now!(),
    " + $4 WHERE grant_id = $1 AND tenant = $2 AND generation = $5 AND (refresher IS NULL OR ",
    "refresher = $3 OR refresh_until <= ",
    now!(),
    ")"
);

pub(super) const GRANT_RELEASE: &str = concat!(
    "UPDATE brain_grants SET refresher = NULL, refresh_until = NULL WHERE grant_id = $1 ",
    "AND tenant = $2 AND generation = $3 AND refresher = $4"
);

/// Deletes the tokens issued on behalf of users (`crate::auth::GrantKey::ISSUED`) that expired
/// more than `$1` ms ago and no replica is renewing.
pub(super) const GRANT_PRUNE_ISSUED: &str = concat!(
    "DELETE FROM brain_grants WHERE grant_id LIKE 'issued:%' AND expires_at * 1000 < ",
    now!(),
    " - $1 AND NOT coalesce(refresh_until > ",
    now!(),
    ", FALSE)"
);

/// The error and its database message, when there is one.
pub(super) fn describe_error(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{error}: {}", db.message()),
        None => match std::error::Error::source(error) {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    }
}
