//! One binding's OAuth tokens (its `auth`): where they come from, how they are cached and
//! refreshed, and what a refused request means.
//!
//! - Before a request: the cached token, refreshed when it is about to expire — one refresh in
//!   flight per key (the key's lock is held while it runs; concurrent requests wait and use its
//!   result). With nothing cached and nothing known about the server, the request goes without a
//!   token: its `401` says where tokens come from.
//! - After a `401` (or a `403 insufficient_scope`): the challenge is read, the metadata found
//!   again (the authorization server may have changed), a new token obtained, and the request
//!   may be sent once more ([`Retry`]). The caller allows that once per request, so nothing
//!   loops; a step-up that asks for nothing new fails at once.
//! - Keys: user-delegated tokens (`authorization_code`) per tenant, others per binding.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use brain_config::{Auth, Grant};
use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use jsonwebtoken::EncodingKey;

use super::code::{CodeFlow, UserAgent};
use super::dpop::{DpopKey, Nonces};
use super::grant::{self, Authn, Client, ClientAuth, Issued};
use super::metadata::{self, Resource, ServerMetadata};
use super::store::{StoreKey, StoredTokens, TokenStore};
use super::{Secret, sensitive};
use crate::http::HttpClient;

/// A token is refreshed this long before it expires, at most (and at most a third of its
/// lifetime before).
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// A stored token (whose lifetime is not known any more) is refreshed this long before it
/// expires.
const STORED_REFRESH_MARGIN: Duration = Duration::from_secs(30);
/// The longest lifetime brain believes a server gives a token.
const MAX_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// After a failed early refresh, the next try waits this long (or until the token expires).
const RETRY_REFRESH_AFTER: Duration = Duration::from_secs(30);

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

/// A token and what refreshing it needs.
#[derive(Debug, Clone)]
struct Tokens {
    access: Secret,
    /// The key a DPoP-bound token is bound to.
    dpop: Option<Arc<DpopKey>>,
    refresh: Option<Secret>,
    expires_at: Option<SystemTime>,
    refresh_at: Option<SystemTime>,
    issuer: String,
    token_endpoint: String,
    resource: String,
    client: Client,
    scopes: Vec<String>,
}

