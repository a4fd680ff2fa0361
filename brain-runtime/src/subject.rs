//! The caller's own token, for a binding that acts on behalf of users (`auth.type`
//! `token_exchange`): brain exchanges it (RFC 8693) for a token issued to brain for the
//! upstream, and never sends it there itself.

use std::sync::Arc;

/// A caller's own access token ([`CallRequest::with_subject_token`](crate::CallRequest::with_subject_token)).
///
/// It is kept out of Debug output, logs, events and errors. Issued tokens are cached per
/// subject: a token the host verified is keyed by its issuer and subject, so that the user's
/// next token (a new `jti`) finds the issued token still valid; a token brain cannot vouch for
/// is keyed by a digest of the token itself, so that a forged token never finds another user's
/// entry.
///
/// ```
/// use brain_runtime::SubjectToken;
///
/// let verified = SubjectToken::verified("eyJ...", "https://idp.example", "alice");
/// assert_eq!(verified.subject(), "https://idp.example|alice");
/// let unverified = SubjectToken::new("eyJ...");
/// assert!(unverified.subject().starts_with("sha256:"));
/// assert!(!format!("{unverified:?}").contains("eyJ"));
/// ```
#[derive(Clone)]
pub struct SubjectToken {
    token: Arc<str>,
    subject: Arc<str>,
}

impl SubjectToken {
    /// A token brain has not verified (`brain-harness call --subject-token-env`, a host that
    /// passes its user's token through): keyed by its SHA-256 digest.
    pub fn new(token: impl Into<String>) -> SubjectToken {
        use sha2::{Digest, Sha256};
        let token: String = token.into();
        let digest = Sha256::digest(token.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        SubjectToken {
            token: token.into(),
            subject: format!("sha256:{hex}").into(),
        }
    }

    /// A token the host verified (its signature, issuer, audience and expiry), of `subject` at
    /// `issuer`: keyed by `issuer|subject`.
    pub fn verified(token: impl Into<String>, issuer: &str, subject: &str) -> SubjectToken {
        let token: String = token.into();
        SubjectToken {
            token: token.into(),
            subject: format!("{issuer}|{subject}").into(),
        }
    }

    /// Whom the token stands for, as brain keys and records it: `issuer|subject` for a verified
    /// token, `sha256:<hex>` of the token otherwise. Never the token.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The token, for the one token request it goes into.
    pub(crate) fn expose(&self) -> &str {
        &self.token
    }
}

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubjectToken")
            .field("subject", &self.subject)
            .field("token", &"<redacted>")
            .finish()
    }
}
