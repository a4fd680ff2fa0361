//! A small OAuth authorization server that issues JWT access tokens (RFC 9068) for the tests of
//! brain as a resource server (`brain_runtime::auth::AccessTokenVerifier`): its metadata (RFC
//! 8414) at `/.well-known/oauth-authorization-server` names its JWKS at `/jwks`. It holds P-256
//! signing keys (ES256), mints `at+jwt` tokens with any claims and key id, and can be made slow
//! (a delay before each JWKS answer), rotate its keys (publish a new one, withdraw an old one
//! while still able to sign with it), send a `Cache-Control` `max-age` with its JWKS, count the
//! JWKS fetches, and go away (stop listening and drop its connections).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The running issuer; it stops when dropped.
pub struct TestIssuer {
    url: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

struct Shared {
    url: String,
    state: Mutex<IssuerState>,
    jwks_fetches: AtomicUsize,
}

#[derive(Default)]
struct IssuerState {
    /// Every key it can sign with, by key id.
    keys: BTreeMap<String, SigningKey>,
    /// The key ids its JWKS lists, in order.
    published: Vec<String>,
    /// Waited before each JWKS answer.
    delay: Duration,
    /// The `max-age` of its JWKS answers, if any.
    max_age: Option<u64>,
}

#[derive(Clone)]
struct SigningKey {
    encoding: EncodingKey,
    jwk: Jwk,
}

impl TestIssuer {
    /// An issuer on `127.0.0.1` with one published key, `key-1`.
    pub async fn start() -> TestIssuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!(
            "http://127.0.0.1:{}",
            listener.local_addr().expect("an address").port()
        );
        let shared = Arc::new(Shared {
            url: url.clone(),
            state: Mutex::new(IssuerState::default()),
            jwks_fetches: AtomicUsize::new(0),
        });
        let router = axum::Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/jwks", get(jwks))
            .with_state(Arc::clone(&shared));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let builder = Arc::new(builder);
            loop {
                let tcp = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((tcp, _)) => tcp,
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    },
                    () = stopped.cancelled() => return,
                };
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                let (builder, stopped) = (Arc::clone(&builder), stopped.clone());
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(tcp);
                    tokio::select! {
                        _ = builder.serve_connection(io, service) => {}
                        () = stopped.cancelled() => {}
                    }
                });
            }
        });
        let issuer = TestIssuer { url, shared, stop };
        issuer.add_key("key-1");
        issuer
    }

    /// Its issuer identifier (`http://127.0.0.1:<port>`, no trailing slash).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many times its JWKS was fetched so far.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Makes a new P-256 key `kid` and publishes it in the JWKS.
    pub fn add_key(&self, kid: &str) {
        let key = SigningKey::generate(kid);
        let mut state = self.state();
        state.keys.insert(kid.to_owned(), key);
        if !state.published.iter().any(|published| published == kid) {
            state.published.push(kid.to_owned());
        }
    }

    /// Makes a new P-256 key `kid` it can sign with, without publishing it.
    pub fn add_unpublished_key(&self, kid: &str) {
        let key = SigningKey::generate(kid);
        self.state().keys.insert(kid.to_owned(), key);
    }

    /// Takes `kid` out of the JWKS; it can still sign with it.
    pub fn withdraw_key(&self, kid: &str) {
        self.state().published.retain(|published| published != kid);
    }

    /// Puts the known key `kid` back into the JWKS.
    pub fn republish_key(&self, kid: &str) {
        let mut state = self.state();
        assert!(state.keys.contains_key(kid), "no key {kid}");
        if !state.published.iter().any(|published| published == kid) {
            state.published.push(kid.to_owned());
        }
    }

    /// Waits `delay` before each JWKS answer (from the next request on).
    pub fn set_jwks_delay(&self, delay: Duration) {
        self.state().delay = delay;
    }

    /// Sends `Cache-Control: max-age=<seconds>` with the JWKS (`None`: no `Cache-Control`).
    pub fn set_max_age(&self, seconds: Option<u64>) {
        self.state().max_age = seconds;
    }

    /// Stops listening and drops every connection: the issuer is unreachable from now on.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Claims of a valid access token for `resource`: `iss`, `aud`, `sub` `user-1`,
    /// `client_id` `client-1`, `tenant` `acme`, `iat` now, `exp` in 5 minutes, a `jti`.
    pub fn claims(&self, resource: &str) -> serde_json::Map<String, Value> {
        let now = now();
        let Value::Object(claims) = json!({
            "iss": self.url,
            "aud": resource,
            "sub": "user-1",
            "client_id": "client-1",
            "tenant": "acme",
            "iat": now,
            "exp": now + 300,
            "jti": format!("jti-{now}-{}", self.jwks_fetches()),
        }) else {
            unreachable!("an object")
        };
        claims
    }

    /// An `at+jwt` token with `claims`, signed (ES256) with its key `kid` and naming it.
    pub fn token(&self, kid: &str, claims: &serde_json::Map<String, Value>) -> String {
        self.token_as(kid, Some(kid), claims)
    }

    /// An `at+jwt` token with `claims`, signed with the key `signer` and naming `kid` (none
    /// with `None`).
    pub fn token_as(
        &self,
        signer: &str,
        kid: Option<&str>,
        claims: &serde_json::Map<String, Value>,
    ) -> String {
        let key = self
            .state()
            .keys
            .get(signer)
            .cloned()
            .unwrap_or_else(|| panic!("no key {signer}"));
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("at+jwt".into());
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &key.encoding).expect("a signed token")
    }

    fn state(&self) -> std::sync::MutexGuard<'_, IssuerState> {
        self.shared.state()
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, IssuerState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl SigningKey {
    fn generate(kid: &str) -> SigningKey {
        use p256::elliptic_curve::Generate;
        use p256::pkcs8::EncodePrivateKey;
        let secret = p256::SecretKey::generate();
        let der = secret.to_pkcs8_der().expect("a PKCS#8 key");
        let encoding = EncodingKey::from_ec_der(der.as_bytes());
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::ES256).expect("a JWK");
        jwk.common.key_id = Some(kid.to_owned());
        SigningKey { encoding, jwk }
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

async fn metadata(State(shared): State<Arc<Shared>>) -> Response {
    let url = &shared.url;
    let document = json!({
        "issuer": url,
        "token_endpoint": format!("{url}/token"),
        "jwks_uri": format!("{url}/jwks"),
        "response_types_supported": ["code"],
    });
    ([(CONTENT_TYPE, "application/json")], document.to_string()).into_response()
}

async fn jwks(State(shared): State<Arc<Shared>>) -> Response {
    shared.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let delay = shared.state().delay;
    tokio::time::sleep(delay).await;
    let (set, max_age) = {
        let state = shared.state();
        let keys = state
            .published
            .iter()
            .filter_map(|kid| state.keys.get(kid))
            .map(|key| key.jwk.clone())
            .collect();
        (JwkSet { keys }, state.max_age)
    };
    let mut response = (
        [(CONTENT_TYPE, "application/jwk-set+json")],
        serde_json::to_string(&set).expect("a JWKS"),
    )
        .into_response();
    if let Some(max_age) = max_age {
        response.headers_mut().insert(
            CACHE_CONTROL,
            format!("max-age={max_age}")
                .parse()
                .expect("a header value"),
        );
    }
    response
}
