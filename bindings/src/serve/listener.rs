//! `serve --listen`'s accept loop: connections are bounded before anything is read from them —
//! a cap on all connections and one per source (the peer's address), a deadline for the first
//! request head, an idle timeout — and each is served by hyper (HTTP/1.1, or h2c with a bound on
//! its streams and on the resets it waits to accept).
//!
//! At a cap, the oldest connection that has not yet sent a complete request head is closed to
//! make room (in all, or of that source); when every connection has, the new one is closed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

/// The bounds on connections, from the config's `serve` section.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Connections open at once, all sources.
    pub(crate) max_connections: usize,
    /// Connections open at once from one source.
    pub(crate) per_source: usize,
    /// From opening (or a response) to a complete request head.
    pub(crate) header_read: Duration,
    /// No request in flight, no byte either way.
    pub(crate) idle: Duration,
    /// h2c: streams open at once on one connection.
    pub(crate) max_streams: u32,
}

/// The peer a request came over (its connection's), in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// One open connection, as the table keeps it.
struct Open {
    source: IpAddr,
    opened: Instant,
    /// Set once a complete request head has arrived.
    headed: Arc<AtomicBool>,
    /// Cancelled to close the connection at once.
    close: CancellationToken,
}

#[derive(Default)]
struct Table {
    open: HashMap<u64, Open>,
    per_source: HashMap<IpAddr, usize>,
    next: u64,
}

impl Table {
    /// Makes room for a connection from `source` within `bounds`: closes the oldest unheaded
    /// connection (of that source when its own cap is met); false when none can go.
    fn make_room(&mut self, source: IpAddr, bounds: &Bounds) -> bool {
        let of_source = self.per_source.get(&source).copied().unwrap_or(0);
        let scope = if of_source >= bounds.per_source {
            Some(source)
        } else if self.open.len() >= bounds.max_connections {
            None
        } else {
            return true;
        };
        let oldest = self
            .open
            .iter()
            .filter(|(_, open)| scope.is_none_or(|s| s == open.source))
            .filter(|(_, open)| !open.headed.load(Ordering::Relaxed))
            .min_by_key(|(_, open)| open.opened)
            .map(|(id, _)| *id);
        match oldest {
            Some(id) => {
                self.remove(id);
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, id: u64) {
        if let Some(open) = self.open.remove(&id) {
            open.close.cancel();
            if let Some(count) = self.per_source.get_mut(&open.source) {
                *count -= 1;
                if *count == 0 {
                    self.per_source.remove(&open.source);
                }
            }
        }
    }
}

/// Serves `router` on `listener` until `accept` is cancelled; then stops accepting, lets each
/// connection finish what it is answering (graceful shutdown), and returns once all have ended
/// or `sessions` ends the rest.
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    bounds: Bounds,
    accept: CancellationToken,
) -> std::io::Result<()> {
    let table = Arc::new(Mutex::new(Table::default()));
    let tracker = TaskTracker::new();
    let graceful = CancellationToken::new();
    let epoch = Instant::now();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, or a connection reset before it was taken: wait a
                    // little rather than spin.
                    tracing::warn!(%error, "serve: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = accept.cancelled() => break,
        };
        let source = peer.ip();
        let (id, headed, close) = {
            let mut table = table.lock().unwrap_or_else(|p| p.into_inner());
            if !table.make_room(source, &bounds) {
                tracing::debug!(%peer, "serve: at the connection cap; closed");
                drop(stream);
                continue;
            }
            let id = table.next;
            table.next += 1;
            let headed = Arc::new(AtomicBool::new(false));
            let close = CancellationToken::new();
            table.open.insert(
                id,
                Open {
                    source,
                    opened: Instant::now(),
                    headed: Arc::clone(&headed),
                    close: close.clone(),
                },
            );
            *table.per_source.entry(source).or_default() += 1;
            (id, headed, close)
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            router: router.clone(),
            bounds,
            peer,
            headed,
            close,
            graceful: graceful.clone(),
            epoch,
        };
        let table = Arc::clone(&table);
        tracker.spawn(async move {
            connection.run(stream).await;
            table.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        });
    }
    drop(listener);
    graceful.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// One connection's service and its watch.
struct Connection {
    router: axum::Router,
    bounds: Bounds,
    peer: SocketAddr,
    headed: Arc<AtomicBool>,
    close: CancellationToken,
    graceful: CancellationToken,
    epoch: Instant,
}

/// What the watch reads: the last byte either way (ms since the epoch), requests in flight.
struct Activity {
    epoch: Instant,
    last: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.epoch + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }
}

