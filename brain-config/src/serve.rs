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
            ("jwks_max_stale_seconds", self.jwks_max_stale_seconds, 0, 86_400),
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

    /// Each bound: its field's name, its value when set, and the largest value it takes.
    pub(crate) fn bounds(&self) -> [(&'static str, Option<u32>, u32); 5] {
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
        ]
    }
}
