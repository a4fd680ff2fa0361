//! The approver's side of approvals: a person, known by an Ed25519 key whose public half the
//! host config's `approvals` names (or by a token whose SHA-256 it names), lists the calls held
//! for its tenants and approves or denies them. A decision is recorded with the approver's
//! name and the time, in the journal's store, where the held call's retry finds it; a key
//! approver's decision is a statement it signs ([`crate::approvals::signed`]), which the claim checks before
//! it uses it. Neither the token nor the private key is ever stored, logged or shown.

use brain_config::HostConfig;
use brain_config::approvals::ApproverConfig;
use brain_config::policy::Principal;
use sha2::{Digest, Sha256};

use crate::approvals::signed::Statement;
use crate::journal::{Approval, ApprovalFilter, Decision, Journal, StoreError};

pub use crate::approvals::signed::{APPROVER_KEY_FILE_VAR, ApproverKey, ApproverKeys};

/// Why an approver could not be made, or could not decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The host config names no approvers (`approvals`).
    #[error(
        "the host config names no approvers: add `approvals` with the SHA-256 of each \
         approver's token"
    )]
    NoApprovers,
    /// The token is no approver's (its SHA-256 matches none of `approvals.approvers`).
    #[error(
        "the approver token matches no approver of the host config (set BRAIN_APPROVER_TOKEN \
         to a token whose SHA-256 is an approver's `token_sha256`)"
    )]
    UnknownToken,
    /// The private key is no approver's (its public key is none of `approvals.approvers`).
    #[error(
        "the approver key {0} matches no approver's `public_key` in the host config (set \
         BRAIN_APPROVER_KEY_FILE to the private key whose public key an approver names)"
    )]
    UnknownKey(String),
    /// A tenant the approver does not decide for.
    #[error("approver {approver:?} does not decide for tenant {tenant:?}")]
    NotTheirTenant {
        /// The approver.
        approver: String,
        /// The tenant.
        tenant: String,
    },
    /// No such approval is pending for the approver's tenants: decided already, expired, or
    /// another tenant's.
    #[error(
        "approval {0:?} is not pending for this approver: decided already, expired, or not one \
         of its tenants' (`brain-harness approvals list` shows what is)"
    )]
    NotPending(String),
    /// The approver is the principal that asked: no one approves their own call.
    #[error(
        "approver {approver:?} asked for approval {id:?} itself ({principal}): another approver must decide it"
    )]
    OwnCall {
        /// The approval.
        id: String,
        /// The approver.
        approver: String,
        /// The principal that asked.
        principal: String,
    },
    /// The arguments and binding the store shows are not those of the call that asked: their
    /// digest under the host config's binding is not the call's. Someone wrote to the store
    /// (or the binding changed since the call asked); approving it would approve a call the
    /// approver never saw.
    #[error(
        "approval {id:?} shows arguments of {binding:?} that are not the held call's (their digest \
         under this host config is not the one the call asked with): the store was edited, or \
         the binding changed since; not approved — deny it, and let the call ask again"
    )]
    NotAsAsked {
        /// The approval.
        id: String,
        /// The binding it names.
        binding: String,
    },
    /// The store could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One approver, known by its key (each decision signed) or its token: lists and decides the
/// calls held for approval in its tenants, on the journal's store the runtimes use.
///
/// ```no_run
/// # async fn run(config: &brain_config::HostConfig) -> Result<(), Box<dyn std::error::Error>> {
/// use brain_runtime::{Approver, journal::Journal};
/// let journal = Journal::open("sqlite:/var/lib/brain/state.db").await?;
/// let key = brain_runtime::ApproverKey::from_env()?.ok_or("set BRAIN_APPROVER_KEY_FILE")?;
/// let approver = Approver::with_key(config, journal, key)?;
/// for held in approver.pending(None).await? {
///     println!("{} {} {:?}", held.id, held.binding, held.arguments);
/// }
/// approver.approve("apr_…").await?;
/// # Ok(()) }
/// ```
pub struct Approver {
    name: String,
    tenants: Vec<String>,
    journal: Journal,
    /// Each binding's identity (what a call's digest hashes besides its arguments).
    identities: std::collections::HashMap<String, [u8; 32]>,
    /// A key approver's key: each decision is signed with it.
    key: Option<ApproverKey>,
}

impl std::fmt::Debug for Approver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approver")
            .field("name", &self.name)
            .field("tenants", &self.tenants)
            .field("journal", &self.journal)
            .field("key", &self.key)
            .finish()
    }
}

