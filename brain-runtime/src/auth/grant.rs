//! Requests to the authorization server: token requests of every grant with the client's
//! authentication (`client_secret_basic`, `client_secret_post`, `private_key_jwt`, none), DPoP
//! proofs with the server's nonce, and dynamic client registration (RFC 7591).

use crate::http::Body;
use base64::Engine;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::dpop::{DpopKey, Nonces};
use super::request::{require_secure, send};
use super::secret::{Secret, sensitive};
use crate::http::HttpClient;

pub(crate) const GRANT_CLIENT_CREDENTIALS: &str = "client_credentials";
pub(crate) const GRANT_AUTHORIZATION_CODE: &str = "authorization_code";
pub(crate) const GRANT_REFRESH_TOKEN: &str = "refresh_token";
pub(crate) const GRANT_JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub(crate) const GRANT_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693's token type of an OAuth access token (the subject token on behalf of a user).
pub(crate) const TOKEN_TYPE_ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
const ASSERTION_TYPE_JWT: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How a client proves who it is at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// A public client: its `client_id` in the body.
    None,
    /// `client_secret_basic`.
    Basic,
    /// `client_secret_post`.
    Post,
    /// `private_key_jwt` (RFC 7523 §2.2).
    PrivateKeyJwt,
}

impl ClientAuth {
    pub(crate) fn from_name(name: &str) -> Option<ClientAuth> {
        Some(match name {
            "none" => ClientAuth::None,
            "client_secret_basic" => ClientAuth::Basic,
            "client_secret_post" => ClientAuth::Post,
            "private_key_jwt" => ClientAuth::PrivateKeyJwt,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Basic => "client_secret_basic",
            ClientAuth::Post => "client_secret_post",
            ClientAuth::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method for a client with a secret, as the server's metadata allows: basic when it
    /// lists it or lists nothing (RFC 8414's default), else post.
    pub(crate) fn for_secret(supported: Option<&[String]>) -> ClientAuth {
        match supported {
            Some(methods)
                if !methods.iter().any(|m| m == "client_secret_basic")
                    && methods.iter().any(|m| m == "client_secret_post") =>
            {
                ClientAuth::Post
            }
            _ => ClientAuth::Basic,
        }
    }
}

/// A client at one authorization server.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) id: String,
    pub(crate) secret: Option<Secret>,
    pub(crate) auth: ClientAuth,
}

/// What the client authenticates with besides its id and secret.
pub(crate) struct Authn<'a> {
    pub(crate) client: &'a Client,
    /// The key of `private_key_jwt`.
    pub(crate) key: Option<&'a EncodingKey>,
    /// The authorization server's issuer: the audience of a client assertion.
    pub(crate) issuer: &'a str,
}

impl Authn<'_> {
    fn apply(
        &self,
        form: &mut Vec<(&'static str, String)>,
        headers: &mut HeaderMap,
    ) -> Result<(), String> {
        let client = self.client;
        match client.auth {
            ClientAuth::None => form.push(("client_id", client.id.clone())),
            ClientAuth::Basic => {
                let secret = client
                    .secret
                    .as_ref()
                    .map(Secret::expose)
                    .unwrap_or_default();
                let encode = |text: &str| {
                    form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>()
                };
                let pair = format!("{}:{}", encode(&client.id), encode(secret));
                let value = format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                );
                let value = sensitive(&value).ok_or("the client id cannot be sent in a header")?;
                headers.insert(AUTHORIZATION, value);
            }
            ClientAuth::Post => {
                form.push(("client_id", client.id.clone()));
                let secret = client
                    .secret
                    .as_ref()
                    .map(Secret::expose)
                    .unwrap_or_default();
                form.push(("client_secret", secret.to_owned()));
            }
            ClientAuth::PrivateKeyJwt => {
                let key = self.key.ok_or("private_key_jwt needs a private key")?;
                form.push(("client_id", client.id.clone()));
                form.push(("client_assertion_type", ASSERTION_TYPE_JWT.to_owned()));
                form.push((
                    "client_assertion",
                    client_assertion(&client.id, self.issuer, key)?,
                ));
            }
        }
        Ok(())
    }
}

