//! How a binding's requests are authorized ([`Credentials`]) and for whom ([`Authorizing`]).

use std::sync::Arc;

use http::header::HeaderMap;

use super::oauth::{OAuth, Party};
use super::secret::Token;
use crate::subject::SubjectToken;

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
/// tenant; tokens on behalf of users per tenant and caller).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Authorizing<'a> {
    pub(crate) credentials: &'a Credentials,
    pub(crate) tenant: &'a str,
    /// The caller's own token, for a binding that exchanges it (`token_exchange`).
    pub(crate) subject: Option<&'a SubjectToken>,
}

impl<'a> Authorizing<'a> {
    /// For whom the request's OAuth token is obtained.
    pub(crate) fn party(&self) -> Party<'a> {
        Party {
            tenant: self.tenant,
            subject: self.subject,
        }
    }
}

/// Adds the static token, when there is one; OAuth goes through [`OAuth::authorize`].
pub(crate) fn add_static(credentials: &Credentials, headers: &mut HeaderMap) {
    if let Credentials::Static(token) = credentials {
        headers.insert(http::header::AUTHORIZATION, token.header());
    }
}