impl Approver {
    /// The approver of `config` whose `token_sha256` is the SHA-256 of `token`, deciding on
    /// `journal`'s store.
    pub fn new(
        config: &HostConfig,
        journal: Journal,
        token: &str,
    ) -> Result<Approver, ApprovalError> {
        let approvers = approvers(config)?;
        let presented = crate::state::hex(&Sha256::digest(token.trim().as_bytes()));
        // Every approver compared in full: how long it takes says nothing of which matched.
        let mut found: Option<&ApproverConfig> = None;
        for approver in approvers {
            let hash = approver.token_sha256.as_deref().unwrap_or_default();
            if same(hash.as_bytes(), presented.as_bytes()) {
                found = Some(approver);
            }
        }
        let approver = found.ok_or(ApprovalError::UnknownToken)?;
        Ok(Approver::of(config, approver, journal, None))
    }

    /// The approver of `config` whose `public_key` is `key`'s, deciding on `journal`'s store:
    /// each decision is a statement signed with `key`.
    pub fn with_key(
        config: &HostConfig,
        journal: Journal,
        key: ApproverKey,
    ) -> Result<Approver, ApprovalError> {
        let approvers = approvers(config)?;
        let public = key.verifying_key();
        let approver = approvers
            .iter()
            .find(|approver| matches!(approver.verifying_key(), Some(Ok(k)) if k == public))
            .ok_or_else(|| ApprovalError::UnknownKey(key.id().to_owned()))?;
        Ok(Approver::of(config, approver, journal, Some(key)))
    }

    fn of(
        config: &HostConfig,
        approver: &ApproverConfig,
        journal: Journal,
        key: Option<ApproverKey>,
    ) -> Approver {
        Approver {
            name: approver.name.clone(),
            tenants: approver.tenants.clone(),
            journal,
            identities: config
                .tools
                .iter()
                .map(|binding| (binding.name.clone(), crate::journal::identity(binding)))
                .collect(),
            key,
        }
    }

    /// The approver's name, as decisions record it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tenants it decides for.
    pub fn tenants(&self) -> &[String] {
        &self.tenants
    }

    fn scope(&self, tenant: Option<&str>) -> Result<Vec<String>, ApprovalError> {
        match tenant {
            None => Ok(self.tenants.clone()),
            Some(tenant) if self.tenants.iter().any(|t| t == tenant) => Ok(vec![tenant.to_owned()]),
            Some(tenant) => Err(ApprovalError::NotTheirTenant {
                approver: self.name.clone(),
                tenant: tenant.to_owned(),
            }),
        }
    }

    /// The pending, unexpired approvals of its tenants (or of `tenant`), newest first, each
    /// with the call's canonical arguments.
    pub async fn pending(&self, tenant: Option<&str>) -> Result<Vec<Approval>, ApprovalError> {
        self.list(tenant, true, 0).await
    }

    /// The approvals of its tenants (or of `tenant`), newest first: pending only with
    /// `pending`, at most `limit` (0: all).
    pub async fn list(
        &self,
        tenant: Option<&str>,
        pending: bool,
        limit: usize,
    ) -> Result<Vec<Approval>, ApprovalError> {
        let filter = ApprovalFilter {
            tenants: self.scope(tenant)?,
            id: None,
            pending,
            limit,
        };
        Ok(self.journal.store().approvals(&filter).await?)
    }

    /// The approval `id`, when it is one of its tenants'.
    pub async fn show(&self, id: &str) -> Result<Approval, ApprovalError> {
        let filter = ApprovalFilter {
            tenants: self.tenants.clone(),
            id: Some(id.to_owned()),
            pending: false,
            limit: 1,
        };
        let found = self.journal.store().approvals(&filter).await?;
        found
            .into_iter()
            .next()
            .ok_or_else(|| ApprovalError::NotPending(id.to_owned()))
    }

    /// Approves the pending approval `id`: the held call, retried with the same call id and
    /// arguments in the same session, then runs once.
    pub async fn approve(&self, id: &str) -> Result<Approval, ApprovalError> {
        self.decide(id, true).await
    }

    /// Denies the pending approval `id`: the held call's retries are refused until it expires.
    pub async fn deny(&self, id: &str) -> Result<Approval, ApprovalError> {
        self.decide(id, false).await
    }

    /// Whether what the approver is shown (binding and arguments) is what the call asked with:
    /// their digest is the call's — for a call on behalf of a verified user, with the user's
    /// `iss|sub` (the approval's principal) in it. A call on behalf of a token brain did not
    /// verify has the token's digest in it, which no approval shows: it is never as asked.
    fn as_asked(&self, approval: &Approval) -> bool {
        let (Some(identity), Some(arguments)) = (
            self.identities.get(&approval.binding),
            approval.arguments.as_deref(),
        ) else {
            return false;
        };
        let user = match approval.principal.parse::<Principal>() {
            Ok(Principal::User {
                issuer, subject, ..
            }) => Some(format!("{issuer}|{subject}")),
            _ => None,
        };
        serde_json::from_str(arguments).is_ok_and(|arguments| {
            [None, user.as_deref()].into_iter().any(|subject| {
                crate::journal::digest(identity, &arguments, subject) == approval.digest
            })
        })
    }

