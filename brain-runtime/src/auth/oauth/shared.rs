//! One key's tokens shared with every process on the state's store ([`TokenStore`]): read what
//! others wrote, claim a refresh before the token request, publish new tokens under the claimed
//! generation only, wait (bounded) while another process refreshes, and mark a grant whose
//! refresh token was refused as needing a login — once, never looping.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::tokens::{Slot, Tokens};
use super::{Discovered, OAuth};
use crate::auth::grants::{Expected, GrantKey, GrantState, GrantWrite};
use crate::auth::store::StoredTokens;
use crate::subject::SubjectToken;

use super::Party;

/// A claim outlives the token request it covers (30 s at most, `request.rs`): a slow but live
/// refresher is never overtaken.
const LEASE: Duration = Duration::from_secs(45);
/// The longest wait for another process's refresh: its lease, then one request of our own.
const WAIT: Duration = Duration::from_secs(80);
/// The longest pause between two looks at a refresh running elsewhere.
const MAX_PAUSE: Duration = Duration::from_millis(500);

/// New tokens, not yet published.
pub(super) struct Obtained {
    pub(super) tokens: Tokens,
    /// The scopes requested for them.
    pub(super) requested: BTreeSet<String>,
    /// Whether the refresh that gave them rotated the refresh token (`None`: a new grant).
    pub(super) rotates: Option<bool>,
}

/// What a token request came to.
pub(super) enum Outcome {
    Obtained(Box<Obtained>),
    /// The authorization server refused the user's refresh token: a login is needed.
    NeedsLogin(String),
    Failed(String),
}

/// Why a refresh failed.
pub(super) enum Refused {
    /// `invalid_grant`: the refresh token is spent or revoked.
    Spent(String),
    Failed(String),
}

impl OAuth {
    /// The grant's key in the store: the server and the `auth` fields that identify the client
    /// and the flow (not the scopes: a step-up does not fork the grant), and the tenant for
    /// user-delegated tokens; on behalf of users (`token_exchange`), the token endpoint, audience
    /// and resource and the caller's subject too (a grant per user, per tenant).
    pub(super) fn grant_key(&self, party: Party<'_>) -> GrantKey {
        use sha2::{Digest, Sha256};
        let config = &self.config;
        let mut hash = Sha256::new();
        for part in [
            "brain-grant-1",
            &self.server_url,
            config.grant.as_str(),
            config.client_id.as_deref().unwrap_or(""),
            config.client_metadata_url.as_deref().unwrap_or(""),
            config.idp_token_endpoint.as_deref().unwrap_or(""),
            config.idp_client_id.as_deref().unwrap_or(""),
            if config.uses_dpop() { "dpop" } else { "bearer" },
        ] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        if config.on_behalf_of_users() {
            // Only here: the keys of the other grants stay what they were.
            for part in [
                config.token_endpoint.as_deref().unwrap_or(""),
                config.audience.as_deref().unwrap_or(""),
                config.resource.as_deref().unwrap_or(""),
                party.subject.map_or("", SubjectToken::subject),
            ] {
                hash.update((part.len() as u64).to_be_bytes());
                hash.update(part.as_bytes());
            }
        }
        let kind = if config.on_behalf_of_users() {
            GrantKey::ISSUED
        } else {
            ""
        };
        GrantKey {
            grant: format!("{kind}sha256:{}", crate::state::hex(&hash.finalize())),
            tenant: if self.per_tenant() {
                party.tenant.to_owned()
            } else {
                String::new()
            },
        }
    }

    /// Reads the grant's row and takes what another process wrote since this one last looked.
    pub(super) async fn sync(&self, slot: &mut Slot, party: Party<'_>) -> Result<(), String> {
        let key = self.grant_key(party);
        let row = self
            .store
            .load(&key)
            .await
            .map_err(|e| self.store_failed(&e))?;
        let Some(row) = row else {
            return Ok(());
        };
        if row.generation == slot.generation && slot.tokens.is_some() {
            return Ok(());
        }
        slot.generation = row.generation;
        slot.state = row.written.state;
        slot.rotates = row.written.rotates;
        slot.tokens = match (&row.written.state, &row.written.sealed) {
            (GrantState::Valid, Some(sealed)) => {
                let stored = self.unseal(&key, row.generation, sealed)?;
                Some(Tokens::from_stored(stored)?)
            }
            _ => None,
        };
        if slot.tokens.is_some() {
            slot.requested = row.written.scopes.into_iter().collect();
        }
        Ok(())
    }

    /// Whether a refresh of this grant must be coordinated through the store: a grant not
    /// known not to rotate its refresh tokens (refreshing it blind is what revokes grants).
    fn must_coordinate(&self, slot: &Slot) -> bool {
        slot.rotates != Some(false) && slot.tokens.as_ref().is_some_and(|t| t.refresh.is_some())
    }

