//! The authorization code flow with PKCE (OAuth 2.1): the user approves brain at the
//! authorization server, which sends them back to brain's redirect URI with a code. brain checks
//! `state` and `iss` (RFC 9207) before it spends the code. A [`UserAgent`] takes the user there:
//! [`LoopbackAgent`] (a browser and a loopback redirect, as `brain-harness login` does), or the
//! host's own.

use std::future::Future;
use std::pin::Pin;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::dpop::{DpopKey, Nonces};
use super::grant::{self, Authn, Issued};
use super::metadata::ServerMetadata;
use crate::http::HttpClient;

/// What takes the user to the authorization server and brings back where it redirected them.
pub trait UserAgent: Send + Sync {
    /// The redirect URI to register and send (a loopback URL for a native client).
    fn redirect_uri(&self) -> String;

    /// Shows the user the authorization request `url` and returns the full URL the
    /// authorization server redirected them to (with `code`, `state` and maybe `iss`), or
    /// [`AuthError::UserAgent`](super::error::AuthError::UserAgent) saying why not.
    fn authorize<'a>(
        &'a self,
        url: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<String, super::error::AuthError>> + Send + 'a>>;
}

/// A redirect received on a loopback port (RFC 8252 §7.3): `show` presents the authorization URL
/// (print it, open a browser); the first request to `/callback` ends the wait.
pub struct LoopbackAgent {
    listener: std::sync::Mutex<Option<std::net::TcpListener>>,
    port: u16,
    show: Box<dyn Fn(&str) + Send + Sync>,
}

impl LoopbackAgent {
    /// Listens on a free port of 127.0.0.1 now, so that the redirect URI is known.
    pub fn bind(show: impl Fn(&str) + Send + Sync + 'static) -> std::io::Result<LoopbackAgent> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        Ok(LoopbackAgent {
            port: listener.local_addr()?.port(),
            listener: std::sync::Mutex::new(Some(listener)),
            show: Box::new(show),
        })
    }
}

impl UserAgent for LoopbackAgent {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn authorize<'a>(
        &'a self,
        url: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<String, super::error::AuthError>> + Send + 'a>> {
        Box::pin(async {
            self.receive(url)
                .await
                .map_err(super::error::AuthError::UserAgent)
        })
    }
}

impl LoopbackAgent {
    /// Shows `url`, then waits for the redirect on the loopback port.
    async fn receive(&self, url: &str) -> Result<String, String> {
        let listener = self
            .listener
            .lock()
            .map_err(|_| "the loopback listener is unusable".to_owned())?
            .take()
            .ok_or("this loopback agent has already been used")?;
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|error| format!("cannot listen for the redirect: {error}"))?;
        (self.show)(url);
        loop {
            let (mut stream, _) = listener
                .accept()
                .await
                .map_err(|error| format!("cannot accept the redirect: {error}"))?;
            let mut buffer = vec![0u8; 16 * 1024];
            let mut read = 0;
            while read < buffer.len() && !buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            let head = String::from_utf8_lossy(&buffer[..read]);
            let target = head
                .lines()
                .next()
                .and_then(|line| line.strip_prefix("GET "))
                .and_then(|rest| rest.split(' ').next())
                .unwrap_or_default()
                .to_owned();
            if !target.starts_with("/callback") {
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            let page = "<!doctype html><title>brain</title><p>brain received the \
                        authorization. You can close this window.</p>";
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            return Ok(format!("http://127.0.0.1:{}{target}", self.port));
        }
    }
}

/// One authorization: PKCE, state, the redirect checked, the code exchanged.
pub(crate) struct CodeFlow<'a> {
    pub(crate) metadata: &'a ServerMetadata,
    pub(crate) authn: Authn<'a>,
    pub(crate) scope: Option<&'a str>,
    pub(crate) resource: &'a str,
}

