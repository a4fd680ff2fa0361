//! `serve`: how `brain-harness serve` offers the bindings to MCP hosts — who its clients are, how
//! they authenticate, and its bounds.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default [`Serve::concurrent_calls_per_client`].
pub const DEFAULT_CONCURRENT_CALLS_PER_CLIENT: u32 = 64;
/// Default [`Serve::concurrent_calls`].
pub const DEFAULT_CONCURRENT_CALLS: u32 = 1024;
/// Default [`Serve::sessions_per_client`].
pub const DEFAULT_SESSIONS_PER_CLIENT: u32 = 64;
/// Default [`Serve::session_idle_seconds`].
pub const DEFAULT_SESSION_IDLE_SECONDS: u32 = 300;
/// Default [`Serve::max_request_bytes`] (4 MiB, as rmcp's).
pub const DEFAULT_MAX_REQUEST_BYTES: u32 = 4 * 1024 * 1024;
/// Default [`ServeAuthorization::jwks_max_age_seconds`].
pub const DEFAULT_JWKS_MAX_AGE_SECONDS: u32 = 300;
/// Default [`ServeAuthorization::jwks_max_stale_seconds`].
pub const DEFAULT_JWKS_MAX_STALE_SECONDS: u32 = 3600;
/// Default [`Serve::max_sessions`].
pub const DEFAULT_MAX_SESSIONS: u32 = 1024;
/// Default [`Serve::max_connections`] (lowered at start to half the process's descriptor limit,
/// leaving the rest for upstream sockets, the state store and stdio servers).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;
/// Default [`Serve::connections_per_source`].
pub const DEFAULT_CONNECTIONS_PER_SOURCE: u32 = 64;
/// Default [`Serve::header_read_timeout_seconds`].
pub const DEFAULT_HEADER_READ_TIMEOUT_SECONDS: u32 = 10;
/// Default [`Serve::idle_timeout_seconds`].
pub const DEFAULT_IDLE_TIMEOUT_SECONDS: u32 = 60;
/// Default [`Serve::max_concurrent_streams`].
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 128;
/// Default [`Serve::failed_authentications_per_minute`].
pub const DEFAULT_FAILED_AUTHENTICATIONS_PER_MINUTE: u32 = 30;

/// How `brain-harness serve` serves the bindings as one MCP server: the clients that may connect
/// over HTTP and how each authenticates (its tenant comes from its credential, never from what it
/// writes), and the bounds that refuse work before any upstream I/O. Over stdio the tenant is the
/// command line's and only the call bounds apply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Serve {
    /// Clients with a static bearer token: each names its tenant and the environment variable
    /// holding its token (an unset or empty variable disables that client).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ServeClient>,
    /// brain as an OAuth 2.1 resource server: clients present JWT access tokens (RFC 9068) of
    /// this issuer, and their tenant is a claim of the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<ServeAuthorization>,
    /// Calls one client may have in flight (default 64); more are refused with nothing sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_calls_per_client: Option<u32>,
    /// Calls all clients together may have in flight (default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_calls: Option<u32>,
    /// MCP sessions (2025 revisions) one client may hold open (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions_per_client: Option<u32>,
    /// A session without a request for this long ends (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_idle_seconds: Option<u32>,
    /// The largest request body taken, in bytes (default 4 MiB); larger ones get HTTP 413.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<u32>,
    /// MCP sessions all clients together may hold open (default 1024); more get HTTP 429.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u32>,
    /// TCP connections open at once (default 1024, and at most half the process's descriptor
    /// limit); at the cap the oldest connection that has not sent a complete request is closed,
    /// else the new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// TCP connections one source (the peer's address; an IPv6 one's /64) may hold open at
    /// once (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_per_source: Option<u32>,
    /// A connection that has not sent a complete request head within this many seconds of
    /// opening (or of its last response) is closed, and a request's body must have arrived
    /// this long after its head (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_read_timeout_seconds: Option<u32>,
    /// A connection with no request in flight (a response's body, such as an SSE stream,
    /// included) for this long is closed (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<u32>,
    /// HTTP/2 (h2c): streams one connection may have open at once (default 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_streams: Option<u32>,
    /// Failed authentications one source may make per minute (default 30); beyond, its requests
    /// get HTTP 429 with `Retry-After` at once, without being checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_authentications_per_minute: Option<u32>,
}

/// A client of `serve` that authenticates with a static bearer token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServeClient {
    /// The tenant its calls run as (a tenant some binding allows).
    pub tenant: String,
    /// The environment variable holding its token (never the token itself).
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub token_env: String,
}

/// brain as an OAuth 2.1 resource server (the MCP authorization spec's resource side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServeAuthorization {
    /// The authorization server's issuer identifier (`https`, or `http` on loopback); its
    /// metadata names the JWKS that signs the tokens.
    #[schemars(url)]
    pub issuer: String,
    /// This server's resource identifier: a token's `aud` must be it (RFC 8707), and the
    /// protected resource metadata names it.
    #[schemars(url)]
    pub resource: String,
    /// The token claim whose value is the client's tenant, e.g. `tenant` or `sub`.
    #[schemars(length(min = 1))]
    pub tenant_claim: String,
    /// The longest a fetched JWKS is kept, in seconds (default 300, 5 to 86400); the issuer's
    /// `Cache-Control` `max-age`, raised to at least 60, applies when shorter. It is refreshed
    /// in the background at 80 % of its lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 86_400))]
    pub jwks_max_age_seconds: Option<u32>,
    /// While the issuer cannot be reached, an expired JWKS is still used for this many seconds
    /// past its expiry (default 3600, 0 to 86400); then tokens get HTTP 503.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86_400))]
    pub jwks_max_stale_seconds: Option<u32>,
}

