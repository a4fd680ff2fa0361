//! Secrets and how they travel: a [`Secret`] read from the environment, a static bearer
//! [`Token`], and [`sensitive`] header values. None of them appears in Debug output.

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