impl CodeFlow<'_> {
    /// Takes the user to the authorization server through `agent` and spends the code it sends
    /// back at the token endpoint, over `http`, with a DPoP proof when `dpop`.
    pub(crate) async fn run(
        &self,
        http: &HttpClient,
        dpop: Option<(&DpopKey, &Nonces)>,
        agent: &dyn UserAgent,
    ) -> Result<Issued, String> {
        let metadata = self.metadata;
        // OAuth 2.1 and the MCP spec: no PKCE with S256, no authorization.
        if !metadata.pkce_s256 {
            return Err(format!(
                "the authorization server {} does not list S256 in code_challenge_methods_supported: \
                 brain does not authorize without PKCE",
                metadata.issuer
            ));
        }
        let endpoint = metadata.authorization_endpoint.as_deref().ok_or_else(|| {
            format!(
                "the authorization server {} has no authorization endpoint",
                metadata.issuer
            )
        })?;
        let verifier = random_text(32)?;
        let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
        let state = random_text(16)?;
        let redirect_uri = agent.redirect_uri();
        let url = self.authorization_url(endpoint, &redirect_uri, &challenge, &state)?;
        let callback = agent
            .authorize(url.as_str())
            .await
            .map_err(|error| error.to_string())?;
        // Never quoted in a message: it carries the authorization code.
        let callback = url::Url::parse(&callback)
            .map_err(|error| format!("the redirect brain received is not a URL: {error}"))?;
        let param = |name: &str| {
            callback
                .query_pairs()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
        };
        // `state` first: a redirect that is not the answer to this request says nothing.
        if param("state").as_deref() != Some(state.as_str()) {
            return Err("the redirect's `state` does not match the request's: refused".into());
        }
        if let Some(error) = param("error") {
            let bounded = |text: String| text.chars().take(200).collect::<String>();
            let description = param("error_description").map(bounded).unwrap_or_default();
            return Err(format!(
                "the authorization server refused the authorization: {} {description}",
                bounded(error)
            ));
        }
        // RFC 9207: an `iss` must be the issuer, exactly; one the metadata promises must be there.
        match param("iss") {
            Some(iss) if iss != metadata.issuer => {
                return Err(format!(
                    "the redirect came from issuer {iss:?}, not {:?}: the code was not used \
                     (RFC 9207, a mix-up attack or a misconfigured server)",
                    metadata.issuer
                ));
            }
            None if metadata.iss_parameter_supported => {
                return Err(format!(
                    "the redirect has no `iss`, which {} promises to send: the code was not used \
                     (RFC 9207)",
                    metadata.issuer
                ));
            }
            _ => {}
        }
        let code = param("code").ok_or("the redirect carries no authorization code")?;
        let form = vec![
            ("grant_type", grant::GRANT_AUTHORIZATION_CODE.to_owned()),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", self.resource.to_owned()),
        ];
        grant::token_request(
            http,
            &metadata.token_endpoint,
            form,
            Some(&self.authn),
            dpop,
        )
        .await
        .map_err(|refused| refused.message)
    }

    /// The authorization request the user is taken to: `endpoint` with the client, the
    /// `redirect_uri`, the PKCE `challenge` (S256), the `state`, the resource and the scope.
    fn authorization_url(
        &self,
        endpoint: &str,
        redirect_uri: &str,
        challenge: &str,
        state: &str,
    ) -> Result<url::Url, String> {
        let mut url = url::Url::parse(endpoint).map_err(|error| {
            format!("the authorization endpoint {endpoint:?} is not a URL: {error}")
        })?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.authn.client.id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("code_challenge", challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", state)
                .append_pair("resource", self.resource);
            if let Some(scope) = self.scope {
                query.append_pair("scope", scope);
            }
        }
        Ok(url)
    }
}

/// `bytes` random bytes, base64url.
fn random_text(bytes: usize) -> Result<String, String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|error| format!("no randomness: {error}"))?;
    Ok(URL_SAFE_NO_PAD.encode(buffer))
}
