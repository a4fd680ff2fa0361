//! A real OAuth 2.1 authorization server for the OAuth tests — `oidc-provider@9.13.3` (npm, an
//! OpenID-certified server) run by `tests/interop/oauth_server.mjs` on a free loopback port,
//! approving every authorization at once — and a [`Browser`] that follows its login and consent
//! redirects with cookies, as a user's browser would, until it reaches brain's redirect URI.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};

use brain_runtime::auth::UserAgent;
use serde_json::Value;

/// The clients the authorization server knows (see `oauth_server.mjs`).
pub const SERVICE_CLIENT: &str = "brain-service";
/// The secret of [`SERVICE_CLIENT`].
pub const SERVICE_SECRET: &str = "service-secret-0123456789";
/// A public native client for users (PKCE, refresh tokens).
pub const USER_CLIENT: &str = "brain-user";
/// The MCP server's client, for introspection.
pub const RESOURCE_CLIENT: &str = "mcp-server";
/// The secret of [`RESOURCE_CLIENT`].
pub const RESOURCE_SECRET: &str = "mcp-server-secret-0123456789";
/// A gateway's client allowed the token exchange grant (RFC 8693) on behalf of users.
pub const EXCHANGE_CLIENT: &str = "brain-exchange";
/// The secret of [`EXCHANGE_CLIENT`].
pub const EXCHANGE_SECRET: &str = "exchange-secret-0123456789";
/// A second machine client; with `BRAIN_TEST_AS_JWT=1` its tokens name tenant `globex` (and
/// [`SERVICE_CLIENT`]'s `acme`).
pub const GLOBEX_CLIENT: &str = "brain-service-globex";
/// The secret of [`GLOBEX_CLIENT`].
pub const GLOBEX_SECRET: &str = "globex-secret-0123456789";
/// Users who log in through [`USER_CLIENT`] (the `login_hint` of [`user_token`]); with
/// `BRAIN_TEST_AS_JWT=1` their tokens name tenant `acme` ([`ALICE`], [`CAROL`]) and `globex`
/// ([`BOB`]).
pub const ALICE: &str = "alice";
/// See [`ALICE`].
pub const BOB: &str = "bob";
/// See [`ALICE`]: a second user of `acme`.
pub const CAROL: &str = "carol";

/// The authorization server process; killed when dropped.
#[derive(Debug)]
pub struct AuthorizationServer {
    child: Child,
    /// Its issuer, `http://127.0.0.1:PORT`.
    pub issuer: String,
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AuthorizationServer {
    /// Starts one issuing tokens for `resource` that live `access_ttl` seconds.
    pub fn start(resource: &str, access_ttl: u64) -> AuthorizationServer {
        AuthorizationServer::start_with(resource, access_ttl, &[])
    }

    /// [`AuthorizationServer::start`] with `env` set (`BRAIN_TEST_AS_ROTATE=0`: refresh tokens
    /// may be presented again, as within a reuse grace period; `BRAIN_TEST_AS_REFRESH_DELAY_MS`:
    /// the first refresh is answered that late, after the token was spent).
    pub fn start_with(
        resource: &str,
        access_ttl: u64,
        env: &[(&str, &str)],
    ) -> AuthorizationServer {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop");
        assert!(
            dir.join("node_modules/oidc-provider/package.json").exists(),
            "oidc-provider is missing: run tests/interop/setup.sh (cargo xtask ci does)"
        );
        let mut child = Command::new("node")
            .arg(dir.join("oauth_server.mjs"))
            .arg(resource)
            .arg(access_ttl.to_string())
            .current_dir(&dir)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(match std::env::var_os("BRAIN_TEST_AS_LOG") {
                Some(path) => Stdio::from(std::fs::File::create(path).expect("the log file")),
                None => Stdio::null(),
            })
            .spawn()
            .expect("node starts the authorization server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the authorization server says where it listens");
        let started: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("the authorization server printed {line:?}: {error}"));
        AuthorizationServer {
            child,
            issuer: started["issuer"].as_str().expect("an issuer").to_owned(),
        }
    }

    /// What it saw: `{"token": {grant_type: n}, "token_errors": {...}, "revocations": n,
    /// "authorizations": n}`.
    pub async fn stats(&self) -> Value {
        client()
            .get(format!("{}/stats", self.issuer))
            .send()
            .await
            .expect("stats")
            .json()
            .await
            .expect("JSON stats")
    }

