//! Why a login, a logout, a token file import or a user agent did not complete.

use std::path::PathBuf;

/// Why [`login`](super::login), [`logout`](super::logout),
/// [`import_token_file`](super::import_token_file), a [`FileTokenStore`](super::FileTokenStore)
/// or a [`UserAgent`](super::UserAgent) did not complete. Messages never hold a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The binding has no `auth`: it needs no login.
    #[error("{binding} has no `auth`: it needs no login")]
    NoAuth {
        /// The binding.
        binding: String,
    },
    /// The user agent could not take the user to the authorization server, or bring back where
    /// it redirected them (the browser, the loopback listener, the user's approval).
    #[error("{0}")]
    UserAgent(String),
    /// An earlier brain's token file could not be read, parsed or renamed.
    #[error("{message}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// What went wrong (where in the file, never its text).
        message: String,
    },
    /// The OAuth exchange failed: the server's challenge, its authorization server's metadata
    /// or token endpoint, the binding's secrets, or the token store.
    #[error("{0}")]
    Flow(String),
}
