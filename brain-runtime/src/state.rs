//! What the durable state's stores share — the call journal's ([`crate::journal`]) and the
//! OAuth grants' ([`crate::auth::TokenStore`]): their error and their futures. Both live in one
//! store (a SQLite file, a PostgreSQL database, or memory), reached through one state URL.

use futures_util::future::BoxFuture;

/// The store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the call journal ({store}) failed: {message}")]
pub struct StoreError {
    /// Which store (its kind and place, never a password).
    pub store: String,
    /// What went wrong.
    pub message: String,
}

/// A future a store returns.
pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T, StoreError>>;
