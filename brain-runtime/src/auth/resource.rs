//! brain as an OAuth 2.1 resource server (the MCP authorization spec's resource side, for
//! `brain-harness serve`): a client's bearer token must be a JWT access token (RFC 9068, `typ`
//! `at+jwt`) of the configured issuer, signed with an asymmetric algorithm by a key of the
//! issuer's JWKS, whose `aud` is this server's resource, with a `sub`, which has not expired, is
//! not before its `nbf` and was not issued in the future (`iat`), each with [`LEEWAY_SECONDS`] of
//! clock skew (RFC 9068 §4, RFC 8725). Its tenant is a claim of the token.
//!
//! **Keys.** The JWKS is found through the issuer's metadata (RFC 8414, then OpenID discovery)
//! and fetched over `https` (`http` on loopback only). A fetched set lives for the issuer's
//! `Cache-Control` `max-age`, at least 60 s, at most the configured maximum (default
//! [`DEFAULT_KEYS_MAX_AGE`]; the maximum alone when the issuer gives none) and is refreshed in
//! the background at 80 % of that lifetime, one fetch at a time: no lock is held across a fetch,
//! and no token waits while the set is fresh.
//!
//! - After the set has expired, a token waits at most [`KEYS_WAIT`] for the refresh in flight,
//!   then is refused with [`TokenRejected::KeysUnavailable`] (HTTP 503).
//! - When a refresh fails (the issuer is unreachable), the expired set is still used for at most
//!   the configured staleness (default [`DEFAULT_KEYS_MAX_STALE`]) past its expiry, then tokens get
//!   [`TokenRejected::KeysUnavailable`]; failed fetches are retried with a backoff of at most
//!   [`REFETCH_INTERVAL`].
//! - A key id that a successful fetch no longer lists is retired: it is never used again, even if
//!   the issuer lists it later (the last [`RETIRED_KEYS`] retired ids are kept). A fetch that
//!   finds no key at all is taken as a failed one: it retires nothing.
//! - A key id the set does not hold triggers a fetch at most once per [`REFETCH_INTERVAL`], so
//!   that tokens with made-up key ids cannot make brain hammer the issuer; only that token waits
//!   for the fetch (at most [`KEYS_WAIT`]), never one whose key is held.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use http::header::{ACCEPT, CACHE_CONTROL};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::metadata::authorization_server;
use super::request::{require_secure, send};
use crate::http::{Body, HttpClient};

/// The least time between two fetches of the JWKS prompted by key ids the set does not hold, and
/// the longest backoff between failed fetches.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds.
pub const LEEWAY_SECONDS: u64 = 30;
/// The longest a token waits for a fetch of the JWKS.
pub const KEYS_WAIT: Duration = Duration::from_secs(2);
/// The default longest lifetime of a fetched JWKS (the config's `jwks_max_age_seconds`).
pub const DEFAULT_KEYS_MAX_AGE: Duration = Duration::from_secs(300);
/// The default longest use of an expired JWKS while the issuer cannot be reached (the config's
/// `jwks_max_stale_seconds`).
pub const DEFAULT_KEYS_MAX_STALE: Duration = Duration::from_secs(3600);
/// How many retired key ids are remembered.
pub const RETIRED_KEYS: usize = 1024;
/// The least lifetime given to an issuer's `max-age`.
const LEAST_ISSUER_MAX_AGE: Duration = Duration::from_secs(60);

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenRejected {
    /// The token is not one this server accepts (HTTP 401): malformed, not an access token,
    /// a symmetric algorithm, an unknown or retired key, a bad signature, another issuer or
    /// audience, expired, not valid yet, issued in the future, without `sub` or without the
    /// tenant claim. The message never contains the token.
    #[error("the access token is not accepted: {0}")]
    Invalid(String),
    /// The issuer's keys could not be read, so no token can be checked now (HTTP 503).
    #[error("the issuer's keys cannot be read: {0}")]
    KeysUnavailable(String),
}

/// Why a verifier cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifierError {
    /// The issuer is not an `https` URL (`http` only on loopback).
    #[error("{0}")]
    Issuer(String),
    /// The HTTP client for the issuer's keys cannot be built (the platform's TLS roots).
    #[error("cannot build the HTTP client for the issuer's keys: {0}")]
    Http(String),
}