    /// Successful token requests of `grant_type`.
    pub async fn tokens(&self, grant_type: &str) -> u64 {
        self.stats().await["token"][grant_type]
            .as_u64()
            .unwrap_or(0)
    }

    /// An access token for `resource` by the client credentials grant, as `client` (whose secret
    /// is `secret`).
    pub async fn client_credentials(
        &self,
        client_id: &str,
        secret: &str,
        resource: &str,
    ) -> String {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "client_credentials")
            .append_pair("resource", resource)
            .append_pair("scope", "mcp:basic")
            .finish();
        let request = client()
            .post(format!("{}/token", self.issuer))
            .basic_auth(client_id, Some(secret));
        access_token(request, body, client_id).await
    }

    /// An access token for `resource` (scope `mcp:basic`) that `user` obtains through the user
    /// client [`USER_CLIENT`], as a user does: the authorization code flow with PKCE (S256) and
    /// `login_hint=user`, its login and consent followed by [`follow`] (a browser of its own: no
    /// session is shared with another user's), then the code exchanged at the token endpoint.
    /// With `BRAIN_TEST_AS_JWT=1` it is a JWT with `sub` = `user`, `client_id` = [`USER_CLIENT`],
    /// `aud` = `resource` and `tenant` = the user's (see [`ALICE`]).
    pub async fn user_token(&self, resource: &str, user: &str) -> String {
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use sha2::Digest;
        let redirect_uri = Browser.redirect_uri();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        // 43 characters, unique enough for a test (the verifier need only be unguessable by an
        // attacker, of whom there is none here).
        let verifier =
            URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(format!("{user} {nanos}").as_bytes()));
        let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
        let mut authorize = url::Url::parse(&format!("{}/auth", self.issuer)).expect("a URL");
        authorize
            .query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", USER_CLIENT)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("scope", "mcp:basic")
            .append_pair("resource", resource)
            .append_pair("state", &nanos.to_string())
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("login_hint", user);
        let callback = follow(authorize.as_str(), &redirect_uri)
            .await
            .unwrap_or_else(|error| panic!("{user} logs in: {error}"));
        let callback = url::Url::parse(&callback).expect("the callback URL");
        let code = callback
            .query_pairs()
            .find(|(key, _)| key == "code")
            .map(|(_, code)| code.into_owned())
            .unwrap_or_else(|| panic!("no code in {callback}"));
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("client_id", USER_CLIENT)
            .append_pair("code", &code)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("code_verifier", &verifier)
            .append_pair("resource", resource)
            .finish();
        let request = client().post(format!("{}/token", self.issuer));
        access_token(request, body, user).await
    }

    /// Revokes `token` (RFC 7009) as the public user client: an access token alone, or a refresh
    /// token with its whole grant.
    pub async fn revoke(&self, token: &str) {
        self.revoke_as(token, USER_CLIENT, None).await;
    }

    /// Revokes `token` (RFC 7009) as `client` (authenticated with `secret` when it has one): a
    /// server revokes only its own client's tokens.
    pub async fn revoke_as(&self, token: &str, client_id: &str, secret: Option<&str>) {
        let mut body = form_urlencoded::Serializer::new(String::new());
        body.append_pair("token", token);
        if secret.is_none() {
            body.append_pair("client_id", client_id);
        }
        let body = body.finish();
        let mut request = client().post(format!("{}/token/revocation", self.issuer));
        if let Some(secret) = secret {
            request = request.basic_auth(client_id, Some(secret));
        }
        let response = request
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("revocation");
        assert!(response.status().is_success(), "revocation: {response:?}");
    }
}

/// An authorization server issuing tokens that live `ttl` seconds, and a test server guarding
/// `/mcp` with them (introspected on every request), whose `admin_tools` also need `mcp:admin`.
pub async fn servers(
    ttl: u64,
    admin_tools: &[&str],
) -> (AuthorizationServer, crate::server::TestServer) {
    servers_with(ttl, admin_tools, &[]).await
}

