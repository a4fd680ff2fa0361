//! The cache of one key: its [`Tokens`] (with what refreshing them needs, and how they are
//! stored between runs) and the [`Slot`] that holds them with the scopes asked for so far.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::auth::dpop::DpopKey;
use crate::auth::grant::{Client, ClientAuth, Issued};
use crate::auth::grants::GrantState;
use crate::auth::secret::Secret;
use crate::auth::store::StoredTokens;

/// A token is refreshed this long before it expires, at most (and at most a third of its
/// lifetime before).
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// A stored token whose refresh time was not stored (an earlier brain's) is refreshed this long
/// before it expires.
const STORED_REFRESH_MARGIN: Duration = Duration::from_secs(30);
/// The longest lifetime brain believes a server gives a token.
const MAX_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
impl Default for Slot {
    fn default() -> Self {
        Slot {
            tokens: None,
            generation: 0,
            state: GrantState::Valid,
            rotates: None,
            challenge_scope: None,
            stepped_up: BTreeSet::new(),
            requested: BTreeSet::new(),
        }
    }
}

/// After a failed early refresh, the next try waits this long (or until the token expires).
const RETRY_REFRESH_AFTER: Duration = Duration::from_secs(30);

/// A token and what refreshing it needs.
#[derive(Debug, Clone)]
pub(super) struct Tokens {
    pub(super) access: Secret,
    /// The key a DPoP-bound token is bound to.
    pub(super) dpop: Option<Arc<DpopKey>>,
    pub(super) refresh: Option<Secret>,
    pub(super) expires_at: Option<SystemTime>,
    pub(super) refresh_at: Option<SystemTime>,
    pub(super) issuer: String,
    pub(super) token_endpoint: String,
    pub(super) resource: String,
    pub(super) client: Client,
    pub(super) scopes: Vec<String>,
}

impl Tokens {
    pub(super) fn new(
        issued: Issued,
        (issuer, token_endpoint): (&str, &str),
        resource: &str,
        client: Client,
        scopes: Vec<String>,
        previous_refresh: Option<Secret>,
        key: Option<&Arc<DpopKey>>,
    ) -> Tokens {
        let now = SystemTime::now();
        let (expires_at, refresh_at) = match issued.expires_in {
            Some(seconds) => {
                // A server's number, capped: a year is longer than any token lives.
                let lifetime = Duration::from_secs(seconds.min(MAX_LIFETIME.as_secs()));
                let margin = REFRESH_MARGIN.min(lifetime / 3);
                (Some(now + lifetime), Some(now + lifetime - margin))
            }
            None => (None, None),
        };
        Tokens {
            access: issued.access_token,
            dpop: key
                .filter(|_| issued.token_type.eq_ignore_ascii_case("dpop"))
                .cloned(),
            // A server that does not rotate refresh tokens sends none with a refresh.
            refresh: issued.refresh_token.or(previous_refresh),
            expires_at,
            refresh_at,
            issuer: issuer.to_owned(),
            token_endpoint: token_endpoint.to_owned(),
            resource: resource.to_owned(),
            client,
            scopes,
        }
    }

    /// Due for a refresh (or a new grant).
    pub(super) fn due(&self) -> bool {
        self.refresh_at.is_some_and(|at| SystemTime::now() >= at)
    }

    pub(super) fn expired(&self) -> bool {
        self.expires_at.is_some_and(|at| SystemTime::now() >= at)
    }

    pub(super) fn stored(&self) -> Result<StoredTokens, String> {
        let unix = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .ok()
        };
        Ok(StoredTokens {
            issuer: self.issuer.clone(),
            token_endpoint: self.token_endpoint.clone(),
            resource: self.resource.clone(),
            client_id: self.client.id.clone(),
            client_secret: self.client.secret.as_ref().map(|s| s.expose().to_owned()),
            client_auth: self.client.auth.name().to_owned(),
            access_token: self.access.expose().to_owned(),
            token_type: if self.dpop.is_some() {
                "DPoP"
            } else {
                "Bearer"
            }
            .to_owned(),
            refresh_token: self.refresh.as_ref().map(|s| s.expose().to_owned()),
            expires_at: self.expires_at.and_then(unix),
            refresh_at: self.refresh_at.and_then(unix),
            scopes: self.scopes.clone(),
            dpop_key: self.dpop.as_ref().map(|key| key.to_pem()).transpose()?,
        })
    }

    pub(super) fn from_stored(stored: StoredTokens) -> Result<Tokens, String> {
        let at = |secs: u64| {
            SystemTime::UNIX_EPOCH
                .checked_add(Duration::from_secs(secs))
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        let dpop = match (
            &stored.dpop_key,
            stored.token_type.eq_ignore_ascii_case("dpop"),
        ) {
            (Some(pem), true) => Some(Arc::new(DpopKey::from_pem(pem)?)),
            (None, true) => return Err("a stored DPoP-bound token has no key".into()),
            _ => None,
        };
        Ok(Tokens {
            access: Secret::new(stored.access_token),
            dpop,
            refresh: stored.refresh_token.map(Secret::new),
            expires_at: stored.expires_at.map(at),
            refresh_at: match (stored.refresh_at, stored.expires_at) {
                (Some(secs), _) => Some(at(secs)),
                (None, expires) => expires.map(|secs| {
                    at(secs)
                        .checked_sub(STORED_REFRESH_MARGIN)
                        .unwrap_or(SystemTime::UNIX_EPOCH)
                }),
            },
            issuer: stored.issuer,
            token_endpoint: stored.token_endpoint,
            resource: stored.resource,
            client: Client {
                id: stored.client_id,
                secret: stored.client_secret.map(Secret::new),
                auth: ClientAuth::from_name(&stored.client_auth).unwrap_or(ClientAuth::None),
            },
            scopes: stored.scopes,
        })
    }
}

/// One key's tokens, as this process last read or wrote them in the store.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) tokens: Option<Tokens>,
    /// The grant's generation in the store when these tokens were read or written: a refusal
    /// of an older one is already handled.
    pub(super) generation: i64,
    /// Where the grant stands in the store.
    pub(super) state: GrantState,
    /// Whether the grant's refresh tokens rotate (`None`: not known, treated as rotating).
    pub(super) rotates: Option<bool>,
    /// The scope of the server's last `401` challenge.
    pub(super) challenge_scope: Option<String>,
    /// Scopes added by step-up (`403 insufficient_scope`).
    pub(super) stepped_up: BTreeSet<String>,
    /// The scopes last requested.
    pub(super) requested: BTreeSet<String>,
}

/// After a failed early refresh of a token that still works: the next try waits a little (or
/// until the token expires), so that calls are not held up by a refresh on every request.
pub(super) fn defer_refresh(slot: &mut Slot) {
    if let Some(tokens) = &mut slot.tokens {
        let later = SystemTime::now() + RETRY_REFRESH_AFTER;
        tokens.refresh_at = Some(tokens.expires_at.map_or(later, |at| at.min(later)));
    }
}

/// The words of a space-separated scope string.
pub(super) fn words(scope: Option<&str>) -> BTreeSet<String> {
    scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}
