//! One binding's OAuth tokens (its `auth`): where they come from, how they are cached and
//! refreshed, and what a refused request means.
//!
//! - Before a request: the cached token, refreshed when it is about to expire — one refresh per
//!   grant across every process on the state's store (`oauth/shared.rs`: claimed in the store
//!   before the token request; in this process the key's lock is held while it runs, and
//!   concurrent requests wait and use its result). With nothing cached and nothing known about
//!   the server, the request goes without a token: its `401` says where tokens come from.
//! - After a `401` (or a `403 insufficient_scope`): the challenge is read, the metadata found
//!   again (the authorization server may have changed), a new token obtained, and the request
//!   may be sent once more ([`Retry`]). The caller allows that once per request, so nothing
//!   loops; a step-up that asks for nothing new fails at once.
//! - Keys: a grant (the server and the client and flow of its `auth`), per tenant for
//!   user-delegated tokens (`authorization_code`).
//!
//! This file holds the client, its cache of keys and what a request and a refusal do with them;
//! `oauth/tokens.rs` one key's tokens, `oauth/obtain.rs` how a key gets new ones,
//! `oauth/shared.rs` how they are shared through the store.

mod obtain;
mod shared;
mod tokens;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use brain_config::{Auth, Grant};
use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use jsonwebtoken::EncodingKey;

use self::tokens::{Slot, Tokens, defer_refresh, words};
use super::code::UserAgent;
use super::dpop::{DpopKey, Nonces};
use super::grant::Client;
use super::grants::{Expected, GrantState, GrantWrite, TokenStore};
use super::metadata::{self, Resource, ServerMetadata, merged_challenge};
use super::secret::{Secret, sensitive};
use crate::http::HttpClient;
use crate::subject::SubjectToken;

/// For whom a token is obtained: the calling tenant, and — for a binding on behalf of users
/// (`token_exchange`) — the caller's own token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Party<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) subject: Option<&'a SubjectToken>,
}

impl<'a> Party<'a> {
    /// `tenant`, with no token of a caller's own.
    pub(crate) fn tenant(tenant: &'a str) -> Party<'a> {
        Party {
            tenant,
            subject: None,
        }
    }
}

/// What the caller may do after a refused request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// A new token was obtained after a `401`: send the request again, once.
    Reauthorized,
    /// A token with more scopes was obtained after a `403 insufficient_scope`: send the request
    /// again, once.
    SteppedUp,
    /// The server asked for a DPoP nonce, now recorded: send the request again, once.
    Nonce,
    /// Nothing to do: the refusal stands.
    No,
}

/// The server's resource and authorization server, as last discovered.
#[derive(Debug)]
struct Discovered {
    resource: Resource,
    metadata: ServerMetadata,
}

/// The secrets an `auth` names, read when the runtime starts.
#[derive(Debug, Default)]
struct Secrets {
    client_secret: Option<Secret>,
    assertion: Option<Secret>,
    id_token: Option<Secret>,
}

