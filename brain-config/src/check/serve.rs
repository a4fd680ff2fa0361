//! `serve`: its clients name tenants the bindings allow and variables of their own, its bounds
//! are in range, and its authorization server is one brain can reach safely.

use std::collections::BTreeMap;
use url::Url;

use super::context::{Draft, is_env_name, loopback};
use crate::diagnostic::{Diagnostic, Rule};
use crate::serve::Serve;

/// Every rule about `serve`, given the bindings.
pub(super) fn serve(serve: &Serve, drafts: &[Draft], out: &mut Vec<Diagnostic>) {
    clients(serve, drafts, out);
    bounds(serve, out);
    authorization(serve, out);
}

/// Each client's tenant is one some binding allows; its variable is a variable name, used by no
/// other client and by no binding as an upstream secret.
fn clients(serve: &Serve, drafts: &[Draft], out: &mut Vec<Diagnostic>) {
    let mut upstream: BTreeMap<&str, String> = BTreeMap::new();
    for draft in drafts {
        let binding = &draft.binding;
        let name = &binding.name;
        if let Some(var) = binding.token_env.as_deref() {
            upstream.insert(var, format!("the `token_env` of {name:?}"));
        }
        for (field, var) in binding.auth.iter().flat_map(|auth| auth.env_vars()) {
            upstream.insert(var, format!("`auth.{field}` of {name:?}"));
        }
        for var in binding.env_from.iter().flat_map(|from| from.values()) {
            upstream.insert(var, format!("an `env_from` variable of {name:?}"));
        }
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, client) in serve.clients.iter().enumerate() {
        let at = format!("/serve/clients/{index}");
        if !drafts
            .iter()
            .any(|d| d.binding.tenants.contains(&client.tenant))
        {
            out.push(Diagnostic::new(
                Rule::ServeTenantUnknown,
                format!("{at}/tenant"),
                format!(
                    "no binding allows tenant {:?}: this client could call nothing",
                    client.tenant
                ),
                "add the tenant to the `tenants` of the bindings it may call, or remove the client",
            ));
        }
        let var = client.token_env.as_str();
        if !is_env_name(var) {
            out.push(Diagnostic::new(
                Rule::TokenEnvName,
                format!("{at}/token_env"),
                format!("`token_env` {var:?} is not an environment variable name"),
                "name the variable that holds the client's token (letters, digits and `_`, not \
                 starting with a digit), e.g. `BRAIN_SERVE_TOKEN_ACME`; never put the token \
                 itself here",
            ));
            continue;
        }
        if let Some(first) = seen.insert(var, index) {
            out.push(Diagnostic::new(
                Rule::ServeTokenEnvDuplicate,
                format!("{at}/token_env"),
                format!("clients {first} and {index} both read their token from {var}"),
                "give each client its own variable: one token must name one tenant",
            ));
        }
        if let Some(there) = upstream.get(var) {
            out.push(Diagnostic::new(
                Rule::ServeTokenEnvUpstream,
                format!("{at}/token_env"),
                format!(
                    "{var} is also {there}: a secret brain sends upstream would let a client in"
                ),
                "use a variable of its own for each client's token (e.g. `BRAIN_SERVE_TOKEN_…`)",
            ));
        }
    }
}

/// Each bound that is set is at least 1 (the authorization's: its least value) and at most its
/// maximum.
fn bounds(serve: &Serve, out: &mut Vec<Diagnostic>) {
    let serve_bounds = serve
        .bounds()
        .into_iter()
        .map(|(field, value, max)| (format!("/serve/{field}"), field, value, 1, max));
    let authorization_bounds = serve.authorization.iter().flat_map(|authorization| {
        authorization
            .bounds()
            .into_iter()
            .map(|(field, value, min, max)| {
                (
                    format!("/serve/authorization/{field}"),
                    field,
                    value,
                    min,
                    max,
                )
            })
    });
    for (at, field, value, min, max) in serve_bounds.chain(authorization_bounds) {
        let Some(value) = value else { continue };
        if value < min || value > max {
            out.push(Diagnostic::new(
                Rule::ServeBoundRange,
                at,
                format!("`{field}` is {value}, outside {min}..={max}"),
                format!("use a value from {min} to {max}, or remove it for the default"),
            ));
        }
    }
}

/// The issuer and the resource are `https` URLs (`http` on a loopback host), the issuer without
/// a query or fragment, and the tenant claim is not blank.
fn authorization(serve: &Serve, out: &mut Vec<Diagnostic>) {
    let Some(authorization) = &serve.authorization else {
        return;
    };
    for (field, raw) in [
        ("issuer", &authorization.issuer),
        ("resource", &authorization.resource),
    ] {
        let problem = match Url::parse(raw) {
            Err(error) => Some(format!("is not a URL ({error})")),
            Ok(url) if url.scheme() == "https" || (url.scheme() == "http" && loopback(&url)) => {
                (url.fragment().is_some() || (field == "issuer" && url.query().is_some()))
                    .then(|| "has a query or fragment".to_owned())
            }
            Ok(url) => Some(format!(
                "has scheme `{}` on a host that is not loopback",
                url.scheme()
            )),
        };
        if let Some(problem) = problem {
            out.push(Diagnostic::new(
                Rule::ServeAuthorizationInvalid,
                format!("/serve/authorization/{field}"),
                format!("`{field}` {raw:?} {problem}"),
                "use an `https://` URL (`http://` only on localhost, 127.0.0.1 or ::1), e.g. \
                 `https://auth.example.com` for the issuer and `https://brain.example.com/mcp` \
                 for the resource",
            ));
        }
    }
    if authorization.tenant_claim.trim().is_empty() {
        out.push(Diagnostic::new(
            Rule::ServeAuthorizationInvalid,
            "/serve/authorization/tenant_claim",
            "`tenant_claim` is blank",
            "name the access token's claim that holds the client's tenant, e.g. `tenant`",
        ));
    }
}
