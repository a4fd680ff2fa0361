//! Authorization: what a request carries to show that it may be made — a static bearer token
//! read from a binding's `token_env` when the runtime starts, or OAuth access tokens obtained
//! from the server's authorization server (a binding's `auth`, the MCP authorization spec).
//!
//! This module hands a transport headers and nothing else: it never sees a call's arguments or
//! results. Secrets (tokens, client secrets, private keys, assertions) never leave it except as
//! sensitive headers and in the bodies of requests to the authorization server they belong to;
//! they are redacted in Debug output and never put in errors, events or logs.
//!
//! - `secret.rs`: secrets read from the environment, the static bearer token, sensitive header
//!   values.
//! - `request.rs`: the HTTP requests to authorization servers (bounded, with a timeout), JSON
//!   metadata documents, and the URL rules (`split_url`, https or loopback only).
//! - `store.rs`: what stored tokens are ([`StoredTokens`]) and the token file of earlier
//!   brains, read once to import it ([`FileTokenStore`]).
//! - `seal.rs`: tokens at rest, sealed (AES-256-GCM) under `BRAIN_STATE_KEY`.
//! - `grants.rs`: grants shared by every process on the state's store ([`TokenStore`]): a
//!   generation per grant, a refresh claim with a lease.
//! - `metadata.rs`: `WWW-Authenticate` challenges, protected resource metadata (RFC 9728) and
//!   authorization server metadata (RFC 8414, OpenID discovery).
//! - `dpop.rs`: DPoP proofs (RFC 9449) and the servers' nonces.
//! - `grant.rs`: requests to the authorization server — token requests of every grant, client
//!   authentication, dynamic client registration (RFC 7591).
//! - `code.rs`: the authorization code flow with PKCE and the [`UserAgent`] that takes the user
//!   there.
//! - `oauth.rs`: one binding's OAuth client — discovery, the cache, authorizing a request,
//!   refresh (one per grant across processes: `oauth/shared.rs`), step-up, what a refused request means, and login's probe;
//!   `oauth/tokens.rs` one key's tokens, `oauth/obtain.rs` how a key gets new ones (refresh,
//!   the grant, the client it authenticates as).
//! - `credentials.rs`: how a binding's requests are authorized (none, static, OAuth).
//! - `user.rs`: a user's [`login`] and [`logout`].
//!
//! Dependencies go one way: each module names only modules to its left, and this file only
//! declares and re-exports them. secret, request, store, grants, seal ← metadata, dpop ← grant ← code ←
//! oauth/tokens ← oauth ← oauth/obtain, credentials, user.

mod code;
mod credentials;
mod dpop;
mod error;
mod grant;
mod grants;
mod metadata;
mod oauth;
mod request;
mod resource;
mod seal;
mod secret;
mod store;
mod user;

pub use code::{LoopbackAgent, UserAgent};
pub(crate) use credentials::{Authorizing, Credentials, add_static};
pub use error::AuthError;
pub use grants::{Expected, Grant, GrantKey, GrantState, GrantWrite, MemoryTokenStore, TokenStore};
pub(crate) use oauth::{OAuth, Party, Retry};
pub use resource::{
    AccessTokenVerifier, DEFAULT_KEYS_MAX_AGE, DEFAULT_KEYS_MAX_STALE, KEYS_WAIT, LEEWAY_SECONDS,
    REFETCH_INTERVAL, RETIRED_KEYS, TokenRejected, VerifiedToken, VerifierError,
};
pub use seal::STATE_KEY_ENV;
pub(crate) use secret::Token;
pub use store::{FileTokenStore, StoreKey, StoredTokens};
pub use user::{import_token_file, login, logout};
