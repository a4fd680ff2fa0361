//! What the durable state's stores share — the call journal's ([`crate::journal`]) and the
//! OAuth grants' ([`crate::auth::TokenStore`]): their error and their futures. Both live in one
//! store (a SQLite file, a PostgreSQL database, or memory), reached through one state URL.

use futures_util::future::BoxFuture;

/// What the state store (the call journal's, which also holds OAuth grants) could not do.
/// Each kind says what a host does about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The state URL (or one of its options) is not one brain can use: fix the configuration.
    #[error("the state URL cannot be used: {message}")]
    InvalidUrl {
        /// What is wrong, and the forms a state URL takes.
        message: String,
    },
    /// The store's schema was made by a newer brain (or by none): run a newer brain, or point
    /// it at another database or file. Retrying does not help.
    #[error("the call journal ({store}) cannot be used: {message}")]
    Incompatible {
        /// Which store (its kind and place, never a password).
        store: String,
        /// The versions found and expected.
        message: String,
    },
    /// The memory journal holds as many calls in flight as it may: the call was not sent; try
    /// again when calls finish, or use a larger or durable journal.
    #[error("the call journal ({store}) is full: {message}")]
    Full {
        /// Which store.
        store: String,
        /// How many calls are in flight.
        message: String,
    },
    /// The store could not be opened or did not do what was asked (unreachable, refused, I/O
    /// failed): usually transient, so retry later or repair the store.
    #[error("the call journal ({store}) failed: {message}")]
    Unavailable {
        /// Which store (its kind and place, never a password).
        store: String,
        /// What went wrong.
        message: String,
    },
}

impl StoreError {
    /// The store failed or could not be reached.
    pub fn unavailable(store: impl Into<String>, message: impl Into<String>) -> StoreError {
        StoreError::Unavailable {
            store: store.into(),
            message: message.into(),
        }
    }

    /// Which store (its kind and place, never a password); none for a state URL that names
    /// no usable store.
    pub fn store(&self) -> Option<&str> {
        match self {
            StoreError::InvalidUrl { .. } => None,
            StoreError::Incompatible { store, .. }
            | StoreError::Full { store, .. }
            | StoreError::Unavailable { store, .. } => Some(store),
        }
    }

    /// What went wrong, without the store's name.
    pub fn message(&self) -> &str {
        match self {
            StoreError::InvalidUrl { message }
            | StoreError::Incompatible { message, .. }
            | StoreError::Full { message, .. }
            | StoreError::Unavailable { message, .. } => message,
        }
    }
}

/// Why a schema could not be made or checked: the version found is not one this brain can
/// use, or the store failed while making it.
pub(crate) enum Migration {
    Incompatible(String),
    Failed(String),
}

impl Migration {
    pub(crate) fn into_error(self, store: &str) -> StoreError {
        match self {
            Migration::Incompatible(message) => StoreError::Incompatible {
                store: store.to_owned(),
                message,
            },
            Migration::Failed(message) => StoreError::unavailable(store, message),
        }
    }
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
/// Milliseconds since the epoch as an RFC 3339 UTC time, to the millisecond.
pub fn rfc3339(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}

/// RFC 8785 canonical JSON.
pub(crate) fn canonical(value: &serde_json::Value) -> String {
    serde_jcs::to_string(value).unwrap_or_else(|_| value.to_string())
}
