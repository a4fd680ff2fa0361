//! Static bearer tokens (`serve.clients`): each client's token is read from its variable at
//! start and kept only as a SHA-256 digest; a request's token is digested and compared with every
//! client's in constant time, without an early exit.

use brain_config::Serve;
use sha2::{Digest, Sha256};

/// Who a request comes from: the tenant its calls run as (from its credential, or the command
/// line over stdio), and the client it counts against for the per-client bounds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Client {
    /// The tenant.
    pub(crate) tenant: String,
    /// Names the client in bounds and logs (never a secret): `token:VAR`, `jwt:SUBJECT`,
    /// `stdio`, `anonymous`.
    pub(crate) id: String,
}

/// The clients whose variables were set, by token digest.
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
            let digest = digest(token.trim());
            if let Some((_, other)) = enabled.iter().find(|(d, _)| *d == digest) {
                return Err(format!(
                    "{} and {} hold the same token: each client needs its own (one token names \
                     one tenant)",
                    other.id.trim_start_matches("token:"),
                    client.token_env
                ));
            }
            enabled.push((
                digest,
                Client {
                    tenant: client.tenant.clone(),
                    id,
                },
            ));
        }
        Ok((Clients { enabled }, disabled))
    }

    /// Whether any client can authenticate.
    pub(crate) fn is_empty(&self) -> bool {
        self.enabled.is_empty()
    }

    /// The client whose token `authorization` (the header's value) carries: `Bearer ` and a
    /// non-empty token, equal to a client's.
    pub(crate) fn authenticate(&self, authorization: &str) -> Option<Client> {
        let token = bearer(authorization)?;
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
            "A" => Some("token-a".to_owned()),
            "B" => Some("token-b".to_owned()),
            "EMPTY" => Some("  ".to_owned()),
            _ => None,
        };
        let (clients, disabled) = Clients::read(
            &serve(&[("a", "A"), ("b", "B"), ("c", "EMPTY"), ("d", "UNSET")]),
            env,
        )
        .unwrap();
        assert_eq!(disabled.len(), 2, "{disabled:?}");
        assert_eq!(clients.authenticate("Bearer token-a").unwrap().tenant, "a");
        assert_eq!(clients.authenticate("bearer token-b").unwrap().tenant, "b");
        for wrong in [
            "Bearer ",
            "Bearer",
            "Bearer  ",
            "Basic token-a",
            "token-a",
            "Bearer token-c",
            "",
        ] {
            assert!(clients.authenticate(wrong).is_none(), "{wrong:?}");
        }
        // The disabled clients' empty token never matches `Bearer ` with nothing after it.
        assert!(clients.authenticate("Bearer \t").is_none());
    }

    #[test]
    fn two_variables_with_one_token_refuse_to_start() {
        let env = |_: &str| Some("same".to_owned());
        let error = Clients::read(&serve(&[("a", "A"), ("b", "B")]), env).unwrap_err();
        assert!(error.contains("A and B hold the same token"), "{error}");
        assert!(
            !error.contains("same\""),
            "the token is never named: {error}"
        );
    }
}