    async fn decide(&self, id: &str, approve: bool) -> Result<Approval, ApprovalError> {
        let approval = self.show(id).await?;
        if own_call(&approval.principal, &self.name) {
            return Err(ApprovalError::OwnCall {
                id: id.to_owned(),
                approver: self.name.clone(),
                principal: approval.principal,
            });
        }
        if approve && !self.as_asked(&approval) {
            return Err(ApprovalError::NotAsAsked {
                id: id.to_owned(),
                binding: approval.binding,
            });
        }
        // What the approver saw is what it decides, and with a key signs: the store records the
        // decision only while the approval still says so.
        let statement = Statement {
            approval: &approval.id,
            tenant: &approval.key.tenant,
            digest: &approval.digest,
            policies: &approval.policies,
            approved: approve,
            expires_ms: approval.expires_ms,
        };
        let decision = Decision {
            id: approval.id.clone(),
            tenants: self.tenants.clone(),
            approver: self.name.clone(),
            approved: approve,
            digest: approval.digest.clone(),
            policies: approval.policies.clone(),
            expires_ms: approval.expires_ms,
            signature: self.key.as_ref().map(|key| key.sign(&statement)),
        };
        let decided = self.journal.store().decide_approval(&decision).await?;
        decided.ok_or_else(|| ApprovalError::NotPending(id.to_owned()))
    }
}

/// How long an approval lasts (milliseconds), when the policies may hold a call for one: an
/// `@approval` policy needs a journal to keep approvals, for no longer than it keeps calls.
pub(crate) fn approval_ms(
    config: &HostConfig,
    policies: Option<&brain_config::policy::Policies>,
    journal: Option<&crate::journal::Journaling>,
) -> Result<Option<i64>, String> {
    let seconds = config
        .approvals
        .as_ref()
        .map_or(brain_config::approvals::DEFAULT_APPROVAL_SECONDS, |a| {
            a.expires_seconds()
        });
    let expires_ms = i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    let Some(policy) = policies.and_then(brain_config::policy::Policies::approval_policy) else {
        return Ok(journal.map(|_| expires_ms));
    };
    let Some(journal) = journal else {
        return Err(format!(
            "the @approval policy {policy:?} holds calls for a person's approval, and the runtime \
             has no call journal to keep approvals in: give it one (RuntimeBuilder::journal, \
             `--state` for brain-harness)"
        ));
    };
    if expires_ms > journal.retention_ms() {
        return Err(format!(
            "approvals last {seconds} s (`approvals.expires_seconds`), longer than the journal \
             keeps calls ({} s): shorten `expires_seconds` or lengthen the retention",
            journal.retention_ms() / 1000
        ));
    }
    Ok(Some(expires_ms))
}

/// The approvers `config` names, or [`ApprovalError::NoApprovers`].
fn approvers(config: &HostConfig) -> Result<&[ApproverConfig], ApprovalError> {
    config
        .approvals
        .as_ref()
        .map(|a| a.approvers.as_slice())
        .filter(|a| !a.is_empty())
        .ok_or(ApprovalError::NoApprovers)
}

/// Whether `principal` (an approval's, as [`Principal`]'s text) is the approver `name`: the
/// tenant, the user's `iss|sub`, or its subject. Text no principal writes (a row edited by
/// hand) counts as the approver's own only where it is the name itself.
fn own_call(principal: &str, name: &str) -> bool {
    match principal.parse::<Principal>() {
        Ok(Principal::Tenant(tenant)) => tenant == name,
        Ok(Principal::User {
            issuer, subject, ..
        }) => subject == name || format!("{issuer}|{subject}") == name,
        Err(_) => principal == name,
    }
}

/// Compares in time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_approver_named_as_the_principal_is_its_own() {
        use super::own_call;
        assert!(own_call("Brain::Tenant::\"acme\"", "acme"));
        assert!(!own_call("Brain::Tenant::\"acme\"", "ops"));
        assert!(own_call(
            "Brain::User::\"https://id.example|alice\" (tenant \"acme\")",
            "alice"
        ));
        assert!(own_call(
            "Brain::User::\"https://id.example|alice\" (tenant \"acme\")",
            "https://id.example|alice"
        ));
        assert!(!own_call(
            "Brain::User::\"https://id.example|alice\" (tenant \"acme\")",
            "acme"
        ));
    }
}