/// What a verified token says about its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// The tenant: the value of the configured claim.
    pub tenant: String,
    /// The issuer that signed it: its `iss`, which is the configured issuer.
    pub issuer: String,
    /// Its `sub` (RFC 9068 §2.2): the resource owner, or the client itself when no user is
    /// involved. Unique within [`VerifiedToken::issuer`] only.
    pub subject: String,
    /// Its `client_id`, when it has one: the OAuth client the token was issued to.
    pub client_id: Option<String>,
}

/// Verifies access tokens of one issuer for one resource. Its key set is shared by every task
/// verifying with it; the refreshes run as tokio tasks, which end once the verifier is dropped.
pub struct AccessTokenVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    issuer: String,
    resource: String,
    tenant_claim: String,
    http: HttpClient,
    /// Never held across an await.
    keys: Mutex<Keys>,
    /// Counts finished fetches; tokens waiting for a fetch watch it.
    fetched: watch::Sender<u64>,
}

impl std::fmt::Debug for AccessTokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessTokenVerifier")
            .field("issuer", &self.inner.issuer)
            .field("resource", &self.inner.resource)
            .field("tenant_claim", &self.inner.tenant_claim)
            .finish()
    }
}

/// The key set and when to fetch it.
struct Keys {
    /// The configured longest lifetime of a set.
    max_age: Duration,
    /// How long past its expiry a set is used while fetches fail.
    max_stale: Duration,
    set: Option<JwkSet>,
    /// When `set` expires.
    expires: Option<Instant>,
    /// When the next fetch is due without any token asking (80 % of the set's lifetime, or the
    /// retry after a failure); `None` before the first token.
    due: Option<Instant>,
    in_flight: bool,
    /// When a key id the set did not hold last prompted a fetch.
    unknown_fetched: Option<Instant>,
    /// Why the last fetch failed, until one succeeds.
    failure: Option<String>,
    /// Fetches failed in a row.
    failures: u32,
    /// Key ids a successful fetch dropped, oldest first.
    retired: VecDeque<String>,
    /// The issuer's `jwks_uri`, once its metadata was read (read again after a failure).
    jwks_uri: Option<String>,
}

/// Where a token's key stands.
enum Lookup {
    Key(Box<Jwk>),
    /// Wait for the fetch in flight, then look again (once).
    Wait(watch::Receiver<u64>),
    Refused(TokenRejected),
}

impl AccessTokenVerifier {
    /// A verifier for tokens of `issuer` whose audience is `resource`, with the tenant in the
    /// claim `tenant_claim`, keeping keys as [`DEFAULT_KEYS_MAX_AGE`] and
    /// [`DEFAULT_KEYS_MAX_STALE`] say (see [`AccessTokenVerifier::with_key_lifetimes`]). Nothing
    /// is fetched until the first token.
    pub fn new(issuer: &str, resource: &str, tenant_claim: &str) -> Result<Self, VerifierError> {
        require_secure(issuer, "the issuer").map_err(VerifierError::Issuer)?;
        Ok(AccessTokenVerifier {
            inner: Arc::new(Inner {
                issuer: issuer.to_owned(),
                resource: resource.to_owned(),
                tenant_claim: tenant_claim.to_owned(),
                http: crate::http::client(false, &[]).map_err(VerifierError::Http)?,
                keys: Mutex::new(Keys {
                    max_age: DEFAULT_KEYS_MAX_AGE,
                    max_stale: DEFAULT_KEYS_MAX_STALE,
                    set: None,
                    expires: None,
                    due: None,
                    in_flight: false,
                    unknown_fetched: None,
                    failure: None,
                    failures: 0,
                    retired: VecDeque::new(),
                    jwks_uri: None,
                }),
                fetched: watch::Sender::new(0),
            }),
        })
    }

