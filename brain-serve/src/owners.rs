//! Who owns what in `serve`: each MCP session's owner (its principal and OAuth app), each
//! principal's sessions and calls in flight, and the caps on both — one table under one lock, so
//! that a cap's check and the record it allows are one step. A principal's entry lives while it
//! holds a session, a reservation or a call, and is dropped with its last one.
//!
//! rmcp's sessions go through [`OwnedSessions`], which tells the table when one ends (its
//! owner's DELETE, or [`Owners::expire`] for one idle too long): the session's calls not yet
//! claimed are then withdrawn, and calls already sent run to their result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use tokio_util::sync::CancellationToken;

use super::clients::{Client, Principal};

/// The session's end, in a request's extensions: the facade withdraws the session's calls not
/// yet claimed when it fires.
#[derive(Clone)]
pub(crate) struct SessionEnd(pub(crate) CancellationToken);

/// The longest id serve takes (a session's, a call's): longer ones are refused before the
/// journal, as the runtime's gate refuses them.
pub(crate) const MAX_ID_BYTES: usize = brain_runtime::MAX_ID_BYTES;

/// A session's owner: the principal, through the app (a JWT's `client_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    principal: Principal,
    app: Option<String>,
}

impl Owner {
    pub(crate) fn of(client: &Client) -> Owner {
        Owner {
            principal: client.principal.clone(),
            app: client.app.clone(),
        }
    }
}

/// Why a session cannot be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The principal holds `sessions_per_client` sessions.
    Principal,
    /// serve holds `max_sessions` sessions.
    Server,
}

/// Why a call is not admitted by its principal's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy;

/// The table.
pub(crate) struct Owners {
    sessions_per_principal: usize,
    max_sessions: usize,
    calls_per_principal: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Session>,
    principals: HashMap<Principal, Books>,
    /// Sessions open and reserved, all principals together.
    held: usize,
}

struct Session {
    owner: Owner,
    /// Cancelled when the session ends: its calls not yet claimed are withdrawn.
    ended: CancellationToken,
    /// When its last request began or ended.
    seen: Instant,
    /// Its requests in flight (a session with one is never idle).
    in_flight: usize,
}

/// One principal's sessions (open and reserved) and calls in flight.
#[derive(Default)]
struct Books {
    sessions: usize,
    calls: usize,
}

impl Books {
    fn idle(&self) -> bool {
        self.sessions == 0 && self.calls == 0
    }
}

impl State {
    /// Takes one of `principal`'s sessions or calls back; drops its books when they are empty.
    fn release(&mut self, principal: &Principal, session: bool) {
        if let Some(books) = self.principals.get_mut(principal) {
            if session {
                books.sessions = books.sessions.saturating_sub(1);
            } else {
                books.calls = books.calls.saturating_sub(1);
            }
            if books.idle() {
                self.principals.remove(principal);
            }
        }
        if session {
            self.held = self.held.saturating_sub(1);
        }
    }
}

/// What a request on a session finds.
pub(crate) enum Lookup {
    /// The session is the client's: the token is cancelled when it ends; the session is in use
    /// (never idle) while the [`InUse`] lives.
    Owned(CancellationToken, InUse),
    /// No such session, or another owner's: both answer 404.
    NotFound,
}

/// A request on a session, in flight: the session is not idle until it is dropped.
pub(crate) struct InUse {
    owners: Arc<Owners>,
    id: String,
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut state = self.owners.state();
        if let Some(session) = state.sessions.get_mut(&self.id) {
            session.in_flight = session.in_flight.saturating_sub(1);
            session.seen = Instant::now();
        }
    }
}

