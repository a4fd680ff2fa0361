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

/// This process's name in the stores' leases and claims: `host:pid:random`.
pub(crate) fn process_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    let mut random = [0u8; 4];
    let _ = getrandom::fill(&mut random);
    format!(
        "{host}:{}:{:08x}",
        std::process::id(),
        u32::from_be_bytes(random)
    )
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}