/// One binding's OAuth client.
pub(crate) struct OAuth {
    config: Auth,
    binding: String,
    server_url: String,
    http: HttpClient,
    secrets: Secrets,
    /// The key of `private_key_jwt`.
    key: Option<EncodingKey>,
    dpop: Option<Arc<DpopKey>>,
    nonces: Nonces,
    /// Where the grants live, shared with every process on the same store.
    store: Arc<dyn TokenStore>,
    /// This client in the store's refresh claims: `host:pid:random`.
    owner: String,
    /// Seals the tokens the store keeps.
    sealer: super::seal::Sealer,
    agent: Option<Arc<dyn UserAgent>>,
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
    /// Clients registered dynamically, by issuer (never shown to another issuer).
    clients: tokio::sync::Mutex<HashMap<String, Client>>,
    slots: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("binding", &self.binding)
            .field("grant", &self.config.grant)
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// The OAuth client of the binding `name` at `url`, with its `auth`. Secrets are read through
    /// `env`; a missing one is an error naming the variable (never a value).
    pub(crate) fn new(
        name: &str,
        url: &str,
        config: Auth,
        http: HttpClient,
        env: &dyn Fn(&str) -> Option<String>,
        store: Arc<dyn TokenStore>,
        agent: Option<Arc<dyn UserAgent>>,
    ) -> Result<OAuth, String> {
        let binding = Named { name };
        let missing: Vec<String> = config
            .env_vars()
            .into_iter()
            .filter(|(_, var)| env(var).is_none())
            .map(|(field, var)| format!("{var} (auth.{field} of {})", binding.name))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "environment variables not set: {}",
                missing.join("; ")
            ));
        }
        let key = match &config.private_key_env {
            Some(var) => Some(private_key(&env(var).unwrap_or_default()).map_err(|why| {
                format!("{var} (auth.private_key_env of {}) {why}", binding.name)
            })?),
            None => None,
        };
        let sealer = super::seal::Sealer::from_env(env)?;
        if store.shared() && !sealer.has_key() {
            return Err(format!(
                "{} is set to keep OAuth tokens in {}, which other hosts read, and {} is not set: \
                 tokens are stored there only encrypted. Set {} to 32 random bytes in base64 \
                 (`openssl rand -base64 32`), the same on every host",
                binding.name,
                store.describe(),
                super::seal::STATE_KEY_ENV,
                super::seal::STATE_KEY_ENV
            ));
        }
        let dpop = if config.uses_dpop() {
            Some(Arc::new(DpopKey::generate()?))
        } else {
            None
        };
        Ok(OAuth {
            secrets: Secrets {
                client_secret: config
                    .client_secret_env
                    .as_deref()
                    .and_then(env)
                    .map(Secret::new),
                assertion: config
                    .assertion_env
                    .as_deref()
                    .and_then(env)
                    .map(Secret::new),
                id_token: config
                    .id_token_env
                    .as_deref()
                    .and_then(env)
                    .map(Secret::new),
            },
            config,
            binding: binding.name.to_owned(),
            server_url: url.to_owned(),
            http,
            key,
            dpop,
            nonces: Nonces::default(),
            store,
            owner: crate::state::process_name(),
            sealer,
            agent,
            discovered: tokio::sync::Mutex::new(None),
            clients: tokio::sync::Mutex::new(HashMap::new()),
            slots: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The key and nonces new token requests use.
    fn dpop_pair(&self) -> Option<(&DpopKey, &Nonces)> {
        self.dpop.as_deref().map(|key| (key, &self.nonces))
    }

    fn user_delegated(&self) -> bool {
        self.config.grant == Grant::AuthorizationCode
    }

    /// Whether tokens are kept per tenant: a user's login, or a token exchanged for a user.
    fn per_tenant(&self) -> bool {
        self.user_delegated() || self.config.on_behalf_of_users()
    }

    /// The cached tokens of `party`: one slot for the binding, per tenant for a user's login,
    /// per tenant and subject on behalf of users.
    fn slot(&self, party: Party<'_>) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut key = String::new();
        if self.per_tenant() {
            key.push_str(party.tenant);
        }
        if self.config.on_behalf_of_users() {
            key.push('\0');
            key.push_str(party.subject.map_or("", SubjectToken::subject));
        }
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(key).or_default().clone()
    }

    /// Adds the token (and DPoP proof) for a request of `tenant`: `method` to `url`. Returns the
    /// token's generation, for [`OAuth::challenged`].
    pub(crate) async fn authorize(
        &self,
        party: Party<'_>,
        method: &Method,
        url: &str,
        headers: &mut HeaderMap,
    ) -> Result<i64, String> {
        let slot = self.slot(party);
        let mut slot = slot.lock().await;
        if slot.tokens.as_ref().is_none_or(Tokens::due) {
            // What another process wrote meanwhile (a login, a refresh).
            if let Err(error) = self.sync(&mut slot, party).await {
                // Nothing to go on; else an expired token goes on to its refresh, which decides
                // (a rotating grant is not refreshed blind).
                if slot.tokens.is_none() {
                    return Err(error);
                }
                tracing::debug!(binding = %self.binding, %error, "the token store cannot be read");
            }
            if self.user_delegated() {
                self.usable(&slot, party)?;
            }
        }
        if slot.tokens.as_ref().is_none_or(Tokens::due) {
            let discovered = self.discovered.lock().await.clone();
            // Stored tokens carry what refreshing them needs; else the server's challenge will
            // say where tokens come from.
            let known =
                discovered.is_some() || slot.tokens.as_ref().is_some_and(|t| t.refresh.is_some());
            // In the early-refresh window the token still works: one process refreshes, the
            // others use it and do not wait.
            let early = slot.tokens.as_ref().is_some_and(|t| !t.expired());
            if known
                && let Err(error) = self
                    .renew(&mut slot, party, discovered.as_deref(), false, !early)
                    .await
            {
                if slot.tokens.as_ref().is_none_or(Tokens::expired) {
                    return Err(error);
                }
                tracing::debug!(binding = %self.binding, %error, "early refresh not done");
                defer_refresh(&mut slot);
            }
        }
        if let Some(tokens) = &slot.tokens {
            self.set_headers(tokens, method, url, headers)?;
        }
        Ok(slot.generation)
    }

    fn set_headers(
        &self,
        tokens: &Tokens,
        method: &Method,
        url: &str,
        headers: &mut HeaderMap,
    ) -> Result<(), String> {
        let token = tokens.access.expose();
        let value = match &tokens.dpop {
            Some(key) => {
                let proof = key.proof(
                    method.as_str(),
                    url,
                    self.nonces.get(url).as_deref(),
                    Some(token),
                )?;
                headers.insert(
                    "dpop",
                    HeaderValue::from_str(&proof).map_err(|e| e.to_string())?,
                );
                format!("DPoP {token}")
            }
            None => format!("Bearer {token}"),
        };
        let value = sensitive(&value).ok_or("the access token cannot be sent in a header")?;
        headers.insert(AUTHORIZATION, value);
        Ok(())
    }

    /// Records what a response from the server says for later requests (a DPoP nonce).
    pub(crate) fn observe(&self, url: &str, headers: &HeaderMap) {
        if self.config.uses_dpop() {
            self.nonces.observe(url, headers);
        }
    }

    /// The server refused a request made with generation `generation`'s token (`401`, or `403`
    /// with `insufficient_scope`): decides whether it may be sent once more, after obtaining a
    /// new token or recording a nonce — unless the request already had that kind of retry
    /// (`spent`). An error is why no token could be obtained.
    pub(crate) async fn challenged(
        &self,
        party: Party<'_>,
        status: StatusCode,
        headers: &HeaderMap,
        generation: i64,
        spent: &[Retry],
    ) -> Result<Retry, String> {
        let challenge = merged_challenge(headers);
        let retry = match (status, challenge.error.as_deref()) {
            (_, Some("use_dpop_nonce"))
                if self.dpop.is_some() && headers.contains_key("dpop-nonce") =>
            {
                Retry::Nonce
            }
            (_, Some("use_dpop_nonce")) => Retry::No,
            (StatusCode::FORBIDDEN, Some("insufficient_scope")) => Retry::SteppedUp,
            (StatusCode::UNAUTHORIZED, _) => Retry::Reauthorized,
            _ => Retry::No,
        };
        // Each kind of refusal is answered once per request: nothing loops.
        if retry == Retry::No || spent.contains(&retry) {
            return Ok(Retry::No);
        }
        if retry == Retry::Nonce {
            return Ok(retry);
        }
        let step_up = retry == Retry::SteppedUp;
        let slot = self.slot(party);
        let mut slot = slot.lock().await;
        // Another process may have replaced the refused token already.
        if let Err(error) = self.sync(&mut slot, party).await {
            tracing::debug!(binding = %self.binding, %error, "the token store cannot be read");
        }
        if step_up {
            if slot.generation != generation && slot.tokens.is_some() {
                // Another request already stepped up: try its token.
                return Ok(retry);
            }
            let wanted: BTreeSet<String> = words(challenge.scope.as_deref());
            let mut all = slot.requested.clone();
            all.extend(wanted.iter().cloned());
            if all == slot.requested {
                return Err(format!(
                    "the server refused the token for lack of scope {:?}, which brain already \
                     requested; brain does not ask again",
                    challenge.scope.unwrap_or_default()
                ));
            }
            slot.stepped_up.extend(wanted);
        } else {
            if slot.generation != generation && slot.tokens.is_some() {
                // Another request already replaced the refused token.
                return Ok(Retry::Reauthorized);
            }
            slot.challenge_scope = challenge.scope.clone();
            if let Some(tokens) = &mut slot.tokens {
                // Refused: never send it again (its refresh token may still work).
                tokens.refresh_at = Some(SystemTime::UNIX_EPOCH);
                tokens.expires_at = Some(SystemTime::UNIX_EPOCH);
            }
        }
        let discovered = self
            .discover(challenge.resource_metadata.as_deref())
            .await?;
        self.renew(&mut slot, party, Some(&discovered), step_up, true)
            .await?;
        Ok(retry)
    }

    /// Finds the server's resource metadata and authorization server (again), and remembers them.
    async fn discover(&self, resource_metadata: Option<&str>) -> Result<Arc<Discovered>, String> {
        let resource =
            metadata::protected_resource(&self.http, &self.server_url, resource_metadata).await?;
        let metadata = metadata::authorization_server(
            &self.http,
            &resource.authorization_server,
            resource.legacy,
        )
        .await?;
        tracing::debug!(binding = %self.binding, issuer = %metadata.issuer, resource = %resource.resource, "authorization server found");
        let discovered = Arc::new(Discovered { resource, metadata });
        *self.discovered.lock().await = Some(discovered.clone());
        Ok(discovered)
    }

    /// `brain-harness login`: asks the server for its challenge, finds its authorization
    /// server, runs the authorization code flow and stores the tokens.
    pub(crate) async fn login(&self, tenant: &str) -> Result<String, String> {
        let party = Party::tenant(tenant);
        if !self.user_delegated() {
            return Err(format!(
                "{} gets its tokens with the {} grant, without a user: there is nothing to log in to",
                self.binding,
                self.config.grant.as_str()
            ));
        }
        let probe = crate::mcp::initialize(crate::revision::SESSIONS[0], &tracing::Span::none());
        let request = http::Request::post(&self.server_url)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(crate::http::Body::from(bytes::Bytes::from(
                probe.to_string(),
            )))
            .map_err(|error| error.to_string())?;
        let response = tokio::time::timeout(Duration::from_secs(30), self.http.request(request))
            .await
            .map_err(|_| format!("{} did not answer within 30 s", self.server_url))?
            .map_err(|error| {
                format!(
                    "could not connect to {}: {}",
                    self.server_url,
                    crate::http::error_chain(&error)
                )
            })?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Err(format!(
                "{} answered HTTP {} without asking for authorization: nothing to log in to",
                self.server_url,
                response.status()
            ));
        }
        let challenge = merged_challenge(response.headers());
        drop(response);
        let discovered = self
            .discover(challenge.resource_metadata.as_deref())
            .await?;
        let slot = self.slot(party);
        let mut slot = slot.lock().await;
        slot.tokens = None;
        slot.challenge_scope = challenge.scope;
        self.store_login(&mut slot, party, &discovered).await?;
        let tokens = slot.tokens.as_ref().ok_or("no token was issued")?;
        let expires = match tokens
            .expires_at
            .and_then(|at| at.duration_since(SystemTime::now()).ok())
        {
            Some(left) => format!("expires in {} s", left.as_secs()),
            None => "no expiry given".to_owned(),
        };
        Ok(format!(
            "stored tokens for tenant {tenant} at {} from {} (scopes: {}; {expires}; {})",
            self.server_url,
            tokens.issuer,
            if tokens.scopes.is_empty() {
                "none".to_owned()
            } else {
                tokens.scopes.join(" ")
            },
            if tokens.refresh.is_some() {
                "refreshable"
            } else {
                "no refresh token: log in again when it expires"
            },
        ))
    }

    /// `brain-harness logout`: the grant becomes a tombstone (a refresher finishing later
    /// cannot bring it back). Whether it held tokens.
    pub(crate) async fn logout(&self, tenant: &str) -> Result<bool, String> {
        let party = Party::tenant(tenant);
        let key = self.grant_key(party);
        let held = self
            .store
            .load(&key)
            .await
            .map_err(|e| self.store_failed(&e))?
            .is_some_and(|row| row.written.sealed.is_some());
        let tombstone = GrantWrite {
            state: GrantState::LoggedOut,
            binding: self.binding.clone(),
            resource: self.server_url.clone(),
            scopes: Vec::new(),
            expires_at: None,
            rotates: None,
            sealed: None,
        };
        self.store
            .write(&key, &Expected::Any, &tombstone)
            .await
            .map_err(|e| self.store_failed(&e))?;
        let slot = self.slot(party);
        *slot.lock().await = Slot::default();
        Ok(held)
    }
}

/// A binding's name, for messages.
struct Named<'a> {
    name: &'a str,
}

/// An ES256 signing key from PEM: PKCS#8 (`PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`).
fn private_key(pem: &str) -> Result<EncodingKey, String> {
    use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey};
    let secret = p256::SecretKey::from_pkcs8_pem(pem)
        .or_else(|_| p256::SecretKey::from_sec1_pem(pem))
        .map_err(|_| "is not a PEM-encoded P-256 private key (PKCS#8 or SEC1)".to_owned())?;
    let der = secret
        .to_pkcs8_der()
        .map_err(|_| "holds a key that cannot be encoded".to_owned())?;
    Ok(EncodingKey::from_ec_der(der.as_bytes()))
}
