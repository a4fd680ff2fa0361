//! A counting door in front of a third-party peer that keeps no count of its own: an HTTP proxy
//! on a free loopback port (axum) that forwards every request to the peer (reqwest, responses
//! streamed back as they come, SSE included) and counts the JSON-RPC methods POSTed through it —
//! the server side's count of what brain sent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

/// The proxy, stopped when dropped.
pub struct Counting {
    /// The peer's MCP endpoint, through the proxy.
    pub url: String,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    stop: CancellationToken,
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[derive(Clone)]
struct Door {
    client: reqwest::Client,
    /// `http://host:port` of the peer.
    origin: String,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Counting {
    /// A proxy in front of the MCP endpoint `url`, on its own thread and runtime.
    pub fn start(url: &str) -> Counting {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("an address").port();
        let parsed = url::Url::parse(url).expect("the peer's URL");
        let origin = parsed.origin().ascii_serialization();
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = CancellationToken::new();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let door = Door {
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a client"),
            origin,
            counts: counts.clone(),
        };
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
                let app = axum::Router::new().fallback(forward).with_state(door);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(stopped.cancelled_owned())
                    .await;
            });
        });
        Counting {
            url: format!("http://127.0.0.1:{port}{}", parsed.path()),
            counts,
            stop,
        }
    }

    /// How many requests of `method` were POSTed so far.
    pub fn count(&self, method: &str) -> u64 {
        self.counts().get(method).copied().unwrap_or_default()
    }

    /// Every method counted so far.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

async fn forward(State(door): State<Door>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024 * 1024).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    if parts.method == Method::POST
        && let Ok(message) = serde_json::from_slice::<serde_json::Value>(&bytes)
    {
        let messages = match message {
            serde_json::Value::Array(batch) => batch,
            single => vec![single],
        };
        let mut counts = door.counts.lock().unwrap_or_else(|p| p.into_inner());
        for message in messages {
            if let Some(method) = message.get("method").and_then(serde_json::Value::as_str) {
                *counts.entry(method.to_owned()).or_default() += 1;
            }
        }
    }
    let target = format!(
        "{}{}",
        door.origin,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut forwarded = door.client.request(parts.method, target).body(bytes);
    for (name, value) in &parts.headers {
        if name != header::HOST && name != header::CONTENT_LENGTH {
            forwarded = forwarded.header(name, value);
        }
    }
    let answer = match forwarded.send().await {
        Ok(answer) => answer,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
