//! brain as an OAuth 2.1 resource server (the MCP authorization spec's resource side, for
//! `brain-harness serve`): a client's bearer token must be a JWT access token (RFC 9068, `typ`
//! `at+jwt`) of the configured issuer, signed with an asymmetric algorithm by a key of the
//! issuer's JWKS, whose `aud` is this server's resource and which has not expired. Its tenant is
//! a claim of the token.
//!
//! The JWKS is found through the issuer's metadata (RFC 8414, then OpenID discovery), fetched
//! over `https` (`http` on loopback only), cached, and fetched again for a key id it does not
//! hold — at most once per [`REFETCH_INTERVAL`], so that tokens with made-up key ids cannot make
//! brain hammer the issuer.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::metadata::authorization_server;
use super::request::{get_json, require_secure};
use crate::http::HttpClient;

/// The least time between two fetches of the JWKS.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 30;

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenRejected {
    /// The token is not one this server accepts (HTTP 401): malformed, not an access token,
    /// a symmetric algorithm, an unknown key, a bad signature, another issuer or audience,
    /// expired, or without the tenant claim. The message never contains the token.
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
    /// Who the client is, for bounds and logs: `client_id`, else `sub`.
    pub subject: String,
}

/// Verifies access tokens of one issuer for one resource.
pub struct AccessTokenVerifier {
    issuer: String,
    resource: String,
    tenant_claim: String,
    http: HttpClient,
    keys: tokio::sync::Mutex<Keys>,
}

impl std::fmt::Debug for AccessTokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessTokenVerifier")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("tenant_claim", &self.tenant_claim)
            .finish()
    }
}

#[derive(Default)]
struct Keys {
    set: Option<JwkSet>,
    fetched: Option<Instant>,
}

impl AccessTokenVerifier {
    /// A verifier for tokens of `issuer` whose audience is `resource`, with the tenant in the
    /// claim `tenant_claim`. Nothing is fetched until the first token.
    pub fn new(issuer: &str, resource: &str, tenant_claim: &str) -> Result<Self, VerifierError> {
        require_secure(issuer, "the issuer").map_err(VerifierError::Issuer)?;
        Ok(AccessTokenVerifier {
            issuer: issuer.to_owned(),
            resource: resource.to_owned(),
            tenant_claim: tenant_claim.to_owned(),
            http: crate::http::client(false, &[]).map_err(VerifierError::Http)?,
            keys: tokio::sync::Mutex::default(),
        })
    }

    /// Checks `token` (the bearer token, without `Bearer `).
    pub async fn verify(&self, token: &str) -> Result<VerifiedToken, TokenRejected> {
        let invalid = |why: &str| TokenRejected::Invalid(why.to_owned());
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("not a JWT"))?;
        let typ = header.typ.as_deref().unwrap_or_default();
        if !typ.eq_ignore_ascii_case("at+jwt") && !typ.eq_ignore_ascii_case("application/at+jwt") {
            return Err(invalid("its `typ` is not `at+jwt` (RFC 9068)"));
        }
        if header.alg.family() == AlgorithmFamily::Hmac {
            return Err(invalid("it is signed with a symmetric algorithm"));
        }
        let key = self.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = LEEWAY_SECONDS;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(
            |error| {
                use jsonwebtoken::errors::ErrorKind;
                TokenRejected::Invalid(
                    match error.kind() {
                        ErrorKind::ExpiredSignature => "it has expired",
                        ErrorKind::InvalidIssuer => "another issuer signed it",
                        ErrorKind::InvalidAudience => "it is for another resource (`aud`)",
                        ErrorKind::InvalidSignature => "its signature does not verify",
                        ErrorKind::MissingRequiredClaim(_) => "it lacks `exp`, `iss` or `aud`",
                        ErrorKind::ImmatureSignature => "it is not valid yet (`nbf`)",
                        _ => "it does not verify",
                    }
                    .to_owned(),
                )
            },
        )?;
        let claims = data.claims;
        let tenant = claims
            .get(&self.tenant_claim)
            .and_then(Value::as_str)
            .filter(|tenant| !tenant.is_empty())
            .ok_or_else(|| {
                TokenRejected::Invalid(format!(
                    "it has no `{}` claim naming a tenant",
                    self.tenant_claim
                ))
            })?;
        let subject = ["client_id", "sub"]
            .iter()
            .find_map(|claim| claims.get(*claim).and_then(Value::as_str))
            .unwrap_or_default();
        Ok(VerifiedToken {
            tenant: tenant.to_owned(),
            subject: subject.to_owned(),
        })
    }

    /// The key `kid` (or the set's only key) for `alg`, fetching the JWKS when it is not held
    /// and the last fetch is older than [`REFETCH_INTERVAL`].
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, TokenRejected> {
        let mut keys = self.keys.lock().await;
        if find(keys.set.as_ref(), kid).is_none()
            && keys
                .fetched
                .is_none_or(|at| at.elapsed() >= REFETCH_INTERVAL)
        {
            keys.fetched = Some(Instant::now());
            let fetched = self.fetch().await;
            match fetched {
                Ok(set) => keys.set = Some(set),
                Err(why) if keys.set.is_none() => return Err(TokenRejected::KeysUnavailable(why)),
                Err(why) => tracing::warn!(%why, "the issuer's keys were not refreshed"),
            }
        }
        let jwk = find(keys.set.as_ref(), kid)
            .ok_or_else(|| TokenRejected::Invalid("no key of the issuer signed it".into()))?;
        if jwk
            .common
            .key_algorithm
            .is_some_and(|key_alg| key_alg.to_string() != format!("{alg:?}"))
        {
            return Err(TokenRejected::Invalid(
                "its algorithm is not its key's".into(),
            ));
        }
        DecodingKey::from_jwk(jwk)
            .map_err(|_| TokenRejected::Invalid("the issuer's key cannot be used".into()))
    }

    /// The issuer's JWKS, through its metadata's `jwks_uri`.
    async fn fetch(&self) -> Result<JwkSet, String> {
        let metadata = authorization_server(&self.http, &self.issuer, false).await?;
        let uri = metadata
            .jwks_uri
            .ok_or_else(|| format!("the metadata of {} names no jwks_uri", self.issuer))?;
        require_secure(&uri, "the jwks_uri")?;
        let document = get_json(&self.http, &uri)
            .await?
            .ok_or_else(|| format!("{uri} serves no JWKS"))?;
        serde_json::from_value(document).map_err(|error| format!("{uri} is not a JWKS: {error}"))
    }
}

/// The key `kid` of `set`, or its only key when the token names none.
fn find<'a>(set: Option<&'a JwkSet>, kid: Option<&str>) -> Option<&'a jsonwebtoken::jwk::Jwk> {
    let set = set?;
    match kid {
        Some(kid) => set.find(kid),
        None if set.keys.len() == 1 => set.keys.first(),
        None => None,
    }
}
