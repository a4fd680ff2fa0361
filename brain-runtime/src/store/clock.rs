//! The store's clock in each backend's SQL: milliseconds since the epoch, as a string literal
//! a statement splices in with `concat!`. Leases, expiries and limits are judged by this clock,
//! never by a process's own.

/// SQLite's clock.
macro_rules! sqlite_now {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}
pub(crate) use sqlite_now;

/// PostgreSQL's clock.
macro_rules! postgres_now {
    () => {
        "(extract(epoch FROM now()) * 1000)::int8"
    };
}
pub(crate) use postgres_now;