impl Owners {
    pub(crate) fn new(
        sessions_per_principal: usize,
        max_sessions: usize,
        calls_per_principal: usize,
    ) -> Arc<Owners> {
        Arc::new(Owners {
            sessions_per_principal,
            max_sessions,
            calls_per_principal,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves a session for `client` within both caps, as one step with their check.
    pub(crate) fn reserve(self: &Arc<Self>, client: &Client) -> Result<Reservation, Full> {
        let mut state = self.state();
        let books = state.principals.get(&client.principal);
        if books.is_some_and(|books| books.sessions >= self.sessions_per_principal) {
            return Err(Full::Principal);
        }
        if state.held >= self.max_sessions {
            return Err(Full::Server);
        }
        state
            .principals
            .entry(client.principal.clone())
            .or_default()
            .sessions += 1;
        state.held += 1;
        Ok(Reservation {
            owners: Arc::clone(self),
            owner: Some(Owner::of(client)),
        })
    }

    /// The session `id` as `client` may use it, in use until the answer's [`InUse`] is dropped.
    pub(crate) fn lookup(self: &Arc<Self>, id: &str, client: &Client) -> Lookup {
        let mut state = self.state();
        match state.sessions.get_mut(id) {
            Some(session)
                if session.owner.principal == client.principal
                    && session.owner.app == client.app =>
            {
                session.seen = Instant::now();
                session.in_flight += 1;
                Lookup::Owned(
                    session.ended.clone(),
                    InUse {
                        owners: Arc::clone(self),
                        id: id.to_owned(),
                    },
                )
            }
            _ => Lookup::NotFound,
        }
    }

    /// Whether `id` is a session of the table (whoever owns it).
    pub(crate) fn knows(&self, id: &str) -> bool {
        self.state().sessions.contains_key(id)
    }

    /// The session `id` ended (its DELETE, its expiry, its worker's end): its calls not yet
    /// claimed are withdrawn, and its owner's count goes down.
    pub(crate) fn end(&self, id: &str) {
        let mut state = self.state();
        if let Some(session) = state.sessions.remove(id) {
            session.ended.cancel();
            state.release(&session.owner.principal, true);
            tracing::debug!(
                principals = state.principals.len(),
                sessions = state.held,
                "serve: a session ended"
            );
        }
    }

    /// The sessions without a request in flight or begun for `idle`, which the caller then
    /// closes.
    pub(crate) fn idle_sessions(&self, idle: Duration) -> Vec<String> {
        let now = Instant::now();
        self.state()
            .sessions
            .iter()
            .filter(|(_, session)| {
                session.in_flight == 0 && now.duration_since(session.seen) >= idle
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Admits one more call of `client`'s principal, within its bound.
    pub(crate) fn admit_call(self: &Arc<Self>, client: &Client) -> Result<CallSlot, Busy> {
        let mut state = self.state();
        let books = state
            .principals
            .entry(client.principal.clone())
            .or_default();
        if books.calls >= self.calls_per_principal {
            if books.idle() {
                state.principals.remove(&client.principal);
            }
            return Err(Busy);
        }
        books.calls += 1;
        Ok(CallSlot {
            owners: Arc::clone(self),
            principal: client.principal.clone(),
        })
    }

    /// Principals with books (sessions, reservations or calls), and sessions held.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.state();
        (state.principals.len(), state.held)
    }
}

/// A session reserved within the caps: [`Reservation::commit`] records its owner once rmcp has
/// named it; dropped uncommitted, the reservation is given back.
pub(crate) struct Reservation {
    owners: Arc<Owners>,
    owner: Option<Owner>,
}

impl Reservation {
    /// The session `id` is the reserved one: recorded with its owner.
    pub(crate) fn commit(mut self, id: &str) {
        let Some(owner) = self.owner.take() else {
            return;
        };
        let mut state = self.owners.state();
        state.sessions.insert(
            id.to_owned(),
            Session {
                owner,
                ended: CancellationToken::new(),
                seen: Instant::now(),
                in_flight: 0,
            },
        );
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            self.owners.state().release(&owner.principal, true);
        }
    }
}

/// One call in flight of a principal; given back when dropped.
pub(crate) struct CallSlot {
    owners: Arc<Owners>,
    principal: Principal,
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.owners.state().release(&self.principal, false);
    }
}

/// rmcp's local sessions, whose ends the table hears of: a DELETE, an idle expiry (closed
/// through [`OwnedSessions::expire`]) or a worker that stopped all come through
/// `close_session`, which withdraws the session's unclaimed calls before rmcp ends it.
pub(crate) struct OwnedSessions {
    pub(crate) local: LocalSessionManager,
    pub(crate) owners: Arc<Owners>,
    /// Sessions rmcp created whose owner is not recorded yet, and since when: one whose
    /// request was dropped before its answer named it is closed by [`OwnedSessions::expire`].
    pub(crate) unowned: Mutex<HashMap<String, Instant>>,
}

/// How long a created session may stay without an owner.
const UNOWNED_FOR: Duration = Duration::from_secs(30);
/// How long one session's close may take before it is left to finish on its own.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

impl OwnedSessions {
    pub(crate) fn new(local: LocalSessionManager, owners: Arc<Owners>) -> Arc<OwnedSessions> {
        Arc::new(OwnedSessions {
            local,
            owners,
            unowned: Mutex::default(),
        })
    }

    /// The session `id` has its owner now.
    pub(crate) fn owned(&self, id: &str) {
        self.unowned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// Closes the sessions idle for `idle` (no request in flight or begun), and the ones left
    /// without an owner: what rmcp's own keep-alive would do, but telling the table first.
    /// Each close runs on its own, bounded: one session that does not close stalls no other.
    pub(crate) fn expire(self: &Arc<Self>, idle: Duration) {
        let mut ids = self.owners.idle_sessions(idle);
        {
            let mut unowned = self.unowned.lock().unwrap_or_else(|p| p.into_inner());
            unowned.retain(|id, since| {
                let keep = since.elapsed() < UNOWNED_FOR;
                if !keep {
                    ids.push(id.clone());
                }
                keep
            });
        }
        for id in ids {
            self.close_soon(id);
        }
    }

    /// Ends `id` in the table now and closes it in rmcp in the background, bounded.
    pub(crate) fn close_soon(self: &Arc<Self>, id: String) {
        self.owners.end(&id);
        let sessions = Arc::clone(self);
        tokio::spawn(async move {
            let id: SessionId = id.into();
            let _ = tokio::time::timeout(CLOSE_BOUND, sessions.close_session(&id)).await;
        });
    }
}

impl SessionManager for OwnedSessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let created = self.local.create_session().await?;
        self.unowned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(created.0.to_string(), Instant::now());
        Ok(created)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.owners.end(id);
        self.owned(id);
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<
        impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        self.local.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<
        impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<
        impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static,
        Self::Error,
    > {
        self.local.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // A session unknown here is not taken back from anywhere: its owner would be unknown.
        Ok(RestoreOutcome::NotSupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(tenant: &str, subject: &str, app: Option<&str>) -> Client {
        let mut client = Client::of_token(
            tenant.into(),
            "https://issuer".into(),
            subject.into(),
            app.map(str::to_owned),
        );
        client.id = subject.into();
        client
    }

    #[test]
    fn caps_count_principals_and_books_are_dropped_when_empty() {
        let owners = Owners::new(2, 3, 1);
        let alice = client("acme", "alice", Some("host"));
        let alice_elsewhere = client("acme", "alice", Some("other-app"));
        let bob = client("globex", "bob", Some("host"));
        let one = owners.reserve(&alice).unwrap();
        let two = owners.reserve(&alice_elsewhere).unwrap();
        // Another app is the same principal: its cap is shared.
        assert_eq!(owners.reserve(&alice).err(), Some(Full::Principal));
        one.commit("s1");
        two.commit("s2");
        let three = owners.reserve(&bob).unwrap();
        assert_eq!(
            owners.reserve(&client("x", "y", None)).err(),
            Some(Full::Server)
        );
        drop(three);
        assert_eq!(owners.counts(), (1, 2));
        // A session is its owner's: the same principal through another app does not get it.
        assert!(matches!(owners.lookup("s1", &alice), Lookup::Owned(..)));
        assert!(matches!(
            owners.lookup("s1", &alice_elsewhere),
            Lookup::NotFound
        ));
        assert!(matches!(owners.lookup("s1", &bob), Lookup::NotFound));
        let slot = owners.admit_call(&bob).unwrap();
        assert!(owners.admit_call(&bob).is_err());
        assert_eq!(owners.counts(), (2, 2));
        drop(slot);
        owners.end("s1");
        owners.end("s2");
        assert_eq!(owners.counts(), (0, 0));
    }

    #[test]
    fn simultaneous_reservations_open_exactly_the_cap() {
        let owners = Owners::new(2, 1024, 1);
        let alice = client("acme", "alice", None);
        let granted = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..40)
                .map(|n| {
                    let owners = &owners;
                    let alice = &alice;
                    scope.spawn(move || {
                        owners
                            .reserve(alice)
                            .map(|r| r.commit(&format!("s{n}")))
                            .is_ok()
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().ok())
                .filter(|ok| *ok)
                .count()
        });
        assert_eq!(granted, 2);
    }
}
