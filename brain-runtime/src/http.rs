//! brain's HTTP client: hyper's pooled client over rustls (ring, the platform's roots) and a TCP
//! connector of our own — `localhost` always loopback ([`Resolver`]), TCP_NODELAY, a 10 s connect
//! bound, and on Linux `TCP_QUICKACK` whenever a read has to wait (for streams).
//!
//! Why quick ACKs: a server that leaves Nagle's algorithm on (axum's default, so most rmcp
//! servers) sends an SSE response's first event only once the client has ACKed the headers, and
//! on a reused connection Linux delays that ACK by 40 ms: every call stalled 44 ms (measured,
//! `cargo xtask bench`, P2). Asking for a quick ACK whenever a read has to wait (which sends a
//! delayed ACK at once) removes the stall without giving up pooled connections. It costs a
//! syscall per wait and an ACK packet per segment, which a one-body answer does not need: plain HTTP tools (`http_tool.rs`, JSON or text bodies) use a
//! second client without quick ACKs — at 32 concurrent calls, 0.73–0.80× of the raw POST floor
//! with them, 0.90–0.97× without (`cargo xtask bench`, H1; an HTTP tool that answers with an
//! event stream from a server with Nagle on may then see its events delayed). Redirects are never followed (hyper's client
//! does not), so a token only goes to the configured origin.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

/// The client every call and discovery uses; cheap to clone, one pool.
pub(crate) type HttpClient =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<Connector>, Body>;

/// A request's body: one buffer, and the call's [`Departure`], marked when a connection first
/// reads it.
pub(crate) struct Body {
    data: Option<Bytes>,
    departure: Option<Departure>,
}

impl Body {
    /// A body of `data`; `departure` is marked handed now and left when a connection reads it
    /// (an empty body is never read: it is marked left now).
    pub(crate) fn new(data: Bytes, departure: Option<&Departure>) -> Body {
        let data = (!data.is_empty()).then_some(data);
        if let Some(departure) = departure {
            departure.handed();
            if data.is_none() {
                departure.left();
            }
        }
        Body {
            data,
            departure: departure.cloned(),
        }
    }
}

impl From<Bytes> for Body {
    fn from(data: Bytes) -> Body {
        Body::new(data, None)
    }
}

impl From<String> for Body {
    fn from(data: String) -> Body {
        Body::new(Bytes::from(data), None)
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(departure) = this.departure.take() {
            departure.left();
        }
        Poll::Ready(
            this.data
                .take()
                .map(|data| Ok(hyper::body::Frame::data(data))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.data.as_ref().map_or(0, |data| data.len() as u64))
    }
}

/// Whether a call's request left: handed to the client, then read by a connection. hyper reads a
/// request's body only once the request has a connection — and on HTTP/2 an open stream, which
/// the server's `SETTINGS_MAX_CONCURRENT_STREAMS` bounds (h2 gives a stream over the limit no
/// send capacity, so its body is not read) — so a request handed but never read did not reach
/// the server whole: it waited for a socket, a connection or a stream, and cannot have run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Departure(Arc<std::sync::atomic::AtomicU8>);

impl Departure {
    const IDLE: u8 = 0;
    const HANDED: u8 = 1;
    const LEFT: u8 = 2;

    /// Forgets the requests before (those that opened the call's session).
    pub(crate) fn reset(&self) {
        self.0
            .store(Self::IDLE, std::sync::atomic::Ordering::SeqCst);
    }

    fn handed(&self) {
        self.0
            .fetch_max(Self::HANDED, std::sync::atomic::Ordering::SeqCst);
    }

    fn left(&self) {
        self.0
            .store(Self::LEFT, std::sync::atomic::Ordering::SeqCst);
    }

    /// Since the last reset, a request was handed to the client and none was read by a
    /// connection: nothing the server could act on has left.
    pub(crate) fn only_waited(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst) == Self::HANDED
    }
}

/// A response, its body not read yet.
pub(crate) type Response = http::Response<hyper::body::Incoming>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    /// The URL cannot be requested.
    #[error("invalid URL: {0}")]
    Url(String),
    /// Connecting, TLS, or the exchange failed.
    #[error(transparent)]
    Send(#[from] hyper_util::client::legacy::Error),
    /// No token could be obtained for the request, which was therefore not sent (or was
    /// refused and not sent again).
    #[error("authorization failed: {0}")]
    Auth(String),
}

impl HttpError {
    /// Nothing reached the server (the connection or its TLS handshake failed), or what did
    /// was refused for its authorization and not processed.
    pub(crate) fn is_connect(&self) -> bool {
        match self {
            HttpError::Url(_) | HttpError::Auth(_) => true,
            HttpError::Send(error) => error.is_connect(),
        }
    }
}