/// A client assertion (RFC 7523 §3): `iss` = `sub` = the client, `aud` = the issuer, valid 60 s.
fn client_assertion(client_id: &str, issuer: &str, key: &EncodingKey) -> Result<String, String> {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({
        "iss": client_id,
        "sub": client_id,
        "aud": issuer,
        "jti": uuid::Uuid::new_v4().to_string(),
        "iat": now,
        "exp": now + 60,
    });
    jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, key)
        .map_err(|error| format!("cannot sign the client assertion: {error}"))
}

/// A token the authorization server issued.
#[derive(Debug)]
pub(crate) struct Issued {
    pub(crate) access_token: Secret,
    /// `Bearer` or `DPoP` (as issued, compared case-insensitively).
    pub(crate) token_type: String,
    pub(crate) expires_in: Option<u64>,
    pub(crate) refresh_token: Option<Secret>,
}

/// Why a token request failed.
#[derive(Debug)]
pub(crate) struct Refused {
    /// The OAuth `error` code, when the server gave one (`invalid_grant`, ...).
    pub(crate) error: Option<String>,
    pub(crate) message: String,
}

/// POSTs a token request to `endpoint`, authenticated as `authn`, with a DPoP proof when `dpop`
/// (retried once with the server's nonce when it asks for one).
pub(crate) async fn token_request(
    http: &HttpClient,
    endpoint: &str,
    mut form: Vec<(&'static str, String)>,
    authn: Option<&Authn<'_>>,
    dpop: Option<(&DpopKey, &Nonces)>,
) -> Result<Issued, Refused> {
    let refused = |message: String| Refused {
        error: None,
        message,
    };
    require_secure(endpoint, "the token endpoint").map_err(refused)?;
    let mut headers = HeaderMap::new();
    if let Some(authn) = authn {
        authn.apply(&mut form, &mut headers).map_err(refused)?;
    }
    // What the request carries that a server might echo back in its error.
    let mut secrets: Vec<String> = form
        .iter()
        .filter(|(name, _)| *name != "grant_type" && *name != "resource" && *name != "scope")
        .map(|(_, value)| value.clone())
        .filter(|value| value.len() >= 8)
        .collect();
    if let Some(secret) = authn.and_then(|a| a.client.secret.as_ref()) {
        secrets.push(secret.expose().to_owned());
    }
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let mut nonce_retried = false;
    loop {
        let mut request = http::Request::post(endpoint)
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(map) = request.headers_mut() {
            map.extend(headers.clone());
            if let Some((key, nonces)) = dpop {
                let proof = key
                    .proof("POST", endpoint, nonces.get(endpoint).as_deref(), None)
                    .map_err(refused)?;
                map.insert(
                    "dpop",
                    HeaderValue::from_str(&proof).map_err(|e| refused(e.to_string()))?,
                );
            }
        }
        let request = request
            .body(Body::from(Bytes::from(body.clone())))
            .map_err(|error| refused(format!("{endpoint:?} cannot be requested: {error}")))?;
        let answer = send(http, request).await.map_err(refused)?;
        if let Some((_, nonces)) = dpop {
            nonces.observe(endpoint, &answer.headers);
        }
        let json: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        let error = error_code(&json, &secrets);
        if !answer.status.is_success() {
            if dpop.is_some()
                && !nonce_retried
                && error.as_deref() == Some("use_dpop_nonce")
                && answer.headers.contains_key("dpop-nonce")
            {
                nonce_retried = true;
                continue;
            }
            let description = error_description(&json, &secrets);
            return Err(Refused {
                message: format!(
                    "the token endpoint {endpoint} refused the request: HTTP {}{}{description}",
                    answer.status,
                    error
                        .as_deref()
                        .map(|e| format!(", {e}"))
                        .unwrap_or_default(),
                ),
                error,
            });
        }
        return parse_issued(&json).ok_or_else(|| {
            refused(format!(
                "the token endpoint {endpoint} answered without an access_token"
            ))
        });
    }
}

/// The `error` of an error response: an OAuth error code is short printable ASCII (RFC 6749
/// §5.2); anything else, or anything holding a value the request carried, is not one.
fn error_code(json: &Value, secrets: &[String]) -> Option<String> {
    json.get("error")
        .and_then(Value::as_str)
        .filter(|e| e.len() <= 64 && e.bytes().all(|b| (0x20..0x7f).contains(&b)))
        .filter(|e| !secrets.iter().any(|s| e.contains(s.as_str())))
        .map(str::to_owned)
}

/// ` (the server's error_description)`, bounded, with every value the request carried cut out
/// (a server may echo the assertion or refresh token it refused); left out when a piece of one
/// would remain.
fn error_description(json: &Value, secrets: &[String]) -> String {
    json.get("error_description")
        .and_then(Value::as_str)
        .map(|d| {
            let mut d: String = d.chars().take(200).collect();
            for secret in secrets {
                d = d.replace(secret.as_str(), "[redacted]");
            }
            format!(" ({d})")
        })
        .filter(|d| !secrets.iter().any(|s| d.contains(prefix(s, 12))))
        .unwrap_or_default()
}

/// The first `chars` characters of `text`.
fn prefix(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(at, _)| &text[..at])
}