/// [`servers`] with the authorization server's `env` (see [`AuthorizationServer::start_with`]).
pub async fn servers_with(
    ttl: u64,
    admin_tools: &[&str],
    env: &[(&str, &str)],
) -> (AuthorizationServer, crate::server::TestServer) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let resource = format!("http://{}/mcp", listener.local_addr().unwrap());
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let authorization = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        AuthorizationServer::start_with(&resource, ttl, &env)
    })
    .await
    .unwrap();
    let faults = crate::server::Faults {
        oauth: Some(crate::server::OAuthGuard {
            issuer: authorization.issuer.clone(),
            client_id: RESOURCE_CLIENT.into(),
            client_secret: RESOURCE_SECRET.into(),
            scope: "mcp:basic".into(),
            admin_tools: admin_tools.iter().map(|t| (*t).to_owned()).collect(),
        }),
        ..crate::server::Faults::default()
    };
    let server = crate::server::TestServer::serve(listener, faults).unwrap();
    (authorization, server)
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
}

/// Follows the authorization server's redirects from `url` with a cookie jar, until one leads to
/// `redirect_uri`; returns that URL (not requested).
pub async fn follow(url: &str, redirect_uri: &str) -> Result<String, String> {
    let http = client();
    let mut cookies: Vec<(String, String)> = Vec::new();
    let mut next = url.to_owned();
    for _ in 0..20 {
        if next.starts_with(redirect_uri) {
            return Ok(next);
        }
        let cookie = cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ");
        let response = http
            .get(&next)
            .header("cookie", cookie)
            .send()
            .await
            .map_err(|error| {
                let mut text = format!("GET {next}: {error}");
                let mut source = std::error::Error::source(&error);
                while let Some(cause) = source {
                    text += &format!(": {cause}");
                    source = cause.source();
                }
                text
            })?;
        for set in response.headers().get_all("set-cookie") {
            let Some((name, value)) = set
                .to_str()
                .ok()
                .and_then(|set| set.split(';').next())
                .and_then(|pair| pair.split_once('='))
            else {
                continue;
            };
            cookies.retain(|(known, _)| known != name);
            cookies.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .ok_or_else(|| format!("GET {next}: HTTP {} without a redirect", response.status()))?;
        next = match url::Url::parse(location) {
            Ok(absolute) => absolute.to_string(),
            Err(_) => url::Url::parse(&next)
                .and_then(|base| base.join(location))
                .map_err(|error| error.to_string())?
                .to_string(),
        };
    }
    Err("too many redirects".into())
}

/// The `access_token` a token request with the form `body` answers (`who` for the panic).
async fn access_token(request: reqwest::RequestBuilder, body: String, who: &str) -> String {
    let response: Value = request
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .expect("a token request")
        .json()
        .await
        .expect("a JSON answer");
    response["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no access token for {who}: {response}"))
        .to_owned()
}

/// The claims of a JWT (its payload, base64url-decoded; the signature is not checked).
pub fn jwt_claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token
        .split('.')
        .nth(1)
        .unwrap_or_else(|| panic!("not a JWT: {token}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("a base64url payload");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

/// A user at a browser who approves whatever is asked (the server approves at once); brain's
/// redirect URI is never requested: its URL is handed back as a loopback listener would.
#[derive(Debug, Default)]
pub struct Browser;

impl UserAgent for Browser {
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1:9/callback".into()
    }

    fn authorize<'a>(
        &'a self,
        url: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<String, brain_runtime::auth::AuthError>> + Send + 'a>>
    {
        Box::pin(async move {
            follow(url, &self.redirect_uri())
                .await
                .map_err(brain_runtime::auth::AuthError::UserAgent)
        })
    }
}

/// Runs four `brain-replica` processes (`exe`, the integration test's
/// `env!("CARGO_BIN_EXE_brain-replica")`) at once with `args` and `env`, and waits for each to
/// succeed (its output in the failure).
pub async fn four_replicas(exe: &str, args: &[&str], env: &[(&str, &str)]) {
    let replicas: Vec<_> = (0..4)
        .map(|_| {
            Command::new(exe)
                .args(args)
                .envs(env.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("brain-replica starts")
        })
        .collect();
    for (i, replica) in replicas.into_iter().enumerate() {
        let output = tokio::task::spawn_blocking(move || replica.wait_with_output().unwrap())
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "replica {i}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