/// Builds a client; `quick_ack`: its connections ask for a quick ACK whenever a read waits (for
/// streamed responses; see the module's doc). `extra_roots`: CA certificates trusted beside the
/// platform's roots (a binding's `ca_file`).
pub(crate) fn client(
    quick_ack: bool,
    extra_roots: &[rustls::pki_types::CertificateDer<'static>],
) -> Result<HttpClient, String> {
    Ok(pooled(connector(quick_ack, extra_roots)?))
}

/// What a client connects with: TCP, DNS (`localhost` always loopback) and TLS.
type HttpsConnector = hyper_rustls::HttpsConnector<Connector>;

/// A client of its own pool over `https`.
fn pooled(https: HttpsConnector) -> HttpClient {
    hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(https)
}

/// The clients of a binding on behalf of users: one pool per user (by
/// [`SubjectToken::subject`](crate::SubjectToken::subject)), so that a connection opened with
/// one user's issued token never carries another user's calls. They share the binding's TLS
/// settings. At most [`UserPools::MAX`] users are kept; one more starts the set again (idle
/// connections close, calls in flight keep theirs).
pub(crate) struct UserPools {
    https: HttpsConnector,
    pools: std::sync::Mutex<std::collections::HashMap<Arc<str>, HttpClient>>,
}

impl UserPools {
    /// The most users whose pools are kept at once.
    const MAX: usize = 4096;

    /// The pools of a binding whose client is built as [`client`] builds it.
    pub(crate) fn new(
        quick_ack: bool,
        extra_roots: &[rustls::pki_types::CertificateDer<'static>],
    ) -> Result<UserPools, String> {
        Ok(UserPools {
            https: connector(quick_ack, extra_roots)?,
            pools: std::sync::Mutex::default(),
        })
    }

    /// The client of `subject`'s own pool.
    pub(crate) fn of(&self, subject: &str) -> HttpClient {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = pools.get(subject) {
            return client.clone();
        }
        if pools.len() >= UserPools::MAX {
            pools.clear();
        }
        let client = pooled(self.https.clone());
        pools.insert(Arc::from(subject), client.clone());
        client
    }
}

/// The connector of [`client`].
fn connector(
    quick_ack: bool,
    extra_roots: &[rustls::pki_types::CertificateDer<'static>],
) -> Result<HttpsConnector, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(
        extra_roots.iter().cloned(),
        provider.clone(),
    )
    .map_err(|error| error.to_string())?;
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let mut tcp = HttpConnector::new_with_resolver(Resolver);
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(Duration::from_secs(10)));
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(Connector { tcp, quick_ack }))
}

/// Reads the CA certificates of a PEM file (a binding's `ca_file`).
pub(crate) fn read_roots(
    path: &std::path::Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let roots = rustls::pki_types::CertificateDer::pem_file_iter(path)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|error| {
            format!(
                "cannot read CA certificates from {}: {error}",
                path.display()
            )
        })?;
    if roots.is_empty() {
        return Err(format!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(roots)
}

/// TCP connections that ask for quick ACKs (see the module's doc), or not.
#[derive(Clone)]
pub(crate) struct Connector {
    tcp: HttpConnector<Resolver>,
    quick_ack: bool,
}

impl tower_service::Service<Uri> for Connector {
    type Response = QuickAck;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAck, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.tcp.call(uri);
        let quick_ack = self.quick_ack;
        Box::pin(async move {
            Ok(QuickAck {
                io: connecting.await?,
                quick_ack,
            })
        })
    }
}

/// A TCP connection that, when `quick_ack`, requests a quick ACK whenever a read has to wait, so
/// that the ACK of what arrived is not delayed while the server waits for it.
pub(crate) struct QuickAck {
    io: TokioIo<tokio::net::TcpStream>,
    quick_ack: bool,
}

impl Read for QuickAck {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        // Only when the read has to wait: that is when the server may be holding its next
        // segment until it sees our ACK, and asking now sends a delayed ACK at once.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if this.quick_ack && read.is_pending() {
            // Best effort: a failure only means the ACK may be delayed.
            let _ = socket2::SockRef::from(this.io.inner()).set_tcp_quickack(true);
        }
        read
    }
}

impl Write for QuickAck {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
}

impl Connection for QuickAck {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

/// Name resolution: `localhost` (and `*.localhost`) always means loopback (RFC 6761), without
/// asking the system resolver — which a statically linked binary may not be able to load. Other
/// names go to the system resolver.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Resolver;

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            if host == "localhost" || host.ends_with(".localhost") {
                let loopback = [
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(Ipv6Addr::LOCALHOST),
                ];
                return Ok(loopback
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, 0))
                    .collect::<Vec<_>>()
                    .into_iter());
            }
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(found.into_iter())
        })
    }
}

/// An error and its sources, on one line; when a socket could not be made for want of file
/// descriptors, what to do about it.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    let mut out_of_descriptors = false;
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text += &format!(": {cause_text}");
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            // EMFILE (the process's limit) or ENFILE (the system's).
            out_of_descriptors |= matches!(io.raw_os_error(), Some(24 | 23));
        }
        source = cause.source();
    }
    if out_of_descriptors {
        text += "; the process has no file descriptor left for a socket: raise its open-file \
                 limit (`ulimit -n`, LimitNOFILE= for a systemd service) or make fewer calls at \
                 once";
    }
    text
}

/// Raises this process's open-file limit (soft) to its hard limit, for a front end that makes
/// many calls at once (each HTTP/1.1 call in flight holds a socket); returns the limit now in
/// force. For programs, not libraries: the runtime itself never changes a host's limits — a call
/// that finds no file descriptor for its socket fails before anything is sent, with an error
/// naming `ulimit -n`.
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return Ok(limit.current.unwrap_or(u64::MAX));
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    )?;
    Ok(limit.maximum.unwrap_or(u64::MAX))
}