fn parse_issued(json: &Value) -> Option<Issued> {
    let text = |name: &str| json.get(name).and_then(Value::as_str).map(str::to_owned);
    Some(Issued {
        access_token: Secret::new(text("access_token")?),
        token_type: text("token_type").unwrap_or_else(|| "Bearer".into()),
        expires_in: json.get("expires_in").and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        }),
        refresh_token: text("refresh_token").map(Secret::new),
    })
}

/// Registers a client (RFC 7591) for the authorization code flow with `redirect_uri`.
pub(crate) async fn register(
    http: &HttpClient,
    endpoint: &str,
    redirect_uri: &str,
    supported: Option<&[String]>,
    scope: Option<&str>,
) -> Result<Client, String> {
    require_secure(endpoint, "the registration endpoint")?;
    let wanted = match supported {
        Some(methods) if methods.iter().any(|m| m == "none") => ClientAuth::None,
        Some(methods) => ClientAuth::for_secret(Some(methods)),
        None => ClientAuth::None,
    };
    let mut body = json!({
        "client_name": "brain",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted.name(),
        "application_type": "native",
    });
    if let Some(scope) = scope {
        body["scope"] = json!(scope);
    }
    let request = http::Request::post(endpoint)
        .header(ACCEPT, "application/json")
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(Bytes::from(body.to_string())))
        .map_err(|error| format!("{endpoint:?} cannot be requested: {error}"))?;
    let answer = send(http, request).await?;
    if !answer.status.is_success() {
        return Err(format!(
            "the registration endpoint {endpoint} refused to register brain: HTTP {}",
            answer.status
        ));
    }
    let json: Value = serde_json::from_slice(&answer.body)
        .map_err(|_| format!("the registration endpoint {endpoint} answered with invalid JSON"))?;
    let id = json
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the registration endpoint {endpoint} returned no client_id"))?;
    let secret = json
        .get("client_secret")
        .and_then(Value::as_str)
        .map(Secret::new);
    let auth = json
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .and_then(ClientAuth::from_name)
        .unwrap_or(if secret.is_some() {
            ClientAuth::for_secret(supported)
        } else {
            ClientAuth::None
        });
    Ok(Client {
        id: id.to_owned(),
        secret,
        auth,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_response_never_carries_what_the_request_carried() {
        let secrets = vec!["refresh-secret-0123456789".to_owned()];
        let echoed = serde_json::json!({
            "error": "invalid_grant",
            "error_description": "refresh token refresh-secret-0123456789 was revoked"
        });
        assert_eq!(
            error_code(&echoed, &secrets).as_deref(),
            Some("invalid_grant")
        );
        assert_eq!(
            error_description(&echoed, &secrets),
            " (refresh token [redacted] was revoked)"
        );
        // Cut off at 200 characters, a piece of the secret would remain: left out.
        let cut = serde_json::json!({"error_description": format!("{}refresh-secret-0123", "x".repeat(181))});
        assert_eq!(error_description(&cut, &secrets), "");
        let not_a_code = serde_json::json!({"error": "refresh-secret-0123456789"});
        assert_eq!(error_code(&not_a_code, &secrets), None);
        assert_eq!(
            error_code(&serde_json::json!({"error": "x\ny"}), &secrets),
            None
        );
    }
}
