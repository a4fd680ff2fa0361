//! Credentials: a static bearer token (`token_env`) or OAuth (`auth`), and where a token may
//! be sent.

use url::Url;

use super::context::{Draft, is_env_name, loopback};
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::{Auth, BindingKind, Grant};

/// A bearer token (`token_env`, or OAuth tokens with `auth`) is sent over `http` only to a
/// loopback host (`localhost`, 127.0.0.0/8, `::1`); anywhere else it needs `https`.
pub(super) fn token_over_plain_http(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let field = if draft.binding.token_env.is_some() {
        "token_env"
    } else if draft.binding.auth.is_some() {
        "auth"
    } else {
        return;
    };
    if !draft.usable("url") || !draft.usable(field) {
        return;
    }
    let Some(Ok(url)) = draft.binding.url.as_deref().map(Url::parse) else {
        return;
    };
    if url.scheme() == "http" && !loopback(&url) {
        out.push(draft.error(
            Rule::TokenOverPlainHttp,
            "url",
            format!(
                "the token{} would be sent in clear text to {}",
                if field == "auth" {
                    "s brain obtains with `auth`"
                } else {
                    " in `token_env`"
                },
                url.host_str().unwrap_or_default()
            ),
            format!("use `https://`, or drop `{field}` if the server needs no token"),
        ));
    }
}

/// `token_env` is a valid environment variable name: `^[A-Za-z_][A-Za-z0-9_]*$`.
pub(super) fn token_env_name(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(var) = &draft.binding.token_env else {
        return;
    };
    if draft.usable("token_env") && !is_env_name(var) {
        out.push(draft.error(
            Rule::TokenEnvName,
            "token_env",
            format!("`token_env` {var:?} is not an environment variable name"),
            "name the variable that holds the token (letters, digits and `_`, not starting with a \
             digit), e.g. `MCP_API_KEY`; never put the token itself here",
        ));
    }
}

/// `auth` (OAuth) is on an MCP binding at a `url`, without `token_env`, with exactly the fields its
/// grant uses, each usable: variable names, `https`/`http` URLs, scopes without spaces.
pub(super) fn auth(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let binding = &draft.binding;
    let Some(auth) = binding.auth.as_ref().filter(|_| draft.usable("auth")) else {
        return;
    };
    if binding.kind() != BindingKind::Mcp || binding.is_stdio() {
        let what = if binding.is_stdio() {
            "a stdio server, which gets its secrets from `env_from`".to_owned()
        } else {
            format!(
                "an {} tool, which takes `token_env`",
                binding.kind().as_str()
            )
        };
        out.push(draft.error(
            Rule::AuthNotRemoteMcp,
            "auth",
            format!("`auth` is set on {what}"),
            "remove `auth`: OAuth applies to MCP servers at a `url`",
        ));
    }
    if binding.token_env.is_some() {
        out.push(draft.error(
            Rule::AuthAndTokenEnv,
            "auth",
            "the binding has both `auth` and `token_env`",
            "keep `token_env` for a static API key, or `auth` for tokens from an authorization \
             server, not both",
        ));
    }
    grant_fields(draft, auth, out);
    auth_values(draft, auth, out);
}

/// `auth` holds the fields its grant requires and no field the grant does not use.
fn grant_fields(draft: &Draft, auth: &Auth, out: &mut Vec<Diagnostic>) {
    let fields: [(&str, bool); 14] = [
        ("client_id", auth.client_id.is_some()),
        ("client_secret_env", auth.client_secret_env.is_some()),
        ("private_key_env", auth.private_key_env.is_some()),
        ("signing_algorithm", auth.signing_algorithm.is_some()),
        ("scopes", auth.scopes.is_some()),
        ("assertion_env", auth.assertion_env.is_some()),
        ("id_token_env", auth.id_token_env.is_some()),
        ("idp_token_endpoint", auth.idp_token_endpoint.is_some()),
        ("idp_client_id", auth.idp_client_id.is_some()),
        ("client_metadata_url", auth.client_metadata_url.is_some()),
        ("token_endpoint", auth.token_endpoint.is_some()),
        ("audience", auth.audience.is_some()),
        ("resource", auth.resource.is_some()),
        ("dpop", auth.dpop.is_some()),
    ];
    let (required, allowed): (&[&str], &[&str]) = match auth.grant {
        Grant::ClientCredentials => (
            &["client_id"],
            &[
                "client_secret_env",
                "private_key_env",
                "signing_algorithm",
                "scopes",
                "dpop",
            ],
        ),
        Grant::AuthorizationCode => (
            &[],
            &[
                "client_id",
                "client_secret_env",
                "client_metadata_url",
                "scopes",
                "dpop",
            ],
        ),
        Grant::JwtBearer => (
            &["assertion_env"],
            &["client_id", "client_secret_env", "scopes", "dpop"],
        ),
        Grant::EnterpriseManaged => (
            &[
                "client_id",
                "client_secret_env",
                "id_token_env",
                "idp_token_endpoint",
            ],
            &["idp_client_id", "scopes", "dpop"],
        ),
        Grant::TokenExchange => (
            &["client_id", "token_endpoint"],
            &[
                "client_secret_env",
                "private_key_env",
                "signing_algorithm",
                "audience",
                "resource",
                "scopes",
                "dpop",
            ],
        ),
    };
    let grant = auth.grant.as_str();
    for (field, set) in fields {
        if !set && required.contains(&field) {
            out.push(draft.error(
                Rule::AuthFieldMissing,
                "auth",
                format!("`auth` of type {grant} has no `{field}`"),
                format!("add `auth.{field}`: {}", auth_field_help(field)),
            ));
        } else if set && !required.contains(&field) && !allowed.contains(&field) {
            out.push(draft.error(
                Rule::AuthFieldUnused,
                &format!("auth/{field}"),
                format!("`auth.{field}` is not used by the {grant} grant"),
                "remove it, or change `auth.type` to the grant it belongs to",
            ));
        }
    }
}

