//! Static bearer tokens (`serve.clients`): each client's token is read from its variable at
//! start and kept only as a SHA-256 digest; a request's token is digested and compared with every
//! client's in constant time, without an early exit.

use brain_config::Serve;
use sha2::{Digest, Sha256};

/// The shortest static token serve takes (32 characters: 128 bits of hex, more of base64).
pub(crate) const MIN_TOKEN_CHARS: usize = 32;

/// Whom a request acts for: its tenant, and who it is at the party that vouched for it — a
/// JWT's (`iss`, `sub`), or a static token's variable. The bounds (sessions, calls in flight)
/// count principals, never OAuth apps: a `client_id` is cheap to mint. Cheap to clone, and
/// hashed once (the bookkeeping looks it up on every call); equal only when all three are.
#[derive(Debug, Clone)]
pub(crate) struct Principal(std::sync::Arc<(PrincipalName, u64)>);

/// The three parts of a principal.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct PrincipalName {
    /// The tenant its calls run as.
    pub(crate) tenant: String,
    /// Who vouched: a JWT's `iss`; `token` for a static token, `stdio`, `anonymous`.
    pub(crate) issuer: String,
    /// Who it is there: a JWT's `sub`; a static token's variable; `stdio`, `anonymous`.
    pub(crate) subject: String,
}

impl Principal {
    pub(crate) fn new(tenant: &str, issuer: &str, subject: &str) -> Principal {
        use std::hash::BuildHasher;
        let name = PrincipalName {
            tenant: tenant.to_owned(),
            issuer: issuer.to_owned(),
            subject: subject.to_owned(),
        };
        let hash = HASHER
            .get_or_init(std::collections::hash_map::RandomState::new)
            .hash_one(&name);
        Principal(std::sync::Arc::new((name, hash)))
    }

    /// Its tenant, issuer and subject.
    pub(crate) fn name(&self) -> &PrincipalName {
        &self.0.0
    }
}

/// The process's randomly keyed hasher of principals: no client chooses its principal's hash.
static HASHER: std::sync::OnceLock<std::collections::hash_map::RandomState> =
    std::sync::OnceLock::new();

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.0 == other.0.0
    }
}

impl Eq for Principal {}

impl std::hash::Hash for Principal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.1);
    }
}

/// Who a request comes from: its principal (whose bounds it counts against) and, for a JWT, the
/// OAuth app it came through. A session belongs to exactly this (principal and app).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Client {
    /// The tenant (the principal's).
    pub(crate) tenant: String,
    /// Names the client in logs (never a secret): `token:VAR`, `jwt:SUB@ISS`, `stdio`,
    /// `anonymous`.
    pub(crate) id: String,
    /// Whom it acts for.
    pub(crate) principal: Principal,
    /// The OAuth app (`client_id`) a JWT names.
    pub(crate) app: Option<String>,
    /// Who calls, as the host config's policies see it: the tenant, or the JWT's user in it.
    /// Built only from the authenticated identity.
    pub(crate) acts_as: brain_runtime::Principal,
}

impl Client {
    /// A client that is its own principal (a static token, stdio, anonymous).
    pub(crate) fn named(tenant: &str, issuer: &str, subject: &str, id: String) -> Client {
        Client {
            tenant: tenant.to_owned(),
            id,
            principal: Principal::new(tenant, issuer, subject),
            app: None,
            acts_as: brain_runtime::Principal::Tenant(tenant.to_owned()),
        }
    }

    /// The client of a verified JWT: (tenant, `iss`, `sub`), through `client_id`.
    pub(crate) fn of_token(
        tenant: String,
        issuer: String,
        subject: String,
        app: Option<String>,
    ) -> Client {
        Client {
            id: format!("jwt:{subject}@{issuer}"),
            principal: Principal::new(&tenant, &issuer, &subject),
            acts_as: brain_runtime::Principal::User {
                tenant: tenant.clone(),
                issuer,
                subject,
            },
            tenant,
            app,
        }
    }
}

/// The clients whose variables were set, by token digest.
#[derive(Clone)]
pub(crate) struct Clients {
    enabled: Vec<([u8; 32], Client)>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.enabled.iter().map(|(_, c)| c.id.as_str()).collect();
        f.debug_struct("Clients").field("enabled", &ids).finish()
    }
}