impl ServeAuthorization {
    /// [`ServeAuthorization::jwks_max_age_seconds`] or its default.
    pub fn jwks_max_age(&self) -> Duration {
        Duration::from_secs(
            self.jwks_max_age_seconds
                .unwrap_or(DEFAULT_JWKS_MAX_AGE_SECONDS)
                .into(),
        )
    }

    /// [`ServeAuthorization::jwks_max_stale_seconds`] or its default.
    pub fn jwks_max_stale(&self) -> Duration {
        Duration::from_secs(
            self.jwks_max_stale_seconds
                .unwrap_or(DEFAULT_JWKS_MAX_STALE_SECONDS)
                .into(),
        )
    }

    /// Each bound: its field's name, its value when set, and the least and largest values it
    /// takes.
    pub(crate) fn bounds(&self) -> [(&'static str, Option<u32>, u32, u32); 2] {
        [
            ("jwks_max_age_seconds", self.jwks_max_age_seconds, 5, 86_400),
            (
                "jwks_max_stale_seconds",
                self.jwks_max_stale_seconds,
                0,
                86_400,
            ),
        ]
    }
}

impl Serve {
    /// [`Serve::concurrent_calls_per_client`] or its default.
    pub fn concurrent_calls_per_client(&self) -> u32 {
        self.concurrent_calls_per_client
            .unwrap_or(DEFAULT_CONCURRENT_CALLS_PER_CLIENT)
    }

    /// [`Serve::concurrent_calls`] or its default.
    pub fn concurrent_calls(&self) -> u32 {
        self.concurrent_calls.unwrap_or(DEFAULT_CONCURRENT_CALLS)
    }

    /// [`Serve::sessions_per_client`] or its default.
    pub fn sessions_per_client(&self) -> u32 {
        self.sessions_per_client
            .unwrap_or(DEFAULT_SESSIONS_PER_CLIENT)
    }

    /// [`Serve::session_idle_seconds`] or its default.
    pub fn session_idle_seconds(&self) -> u32 {
        self.session_idle_seconds
            .unwrap_or(DEFAULT_SESSION_IDLE_SECONDS)
    }

    /// [`Serve::max_request_bytes`] or its default.
    pub fn max_request_bytes(&self) -> u32 {
        self.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES)
    }

    /// [`Serve::max_sessions`] or its default.
    pub fn max_sessions(&self) -> u32 {
        self.max_sessions.unwrap_or(DEFAULT_MAX_SESSIONS)
    }

    /// [`Serve::max_connections`] or its default (before the descriptor limit lowers it).
    pub fn max_connections(&self) -> u32 {
        self.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS)
    }

    /// [`Serve::connections_per_source`] or its default.
    pub fn connections_per_source(&self) -> u32 {
        self.connections_per_source
            .unwrap_or(DEFAULT_CONNECTIONS_PER_SOURCE)
    }

    /// [`Serve::header_read_timeout_seconds`] or its default.
    pub fn header_read_timeout_seconds(&self) -> u32 {
        self.header_read_timeout_seconds
            .unwrap_or(DEFAULT_HEADER_READ_TIMEOUT_SECONDS)
    }

    /// [`Serve::idle_timeout_seconds`] or its default.
    pub fn idle_timeout_seconds(&self) -> u32 {
        self.idle_timeout_seconds
            .unwrap_or(DEFAULT_IDLE_TIMEOUT_SECONDS)
    }

    /// [`Serve::max_concurrent_streams`] or its default.
    pub fn max_concurrent_streams(&self) -> u32 {
        self.max_concurrent_streams
            .unwrap_or(DEFAULT_MAX_CONCURRENT_STREAMS)
    }

    /// [`Serve::failed_authentications_per_minute`] or its default.
    pub fn failed_authentications_per_minute(&self) -> u32 {
        self.failed_authentications_per_minute
            .unwrap_or(DEFAULT_FAILED_AUTHENTICATIONS_PER_MINUTE)
    }

    /// Each bound: its field's name, its value when set, and the largest value it takes.
    pub(crate) fn bounds(&self) -> [(&'static str, Option<u32>, u32); 12] {
        [
            (
                "concurrent_calls_per_client",
                self.concurrent_calls_per_client,
                65_536,
            ),
            ("concurrent_calls", self.concurrent_calls, 65_536),
            ("sessions_per_client", self.sessions_per_client, 65_536),
            ("session_idle_seconds", self.session_idle_seconds, 86_400),
            (
                "max_request_bytes",
                self.max_request_bytes,
                64 * 1024 * 1024,
            ),
            ("max_sessions", self.max_sessions, 1_048_576),
            ("max_connections", self.max_connections, 1_048_576),
            (
                "connections_per_source",
                self.connections_per_source,
                1_048_576,
            ),
            (
                "header_read_timeout_seconds",
                self.header_read_timeout_seconds,
                300,
            ),
            ("idle_timeout_seconds", self.idle_timeout_seconds, 86_400),
            (
                "max_concurrent_streams",
                self.max_concurrent_streams,
                65_536,
            ),
            (
                "failed_authentications_per_minute",
                self.failed_authentications_per_minute,
                1_000_000,
            ),
        ]
    }
}