/// Each `auth` field is usable: one way for the client to authenticate, variable names,
/// non-empty client ids, URLs where a token endpoint or metadata can be, scopes without spaces.
fn auth_values(draft: &Draft, auth: &Auth, out: &mut Vec<Diagnostic>) {
    let mut invalid = |field: &str, message: String, help: &str| {
        out.push(draft.error(Rule::AuthInvalid, &format!("auth/{field}"), message, help));
    };
    if matches!(auth.grant, Grant::ClientCredentials | Grant::TokenExchange)
        && auth.client_secret_env.is_some() == auth.private_key_env.is_some()
    {
        invalid(
            "private_key_env",
            format!(
                "`auth` of type {} needs exactly one of `client_secret_env` and \
                 `private_key_env`",
                auth.grant.as_str()
            ),
            "name the variable that holds the client secret, or the one that holds the PEM \
             private key the client signs its assertions with",
        );
    }
    if auth.signing_algorithm.is_some() && auth.private_key_env.is_none() {
        invalid(
            "signing_algorithm",
            "`auth.signing_algorithm` is set without `private_key_env`".into(),
            "remove it, or add `private_key_env`",
        );
    }
    if auth.client_secret_env.is_some() && auth.client_id.is_none() {
        invalid(
            "client_secret_env",
            "`auth.client_secret_env` is set without `client_id`".into(),
            "add the client id the secret belongs to",
        );
    }
    for (field, var) in auth.env_vars() {
        if !is_env_name(var) {
            invalid(
                field,
                format!("`auth.{field}` {var:?} is not an environment variable name"),
                "name the variable that holds the secret (letters, digits and `_`, not starting \
                 with a digit); never put the secret itself here",
            );
        }
    }
    for (field, value) in [
        ("client_id", &auth.client_id),
        ("idp_client_id", &auth.idp_client_id),
        ("audience", &auth.audience),
    ] {
        if value.as_deref().is_some_and(|id| id.trim().is_empty()) {
            invalid(
                field,
                format!("`auth.{field}` is empty"),
                if field == "audience" {
                    "write the audience the authorization server expects, or remove the field"
                } else {
                    "write the client's id, or remove the field"
                },
            );
        }
    }
    auth_urls(auth, &mut invalid);
    for (i, scope) in auth.scopes.iter().flatten().enumerate() {
        if scope.is_empty()
            || scope
                .chars()
                .any(|c| c.is_whitespace() || c == '"' || c == '\\')
        {
            invalid(
                &format!("scopes/{i}"),
                format!("scope {scope:?} is not an OAuth scope"),
                "write one scope per string, without spaces, e.g. `[\"mcp:read\", \"mcp:write\"]`",
            );
        }
    }
    // The caller's token and the client's secret go to the token endpoint: in clear text only
    // to this machine.
    if let Some(Ok(url)) = auth.token_endpoint.as_deref().map(Url::parse)
        && url.scheme() == "http"
        && !loopback(&url)
    {
        out.push(draft.error(
            Rule::TokenOverPlainHttp,
            "auth/token_endpoint",
            format!(
                "the callers' tokens and the client's credentials would be sent in clear text to \
                 {}",
                url.host_str().unwrap_or_default()
            ),
            "use the token endpoint's `https://` URL",
        ));
    }
}

/// Each URL field of `auth` is usable where it goes: an absolute `http(s)` URL without a fragment
/// (an `https` one with a path for a client metadata document).
fn auth_urls(auth: &Auth, invalid: &mut impl FnMut(&str, String, &str)) {
    for (field, value, https_only) in [
        ("idp_token_endpoint", &auth.idp_token_endpoint, false),
        ("client_metadata_url", &auth.client_metadata_url, true),
        ("token_endpoint", &auth.token_endpoint, false),
        ("resource", &auth.resource, false),
    ] {
        let Some(raw) = value else { continue };
        let ok = match Url::parse(raw) {
            Ok(url) if https_only => url.scheme() == "https" && url.path() != "/",
            Ok(url) => matches!(url.scheme(), "http" | "https") && url.fragment().is_none(),
            Err(_) => false,
        };
        if !ok {
            invalid(
                field,
                format!("`auth.{field}` {raw:?} is not a usable URL"),
                match field {
                    "client_metadata_url" => {
                        "use the `https://` URL (with a path) where the client's metadata \
                         document is served"
                    }
                    "resource" => {
                        "use the upstream server's resource URI, an absolute `https://` URL \
                         without a fragment (RFC 8707), or remove it to use the one its metadata \
                         names"
                    }
                    "token_endpoint" => {
                        "use the authorization server's token endpoint, an absolute `https://` URL"
                    }
                    _ => "use the IdP's token endpoint, an absolute `https://` URL",
                },
            );
        }
    }
}

/// What an `auth` field holds, for a missing field's help.
fn auth_field_help(field: &str) -> &'static str {
    match field {
        "client_id" => "the client's id at the authorization server",
        "client_secret_env" => "the environment variable that holds the client secret",
        "assertion_env" => "the environment variable that holds the workload's JWT",
        "id_token_env" => "the environment variable that holds the user's ID token from the IdP",
        "idp_token_endpoint" => "the IdP's token endpoint, where the ID token is exchanged",
        "token_endpoint" => {
            "the authorization server's token endpoint, where the caller's token is exchanged"
        }
        _ => "see the config's JSON Schema",
    }
}
