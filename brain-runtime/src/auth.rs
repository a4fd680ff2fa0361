//! Authorization: what a request carries to show that it may be made. Today that is a static
//! bearer token read from a binding's `token_env` when the runtime starts; OAuth (tokens obtained
//! from an authorization server, issue 15) belongs here too.
//!
//! This module hands a transport a header value and nothing else: it never sees a call's
//! arguments or results, and a token's value never leaves it except as a sensitive
//! `Authorization` header (redacted in Debug output, never in errors or events).

use http::header::HeaderValue;

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
