//! Session inspection tokens (`inspect_session` on HTTP and SSE tools).
//!
//! A binding with `"inspect_session": true` sends, with every call, a compact JWS (a JWT signed
//! with HMAC-SHA-256) in the `Brain-Session-Token` header. It lets the tool's server ask the host
//! about the session that made this call, and nothing else: its claims are the tenant, the
//! session, the call, the binding's name and an expiry — the call's deadline. The key is the
//! host's (`BRAIN_SESSION_TOKEN_KEY`, at least 32 bytes, read when the runtime starts); the host's
//! inspection endpoint checks a token with [`verify_session_token`]. MCP bindings never get one
//! (the config compiler rejects the field there, and the MCP transports never add the header).
//!
//! The token's header names the key by a `kid`: the first bytes of HMAC-SHA-256 of a fixed
//! label under the key, which does not reveal the key. That is how a token signed under another
//! key ([`SessionTokenError::WrongKey`]) is told from one whose bytes were changed
//! ([`SessionTokenError::Tampered`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// The environment variable that holds the key session inspection tokens are signed with.
pub const SESSION_TOKEN_KEY_ENV: &str = "BRAIN_SESSION_TOKEN_KEY";
/// The request header that carries a session inspection token.
pub const SESSION_TOKEN_HEADER: &str = "brain-session-token";
/// The shortest key accepted, in bytes.
pub const MIN_SESSION_TOKEN_KEY_BYTES: usize = 32;
/// What the key id is the HMAC of.
const KEY_ID_LABEL: &[u8] = b"brain session token key id";

/// What a session inspection token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionClaims {
    /// The tenant of the session that made the call.
    pub tenant_id: String,
    /// The agent session that made the call.
    pub session_id: String,
    /// The call (also its `Brain-Call-Id` and `Idempotency-Key`).
    pub call_id: String,
    /// The binding's name: the tool the token was sent to.
    pub tool: String,
    /// When the token was made, in seconds since the Unix epoch.
    pub iat: u64,
    /// When it expires (the call's deadline), in seconds since the Unix epoch.
    pub exp: u64,
}

impl SessionClaims {
    /// Checks that the token is about a session of `tenant_id` (the tenant the inspection
    /// endpoint is asked about).
    pub fn require_tenant(&self, tenant_id: &str) -> Result<(), SessionTokenError> {
        if self.tenant_id == tenant_id {
            Ok(())
        } else {
            Err(SessionTokenError::WrongTenant {
                expected: tenant_id.to_owned(),
                actual: self.tenant_id.clone(),
            })
        }
    }
}

/// Why a session inspection token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionTokenError {
    /// The key is shorter than [`MIN_SESSION_TOKEN_KEY_BYTES`].
    #[error(
        "the session token key is {0} bytes; it must be at least {MIN_SESSION_TOKEN_KEY_BYTES} \
         (e.g. `openssl rand -hex 32`)"
    )]
    KeyTooShort(usize),
    /// Not a session inspection token (not a compact JWS of these claims).
    #[error("not a session inspection token: {0}")]
    Malformed(String),
    /// Signed under another key (its key id is not this key's).
    #[error("the token was signed with another key")]
    WrongKey,
    /// Its bytes were changed after signing (the signature does not match, or the algorithm is
    /// not HS256).
    #[error("the token's signature does not match its contents: it was changed after signing")]
    Tampered,
    /// Its expiry has passed.
    #[error("the token expired at {expired_at} (seconds since the Unix epoch)")]
    Expired {
        /// Its `exp`.
        expired_at: u64,
    },
    /// It belongs to a session of another tenant.
    #[error("the token belongs to tenant {actual:?}, not {expected:?}")]
    WrongTenant {
        /// The tenant asked about.
        expected: String,
        /// The token's tenant.
        actual: String,
    },
}

/// The key tokens are signed with; its Debug output is redacted.
pub(crate) struct SessionTokenKey {
    encoding: EncodingKey,
    key_id: String,
}

impl std::fmt::Debug for SessionTokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionTokenKey(<redacted>)")
    }
}

impl SessionTokenKey {
    /// The key from its bytes (at least [`MIN_SESSION_TOKEN_KEY_BYTES`]).
    pub(crate) fn new(key: &[u8]) -> Result<Self, SessionTokenError> {
        Ok(SessionTokenKey {
            encoding: encoding_key(key)?,
            key_id: key_id(key)?,
        })
    }

    /// A token for one call, valid until `deadline`.
    pub(crate) fn sign(
        &self,
        tenant_id: &str,
        session_id: &str,
        call_id: &str,
        tool: &str,
        deadline: SystemTime,
    ) -> String {
        let now = SystemTime::now();
        let claims = SessionClaims {
            tenant_id: tenant_id.to_owned(),
            session_id: session_id.to_owned(),
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            iat: seconds(now),
            // Rounded up: a token never expires before the call's deadline.
            exp: seconds(deadline + Duration::from_millis(999)),
        };
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(self.key_id.clone());
        jsonwebtoken::encode(&header, &claims, &self.encoding)
            .expect("HS256 signing of plain claims cannot fail")
    }
}

