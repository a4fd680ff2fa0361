//! Where a server's tokens come from: its `WWW-Authenticate` challenges (RFC 6750, RFC 9449),
//! its protected resource metadata (RFC 9728) and its authorization server's metadata (RFC 8414
//! and OpenID Connect discovery), found the way the MCP authorization spec orders them.
//!
//! Identifiers (`resource`, `issuer`) are kept and compared as the exact strings the documents
//! hold: a URL library would add a trailing slash to `http://host`, and RFC 8414/9207 compare
//! strings.

use http::header::HeaderMap;
use serde_json::Value;

use super::request::{get_json, require_secure, split_url};
use crate::http::HttpClient;

/// One challenge of a `WWW-Authenticate` header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// `bearer` or `dpop` (lowercase).
    pub(crate) scheme: String,
    pub(crate) error: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) resource_metadata: Option<String>,
}

/// Every challenge of every `WWW-Authenticate` header.
pub(crate) fn challenges(headers: &HeaderMap) -> Vec<Challenge> {
    headers
        .get_all(http::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(parse_challenges)
        .collect()
}

/// The challenge of a refusal: the Bearer or DPoP one, a DPoP nonce challenge first, with the
/// `scope` and `resource_metadata` any of them gave.
pub(crate) fn merged_challenge(headers: &HeaderMap) -> Challenge {
    let challenges: Vec<Challenge> = challenges(headers)
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

/// Parses `Bearer error="invalid_token", scope="a b", DPoP algs="ES256"` into challenges.
fn parse_challenges(text: &str) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        let end = rest.find([' ', ',', '=', '\t']).unwrap_or(rest.len());
        let (token, after) = rest.split_at(end);
        let after_trimmed = after.trim_start();
        if token.is_empty() {
            break;
        }
        if let Some(value_text) = after_trimmed.strip_prefix('=') {
            // An auth-param of the current challenge.
            let (value, remaining) = param_value(value_text.trim_start());
            if let Some(challenge) = out.last_mut() {
                let value = Some(value);
                match token.to_ascii_lowercase().as_str() {
                    "error" => challenge.error = value,
                    "scope" => challenge.scope = value,
                    "resource_metadata" => challenge.resource_metadata = value,
                    _ => {}
                }
            }
            rest = remaining;
        } else {
            out.push(Challenge {
                scheme: token.to_ascii_lowercase(),
                ..Challenge::default()
            });
            rest = after;
        }
    }
    out
}

/// A quoted string (with `\` escapes) or a token, and what follows it.
fn param_value(text: &str) -> (String, &str) {
    if let Some(quoted) = text.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                '"' => return (value, &quoted[i + 1..]),
                c => value.push(c),
            }
        }
        (value, "")
    } else {
        let end = text.find([',', ' ', '\t']).unwrap_or(text.len());
        (text[..end].to_owned(), &text[end..])
    }
}

/// What the server says about itself as a protected resource (RFC 9728), or what brain assumes
/// when it says nothing (MCP 2025-03-26: the authorization server is the server's origin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resource {
    /// The `resource` parameter of every authorization and token request (RFC 8707).
    pub(crate) resource: String,
    /// The authorization server's issuer identifier.
    pub(crate) authorization_server: String,
    /// `scopes_supported`.
    pub(crate) scopes_supported: Vec<String>,
    /// The server published no metadata: its origin is assumed to be the authorization server.
    pub(crate) legacy: bool,
}

/// The protected resource metadata of the server at `server_url`: from the challenge's
/// `resource_metadata`, else the path-based well-known URL, else the root one. Without any, the
/// 2025-03-26 rule. A document naming another resource is refused.
pub(crate) async fn protected_resource(
    http: &HttpClient,
    server_url: &str,
    from_challenge: Option<&str>,
) -> Result<Resource, String> {
    let (origin, path) = split_url(server_url)?;
    let mut candidates: Vec<String> = from_challenge.map(str::to_owned).into_iter().collect();
    if !path.is_empty() && path != "/" {
        candidates.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    candidates.push(format!("{origin}/.well-known/oauth-protected-resource"));
    for url in candidates {
        let Some(document) = get_json(http, &url).await? else {
            continue;
        };
        let resource = document
            .get("resource")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the protected resource metadata at {url} has no `resource`"))?
            .to_owned();
        if !resource_covers(&resource, server_url) {
            return Err(format!(
                "the protected resource metadata at {url} is for {resource}, not for {server_url}; \
                 brain does not authorize for another resource"
            ));
        }
        let authorization_server = document
            .get("authorization_servers")
            .and_then(Value::as_array)
            .and_then(|servers| servers.first())
            .and_then(Value::as_str)
            .ok_or_else(|| {
                format!("the protected resource metadata at {url} names no authorization server")
            })?
            .to_owned();
        return Ok(Resource {
            resource,
            authorization_server,
            scopes_supported: strings(document.get("scopes_supported")),
            legacy: false,
        });
    }
    Ok(Resource {
        resource: server_url.to_owned(),
        authorization_server: origin,
        scopes_supported: Vec::new(),
        legacy: true,
    })
}

/// Whether the metadata's `resource` names the server at `server_url`: the same origin, and a
/// path that is the server's path or a prefix of it at a `/` boundary.
fn resource_covers(resource: &str, server_url: &str) -> bool {
    let (Ok((origin, path)), Ok((server_origin, server_path))) =
        (split_url(resource), split_url(server_url))
    else {
        return false;
    };
    if !origin.eq_ignore_ascii_case(&server_origin) {
        return false;
    }
    let path = path.trim_end_matches('/');
    server_path == path
        || server_path.trim_end_matches('/') == path
        || server_path.starts_with(&format!("{path}/"))
}

/// An authorization server, from its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: String,
    pub(crate) registration_endpoint: Option<String>,
    pub(crate) scopes_supported: Vec<String>,
    /// `token_endpoint_auth_methods_supported`; `None` when absent (RFC 8414: then
    /// `client_secret_basic`).
    pub(crate) auth_methods: Option<Vec<String>>,
    pub(crate) client_id_metadata_document_supported: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    pub(crate) iss_parameter_supported: bool,
    /// `code_challenge_methods_supported` lists `S256` (assumed for a server that publishes no
    /// metadata, MCP 2025-03-26).
    pub(crate) pkce_s256: bool,
    /// `jwks_uri`: where the issuer's signing keys are.
    pub(crate) jwks_uri: Option<String>,
}