    /// How long the issuer's keys are kept: a fetched JWKS lives for the issuer's
    /// `Cache-Control` `max-age` raised to at least 60 s, but never longer than `max_age`
    /// (`max_age` alone when the issuer sends no `max-age`; a `max_age` under 60 s therefore
    /// always wins), and is refreshed at 80 % of that. While refreshes fail, an expired set is
    /// still used for `max_stale` past its expiry. The config's `jwks_max_age_seconds` and
    /// `jwks_max_stale_seconds` (defaults [`DEFAULT_KEYS_MAX_AGE`], [`DEFAULT_KEYS_MAX_STALE`]).
    /// `max_age` is at least 1 s.
    #[must_use]
    pub fn with_key_lifetimes(self, max_age: Duration, max_stale: Duration) -> Self {
        {
            let mut keys = self.inner.lock();
            keys.max_age = max_age.max(Duration::from_secs(1));
            keys.max_stale = max_stale;
        }
        self
    }

    /// Checks `token` (the bearer token, without `Bearer `).
    pub async fn verify(&self, token: &str) -> Result<VerifiedToken, TokenRejected> {
        let inner = &self.inner;
        let invalid = |why: &str| TokenRejected::Invalid(why.to_owned());
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("not a JWT"))?;
        let typ = header.typ.as_deref().unwrap_or_default();
        if !typ.eq_ignore_ascii_case("at+jwt") && !typ.eq_ignore_ascii_case("application/at+jwt") {
            return Err(invalid("its `typ` is not `at+jwt` (RFC 9068)"));
        }
        if header.alg.family() == AlgorithmFamily::Hmac {
            return Err(invalid("it is signed with a symmetric algorithm"));
        }
        let key = Inner::key(inner, header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&inner.issuer]);
        validation.set_audience(&[&inner.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(
            |error| {
                use jsonwebtoken::errors::ErrorKind;
                TokenRejected::Invalid(match error.kind() {
                    ErrorKind::ExpiredSignature => "it has expired".to_owned(),
                    ErrorKind::InvalidIssuer => "another issuer signed it".to_owned(),
                    ErrorKind::InvalidAudience => "it is for another resource (`aud`)".to_owned(),
                    ErrorKind::InvalidSignature => "its signature does not verify".to_owned(),
                    ErrorKind::MissingRequiredClaim(claim) => {
                        format!("it lacks `{claim}` (or it is not a string)")
                    }
                    ErrorKind::InvalidClaimFormat(claim) => format!("its `{claim}` is malformed"),
                    ErrorKind::ImmatureSignature => "it is not valid yet (`nbf`)".to_owned(),
                    _ => "it does not verify".to_owned(),
                })
            },
        )?;
        let claims = data.claims;
        match claims.get("iat") {
            None => {}
            Some(iat) => {
                let iat = iat
                    .as_u64()
                    .or_else(|| iat.as_f64().filter(|iat| *iat >= 0.0).map(|iat| iat as u64))
                    .ok_or_else(|| invalid("its `iat` is malformed"))?;
                if iat > jsonwebtoken::get_current_timestamp().saturating_add(LEEWAY_SECONDS) {
                    return Err(invalid("it was issued in the future (`iat`)"));
                }
            }
        }
        let string = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
        };
        let tenant = string(&inner.tenant_claim).ok_or_else(|| {
            TokenRejected::Invalid(format!(
                "it has no `{}` claim naming a tenant",
                inner.tenant_claim
            ))
        })?;
        let subject = string("sub").ok_or_else(|| invalid("its `sub` is empty"))?;
        Ok(VerifiedToken {
            tenant,
            issuer: inner.issuer.clone(),
            subject,
            client_id: string("client_id"),
        })
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Keys> {
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The key `kid` (or the set's only key) for `alg`. Waits (at most [`KEYS_WAIT`]) only
    /// when the set has expired or does not hold `kid`, and a fetch is in flight.
    async fn key(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, TokenRejected> {
        let deadline = Instant::now() + KEYS_WAIT;
        let mut waited = false;
        let jwk = loop {
            match self.lookup(kid, waited) {
                Lookup::Key(jwk) => break jwk,
                Lookup::Refused(rejected) => return Err(rejected),
                Lookup::Wait(mut fetched) => {
                    // A timeout, or a fetch that ended: look again either way, and wait no more.
                    let _ = tokio::time::timeout_at(deadline, fetched.changed()).await;
                    waited = true;
                }
            }
        };
        if jwk
            .common
            .key_algorithm
            .is_some_and(|key_alg| key_alg.to_string() != format!("{alg:?}"))
        {
            return Err(TokenRejected::Invalid(
                "its algorithm is not its key's".into(),
            ));
        }
        DecodingKey::from_jwk(&jwk)
            .map_err(|_| TokenRejected::Invalid("the issuer's key cannot be used".into()))
    }

    /// Where the key `kid` stands now, starting a fetch when one is due; `waited` when the token
    /// already waited for one.
    fn lookup(self: &Arc<Self>, kid: Option<&str>, waited: bool) -> Lookup {
        let mut keys = self.lock();
        let now = Instant::now();
        if let Some(kid) = kid
            && keys.retired.iter().any(|retired| retired == kid)
        {
            return Lookup::Refused(TokenRejected::Invalid(
                "its key was withdrawn by the issuer".into(),
            ));
        }
        if keys.due.is_none_or(|due| due <= now) {
            self.start_fetch(&mut keys, now);
        }
        let usable = keys.expires.is_some_and(|expires| {
            now < expires || (keys.failure.is_some() && now < expires + keys.max_stale)
        });
        if !usable {
            if keys.in_flight && !waited {
                return Lookup::Wait(self.fetched.subscribe());
            }
            let why = match (&keys.failure, keys.expires) {
                (Some(failure), Some(expires)) => format!(
                    "they expired {} s ago and cannot be fetched: {failure}",
                    now.duration_since(expires).as_secs()
                ),
                (Some(failure), None) => failure.clone(),
                (None, _) => format!("fetching them took more than {} s", KEYS_WAIT.as_secs_f32()),
            };
            return Lookup::Refused(TokenRejected::KeysUnavailable(why));
        }
        if let Some(jwk) = find(keys.set.as_ref(), kid) {
            return Lookup::Key(Box::new(jwk.clone()));
        }
        if !waited
            && !keys.in_flight
            && keys
                .unknown_fetched
                .is_none_or(|at| now.duration_since(at) >= REFETCH_INTERVAL)
        {
            keys.unknown_fetched = Some(now);
            self.start_fetch(&mut keys, now);
        }
        if keys.in_flight && !waited {
            return Lookup::Wait(self.fetched.subscribe());
        }
        Lookup::Refused(TokenRejected::Invalid(
            "no key of the issuer signed it".into(),
        ))
    }

    /// Starts a fetch of the JWKS unless one is in flight.
    fn start_fetch(self: &Arc<Self>, keys: &mut Keys, now: Instant) {
        if keys.in_flight {
            return;
        }
        keys.in_flight = true;
        // Until it ends, no other fetch is due.
        keys.due = Some(now + REFETCH_INTERVAL.max(keys.max_age));
        let jwks_uri = keys.jwks_uri.clone();
        let inner = Arc::clone(self);
        tokio::spawn(async move {
            let fetched = inner.fetch(jwks_uri).await;
            let due = inner.fetched_now(fetched);
            let weak = Arc::downgrade(&inner);
            drop(inner);
            tokio::time::sleep_until(due).await;
            refresh_if_due(&weak);
        });
    }

    /// Takes a fetch's result; returns when the next fetch is due.
    fn fetched_now(&self, fetched: Result<Fetched, String>) -> Instant {
        let due = {
            let mut keys = self.lock();
            let now = Instant::now();
            keys.in_flight = false;
            match fetched {
                Ok(Fetched {
                    set,
                    max_age,
                    jwks_uri,
                }) => {
                    let lifetime = match max_age {
                        Some(max_age) => max_age.max(LEAST_ISSUER_MAX_AGE).min(keys.max_age),
                        None => keys.max_age,
                    };
                    if let Some(old) = keys.set.take() {
                        for jwk in &old.keys {
                            if let Some(kid) = &jwk.common.key_id
                                && set.find(kid).is_none()
                                && !keys.retired.contains(kid)
                            {
                                tracing::info!(kid, "an issuer's key was withdrawn");
                                if keys.retired.len() == RETIRED_KEYS {
                                    keys.retired.pop_front();
                                }
                                keys.retired.push_back(kid.clone());
                            }
                        }
                    }
                    keys.set = Some(set);
                    keys.expires = Some(now + lifetime);
                    keys.due = Some(now + lifetime.mul_f64(0.8));
                    keys.failure = None;
                    keys.failures = 0;
                    keys.jwks_uri = Some(jwks_uri);
                }
                Err(why) => {
                    tracing::warn!(%why, "the issuer's keys were not fetched");
                    keys.failures = keys.failures.saturating_add(1);
                    let base =
                        (keys.max_age / 5).clamp(Duration::from_secs(1), Duration::from_secs(5));
                    let backoff = base
                        .saturating_mul(1 << keys.failures.saturating_sub(1).min(8))
                        .min(REFETCH_INTERVAL);
                    keys.failure = Some(why);
                    keys.due = Some(now + backoff);
                    keys.jwks_uri = None;
                }
            }
            keys.due.unwrap_or(now)
        };
        self.fetched.send_modify(|count| *count += 1);
        due
    }

    /// The issuer's JWKS, through its metadata's `jwks_uri` (read now when `jwks_uri` is not
    /// known), with the `max-age` it was served with.
    async fn fetch(&self, jwks_uri: Option<String>) -> Result<Fetched, String> {
        let uri = match jwks_uri {
            Some(uri) => uri,
            None => {
                let metadata = authorization_server(&self.http, &self.issuer, false).await?;
                let uri = metadata
                    .jwks_uri
                    .ok_or_else(|| format!("the metadata of {} names no jwks_uri", self.issuer))?;
                require_secure(&uri, "the jwks_uri")?;
                uri
            }
        };
        let request = http::Request::get(&uri)
            .header(ACCEPT, "application/jwk-set+json, application/json")
            .body(Body::from(bytes::Bytes::new()))
            .map_err(|error| format!("{uri:?} cannot be requested: {error}"))?;
        let answer = send(&self.http, request).await?;
        if !answer.status.is_success() {
            return Err(format!("{uri} answered {}", answer.status));
        }
        let set: JwkSet = serde_json::from_slice(&answer.body)
            .map_err(|error| format!("{uri} is not a JWKS: {error}"))?;
        // An empty set is an issuer's mistake (a deploy, a proxy), not the withdrawal of every
        // key: taken as a failed fetch, it never retires the keys held (the stale window applies).
        if set.keys.is_empty() {
            return Err(format!("{uri} serves an empty JWKS"));
        }
        let max_age = answer
            .headers
            .get_all(CACHE_CONTROL)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(max_age);
        Ok(Fetched {
            set,
            max_age,
            jwks_uri: uri,
        })
    }
}

/// A fetched JWKS.
struct Fetched {
    set: JwkSet,
    /// The `Cache-Control` `max-age` it came with (0 for `no-cache` or `no-store`).
    max_age: Option<Duration>,
    jwks_uri: String,
}

/// Starts the fetch that is due, if the verifier still exists.
fn refresh_if_due(weak: &Weak<Inner>) {
    let Some(inner) = weak.upgrade() else { return };
    let mut keys = inner.lock();
    let now = Instant::now();
    if keys.due.is_some_and(|due| due <= now) {
        inner.start_fetch(&mut keys, now);
    }
}

/// The lifetime a `Cache-Control` value gives.
fn max_age(cache_control: &str) -> Option<Duration> {
    cache_control.split(',').find_map(|directive| {
        let directive = directive.trim();
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        match name.trim().to_ascii_lowercase().as_str() {
            "max-age" => value
                .trim()
                .trim_matches('"')
                .parse::<u64>()
                .ok()
                .map(Duration::from_secs),
            "no-cache" | "no-store" => Some(Duration::ZERO),
            _ => None,
        }
    })
}

/// The key `kid` of `set`, or its only key when the token names none.
fn find<'a>(set: Option<&'a JwkSet>, kid: Option<&str>) -> Option<&'a Jwk> {
    let set = set?;
    match kid {
        Some(kid) => set.find(kid),
        None if set.keys.len() == 1 => set.keys.first(),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_reads_cache_control() {
        assert_eq!(
            max_age("public, max-age=120"),
            Some(Duration::from_secs(120))
        );
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=soon"), None);
    }
}
