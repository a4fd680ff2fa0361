//! Tokens at rest: what a grant's row holds of its tokens (access and refresh tokens, a
//! registered client's secret, the DPoP key), sealed with AES-256-GCM (ring's, which rustls
//! already builds) under `BRAIN_STATE_KEY`. The associated data binds each ciphertext to its
//! grant, tenant and generation, so that a row copied to another tenant (or back to an older
//! generation) does not open. The key has an id, so that keys can be rotated: the first key of
//! `BRAIN_STATE_KEY` seals, every key listed opens (rows are sealed anew at their next write).
//!
//! Without a key, rows hold the tokens' JSON as it is — allowed only in a store no other host
//! reads (a SQLite file in the user's state directory, mode 0600; memory).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

/// The variable holding the keys: 32 random bytes each, standard base64, comma-separated
/// (`openssl rand -base64 32`).
pub const STATE_KEY_ENV: &str = "BRAIN_STATE_KEY";

const PREFIX: &str = "brain-aead-1";

/// The keys rows are sealed and opened with (none: rows are JSON as it is).
pub(crate) struct Sealer {
    keys: Vec<(String, LessSafeKey)>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("Sealer").field("key_ids", &ids).finish()
    }
}

impl Sealer {
    /// The keys of `BRAIN_STATE_KEY` (read through `env`); an error says what is wrong with
    /// the value without showing it.
    pub(crate) fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Sealer, String> {
        let Some(text) = env(STATE_KEY_ENV).filter(|t| !t.trim().is_empty()) else {
            return Ok(Sealer { keys: Vec::new() });
        };
        let mut keys = Vec::new();
        for (i, part) in text.split(',').map(str::trim).enumerate() {
            let bytes = STANDARD
                .decode(part)
                .map_err(|_| format!("{STATE_KEY_ENV}: key {} is not standard base64", i + 1))?;
            if bytes.len() != 32 {
                return Err(format!(
                    "{STATE_KEY_ENV}: key {} is {} bytes, not 32 (make one with `openssl rand -base64 32`)",
                    i + 1,
                    bytes.len()
                ));
            }
            let id = key_id(&bytes);
            let key = UnboundKey::new(&AES_256_GCM, &bytes)
                .map_err(|_| format!("{STATE_KEY_ENV}: key {} is unusable", i + 1))?;
            keys.push((id, LessSafeKey::new(key)));
        }
        Ok(Sealer { keys })
    }

    /// Whether rows are sealed.
    pub(crate) fn has_key(&self) -> bool {
        !self.keys.is_empty()
    }

    /// `plain` as the row keeps it, bound to `context` (the grant, tenant and generation).
    pub(crate) fn seal(&self, plain: &str, context: &str) -> Result<String, String> {
        let Some((id, key)) = self.keys.first() else {
            return Ok(plain.to_owned());
        };
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).map_err(|_| "no randomness for a nonce".to_owned())?;
        let mut sealed = plain.as_bytes().to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(context.as_bytes()),
            &mut sealed,
        )
        .map_err(|_| "the tokens could not be sealed".to_owned())?;
        let mut all = nonce.to_vec();
        all.extend(sealed);
        Ok(format!("{PREFIX}:{id}:{}", STANDARD.encode(all)))
    }

    /// What `sealed` holds, when it was sealed for `context` by one of the keys (or is JSON as
    /// it is). Errors name the key id, never a value.
    pub(crate) fn open(&self, sealed: &str, context: &str) -> Result<String, String> {
        let Some(rest) = sealed
            .strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(':'))
        else {
            // Stored before a key was set: read as it is, sealed at the next write.
            return Ok(sealed.to_owned());
        };
        let (id, data) = rest.split_once(':').ok_or("a sealed row is malformed")?;
        let key = self
            .keys
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, key)| key)
            .ok_or_else(|| {
                format!(
                    "the stored tokens are sealed with key {id}, which {STATE_KEY_ENV} does not \
                     hold{}",
                    if self.keys.is_empty() {
                        " (it is not set)"
                    } else {
                        ""
                    }
                )
            })?;
        let mut data = STANDARD
            .decode(data)
            .map_err(|_| "a sealed row is malformed".to_owned())?;
        if data.len() < 12 + 16 {
            return Err("a sealed row is malformed".into());
        }
        let nonce: [u8; 12] = data[..12].try_into().map_err(|_| "malformed")?;
        let opened = key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut data[12..],
            )
            .map_err(|_| {
                format!(
                    "the stored tokens do not open with key {id} for this grant (the row was \
                     changed or moved): log in again"
                )
            })?;
        String::from_utf8(opened.to_vec()).map_err(|_| "a sealed row is malformed".into())
    }
}

/// A key's id: the first 8 hex digits of its SHA-256.
fn key_id(key: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    crate::state::hex(&Sha256::digest(key)[..4])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(keys: &str) -> Sealer {
        let keys = keys.to_owned();
        Sealer::from_env(&move |var| (var == STATE_KEY_ENV).then(|| keys.clone())).unwrap()
    }

    const A: &str = "qDaj0LoVFJmvB1cR1iA3yx7n0T0nKcqNNs2kpoaSWd8=";
    const B: &str = "xHq0V4l1Y7bV9tH3nF1m0kQ3bS6rW8eU2yP5cJ7zL1o=";

    #[test]
    fn a_sealed_row_opens_only_for_its_grant_and_with_a_listed_key() {
        let a = sealer(A);
        let sealed = a
            .seal(r#"{"access_token":"secret-value"}"#, "g\0t\x001")
            .unwrap();
        assert!(sealed.starts_with("brain-aead-1:") && !sealed.contains("secret-value"));
        assert_eq!(
            a.open(&sealed, "g\0t\x001").unwrap(),
            r#"{"access_token":"secret-value"}"#
        );
        let moved = a.open(&sealed, "g\0other\x001").unwrap_err();
        assert!(moved.contains("moved"), "{moved}");
        let older = a.open(&sealed, "g\0t\x000").unwrap_err();
        assert!(older.contains("moved"), "{older}");
        // Rotation: B seals now, A still opens what it sealed.
        let rotated = sealer(&format!("{B},{A}"));
        assert!(rotated.open(&sealed, "g\0t\x001").is_ok());
        let by_b = rotated.seal("{}", "c").unwrap();
        let missing = a.open(&by_b, "c").unwrap_err();
        assert!(missing.contains("does not hold"), "{missing}");
        // Without a key: JSON as it is, and a sealed row says which key it needs.
        let none = sealer("");
        assert_eq!(none.seal("{}", "c").unwrap(), "{}");
        assert!(
            none.open(&sealed, "g\0t\x001")
                .unwrap_err()
                .contains("not set")
        );
        assert!(format!("{a:?}").contains("key_ids") && !format!("{a:?}").contains(A));
    }

    #[test]
    fn a_bad_key_is_refused_without_showing_it() {
        let short = "c2hvcnQ=";
        let error = Sealer::from_env(&|_| Some(short.to_owned())).unwrap_err();
        assert!(
            error.contains("5 bytes, not 32") && !error.contains(short),
            "{error}"
        );
        let error = Sealer::from_env(&|_| Some("not base64!".to_owned())).unwrap_err();
        assert!(error.contains("not standard base64"), "{error}");
    }
}