/// The metadata of the authorization server `issuer`: RFC 8414 then OpenID discovery, with the
/// path-insert forms first for an issuer with a path, and its `issuer` checked to be exactly
/// `issuer`. A `legacy` server (no protected resource metadata) that publishes none gets the
/// 2025-03-26 default endpoints under its origin.
pub(crate) async fn authorization_server(
    http: &HttpClient,
    issuer: &str,
    legacy: bool,
) -> Result<ServerMetadata, String> {
    require_secure(issuer, "the authorization server")?;
    let (origin, path) = split_url(issuer)?;
    let path = path.trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    for url in &candidates {
        let Some(document) = get_json(http, url).await? else {
            continue;
        };
        let field = |name: &str| {
            document
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let found_issuer = field("issuer").unwrap_or_default();
        // Without protected resource metadata the issuer was guessed from the server's origin
        // (2025-03-26), so there is nothing to compare it with.
        if !legacy && found_issuer != issuer {
            return Err(format!(
                "the authorization server metadata at {url} names issuer {found_issuer:?}, not \
                 {issuer:?}; brain refuses metadata of another issuer (RFC 8414 §3.3)"
            ));
        }
        let token_endpoint = field("token_endpoint").ok_or_else(|| {
            format!("the authorization server metadata at {url} has no token_endpoint")
        })?;
        return Ok(ServerMetadata {
            issuer: if legacy && found_issuer.is_empty() {
                issuer.to_owned()
            } else {
                found_issuer
            },
            authorization_endpoint: field("authorization_endpoint"),
            token_endpoint,
            registration_endpoint: field("registration_endpoint"),
            scopes_supported: strings(document.get("scopes_supported")),
            auth_methods: document
                .get("token_endpoint_auth_methods_supported")
                .map(|methods| strings(Some(methods))),
            client_id_metadata_document_supported: document
                .get("client_id_metadata_document_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            iss_parameter_supported: document
                .get("authorization_response_iss_parameter_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            pkce_s256: strings(document.get("code_challenge_methods_supported"))
                .iter()
                .any(|method| method == "S256"),
            jwks_uri: field("jwks_uri"),
        });
    }
    if legacy {
        return Ok(ServerMetadata {
            issuer: issuer.to_owned(),
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: format!("{origin}/token"),
            registration_endpoint: Some(format!("{origin}/register")),
            scopes_supported: Vec::new(),
            auth_methods: None,
            client_id_metadata_document_supported: false,
            iss_parameter_supported: false,
            pkce_s256: true,
            jwks_uri: None,
        });
    }
    Err(format!(
        "the authorization server {issuer} publishes no metadata (tried {})",
        candidates.join(", ")
    ))
}

/// The strings of a JSON array (others skipped); empty when absent.
fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_challenges_with_quoted_and_bare_params() {
        let parsed = parse_challenges(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp", DPoP algs=ES256 error=use_dpop_nonce"#,
        );
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].scheme, "bearer");
        assert_eq!(parsed[0].error.as_deref(), Some("insufficient_scope"));
        assert_eq!(parsed[0].scope.as_deref(), Some("mcp:basic mcp:write"));
        assert_eq!(
            parsed[0].resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(parsed[1].scheme, "dpop");
        assert_eq!(parsed[1].error.as_deref(), Some("use_dpop_nonce"));
        assert_eq!(parse_challenges(r#"Bearer realm="a\"b""#).len(), 1);
        assert!(parse_challenges("").is_empty());
    }

    #[test]
    fn a_resource_covers_its_server_by_origin_and_path_prefix() {
        assert!(resource_covers(
            "http://localhost:5/mcp",
            "http://localhost:5/mcp"
        ));
        assert!(resource_covers(
            "http://localhost:5",
            "http://localhost:5/mcp"
        ));
        assert!(resource_covers(
            "http://LOCALHOST:5/",
            "http://localhost:5/mcp"
        ));
        assert!(!resource_covers(
            "https://evil.example.com/mcp",
            "http://localhost:5/mcp"
        ));
        assert!(!resource_covers(
            "http://localhost:5/mc",
            "http://localhost:5/mcp"
        ));
        assert!(!resource_covers(
            "http://localhost:6/mcp",
            "http://localhost:5/mcp"
        ));
    }
}
