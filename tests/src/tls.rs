//! TLS for the tests' servers: a CA made per run (rcgen), a certificate it issues for
//! `localhost` and `127.0.0.1`, and a listener that serves HTTP/1.1 and HTTP/2 (chosen by ALPN)
//! over it, counting what a client costs the server: TCP connections, TLS handshakes (full and
//! resumed, by version) and HTTP/2 connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_util::sync::CancellationToken;

/// A CA made for one test run, and the server certificate it issued.
pub struct TestCa {
    /// The CA's certificate, PEM: what a client trusts (`ca_file`, `SSL_CERT_FILE`).
    pub ca_pem: String,
    /// The server certificate's chain, and its key.
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
    /// The server certificate, PEM, and its key, PEM (for servers in other processes).
    pub cert_pem: String,
    /// The server key, PKCS#8 PEM.
    pub key_pem: String,
}

impl TestCa {
    /// Makes a CA and a certificate for `localhost` and `127.0.0.1` that it issued.
    pub fn new() -> TestCa {
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "brain test CA");
        let ca_cert = ca_params.self_signed(&ca_key).expect("the CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("a server key");
        let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("server params");
        let cert = params
            .signed_by(&key, &issuer)
            .expect("the server certificate");
        TestCa {
            ca_pem: ca_cert.pem(),
            chain: vec![cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// Writes the CA's certificate to `dir/ca.pem`; returns the path.
    pub fn write_ca(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("ca.pem");
        std::fs::write(&path, &self.ca_pem).expect("write ca.pem");
        path
    }

    /// A server configuration offering `alpn` (e.g. `h2`, `http/1.1`), TLS 1.3 and 1.2, with
    /// resumption by tickets (TLS 1.3) and session ids.
    pub fn server_config(&self, alpn: &[&str]) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(
                self.chain.clone(),
                PrivateKeyDer::Pkcs8(self.key.clone_key()),
            )
            .expect("the server certificate");
        config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        config.ticketer = rustls::crypto::ring::Ticketer::new().expect("a ticketer");
        Arc::new(config)
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}

/// How a test server speaks TLS.
#[derive(Clone)]
pub struct TlsOptions {
    /// The CA and certificate.
    pub ca: Arc<TestCa>,
    /// The ALPN protocols offered, in order of preference: `["h2", "http/1.1"]` (the default),
    /// or `["http/1.1"]` for a server without HTTP/2.
    pub alpn: Vec<&'static str>,
    /// HTTP/2's `SETTINGS_MAX_CONCURRENT_STREAMS` (hyper's default otherwise: 200).
    pub max_concurrent_streams: Option<u32>,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("alpn", &self.alpn)
            .field("max_concurrent_streams", &self.max_concurrent_streams)
            .finish()
    }
}

impl TlsOptions {
    /// HTTP/2 and HTTP/1.1 offered, under a new CA.
    pub fn h2() -> TlsOptions {
        TlsOptions {
            ca: Arc::new(TestCa::new()),
            alpn: vec!["h2", "http/1.1"],
            max_concurrent_streams: None,
        }
    }

    /// HTTP/1.1 only, under a new CA.
    pub fn h1() -> TlsOptions {
        TlsOptions {
            alpn: vec!["http/1.1"],
            ..TlsOptions::h2()
        }
    }
}

/// What clients cost a TLS server.
#[derive(Debug, Default)]
pub struct TlsStats {
    /// TLS handshakes completed (full and resumed).
    pub handshakes: AtomicUsize,
    /// Of them, resumed ones.
    pub resumed: AtomicUsize,
    /// Of them, TLS 1.3 ones.
    pub tls13: AtomicUsize,
    /// Connections that chose HTTP/2 by ALPN.
    pub h2_connections: AtomicUsize,
    /// Handshakes that failed (a client that does not trust the CA, say).
    pub failed: AtomicUsize,
}

impl TlsStats {
    /// The counters as JSON.
    pub fn snapshot(&self) -> serde_json::Value {
        let get = |c: &AtomicUsize| c.load(Ordering::SeqCst);
        serde_json::json!({
            "tls_handshakes": get(&self.handshakes),
            "tls_resumed": get(&self.resumed),
            "tls13": get(&self.tls13),
            "h2_connections": get(&self.h2_connections),
            "tls_failed": get(&self.failed),
        })
    }
}

/// Serves `router` over TLS on `listener` until `stop`: HTTP/1.1 or HTTP/2 as ALPN chose, each
/// connection counted in `stats` (TCP: `on_accept` before the handshake, dropped when it ends).
pub(crate) fn serve<G: Send + 'static>(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    options: &TlsOptions,
    stats: Arc<TlsStats>,
    on_accept: impl Fn(&tokio::net::TcpStream) -> G + Send + 'static,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(options.ca.server_config(&options.alpn));
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    if let Some(max) = options.max_concurrent_streams {
        // A server that takes thousands of streams at once gives them the window to match:
        // with hyper's default (1 MiB for the connection), 10,000 request bodies in flight are
        // sent in small pieces as the window reopens, and h2 closes the connection for "too
        // many small DATA frames" (ENHANCE_YOUR_CALM; measured at 10,000 in flight).
        builder
            .http2()
            .max_concurrent_streams(max)
            .initial_connection_window_size((max.max(1000) * 2048).min(1 << 30));
    }
    let builder = Arc::new(builder);
    tokio::spawn(async move {
        loop {
            let tcp = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                () = stop.cancelled() => return,
            };
            let _ = tcp.set_nodelay(true);
            let guard = on_accept(&tcp);
            let (acceptor, builder, stats, stop) = (
                acceptor.clone(),
                Arc::clone(&builder),
                Arc::clone(&stats),
                stop.clone(),
            );
            let service = hyper_util::service::TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let _guard = guard;
                let tls = match acceptor.accept(tcp).await {
                    Ok(tls) => tls,
                    Err(_) => {
                        stats.failed.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                };
                {
                    let (_, connection) = tls.get_ref();
                    stats.handshakes.fetch_add(1, Ordering::SeqCst);
                    if connection.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                        stats.resumed.fetch_add(1, Ordering::SeqCst);
                    }
                    if connection.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3) {
                        stats.tls13.fetch_add(1, Ordering::SeqCst);
                    }
                    if connection.alpn_protocol() == Some(b"h2") {
                        stats.h2_connections.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let io = hyper_util::rt::TokioIo::new(tls);
                let serving = builder.serve_connection_with_upgrades(io, service);
                tokio::select! {
                    served = serving => {
                        if let Err(error) = served {
                            tracing::debug!(%error, "a TLS connection failed");
                        }
                    }
                    () = stop.cancelled() => {}
                }
            });
        }
    });
}
