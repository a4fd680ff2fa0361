//! How a key gets a token: a refresh when it can, else the binding's grant — client
//! credentials, a JWT bearer assertion, enterprise-managed authorization (an ID token exchanged
//! at the IdP) or the authorization code flow — with the client each one authenticates as; and
//! how a new token replaces the old one (and is stored).

use std::collections::BTreeSet;

use brain_config::Grant;

use super::shared::{Obtained, Outcome, Refused};
use super::tokens::{Slot, Tokens, words};
use super::{Discovered, OAuth, Party};
use crate::auth::code::{CodeFlow, UserAgent};
use crate::auth::grant::{self, Authn, Client, ClientAuth, Issued};
use crate::auth::metadata::ServerMetadata;
use crate::auth::secret::Secret;

impl OAuth {
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

    /// Obtains new tokens for `slot` (nothing is installed or stored: the caller publishes
    /// them under its claim): a refresh when the cached token has a refresh token from the same
    /// issuer (not for a step-up, which needs a new grant), else the binding's grant, which
    /// needs the server's metadata (`discovered`).
    pub(super) async fn obtain(
        &self,
        slot: &Slot,
        party: Party<'_>,
        discovered: Option<&Discovered>,
        step_up: bool,
    ) -> Outcome {
        let refreshable = slot.tokens.as_ref().is_some_and(|t| {
            t.refresh.is_some() && discovered.is_none_or(|d| t.issuer == d.metadata.issuer)
        });
        if refreshable && !step_up {
            match self.refresh(slot, party).await {
                Ok(obtained) => return Outcome::Obtained(Box::new(obtained)),
                // A user's spent or revoked authorization: only a login mends it (at once when
                // the user is at hand, through the agent).
                Err(Refused::Spent(message)) if self.user_delegated() && self.agent.is_none() => {
                    return Outcome::NeedsLogin(message);
                }
                Err(Refused::Spent(message) | Refused::Failed(message)) => {
                    if discovered.is_none() {
                        return Outcome::Failed(message);
                    }
                    tracing::debug!(binding = %self.binding, error = %message, "refresh failed; a new grant follows")
                }
            }
        }
        let Some(discovered) = discovered else {
            return Outcome::Failed(format!(
                "no authorization server is known for {} yet",
                self.server_url
            ));
        };
        match self.grant(slot, party, discovered).await {
            Ok(obtained) => Outcome::Obtained(Box::new(obtained)),
            Err(message) => Outcome::Failed(message),
        }
    }

    /// The binding's grant: new tokens without a refresh token.
    async fn grant(
        &self,
        slot: &Slot,
        party: Party<'_>,
        discovered: &Discovered,
    ) -> Result<Obtained, String> {
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
            Grant::TokenExchange => {
                // The configured resource, else the one the upstream's metadata names.
                let resource = self.config.resource.as_deref().unwrap_or(resource);
                let (issued, client, endpoint) = self
                    .exchange_subject_token(party, metadata, resource, scope.as_deref())
                    .await?;
                let at = (metadata.issuer.as_str(), endpoint.as_str());
                return Ok(self.obtained(issued, client, at, resource, scopes));
            }
            Grant::AuthorizationCode => {
                let Some(agent) = &self.agent else {
                    let tenant = party.tenant;
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
                (
                    flow.run(&self.http, self.dpop_pair(), agent.as_ref())
                        .await?,
                    client,
                )
            }
        };
        let at = (metadata.issuer.as_str(), metadata.token_endpoint.as_str());
        Ok(self.obtained(issued, client, at, resource, scopes))
    }

    /// A new grant's tokens, issued `at` (the issuer, and the token endpoint a refresh goes
    /// to), not yet published.
    fn obtained(
        &self,
        issued: Issued,
        client: Client,
        at: (&str, &str),
        resource: &str,
        scopes: BTreeSet<String>,
    ) -> Obtained {
        let tokens = Tokens::new(
            issued,
            at,
            resource,
            client,
            scopes.iter().cloned().collect(),
            None,
            self.dpop.as_ref(),
        );
        Obtained {
            tokens,
            requested: scopes,
            // A new grant: whether its refresh tokens rotate is learnt at its first refresh.
            rotates: None,
        }
    }

    /// On behalf of a user (RFC 8693): the caller's own access token exchanged at the configured
    /// token endpoint for one issued to this client for the upstream — `resource`, `audience`
    /// when configured, the scopes; no actor token. The client authenticates as the server's
    /// metadata allows. Returns the issued token, the client and the endpoint (a refresh goes there too).
    async fn exchange_subject_token(
        &self,
        party: Party<'_>,
        metadata: &ServerMetadata,
        resource: &str,
        scope: Option<&str>,
    ) -> Result<(Issued, Client, String), String> {
        let subject = party.subject.ok_or_else(|| {
            format!(
                "{} exchanges each user's own token and the call carries none",
                self.binding
            )
        })?;
        let endpoint = self
            .config
            .token_endpoint
            .clone()
            .unwrap_or_else(|| metadata.token_endpoint.clone());
        let mut form = vec![
            ("grant_type", grant::GRANT_TOKEN_EXCHANGE.to_owned()),
            ("subject_token", subject.expose().to_owned()),
            (
                "subject_token_type",
                grant::TOKEN_TYPE_ACCESS_TOKEN.to_owned(),
            ),
        ];
        form.extend(self.config.audience.clone().map(|a| ("audience", a)));
        let form = scoped(form, scope, resource);
        let client = self.configured_client(metadata);
        let authn = Authn {
            client: &client,
            key: self.key.as_ref(),
            issuer: &metadata.issuer,
        };
        let issued =
            grant::token_request(&self.http, &endpoint, form, Some(&authn), self.dpop_pair())
                .await
                .map_err(|refused| {
                    format!(
                        "the authorization server refused to exchange the user's token for {}: {}",
                        self.binding, refused.message
                    )
                })?;
        Ok((issued, client, endpoint))
    }

    /// Refreshes the slot's token with its refresh token (spent once: a rotated one replaces it).
    async fn refresh(&self, slot: &Slot, party: Party<'_>) -> Result<Obtained, Refused> {
        let tokens = slot
            .tokens
            .as_ref()
            .ok_or_else(|| Refused::Failed("no token to refresh".into()))?;
        let refresh = tokens
            .refresh
            .clone()
            .ok_or_else(|| Refused::Failed("no refresh token".into()))?;
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
        let issued =
            grant::token_request(&self.http, &tokens.token_endpoint, form, Some(&authn), dpop)
                .await
                .map_err(|refused| {
                    if refused.error.as_deref() == Some("invalid_grant") {
                        // Revoked or spent: never presented again.
                        Refused::Spent(if self.user_delegated() {
                            let tenant = party.tenant;
                            format!(
                                "{}; the stored authorization is no longer valid: run `brain-harness login --tenant {tenant} {}` again",
                                refused.message, self.binding
                            )
                        } else {
                            refused.message
                        })
                    } else {
                        Refused::Failed(refused.message)
                    }
                })?;
        // A server that rotates refresh tokens sends a new one with each refresh.
        let rotates = Some(issued.refresh_token.is_some());
        // The same grant, renewed: everything but the tokens stays.
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
        Ok(Obtained {
            tokens: new,
            requested: slot.requested.clone(),
            rotates,
        })
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