impl Tokens {
    fn new(
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
    fn due(&self) -> bool {
        self.refresh_at.is_some_and(|at| SystemTime::now() >= at)
    }

    fn expired(&self) -> bool {
        self.expires_at.is_some_and(|at| SystemTime::now() >= at)
    }

    fn stored(&self) -> Result<StoredTokens, String> {
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
            scopes: self.scopes.clone(),
            dpop_key: self.dpop.as_ref().map(|key| key.to_pem()).transpose()?,
        })
    }

    fn from_stored(stored: StoredTokens) -> Result<Tokens, String> {
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
            refresh_at: stored.expires_at.map(|secs| {
                at(secs)
                    .checked_sub(STORED_REFRESH_MARGIN)
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            }),
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

/// One key's tokens.
#[derive(Debug, Default)]
struct Slot {
    tokens: Option<Tokens>,
    /// Bumped at every new token: a refusal of an older one is already handled.
    generation: u64,
    /// The store was read (user-delegated tokens).
    loaded: bool,
    /// The scope of the server's last `401` challenge.
    challenge_scope: Option<String>,
    /// Scopes added by step-up (`403 insufficient_scope`).
    stepped_up: BTreeSet<String>,
    /// The scopes last requested.
    requested: BTreeSet<String>,
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
    pub(super) http: HttpClient,
    secrets: Secrets,
    /// The key of `private_key_jwt`.
    key: Option<EncodingKey>,
    dpop: Option<Arc<DpopKey>>,
    nonces: Nonces,
    store: Option<Arc<dyn TokenStore>>,
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
        store: Option<Arc<dyn TokenStore>>,
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
            agent,
            discovered: tokio::sync::Mutex::new(None),
            clients: tokio::sync::Mutex::new(HashMap::new()),
            slots: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The key and nonces new token requests use.
    pub(super) fn dpop_pair(&self) -> Option<(&DpopKey, &Nonces)> {
        self.dpop.as_deref().map(|key| (key, &self.nonces))
    }

    fn user_delegated(&self) -> bool {
        self.config.grant == Grant::AuthorizationCode
    }

    fn slot(&self, tenant: &str) -> Arc<tokio::sync::Mutex<Slot>> {
        let key = if self.user_delegated() { tenant } else { "" };
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(key.to_owned()).or_default().clone()
    }

    fn store_key(&self, tenant: &str) -> StoreKey {
        StoreKey {
            resource: self.server_url.clone(),
            tenant: tenant.to_owned(),
        }
    }

    /// Adds the token (and DPoP proof) for a request of `tenant`: `method` to `url`. Returns the
    /// token's generation, for [`OAuth::challenged`].
    pub(crate) async fn authorize(
        &self,
        tenant: &str,
        method: &Method,
        url: &str,
        headers: &mut HeaderMap,
    ) -> Result<u64, String> {
        let slot = self.slot(tenant);
        let mut slot = slot.lock().await;
        if !slot.loaded {
            if self.user_delegated()
                && let Some(store) = &self.store
                && let Some(stored) = store.load(&self.store_key(tenant))?
            {
                slot.requested = stored.scopes.iter().cloned().collect();
                slot.tokens = Some(Tokens::from_stored(stored)?);
                slot.generation += 1;
            }
            // Only once read: a store that failed is asked again by the next request.
            slot.loaded = true;
        }
        if slot.tokens.as_ref().is_none_or(Tokens::due) {
            let discovered = self.discovered.lock().await.clone();
            match discovered {
                Some(discovered) => {
                    if let Err(error) = self.obtain(&mut slot, tenant, &discovered, false).await {
                        // A token that is due but not expired still works.
                        if slot.tokens.as_ref().is_none_or(Tokens::expired) {
                            return Err(error);
                        }
                        tracing::debug!(binding = %self.binding, %error, "early refresh failed");
                        defer_refresh(&mut slot);
                    }
                }
                None if slot.tokens.as_ref().is_some_and(|t| t.refresh.is_some()) => {
                    // Stored tokens carry what refreshing them needs.
                    if let Err(error) = self.refresh(&mut slot, tenant).await {
                        if slot.tokens.as_ref().is_none_or(Tokens::expired) {
                            return Err(error);
                        }
                        defer_refresh(&mut slot);
                    }
                }
                // Nothing known yet: the server's challenge will say where tokens come from.
                None => {}
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
        tenant: &str,
        status: StatusCode,
        headers: &HeaderMap,
        generation: u64,
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
        let slot = self.slot(tenant);
        let mut slot = slot.lock().await;
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
        self.obtain(&mut slot, tenant, &discovered, step_up).await?;
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

    /// The scopes to request: those requested before (SEP-2350: a new authorization keeps
    /// them), the challenge's, the config's and those stepped up to; else the resource's
    /// `scopes_supported`; plus `offline_access` for a user when the server offers it (so that a
    /// refresh token is issued).
    fn scopes(&self, slot: &Slot, discovered: &Discovered) -> BTreeSet<String> {
        let mut scopes: BTreeSet<String> = words(slot.challenge_scope.as_deref());
        scopes.extend(slot.requested.iter().cloned());
        scopes.extend(self.config.scopes.iter().flatten().cloned());
        scopes.extend(slot.stepped_up.iter().cloned());
        if scopes.is_empty() {
            scopes.extend(discovered.resource.scopes_supported.iter().cloned());
        }
        if self.user_delegated()
            && discovered
                .metadata
                .scopes_supported
                .iter()
                .any(|s| s == "offline_access")
        {
            scopes.insert("offline_access".into());
        }
        scopes
    }

    /// Obtains a token for `slot`: a refresh when the cached token has a refresh token from the
    /// same issuer (not for a step-up, which needs a new grant), else the binding's grant.
    async fn obtain(
        &self,
        slot: &mut Slot,
        tenant: &str,
        discovered: &Discovered,
        step_up: bool,
    ) -> Result<(), String> {
        let same_issuer = slot
            .tokens
            .as_ref()
            .is_some_and(|t| t.refresh.is_some() && t.issuer == discovered.metadata.issuer);
        if same_issuer && !step_up {
            match self.refresh(slot, tenant).await {
                Ok(()) => return Ok(()),
                Err(error) => {
                    tracing::debug!(binding = %self.binding, %error, "refresh failed; a new grant follows")
                }
            }
        }
        let scopes = self.scopes(slot, discovered);
        let scope =
            (!scopes.is_empty()).then(|| scopes.iter().cloned().collect::<Vec<_>>().join(" "));
        let metadata = &discovered.metadata;
        let resource = discovered.resource.resource.as_str();
        let (issued, client) = match self.config.grant {
            // The grants without a user: the client's credentials, or an assertion (the
            // workload's JWT, or the ID-JAG the IdP exchanged the user's ID token for).
            Grant::ClientCredentials | Grant::JwtBearer | Grant::EnterpriseManaged => {
                let assertion = match self.config.grant {
                    Grant::JwtBearer => self.secrets.assertion.clone(),
                    Grant::EnterpriseManaged => Some(
                        self.exchange_id_token(metadata, resource, scope.as_deref())
                            .await?,
                    ),
                    _ => None,
                };
                let grant_type = match assertion {
                    Some(_) => grant::GRANT_JWT_BEARER,
                    None => grant::GRANT_CLIENT_CREDENTIALS,
                };
                let mut form = vec![("grant_type", grant_type.to_owned())];
                form.extend(assertion.map(|a| ("assertion", a.expose().to_owned())));
                let form = scoped(form, scope.as_deref(), resource);
                let client = self.configured_client(metadata);
                (self.token(metadata, form, &client).await?, client)
            }
            Grant::AuthorizationCode => {
                let Some(agent) = &self.agent else {
                    return Err(format!(
                        "no user tokens for tenant {tenant:?} at {}: run `brain-harness login --tenant {tenant} {}` first",
                        self.server_url, self.binding
                    ));
                };
                let client = self
                    .user_client(metadata, agent.as_ref(), scope.as_deref())
                    .await?;
                let authn = Authn {
                    client: &client,
                    key: self.key.as_ref(),
                    issuer: &metadata.issuer,
                };
                let flow = CodeFlow {
                    metadata,
                    authn,
                    scope: scope.as_deref(),
                    resource,
                };
                (flow.run(self, agent.as_ref()).await?, client)
            }
        };
        let tokens = Tokens::new(
            issued,
            (&metadata.issuer, &metadata.token_endpoint),
            resource,
            client,
            scopes.iter().cloned().collect(),
            None,
            self.dpop.as_ref(),
        );
        slot.requested = scopes;
        self.install(slot, tenant, tokens)
    }

    /// Refreshes the slot's token with its refresh token (spent once: a rotated one replaces it).
    async fn refresh(&self, slot: &mut Slot, tenant: &str) -> Result<(), String> {
        let tokens = slot.tokens.as_ref().ok_or("no token to refresh")?;
        let refresh = tokens.refresh.clone().ok_or("no refresh token")?;
        let form = vec![
            ("grant_type", grant::GRANT_REFRESH_TOKEN.to_owned()),
            ("refresh_token", refresh.expose().to_owned()),
            ("resource", tokens.resource.clone()),
        ];
        // No `scope`: a refresh keeps the granted scope (RFC 6749 §6), and a server may not
        // count `offline_access` among a refresh token's scopes.
        let authn = Authn {
            client: &tokens.client,
            key: self.key.as_ref(),
            issuer: &tokens.issuer,
        };
        // A DPoP-bound refresh token is refreshed with the key it is bound to.
        let key = tokens.dpop.clone().or_else(|| self.dpop.clone());
        let dpop = key.as_deref().map(|key| (key, &self.nonces));
        let result =
            grant::token_request(&self.http, &tokens.token_endpoint, form, Some(&authn), dpop)
                .await;
        let issued = match result {
            Ok(issued) => issued,
            Err(refused) => {
                if refused.error.as_deref() == Some("invalid_grant") {
                    // Revoked or spent: never try it again.
                    if let Some(tokens) = &mut slot.tokens {
                        tokens.refresh = None;
                    }
                    if self.user_delegated() {
                        return Err(format!(
                            "{}; the stored authorization is no longer valid: run `brain-harness login --tenant {tenant} {}` again",
                            refused.message, self.binding
                        ));
                    }
                }
                return Err(refused.message);
            }
        };
        // The same grant, renewed: everything but the tokens stays.
        let tokens = slot.tokens.as_ref().ok_or("no token to refresh")?;
        let new = Tokens::new(
            issued,
            (&tokens.issuer, &tokens.token_endpoint),
            &tokens.resource,
            tokens.client.clone(),
            tokens.scopes.clone(),
            Some(refresh),
            key.as_ref(),
        );
        tracing::debug!(binding = %self.binding, "token refreshed");
        self.install(slot, tenant, new)
    }

    /// Makes `tokens` the slot's, then stores user-delegated ones: the slot first, so that a
    /// store that fails never makes brain use a refresh token the server already rotated out.
    fn install(&self, slot: &mut Slot, tenant: &str, tokens: Tokens) -> Result<(), String> {
        let stored = (self.user_delegated() && self.store.is_some())
            .then(|| tokens.stored())
            .transpose();
        slot.tokens = Some(tokens);
        slot.generation += 1;
        if let Some(store) = &self.store
            && let Some(stored) = stored?
            && let Err(error) = store.save(&self.store_key(tenant), &stored)
        {
            tracing::warn!(binding = %self.binding, %error, "the new tokens could not be stored");
        }
        Ok(())
    }

    /// A token request authenticated as `client`.
    async fn token(
        &self,
        metadata: &ServerMetadata,
        form: Vec<(&'static str, String)>,
        client: &Client,
    ) -> Result<Issued, String> {
        let authn = Authn {
            client,
            key: self.key.as_ref(),
            issuer: &metadata.issuer,
        };
        // A workload may present its assertion without a client id: no client authentication.
        let authn = (!client.id.is_empty()).then_some(&authn);
        grant::token_request(
            &self.http,
            &metadata.token_endpoint,
            form,
            authn,
            self.dpop_pair(),
        )
        .await
        .map_err(|refused| refused.message)
    }

    /// The client the config names, authenticated as the server's metadata allows.
    fn configured_client(&self, metadata: &ServerMetadata) -> Client {
        let auth = if self.key.is_some() {
            ClientAuth::PrivateKeyJwt
        } else if self.secrets.client_secret.is_some() {
            ClientAuth::for_secret(metadata.auth_methods.as_deref())
        } else {
            ClientAuth::None
        };
        Client {
            id: self.config.client_id.clone().unwrap_or_default(),
            secret: self.secrets.client_secret.clone(),
            auth,
        }
    }

    /// The client of a user-delegated flow: the configured one, else a client ID metadata
    /// document the server accepts, else one registered dynamically (once per issuer).
    async fn user_client(
        &self,
        metadata: &ServerMetadata,
        agent: &dyn UserAgent,
        scope: Option<&str>,
    ) -> Result<Client, String> {
        if self.config.client_id.is_some() {
            return Ok(self.configured_client(metadata));
        }
        if let Some(url) = &self.config.client_metadata_url
            && metadata.client_id_metadata_document_supported
        {
            return Ok(Client {
                id: url.clone(),
                secret: None,
                auth: ClientAuth::None,
            });
        }
        let mut clients = self.clients.lock().await;
        if let Some(client) = clients.get(&metadata.issuer) {
            return Ok(client.clone());
        }
        let endpoint = metadata.registration_endpoint.as_deref().ok_or_else(|| {
            format!(
                "the authorization server {} offers neither dynamic registration nor client ID \
                 metadata documents: set auth.client_id (and client_secret_env) of {} to a \
                 client registered there",
                metadata.issuer, self.binding
            )
        })?;
        let client = grant::register(
            &self.http,
            endpoint,
            &agent.redirect_uri(),
            metadata.auth_methods.as_deref(),
            scope,
        )
        .await?;
        clients.insert(metadata.issuer.clone(), client.clone());
        Ok(client)
    }

    /// Enterprise-managed authorization: the user's ID token exchanged at the IdP (RFC 8693) for
    /// an identity assertion grant (ID-JAG) for this authorization server and resource.
    async fn exchange_id_token(
        &self,
        metadata: &ServerMetadata,
        resource: &str,
        scope: Option<&str>,
    ) -> Result<Secret, String> {
        let endpoint = self
            .config
            .idp_token_endpoint
            .as_deref()
            .unwrap_or_default();
        let id_token = self
            .secrets
            .id_token
            .as_ref()
            .map(Secret::expose)
            .unwrap_or_default();
        let mut form = vec![
            ("grant_type", grant::GRANT_TOKEN_EXCHANGE.to_owned()),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:id-jag".to_owned(),
            ),
            ("subject_token", id_token.to_owned()),
            (
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:id_token".to_owned(),
            ),
            ("audience", metadata.issuer.clone()),
        ];
        form.extend(
            self.config
                .idp_client_id
                .clone()
                .map(|id| ("client_id", id)),
        );
        let form = scoped(form, scope, resource);
        let issued = grant::token_request(&self.http, endpoint, form, None, None)
            .await
            .map_err(|refused| {
                format!("the IdP refused the token exchange: {}", refused.message)
            })?;
        Ok(issued.access_token)
    }

    /// `brain-harness login`: asks the server for its challenge, finds its authorization
    /// server, runs the authorization code flow and stores the tokens.
    pub(crate) async fn login(&self, tenant: &str) -> Result<String, String> {
        if !self.user_delegated() {
            return Err(format!(
                "{} gets its tokens with the {} grant, without a user: there is nothing to log in to",
                self.binding,
                self.config.grant.as_str()
            ));
        }
        let probe =
            crate::revision::initialize(crate::revision::SESSIONS[0], &tracing::Span::none());
        let request = http::Request::post(&self.server_url)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(
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
        let slot = self.slot(tenant);
        let mut slot = slot.lock().await;
        slot.loaded = true;
        slot.tokens = None;
        slot.challenge_scope = challenge.scope;
        self.obtain(&mut slot, tenant, &discovered, true).await?;
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
}

/// After a failed early refresh of a token that still works: the next try waits a little (or
/// until the token expires), so that calls are not held up by a refresh on every request.
fn defer_refresh(slot: &mut Slot) {
    if let Some(tokens) = &mut slot.tokens {
        let later = SystemTime::now() + RETRY_REFRESH_AFTER;
        tokens.refresh_at = Some(tokens.expires_at.map_or(later, |at| at.min(later)));
    }
}

/// The challenge of a refusal: the Bearer or DPoP one, a DPoP nonce challenge first, with the
/// `scope` and `resource_metadata` any of them gave.
fn merged_challenge(headers: &HeaderMap) -> metadata::Challenge {
    let challenges: Vec<metadata::Challenge> = metadata::challenges(headers)
        .into_iter()
        .filter(|c| c.scheme == "dpop" || c.scheme == "bearer")
        .collect();
    let mut merged = challenges
        .iter()
        .find(|c| c.error.as_deref() == Some("use_dpop_nonce"))
        .or_else(|| challenges.first())
        .cloned()
        .unwrap_or_default();
    for other in &challenges {
        merged.scope = merged.scope.or_else(|| other.scope.clone());
        merged.resource_metadata = merged
            .resource_metadata
            .or_else(|| other.resource_metadata.clone());
    }
    merged
}

/// A token request's form with the `scope` (when there is one) and the RFC 8707 `resource`
/// after the grant's own parameters.
fn scoped(
    mut form: Vec<(&'static str, String)>,
    scope: Option<&str>,
    resource: &str,
) -> Vec<(&'static str, String)> {
    form.extend(scope.map(|s| ("scope", s.to_owned())));
    form.push(("resource", resource.to_owned()));
    form
}

/// A binding's name, for messages.
struct Named<'a> {
    name: &'a str,
}

/// The words of a space-separated scope string.
fn words(scope: Option<&str>) -> BTreeSet<String> {
    scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
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
