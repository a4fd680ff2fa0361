//! Authorization: what a request carries to show that it may be made — a static bearer token
//! read from a binding's `token_env` when the runtime starts, or OAuth access tokens obtained
//! from the server's authorization server (a binding's `auth`, the MCP authorization spec).
//!
//! This module hands a transport headers and nothing else: it never sees a call's arguments or
//! results. Secrets (tokens, client secrets, private keys, assertions) never leave it except as
//! sensitive headers and in the bodies of requests to the authorization server they belong to;
//! they are redacted in Debug output and never put in errors, events or logs.
//!
//! - `metadata.rs`: `WWW-Authenticate` challenges, protected resource metadata (RFC 9728) and
//!   authorization server metadata (RFC 8414, OpenID discovery).
//! - `grant.rs`: requests to the authorization server — token requests of every grant, client
//!   authentication, dynamic client registration (RFC 7591).
//! - `dpop.rs`: DPoP proofs (RFC 9449).
//! - `code.rs`: the authorization code flow with PKCE, the [`UserAgent`] that takes the user
//!   there, and [`login`].
//! - `store.rs`: where user-delegated tokens live between runs ([`TokenStore`]).
//! - `oauth.rs`: one binding's tokens — discovery, the grant, the cache, refresh (one in flight),
//!   step-up, and what a refused request means.

mod code;
mod dpop;
mod grant;
mod metadata;
mod oauth;
mod store;

use std::sync::Arc;

use http::header::{HeaderMap, HeaderValue};

pub use code::{LoopbackAgent, UserAgent, login, logout};
pub(crate) use oauth::{OAuth, Retry};
pub use store::{FileTokenStore, MemoryTokenStore, StoreKey, StoredTokens, TokenStore};

/// A bearer token. Its value never appears in Debug output, errors or events.
#[derive(Clone)]
pub(crate) struct Token(HeaderValue);

impl Token {
    /// `None` when the value cannot be an HTTP header value.
    pub(crate) fn new(token: &str) -> Option<Token> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        Some(Token(value))
    }

    /// The `Authorization` header value (marked sensitive).
    pub(crate) fn header(&self) -> HeaderValue {
        self.0.clone()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// How a binding's requests are authorized.
#[derive(Debug, Default)]
pub(crate) enum Credentials {
    /// No `Authorization` header.
    #[default]
    None,
    /// The token of `token_env`.
    Static(Token),
    /// Tokens from the server's authorization server (`auth`).
    OAuth(Arc<OAuth>),
}

/// The credentials of one request, and for whom it is made (user-delegated tokens are per
/// tenant).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Authorizing<'a> {
    pub(crate) credentials: &'a Credentials,
    pub(crate) tenant: &'a str,
}

/// A secret read from the environment: a client secret, a private key, an assertion, a token.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one request body or header it goes into.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A header value holding a secret, marked sensitive (hyper keeps it out of its own logs).
pub(crate) fn sensitive(value: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Adds the static token, when there is one; OAuth goes through [`OAuth::authorize`].
pub(crate) fn add_static(credentials: &Credentials, headers: &mut HeaderMap) {
    if let Credentials::Static(token) = credentials {
        headers.insert(http::header::AUTHORIZATION, token.header());
    }
}
