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
use http_body_util::Full;
use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

/// The client every call and discovery uses; cheap to clone, one pool.
pub(crate) type HttpClient =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<Connector>, Full<Bytes>>;

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
/// streamed responses; see the module's doc).
pub(crate) fn client(quick_ack: bool) -> Result<HttpClient, String> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_platform_verifier())
        .map_err(|error| error.to_string())?
        .with_no_client_auth();
    let mut tcp = HttpConnector::new_with_resolver(Resolver);
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(Duration::from_secs(10)));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(Connector { tcp, quick_ack });
    Ok(
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_timer(TokioTimer::new())
            .build(https),
    )
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

/// An error and its sources, on one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text += &format!(": {cause_text}");
        }
        source = cause.source();
    }
    text
}