fn encoding_key(key: &[u8]) -> Result<EncodingKey, SessionTokenError> {
    if key.len() < MIN_SESSION_TOKEN_KEY_BYTES {
        return Err(SessionTokenError::KeyTooShort(key.len()));
    }
    EncodingKey::from_secret(key).map_err(|error| SessionTokenError::Malformed(error.to_string()))
}

/// The key's id: 16 characters of base64url of HMAC-SHA-256(key, a fixed label).
fn key_id(key: &[u8]) -> Result<String, SessionTokenError> {
    let mac = jsonwebtoken::crypto::sign(KEY_ID_LABEL, &encoding_key(key)?, Algorithm::HS256)
        .map_err(|error| SessionTokenError::Malformed(error.to_string()))?;
    Ok(mac.chars().take(16).collect())
}

fn seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

/// Checks a session inspection token from a `Brain-Session-Token` header: signed with `key`
/// (HS256 only), unchanged, not expired at `now`. Check the tenant and tool the inspection
/// endpoint is asked about against the claims ([`SessionClaims::require_tenant`]).
pub fn verify_session_token(
    token: &str,
    key: &[u8],
    now: SystemTime,
) -> Result<SessionClaims, SessionTokenError> {
    let expected_id = key_id(key)?;
    let header = jsonwebtoken::decode_header(token)
        .map_err(|error| SessionTokenError::Malformed(error.to_string()))?;
    if header.alg != Algorithm::HS256 {
        return Err(SessionTokenError::Tampered);
    }
    if header.kid.as_deref() != Some(expected_id.as_str()) {
        return Err(SessionTokenError::WrongKey);
    }
    let decoding = DecodingKey::from_secret(key)
        .map_err(|error| SessionTokenError::Malformed(error.to_string()))?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let claims = jsonwebtoken::decode::<SessionClaims>(token, &decoding, &validation)
        .map_err(|error| match error.kind() {
            ErrorKind::InvalidSignature | ErrorKind::InvalidAlgorithm => {
                SessionTokenError::Tampered
            }
            _ => SessionTokenError::Malformed(error.to_string()),
        })?
        .claims;
    if seconds(now) >= claims.exp {
        return Err(SessionTokenError::Expired {
            expired_at: claims.exp,
        });
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn token(deadline: SystemTime) -> String {
        SessionTokenKey::new(KEY)
            .unwrap()
            .sign("acme", "s1", "c1", "lookup", deadline)
    }

    #[test]
    fn a_fresh_token_verifies_with_its_claims() {
        let now = SystemTime::now();
        let claims = verify_session_token(&token(now + Duration::from_secs(30)), KEY, now).unwrap();
        assert_eq!(
            (claims.tenant_id.as_str(), claims.session_id.as_str()),
            ("acme", "s1")
        );
        assert_eq!(
            (claims.call_id.as_str(), claims.tool.as_str()),
            ("c1", "lookup")
        );
        assert!(claims.exp >= seconds(now) + 30 && claims.iat <= seconds(now) + 1);
        assert_eq!(claims.require_tenant("acme"), Ok(()));
        assert!(matches!(
            claims.require_tenant("other"),
            Err(SessionTokenError::WrongTenant { .. })
        ));
    }

    #[test]
    fn each_kind_of_bad_token_has_its_own_error() {
        let now = SystemTime::now();
        let good = token(now + Duration::from_secs(30));
        let other_key = b"another key, also at least 32 bytes long";
        assert_eq!(
            verify_session_token(&good, other_key, now),
            Err(SessionTokenError::WrongKey)
        );
        // Change the payload (the tenant), keep header and signature.
        let parts: Vec<&str> = good.split('.').collect();
        let forged = {
            use base64::Engine;
            let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            let mut claims: serde_json::Value =
                serde_json::from_slice(&engine.decode(parts[1]).unwrap()).unwrap();
            claims["tenant_id"] = "intruder".into();
            let payload = engine.encode(claims.to_string());
            format!("{}.{payload}.{}", parts[0], parts[2])
        };
        assert_eq!(
            verify_session_token(&forged, KEY, now),
            Err(SessionTokenError::Tampered)
        );
        assert!(matches!(
            verify_session_token("not-a-token", KEY, now),
            Err(SessionTokenError::Malformed(_))
        ));
        assert!(matches!(
            verify_session_token(&good, KEY, now + Duration::from_secs(120)),
            Err(SessionTokenError::Expired { .. })
        ));
        assert_eq!(
            verify_session_token(&good, b"short", now),
            Err(SessionTokenError::KeyTooShort(5))
        );
    }

    #[test]
    fn the_key_never_appears_in_debug_output_or_the_token() {
        let key = SessionTokenKey::new(KEY).unwrap();
        assert_eq!(format!("{key:?}"), "SessionTokenKey(<redacted>)");
        let token = token(SystemTime::now() + Duration::from_secs(5));
        assert!(!token.contains(std::str::from_utf8(KEY).unwrap()));
    }
}