    /// New tokens for the slot, obtained once across every process sharing the store: claims
    /// the refresh (or fetch), obtains, publishes under the claim. When another process holds
    /// the claim, waits for its tokens (`wait`) or gives up at once (the old token still
    /// works). A store that cannot be reached stops the refresh of a rotating grant.
    pub(super) async fn renew(
        &self,
        slot: &mut Slot,
        party: Party<'_>,
        discovered: Option<&Discovered>,
        step_up: bool,
        wait: bool,
    ) -> Result<(), String> {
        let key = self.grant_key(party);
        let lease = i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX);
        let deadline = Instant::now() + WAIT;
        let mut pause = Duration::from_millis(20);
        loop {
            let generation = slot.generation;
            match self.store.claim(&key, generation, &self.owner, lease).await {
                Err(error) if self.must_coordinate(slot) => {
                    return Err(format!(
                        "{}; brain does not refresh a rotating grant it cannot record (another \
                         process could spend the same refresh token, and the authorization \
                         server would revoke the grant)",
                        self.store_failed(&error)
                    ));
                }
                Err(error) => {
                    tracing::warn!(binding = %self.binding, error = %self.store_failed(&error), "new tokens are not shared");
                    return match self.obtain(slot, party, discovered, step_up).await {
                        Outcome::Obtained(obtained) => {
                            adopt(slot, obtained, generation);
                            Ok(())
                        }
                        Outcome::NeedsLogin(message) | Outcome::Failed(message) => Err(message),
                    };
                }
                Ok(true) => {
                    let outcome = self.obtain(slot, party, discovered, step_up).await;
                    return self.publish(slot, party, &key, generation, outcome).await;
                }
                Ok(false) if !wait => {
                    return Err("another process is refreshing the tokens".into());
                }
                Ok(false) => {
                    if Instant::now() >= deadline {
                        return Err(format!(
                            "another process has been refreshing the tokens of {} for over {} s",
                            self.binding,
                            WAIT.as_secs()
                        ));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                    self.sync(slot, party).await?;
                    self.usable(slot, party)?;
                    if slot.generation != generation
                        && slot.tokens.as_ref().is_some_and(|t| !t.expired())
                    {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// An error when the grant in the store cannot be used: it needs a login, or was logged out.
    pub(super) fn usable(&self, slot: &Slot, party: Party<'_>) -> Result<(), String> {
        let what = match slot.state {
            GrantState::Valid => return Ok(()),
            GrantState::NeedsLogin => "needs a new login (its refresh token was refused)",
            GrantState::LoggedOut => "was logged out",
        };
        let tenant = party.tenant;
        Err(format!(
            "the authorization of tenant {tenant:?} at {} {what}: run `brain-harness login \
             --tenant {tenant} {}`",
            self.server_url, self.binding
        ))
    }

    /// Publishes what the claimed token request came to, under the claimed `generation` only.
    async fn publish(
        &self,
        slot: &mut Slot,
        party: Party<'_>,
        key: &GrantKey,
        generation: i64,
        outcome: Outcome,
    ) -> Result<(), String> {
        let expected = Expected::Claimed {
            generation,
            owner: self.owner.clone(),
        };
        let (write, obtained, failure) = match outcome {
            Outcome::Obtained(obtained) => {
                let rotates = obtained.rotates.or(slot.rotates);
                let write =
                    self.written(key, generation + 1, GrantState::Valid, &obtained, rotates)?;
                (write, Some(obtained), None)
            }
            Outcome::NeedsLogin(message) => {
                let write = GrantWrite {
                    state: GrantState::NeedsLogin,
                    binding: self.binding.clone(),
                    resource: self.server_url.clone(),
                    scopes: slot.requested.iter().cloned().collect(),
                    expires_at: None,
                    rotates: slot.rotates,
                    sealed: None,
                };
                (write, None, Some(message))
            }
            Outcome::Failed(message) => {
                // Nothing changed the grant: the next process need not wait for the lease.
                if let Err(error) = self.store.release(key, generation, &self.owner).await {
                    tracing::debug!(binding = %self.binding, error = %self.store_failed(&error), "the refresh claim stays until its lease ends");
                }
                return Err(message);
            }
        };
        match self.store.write(key, &expected, &write).await {
            Ok(Some(written)) => {
                slot.state = write.state;
                slot.rotates = write.rotates;
                match (obtained, failure) {
                    (Some(obtained), _) => {
                        adopt(slot, obtained, written);
                        Ok(())
                    }
                    (None, failure) => {
                        slot.tokens = None;
                        slot.generation = written;
                        Err(failure.unwrap_or_default())
                    }
                }
            }
            // Overtaken, or logged out meanwhile: the store's row wins.
            Ok(None) => {
                self.sync(slot, party).await?;
                self.usable(slot, party)?;
                if slot.tokens.as_ref().is_some_and(|t| !t.expired()) {
                    return Ok(());
                }
                Err(failure.unwrap_or_else(|| {
                    format!(
                        "the grant of {} changed while brain refreshed it; try the call again",
                        self.binding
                    )
                }))
            }
            Err(error) => {
                tracing::warn!(binding = %self.binding, error = %self.store_failed(&error), "the new tokens could not be stored");
                match (obtained, failure) {
                    // New tokens, the old refresh token spent: use them here at least.
                    (Some(obtained), _) => {
                        adopt(slot, obtained, generation);
                        Ok(())
                    }
                    (None, failure) => Err(failure.unwrap_or_default()),
                }
            }
        }
    }

    /// The row `obtained` is written as, at `generation`.
    pub(super) fn written(
        &self,
        key: &GrantKey,
        generation: i64,
        state: GrantState,
        obtained: &Obtained,
        rotates: Option<bool>,
    ) -> Result<GrantWrite, String> {
        let stored = obtained.tokens.stored()?;
        Ok(GrantWrite {
            state,
            binding: self.binding.clone(),
            resource: self.server_url.clone(),
            scopes: obtained.requested.iter().cloned().collect(),
            expires_at: stored.expires_at.and_then(|at| i64::try_from(at).ok()),
            rotates,
            sealed: Some(self.seal(key, generation, &stored)?),
        })
    }

    /// A login's new grant (the authorization code flow, through the agent), stored whatever
    /// the grant was: a logout's tombstone, a grant needing a login, a refresh claimed
    /// elsewhere (which then cannot publish).
    pub(super) async fn store_login(
        &self,
        slot: &mut Slot,
        party: Party<'_>,
        discovered: &Discovered,
    ) -> Result<(), String> {
        let obtained = match self.obtain(slot, party, Some(discovered), true).await {
            Outcome::Obtained(obtained) => *obtained,
            Outcome::NeedsLogin(message) | Outcome::Failed(message) => {
                return Err(message);
            }
        };
        // A login replaces whatever the grant was; sealed for the generation it will have, so
        // written only at the one it was read at (once more if a sibling wrote meanwhile).
        let key = self.grant_key(party);
        let mut written = None;
        for _ in 0..2 {
            let current = self
                .store
                .load(&key)
                .await
                .map_err(|e| self.store_failed(&e))?
                .map_or(0, |row| row.generation);
            let write = self.written(&key, current + 1, GrantState::Valid, &obtained, None)?;
            written = self
                .store
                .write(&key, &Expected::Generation(current), &write)
                .await
                .map_err(|e| self.store_failed(&e))?;
            if written.is_some() {
                break;
            }
        }
        let generation =
            written.ok_or("the grant kept changing while the login was stored; log in again")?;
        slot.state = GrantState::Valid;
        slot.rotates = None;
        slot.generation = generation;
        slot.requested = obtained.requested;
        slot.tokens = Some(obtained.tokens);
        Ok(())
    }

    /// Imports `stored` (an earlier brain's token file) as `tenant`'s grant, unless the store
    /// has the grant already. Whether it did.
    pub(crate) async fn import(&self, tenant: &str, stored: StoredTokens) -> Result<bool, String> {
        let key = self.grant_key(Party::tenant(tenant));
        let write = GrantWrite {
            state: GrantState::Valid,
            binding: self.binding.clone(),
            resource: self.server_url.clone(),
            scopes: stored.scopes.clone(),
            expires_at: stored.expires_at.and_then(|at| i64::try_from(at).ok()),
            rotates: None,
            sealed: Some(self.seal(&key, 1, &stored)?),
        };
        let written = self
            .store
            .write(&key, &Expected::Generation(0), &write)
            .await
            .map_err(|e| self.store_failed(&e))?;
        Ok(written.is_some())
    }

    /// The tokens as the store keeps them at `generation`: sealed when the state has a key.
    fn seal(
        &self,
        key: &GrantKey,
        generation: i64,
        stored: &StoredTokens,
    ) -> Result<String, String> {
        let json =
            serde_json::to_string(stored).map_err(|_| "the tokens cannot be stored".to_owned())?;
        self.sealer.seal(&json, &context(key, generation))
    }

    /// The tokens the store kept at `generation`.
    fn unseal(
        &self,
        key: &GrantKey,
        generation: i64,
        sealed: &str,
    ) -> Result<StoredTokens, String> {
        let json = self
            .sealer
            .open(sealed, &context(key, generation))
            .map_err(|error| format!("the tokens of {}: {error}", self.binding))?;
        // Only where, never serde's text: it may quote a token.
        serde_json::from_str(&json).map_err(|error| {
            format!(
                "the stored tokens of {} are not valid (line {}, column {}): log in again",
                self.binding,
                error.line(),
                error.column()
            )
        })
    }

    pub(super) fn store_failed(&self, error: &crate::state::StoreError) -> String {
        format!(
            "the token store ({}) failed: {}",
            error.store().unwrap_or("state"),
            error.message()
        )
    }
}

/// What a row's seal is bound to: its grant, tenant and generation.
fn context(key: &GrantKey, generation: i64) -> String {
    format!("{}\0{}\0{generation}", key.grant, key.tenant)
}

/// Makes `obtained` the slot's tokens, at `generation`.
fn adopt(slot: &mut Slot, obtained: Box<Obtained>, generation: i64) {
    let obtained = *obtained;
    slot.tokens = Some(obtained.tokens);
    slot.requested = obtained.requested;
    slot.generation = generation;
    if obtained.rotates.is_some() {
        slot.rotates = obtained.rotates;
    }
}
