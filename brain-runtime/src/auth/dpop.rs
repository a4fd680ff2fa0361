//! DPoP (RFC 9449): tokens bound to a key brain holds. Every token request and every request
//! with a DPoP-bound token carries a fresh proof — a JWT signed with that key, naming the method
//! and URL, with a new `jti`, the server's latest nonce, and (to a resource) the token's hash.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use sha2::Digest;

use super::request::split_url;

/// A key pair generated when the runtime starts (ES256); it never leaves the process.
pub(crate) struct DpopKey {
    key: EncodingKey,
    jwk: Jwk,
    secret: p256::SecretKey,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DpopKey(<redacted>)")
    }
}

impl DpopKey {
    /// A fresh P-256 key.
    pub(crate) fn generate() -> Result<DpopKey, String> {
        use p256::elliptic_curve::Generate;
        DpopKey::from_secret(p256::SecretKey::generate())
    }

    /// The key stored with the tokens bound to it (PKCS#8 PEM).
    pub(crate) fn from_pem(pem: &str) -> Result<DpopKey, String> {
        use p256::pkcs8::DecodePrivateKey;
        let secret = p256::SecretKey::from_pkcs8_pem(pem)
            .map_err(|_| "the stored DPoP key is not a P-256 key".to_owned())?;
        DpopKey::from_secret(secret)
    }

    /// PKCS#8 PEM, to store with the tokens bound to the key (they are useless without it).
    pub(crate) fn to_pem(&self) -> Result<String, String> {
        use p256::pkcs8::{EncodePrivateKey, LineEnding};
        self.secret
            .to_pkcs8_pem(LineEnding::LF)
            .map(|pem| pem.to_string())
            .map_err(|error| format!("cannot encode the DPoP key: {error}"))
    }

    fn from_secret(secret: p256::SecretKey) -> Result<DpopKey, String> {
        use p256::pkcs8::EncodePrivateKey;
        let der = secret
            .to_pkcs8_der()
            .map_err(|error| format!("cannot encode the DPoP key: {error}"))?;
        let key = EncodingKey::from_ec_der(der.as_bytes());
        let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256)
            .map_err(|error| format!("cannot describe the DPoP key: {error}"))?;
        jwk.common.key_algorithm = None;
        Ok(DpopKey { key, jwk, secret })
    }

    /// A proof for one request: `method` to `url` (without its query and fragment), with the
    /// server's `nonce` and, to a resource, the `access_token` it accompanies.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        nonce: Option<&str>,
        access_token: Option<&str>,
    ) -> Result<String, String> {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("dpop+jwt".into());
        header.jwk = Some(self.jwk.clone());
        let htu = url.split(['?', '#']).next().unwrap_or(url);
        let mut claims = json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "htm": method,
            "htu": htu,
            "iat": jsonwebtoken::get_current_timestamp(),
        });
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        if let Some(token) = access_token {
            claims["ath"] = json!(URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes())));
        }
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|error| format!("cannot sign a DPoP proof: {error}"))
    }
}

/// The latest `DPoP-Nonce` each server (by origin) gave.
#[derive(Debug, Default)]
pub(crate) struct Nonces(Mutex<HashMap<String, String>>);

impl Nonces {
    pub(crate) fn get(&self, url: &str) -> Option<String> {
        let origin = split_url(url).ok()?.0;
        self.0.lock().ok()?.get(&origin).cloned()
    }

    /// Records the nonce of a response from `url`, if it carries one.
    pub(crate) fn observe(&self, url: &str, headers: &http::HeaderMap) {
        let Some(nonce) = headers.get("dpop-nonce").and_then(|v| v.to_str().ok()) else {
            return;
        };
        if let (Ok((origin, _)), Ok(mut nonces)) = (split_url(url), self.0.lock()) {
            nonces.insert(origin, nonce.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_names_the_request_and_hashes_the_token() {
        let key = DpopKey::generate().unwrap();
        let proof = key
            .proof(
                "POST",
                "https://rs.example/mcp?x=1",
                Some("n1"),
                Some("tok"),
            )
            .unwrap();
        let header = jsonwebtoken::decode_header(&proof).unwrap();
        assert_eq!(header.typ.as_deref(), Some("dpop+jwt"));
        let jwk = header.jwk.unwrap();
        let decoding = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
        let mut validation = jsonwebtoken::Validation::new(Algorithm::ES256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        let claims =
            jsonwebtoken::decode::<serde_json::Value>(&proof, &decoding, &validation).unwrap();
        assert_eq!(claims.claims["htu"], "https://rs.example/mcp");
        assert_eq!(claims.claims["htm"], "POST");
        assert_eq!(claims.claims["nonce"], "n1");
        assert_eq!(
            claims.claims["ath"],
            URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(b"tok"))
        );
        let again = key
            .proof("POST", "https://rs.example/mcp", None, None)
            .unwrap();
        assert_ne!(proof, again, "every proof has its own jti");
    }
}
