//! `serve --listen`'s accept loop: connections are bounded before anything is read from them —
//! a cap on all connections and one per source (the peer's address), a deadline for the first
//! request head (hyper's for the heads after it), an idle timeout (no request in flight, a
//! response's body included: keep-alive pings or stray bytes do not keep a connection) — and
//! each is served by hyper (HTTP/1.1, or h2c with a bound on its streams and on the resets it
//! waits to accept).
//!
//! At a cap, the oldest connection that has not yet sent a complete request head is closed to
//! make room (in all, or of that source); when every connection has, the new one is closed.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
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
    /// Its requests in flight, and when one last began or ended.
    activity: Arc<Activity>,
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
    /// Makes room for a connection from `source` within `bounds`: closes the oldest connection
    /// that has not sent a complete request head (of that source when its own cap is met), else
    /// the one idle longest (no request in flight); false when none can go.
    fn make_room(&mut self, source: IpAddr, bounds: &Bounds) -> bool {
        let of_source = self.per_source.get(&source).copied().unwrap_or(0);
        let scope = if of_source >= bounds.per_source {
            Some(source)
        } else if self.open.len() >= bounds.max_connections {
            None
        } else {
            return true;
        };
        let candidates = || {
            self.open
                .iter()
                .filter(move |(_, open)| scope.is_none_or(|s| s == open.source))
        };
        let unheaded = candidates()
            .filter(|(_, open)| !open.headed.load(Ordering::Relaxed))
            .min_by_key(|(_, open)| open.opened)
            .map(|(id, _)| *id);
        let idle = || {
            candidates()
                .filter(|(_, open)| open.activity.in_flight.load(Ordering::Relaxed) == 0)
                .min_by_key(|(_, open)| open.activity.last())
                .map(|(id, _)| *id)
        };
        match unheaded.or_else(idle) {
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
        let source = super::sources::source_of(peer.ip());
        let (id, headed, close, activity) = {
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
            let activity = Arc::new(Activity {
                epoch,
                last: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
            });
            activity.touch();
            table.open.insert(
                id,
                Open {
                    source,
                    opened: Instant::now(),
                    headed: Arc::clone(&headed),
                    activity: Arc::clone(&activity),
                    close: close.clone(),
                },
            );
            *table.per_source.entry(source).or_default() += 1;
            (id, headed, close, activity)
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            router: router.clone(),
            bounds,
            peer,
            headed,
            close,
            graceful: graceful.clone(),
            activity,
        };
        // Out of the table however the connection ends (a panic in its service included).
        let entry = Entry {
            table: Arc::clone(&table),
            id,
        };
        tracker.spawn(async move {
            let _entry = entry;
            connection.run(stream).await;
        });
    }
    drop(listener);
    graceful.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// A connection's place in the table, given back when dropped.
struct Entry {
    table: Arc<Mutex<Table>>,
    id: u64,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(self.id);
    }
}

/// One connection's service and its watch.
struct Connection {
    router: axum::Router,
    bounds: Bounds,
    peer: SocketAddr,
    headed: Arc<AtomicBool>,
    close: CancellationToken,
    graceful: CancellationToken,
    activity: Arc<Activity>,
}

/// What the watch reads: when a request last began or ended (ms since the epoch), and the
/// requests in flight (until their response's body has ended).
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
        let activity = Arc::clone(&self.activity);
        let opened = Instant::now();
        let io = TokioIo::new(stream);
        let router = self.router.clone();
        let headed = Arc::clone(&self.headed);
        let peer = self.peer;
        let counted = Arc::clone(&activity);
        let body_deadline = self.bounds.header_read;
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            headed.store(true, Ordering::Relaxed);
            request.extensions_mut().insert(Peer(peer));
            // The body arrives within the head's deadline, or the request fails: a request in
            // flight keeps its connection, so it may not wait for a body forever.
            let request = request.map(|body| Deadline {
                body,
                deadline: Box::pin(tokio::time::sleep(body_deadline)),
            });
            let mut router = router.clone();
            let flight = InFlight::start(Arc::clone(&counted));
            async move {
                let response = router.call(request.map(Body::new)).await;
                // The request is in flight until its response's body has ended (an SSE stream
                // included).
                response.map(|response| {
                    response.map(|body| {
                        Body::new(Holding {
                            body,
                            _held: flight,
                        })
                    })
                })
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
        let connection = builder.serve_connection(io, service);
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
                        // A request is in flight (a long call, an SSE stream): look again later.
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
        activity.touch();
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

/// A request's body, failing once its deadline has passed before it ended.
struct Deadline {
    body: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Deadline {
    type Data = axum::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(
                "the request body did not arrive within serve's header_read_timeout_seconds".into(),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A response's body holding something (its request in flight, its session in use) until the
/// body ends or is dropped.
pub(crate) struct Holding<T> {
    pub(crate) body: Body,
    pub(crate) _held: T,
}

impl<T: Unpin> http_body::Body for Holding<T> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The connection cap in force: the config's, at most half the descriptor limit (the rest is
/// for upstream sockets, the state store and stdio servers).
pub(crate) fn connection_cap(configured: u32) -> usize {
    // The harness raised the soft limit to the hard one at start; this reads what is in force.
    let limit = brain_runtime::raise_open_file_limit().unwrap_or(1024);
    let half = usize::try_from(limit / 2).unwrap_or(usize::MAX).max(1);
    (configured as usize).min(half)
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
        open_busy(table, source, headed, usize::from(headed))
    }

    fn open_busy(
        table: &mut Table,
        source: [u8; 4],
        headed: bool,
        in_flight: usize,
    ) -> (u64, CancellationToken) {
        let source = IpAddr::from(source);
        let id = table.next;
        table.next += 1;
        let close = CancellationToken::new();
        let activity = Arc::new(Activity {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(in_flight),
        });
        table.open.insert(
            id,
            Open {
                source,
                opened: Instant::now(),
                headed: Arc::new(AtomicBool::new(headed)),
                activity,
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
        // Nothing to close: every connection has a request in flight.
        let mut full = Table::default();
        open(&mut full, [127, 0, 0, 1], true);
        assert!(!full.make_room(IpAddr::from([127, 0, 0, 1]), &bounds(1, 5)));
        // A headed connection with nothing in flight (an idle h2c one) goes when none else can.
        let mut idle = Table::default();
        let (_, kept) = open(&mut idle, [127, 0, 0, 1], true);
        let (_, holder) = open_busy(&mut idle, [127, 0, 0, 2], true, 0);
        assert!(idle.make_room(IpAddr::from([127, 0, 0, 3]), &bounds(2, 5)));
        assert!(holder.is_cancelled() && !kept.is_cancelled());
    }
}