impl Clients {
    /// Reads each client's variable through `env`. An unset or empty variable disables its
    /// client (listed in the second value, for a notice); two variables holding the same token
    /// are an error.
    pub(crate) fn read(
        serve: &Serve,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(Clients, Vec<String>), String> {
        let mut enabled: Vec<([u8; 32], Client)> = Vec::new();
        // Each enabled client's variable, in `enabled`'s order.
        let mut variables: Vec<&str> = Vec::new();
        let mut disabled = Vec::new();
        for client in &serve.clients {
            let id = format!("token:{}", client.token_env);
            let Some(token) = env(&client.token_env).filter(|t| !t.trim().is_empty()) else {
                disabled.push(format!(
                    "the client of tenant {:?} is disabled: {} is not set",
                    client.tenant, client.token_env
                ));
                continue;
            };
            if token.trim().chars().count() < MIN_TOKEN_CHARS {
                return Err(format!(
                    "{} holds a token shorter than {MIN_TOKEN_CHARS} characters: anyone may \
                     guess it; set a random one (e.g. `openssl rand -hex 32`)",
                    client.token_env
                ));
            }
            let digest = digest(token.trim());
            if let Some(other) = enabled.iter().position(|(d, _)| *d == digest) {
                return Err(format!(
                    "{} and {} hold the same token: each client needs its own (one token names \
                     one tenant)",
                    variables[other], client.token_env
                ));
            }
            enabled.push((
                digest,
                Client::named(&client.tenant, "token", &client.token_env, id),
            ));
            variables.push(&client.token_env);
        }
        Ok((Clients { enabled }, disabled))
    }

    /// Whether any client can authenticate.
    pub(crate) fn is_empty(&self) -> bool {
        self.enabled.is_empty()
    }

    /// The client whose token `authorization` (the header's value) carries: `Bearer ` and a
    /// non-empty token, equal to a client's.
    #[cfg(test)]
    pub(crate) fn authenticate(&self, authorization: &str) -> Option<Client> {
        self.authenticate_token(bearer(authorization)?)
    }

    /// The client whose token is `token` (without `Bearer `).
    pub(crate) fn authenticate_token(&self, token: &str) -> Option<Client> {
        let presented = digest(token);
        let mut found = None;
        for (digest, client) in &self.enabled {
            // Every byte of every client's digest is compared: the time says nothing of which
            // client, or how much of a digest, matched.
            let difference = digest
                .iter()
                .zip(presented.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if difference == 0 {
                found = Some(client);
            }
        }
        found.cloned()
    }
}

/// The token of an `Authorization: Bearer TOKEN` header; `None` without one, or an empty one.
pub(crate) fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use brain_config::ServeClient;

    fn serve(vars: &[(&str, &str)]) -> Serve {
        Serve {
            clients: vars
                .iter()
                .map(|(tenant, var)| ServeClient {
                    tenant: (*tenant).into(),
                    token_env: (*var).into(),
                })
                .collect(),
            ..Serve::default()
        }
    }

    #[test]
    fn tokens_name_their_tenant_and_nothing_else_matches() {
        let env = |var: &str| match var {
            "A" => Some(TOKEN_A.to_owned()),
            "B" => Some(TOKEN_B.to_owned()),
            "EMPTY" => Some("  ".to_owned()),
            _ => None,
        };
        let (clients, disabled) = Clients::read(
            &serve(&[("a", "A"), ("b", "B"), ("c", "EMPTY"), ("d", "UNSET")]),
            env,
        )
        .unwrap();
        assert_eq!(disabled.len(), 2, "{disabled:?}");
        let a = format!("Bearer {TOKEN_A}");
        let b = format!("bearer {TOKEN_B}");
        assert_eq!(clients.authenticate(&a).unwrap().tenant, "a");
        assert_eq!(clients.authenticate(&b).unwrap().tenant, "b");
        let basic = format!("Basic {TOKEN_A}");
        for wrong in [
            "Bearer ",
            "Bearer",
            "Bearer  ",
            &basic,
            TOKEN_A,
            "Bearer token-c",
            "",
        ] {
            assert!(clients.authenticate(wrong).is_none(), "{wrong:?}");
        }
        // The disabled clients' empty token never matches `Bearer ` with nothing after it.
        assert!(clients.authenticate("Bearer \t").is_none());
    }

    const TOKEN_A: &str = "token-a-0123456789abcdef0123456789";
    const TOKEN_B: &str = "token-b-0123456789abcdef0123456789";

    #[test]
    fn two_variables_with_one_token_refuse_to_start() {
        let env = |_: &str| Some("same-0123456789abcdef0123456789ab".to_owned());
        let error = Clients::read(&serve(&[("a", "A"), ("b", "B")]), env).unwrap_err();
        assert!(error.contains("A and B hold the same token"), "{error}");
        assert!(
            !error.contains("0123456789abcdef"),
            "the token is never named: {error}"
        );
    }

    #[test]
    fn a_short_token_refuses_to_start_naming_its_variable_only() {
        let env = |_: &str| Some("x".repeat(MIN_TOKEN_CHARS - 1));
        let error = Clients::read(&serve(&[("a", "A")]), env).unwrap_err();
        assert!(
            error.starts_with("A holds a token shorter than 32"),
            "{error}"
        );
        assert!(!error.contains("xxx"), "the token is never named: {error}");
        let env = |_: &str| Some("x".repeat(MIN_TOKEN_CHARS));
        assert!(Clients::read(&serve(&[("a", "A")]), env).is_ok());
    }
}