impl Connection {
    async fn run(self, stream: TcpStream) {
        let activity = Arc::new(Activity {
            epoch: self.epoch,
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        });
        activity.touch();
        let opened = Instant::now();
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: Arc::clone(&activity),
        });
        let router = self.router.clone();
        let headed = Arc::clone(&self.headed);
        let peer = self.peer;
        let counted = Arc::clone(&activity);
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            headed.store(true, Ordering::Relaxed);
            request.extensions_mut().insert(Peer(peer));
            let mut router = router.clone();
            let flight = InFlight::start(Arc::clone(&counted));
            async move {
                let response = router.call(request.map(Body::new)).await;
                drop(flight);
                response
            }
        });
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.bounds.header_read);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.bounds.max_streams)
            .max_pending_accept_reset_streams(Some(32))
            .max_local_error_reset_streams(Some(256))
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(10));
        let connection = builder.serve_connection_with_upgrades(io, service);
        tokio::pin!(connection);
        let mut shutting_down = false;
        loop {
            // The next moment the watch must look: the head's deadline until a head came, then
            // the idle deadline.
            let deadline = if self.headed.load(Ordering::Relaxed) {
                activity.last() + self.bounds.idle
            } else {
                opened + self.bounds.header_read
            };
            tokio::select! {
                _ = connection.as_mut() => return,
                () = self.close.cancelled() => return,
                () = self.graceful.cancelled(), if !shutting_down => {
                    shutting_down = true;
                    connection.as_mut().graceful_shutdown();
                }
                () = tokio::time::sleep_until(deadline) => {
                    let now = Instant::now();
                    if !self.headed.load(Ordering::Relaxed) {
                        if now >= opened + self.bounds.header_read {
                            tracing::debug!(peer = %self.peer, "serve: no request head in time; closed");
                            return;
                        }
                    } else if activity.in_flight.load(Ordering::Relaxed) == 0
                        && now >= activity.last() + self.bounds.idle
                    {
                        tracing::debug!(peer = %self.peer, "serve: idle connection closed");
                        return;
                    } else if activity.in_flight.load(Ordering::Relaxed) > 0
                        && now >= activity.last() + self.bounds.idle
                    {
                        // A request is in flight (a long call): look again later.
                        activity.touch();
                    }
                }
            }
        }
    }
}

/// A request being answered on a connection (the idle timeout waits for it).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connection's socket, noting each byte read or written.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The connection cap in force: the config's, at most half the descriptor limit (the rest is
/// for upstream sockets, the state store and stdio servers).
pub(crate) fn connection_cap(configured: u32) -> usize {
    let limit = descriptor_limit().unwrap_or(1024);
    (configured as usize).min((limit / 2).max(1) as usize)
}

/// The process's soft limit on open descriptors.
fn descriptor_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max: usize, per_source: usize) -> Bounds {
        Bounds {
            max_connections: max,
            per_source,
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            max_streams: 8,
        }
    }

    fn open(table: &mut Table, source: [u8; 4], headed: bool) -> (u64, CancellationToken) {
        let source = IpAddr::from(source);
        let id = table.next;
        table.next += 1;
        let close = CancellationToken::new();
        table.open.insert(
            id,
            Open {
                source,
                opened: Instant::now(),
                headed: Arc::new(AtomicBool::new(headed)),
                close: close.clone(),
            },
        );
        *table.per_source.entry(source).or_default() += 1;
        (id, close)
    }

    #[tokio::test]
    async fn at_a_cap_the_oldest_unheaded_connection_goes() {
        let mut table = Table::default();
        let caps = bounds(3, 2);
        let (_, first) = open(&mut table, [127, 0, 0, 2], false);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let (_, second) = open(&mut table, [127, 0, 0, 2], false);
        // The source's cap: its oldest unheaded connection is closed.
        assert!(table.make_room(IpAddr::from([127, 0, 0, 2]), &caps));
        assert!(first.is_cancelled() && !second.is_cancelled());
        let (_, client) = open(&mut table, [127, 0, 0, 1], true);
        let (_, third) = open(&mut table, [127, 0, 0, 3], false);
        // All connections: the oldest unheaded one anywhere, never the headed client's.
        assert!(table.make_room(IpAddr::from([127, 0, 0, 4]), &caps));
        assert!(second.is_cancelled() && !client.is_cancelled() && !third.is_cancelled());
        // Nothing to close: every connection has sent a head.
        let mut full = Table::default();
        open(&mut full, [127, 0, 0, 1], true);
        assert!(!full.make_room(IpAddr::from([127, 0, 0, 1]), &bounds(1, 5)));
    }
}
