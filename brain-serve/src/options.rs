//! What a host chooses when it serves ([`Options`], [`HttpOptions`]), and why serving can fail
//! ([`ServeError`]).

/// What every way of serving takes.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// The session of calls whose `_meta` names none (else `default`).
    pub session: Option<String>,
    /// Log each call as a JSON line on stderr (else as text).
    pub json_log: bool,
}

impl Options {
    /// The session of calls whose `_meta` names none.
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Each call's log line as JSON.
    pub fn json_log(mut self, json: bool) -> Self {
        self.json_log = json;
        self
    }
}

/// What serving over Streamable HTTP takes besides [`Options`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Browser origins allowed besides loopback ones, e.g. `https://app.example.com` (`:*` for
    /// any port).
    pub origins: Vec<String>,
    /// `Host` values allowed besides loopback ones: the names clients reach the server by.
    pub hosts: Vec<String>,
    /// A request without `Authorization` runs as this tenant: only with [`Http::listen`] on a
    /// loopback address (a local client that cannot send a header, such as a test suite).
    pub anonymous_tenant: Option<String>,
    /// Proxies (addresses or CIDR blocks) whose forwarding header names a request's source for
    /// the throttle of failed authentications.
    pub trusted_proxies: Vec<String>,
    /// The one header those proxies write: `x-forwarded-for` (the default) or `forwarded`.
    pub forwarded_header: Option<String>,
}

/// Why brain cannot serve: each says what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The default session is not an id.
    #[error("the session {0}")]
    InvalidSession(brain_runtime::InvalidId),
    /// No binding allows the tenant: serve would offer no tool.
    #[error("no binding allows tenant {0:?}: serve would offer no tool")]
    NoToolForTenant(String),
    /// A client of the config's `serve.clients` cannot be read (its token variable).
    #[error("{0}")]
    Clients(String),
    /// No client could authenticate: no client's variable is set, and neither
    /// `serve.authorization` nor an anonymous tenant is declared.
    #[error(
        "no client could authenticate: set the variable of a client in the config's \
         `serve.clients` ({variables}), or declare `serve.authorization`"
    )]
    NoClient {
        /// The clients' variables, or "there are none".
        variables: String,
    },
    /// An anonymous tenant outside brain's own loopback listener.
    #[error(
        "an anonymous tenant lets any request in without a credential: it is served only by \
         `Http::listen` on a loopback address (e.g. 127.0.0.1:8080){0}"
    )]
    AnonymousNotLoopback(String),
    /// A trusted proxy or the forwarding header cannot be read.
    #[error("{0}")]
    TrustedProxies(String),
    /// The config's `serve.authorization` cannot be used (its issuer or resource).
    #[error("serve.authorization: {0}")]
    Authorization(String),
    /// The stdio session did not start.
    #[error("the MCP session did not start: {0}")]
    SessionStart(String),
    /// The listener could not be bound or failed.
    #[error("cannot serve: {0}")]
    Io(#[from] std::io::Error),
}
