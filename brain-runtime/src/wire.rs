//! Streamable HTTP on the wire: one POST per JSON-RPC message, answered by `202`, one JSON body
//! or an SSE stream, every response body read with a byte bound.
//!
//! brain drives the exchange itself rather than through rmcp's transport worker, which opens a GET
//! stream per session, re-initializes and re-sends on an expired session, and folds most 4xx
//! statuses into strings: all three would break at-most-once or the `unknown_outcome` table.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

use crate::auth::{Authorizing, Credentials, Retry};
pub(crate) use crate::http::error_chain;
use crate::http::{Body, Departure, HttpClient, HttpError, Response};
use crate::outcome::Failure;
use serde_json::Value;
use sse_stream::SseStream;

/// The session header of Streamable HTTP.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// Where a call's messages go, and how they are authorized.
pub(crate) struct Endpoint<'a> {
    pub(crate) http: &'a HttpClient,
    pub(crate) url: &'a str,
    pub(crate) auth: Authorizing<'a>,
    /// Whether the call's request left (`http::Departure`).
    pub(crate) departure: Departure,
}

impl Endpoint<'_> {
    /// Whether a request that got `error` reached the server not at all: no connection, or its
    /// body was never read by one (`http::Departure`).
    pub(crate) fn never_left(&self, error: &HttpError) -> bool {
        error.is_connect() || self.departure.only_waited()
    }

    /// POSTs one JSON-RPC message.
    pub(crate) async fn post(
        &self,
        message: &Value,
        headers: HeaderMap,
    ) -> Result<Response, HttpError> {
        self.post_message(serialize(message), headers).await
    }

    /// POSTs one JSON-RPC message already serialized ([`serialize`]).
    pub(crate) async fn post_message(
        &self,
        body: Bytes,
        headers: HeaderMap,
    ) -> Result<Response, HttpError> {
        self.post_json(body, "application/json, text/event-stream", headers)
            .await
    }

    /// POSTs a JSON body that is already serialized, accepting `accept`.
    pub(crate) async fn post_json(
        &self,
        body: Bytes,
        accept: &'static str,
        mut headers: HeaderMap,
    ) -> Result<Response, HttpError> {
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        self.request(Method::POST, headers, body).await
    }

    /// GETs the session's SSE stream to resume a response stream after `last_event_id`
    /// (Streamable HTTP resumability). Nothing is re-sent: the server replays what followed.
    pub(crate) async fn resume(
        &self,
        mut headers: HeaderMap,
        last_event_id: &str,
    ) -> Result<Response, HttpError> {
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Ok(id) = HeaderValue::from_str(last_event_id) {
            headers.insert("last-event-id", id);
        }
        self.request(Method::GET, headers, Bytes::new()).await
    }

    /// GETs the session's own SSE stream, where a server may send messages outside any
    /// request's response.
    pub(crate) async fn listen(&self, mut headers: HeaderMap) -> Result<Response, HttpError> {
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        self.request(Method::GET, headers, Bytes::new()).await
    }

    /// DELETEs a session; errors are of no interest to anyone.
    pub(crate) async fn delete(&self, headers: HeaderMap) {
        let _ = self.request(Method::DELETE, headers, Bytes::new()).await;
    }

    /// Sends one request with its authorization. With OAuth, a request the server refuses for
    /// its token is sent once more after each kind of refusal, at most once each: a `401` (a new
    /// token), a `403 insufficient_scope` (a token with the scopes asked for), a DPoP nonce
    /// asked for. A refused request was not processed, so sending it again cannot run anything
    /// twice (ARCHITECTURE.md, at-most-once); at most four POSTs carry one request.
    async fn request(
        &self,
        method: Method,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response, HttpError> {
        let (Credentials::OAuth(oauth), party) = (self.auth.credentials, self.auth.party()) else {
            crate::auth::add_static(self.auth.credentials, &mut headers);
            return self.send(method, headers, body).await;
        };
        // Boxed: OAuth's exchanges are large futures, and every request would carry their size
        // while it waits for its response (memory per call in flight, `cargo xtask bench` T2).
        Box::pin(self.request_oauth(oauth, party, method, headers, body)).await
    }

    /// [`Endpoint::request`] with OAuth's tokens and its refusals.
    async fn request_oauth(
        &self,
        oauth: &crate::auth::OAuth,
        party: crate::auth::Party<'_>,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response, HttpError> {
        let mut spent: Vec<Retry> = Vec::new();
        loop {
            let mut attempt = headers.clone();
            let generation = oauth
                .authorize(party, &method, self.url, &mut attempt)
                .await
                .map_err(HttpError::Auth)?;
            let response = self.send(method.clone(), attempt, body.clone()).await?;
            oauth.observe(self.url, response.headers());
            let status = response.status();
            if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
                return Ok(response);
            }
            let retry = oauth
                .challenged(party, status, response.headers(), generation, &spent)
                .await
                .map_err(HttpError::Auth)?;
            if retry == Retry::No {
                return Ok(response);
            }
            spent.push(retry);
            tracing::debug!(%method, url = self.url, %status, ?retry, "sending again after the refusal");
        }
    }

    async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response, HttpError> {
        let mut request = http::Request::builder()
            .method(method.clone())
            .uri(self.url);
        if let Some(map) = request.headers_mut() {
            *map = headers;
        }
        let request = request
            .body(Body::new(body, Some(&self.departure)))
            .map_err(|error| HttpError::Url(error.to_string()))?;
        let response = self.http.request(request).await;
        match &response {
            Ok(response) => {
                tracing::trace!(%method, url = self.url, status = %response.status(), "response")
            }
            Err(error) => {
                tracing::trace!(%method, url = self.url, error = %error_chain(error), "no response")
            }
        }
        Ok(response?)
    }
}

/// A JSON-RPC message's bytes.
pub(crate) fn serialize(message: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(message).expect("a JSON value serializes"))
}

/// Why reading a response's messages failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The body (for an SSE stream: one event) exceeded the byte bound; reading stopped there.
    #[error("the response exceeded {0} bytes")]
    TooLarge(u64),
    /// The connection failed mid-body (dropped, reset, truncated).
    #[error("the connection failed while reading the response: {0}")]
    Transport(String),
    /// The body is not what Streamable HTTP allows.
    #[error("the server sent a malformed response: {0}")]
    Malformed(String),
    /// A notification or server request over [`MESSAGE_LIMIT`].
    #[error(
        "the server sent a {method} message of {size} bytes, more than the {MESSAGE_LIMIT} \
         bytes brain reads of a notification or a server request"
    )]
    MessageTooLarge {
        /// The message's method.
        method: String,
        /// Its size in bytes.
        size: usize,
    },
}

impl ReadError {
    /// The call's failure when reading its answer failed after `tools/call` was written:
    /// always a broken exchange; over the bound, the message names `max_output_bytes`.
    pub(crate) fn failure(self, max_output_bytes: u64) -> Failure {
        match self {
            ReadError::TooLarge(limit) => Failure::broken(format!(
                "the response (or one message of its stream) exceeded {limit} bytes, more than \
                 max_output_bytes ({max_output_bytes}) allows; brain stopped reading it"
            )),
            other => Failure::broken(format!("{other}; the tool may have run")),
        }
    }
}

/// The JSON-RPC error object an error response carries, if any (read within 64 KiB).
pub(crate) async fn error_object(response: Response) -> Option<Value> {
    let mut messages = Messages::read(response, 64 * 1024).await.ok()?;
    match messages.next().await {
        Some(Ok(message)) => message.get("error").cloned(),
        _ => None,
    }
}

/// `: <JSON-RPC error>` when an error response carries one (read within 64 KiB), else nothing.
pub(crate) async fn error_detail(response: Response) -> String {
    error_object(response)
        .await
        .map(|error| format!(": {}", crate::mcp::rpc_error_text(&error)))
        .unwrap_or_default()
}

/// The most bytes of one notification or server request brain reads (a response is read under
/// the call's own bound instead): a chatty server's messages cost memory one at a time, however
/// many it sends.
pub(crate) const MESSAGE_LIMIT: usize = 64 * 1024;

/// `message`, of `size` bytes on the wire, unless it is a notification or a server request over
/// [`MESSAGE_LIMIT`].
pub(crate) fn within_message_limit(message: Value, size: usize) -> Result<Value, ReadError> {
    if size > MESSAGE_LIMIT
        && let Some(method) = message.get("method").and_then(Value::as_str)
    {
        return Err(ReadError::MessageTooLarge {
            method: method.chars().take(64).collect(),
            size,
        });
    }
    Ok(message)
}

impl From<sse_stream::Error> for ReadError {
    /// A failed SSE stream: the bound or the connection failing under it (from [`Bounded`]), or
    /// text that is not SSE.
    fn from(error: sse_stream::Error) -> Self {
        match error {
            sse_stream::Error::Body(error) => match error.downcast::<ReadError>() {
                Ok(error) => *error,
                Err(error) => ReadError::Transport(error.to_string()),
            },
            other => ReadError::Malformed(format!("invalid SSE: {other}")),
        }
    }
}

/// A response's media type, lowercase (empty when it has none).
pub(crate) fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// How long [`Messages::release`] waits for the rest of a response.
const RELEASE_BOUND: Duration = Duration::from_secs(1);

/// The JSON-RPC messages of one response, in wire order. A JSON body is read whole under the
/// bound; an SSE stream one event at a time, each event under the bound, and each notification
/// or server request under [`MESSAGE_LIMIT`]: a stream is only bounded in time (by its caller).
pub(crate) struct Messages {
    kind: Kind,
    /// The id of the last SSE event that carried one: where a resumed stream starts.
    pub(crate) last_event_id: Option<String>,
    /// The server's last `retry` field: how long to wait before resuming.
    pub(crate) retry: Option<Duration>,
}

/// An SSE body, each event under its bound.
type EventBody = sse_stream::ByteStreamBody<Bounded<EventSize>, Bytes>;

enum Kind {
    Json(std::vec::IntoIter<Value>),
    Sse(Pin<Box<SseStream<EventBody>>>),
    Done,
}

impl Messages {
    /// Starts reading `response`: a JSON body of at most `limit` bytes, or an SSE stream whose
    /// events are at most `limit` bytes each.
    pub(crate) async fn read(response: Response, limit: u64) -> Result<Self, ReadError> {
        let content_type = content_type(&response);
        if content_type.starts_with("text/event-stream") {
            let body = Bounded::per_event(response, limit);
            return Ok(Messages {
                kind: Kind::Sse(Box::pin(SseStream::from_bytes_stream(body))),
                last_event_id: None,
                retry: None,
            });
        }
        if !content_type.starts_with("application/json") {
            return Err(ReadError::Malformed(format!(
                "unexpected content type {content_type:?}"
            )));
        }
        let body = Bounded::new(response, limit);
        let bytes = body.collect_all().await?;
        let messages = match serde_json::from_slice(&bytes) {
            Ok(Value::Array(batch)) => batch,
            Ok(message) => vec![message],
            Err(error) => return Err(ReadError::Malformed(format!("invalid JSON: {error}"))),
        };
        // A message's size in a JSON body is that of its own JSON text.
        let mut checked = Vec::with_capacity(messages.len());
        for message in messages {
            let size = if message.get("method").is_some() {
                serde_json::to_vec(&message).map_or(0, |text| text.len())
            } else {
                0
            };
            checked.push(within_message_limit(message, size)?);
        }
        Ok(Messages {
            kind: Kind::Json(checked.into_iter()),
            last_event_id: None,
            retry: None,
        })
    }

    /// Done with the response after the message the caller waited for: the rest of an SSE
    /// stream (usually just its end) is read, off the caller's path and for at most
    /// [`RELEASE_BOUND`], so that its connection goes back to the pool instead of being closed
    /// (a new connection per call costs more than the call). What arrives is passed over.
    pub(crate) fn release(mut self) {
        if !matches!(self.kind, Kind::Sse(_)) {
            return;
        }
        // Most often the end has arrived with the last message.
        if let Some(None) = futures_util::FutureExt::now_or_never(self.next()) {
            return;
        }
        tokio::spawn(async move {
            let drained = async { while self.next().await.is_some() {} };
            let _ = tokio::time::timeout(RELEASE_BOUND, drained).await;
        });
    }

    /// [`Messages::release`], after waiting up to `wait` for the end of the response on the
    /// caller's path: for a response whose connection the caller's next request should reuse
    /// (initialize's, whose session goes on at once).
    pub(crate) async fn finish(mut self, wait: Duration) {
        if matches!(self.kind, Kind::Sse(_))
            && let Ok(None) = tokio::time::timeout(wait, self.next()).await
        {
            return;
        }
        self.release();
    }

    /// Whether this is an SSE stream that gave an event id, so it can be resumed.
    pub(crate) fn resumable(&self) -> bool {
        matches!(self.kind, Kind::Sse(_) | Kind::Done) && self.last_event_id.is_some()
    }

    /// The next message; `None` when the response has ended.
    pub(crate) async fn next(&mut self) -> Option<Result<Value, ReadError>> {
        match &mut self.kind {
            Kind::Json(messages) => messages.next().map(Ok),
            Kind::Sse(events) => loop {
                let event = match events.next().await? {
                    Ok(event) => event,
                    Err(error) => {
                        self.kind = Kind::Done;
                        return Some(Err(error.into()));
                    }
                };
                if let Some(id) = event.id.as_ref() {
                    self.last_event_id = Some(id.clone());
                }
                if let Some(retry) = event.retry {
                    self.retry = Some(Duration::from_millis(retry));
                }
                // Priming events and comments carry no data.
                let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                    continue;
                };
                let message = serde_json::from_str(&data).map_err(|error| {
                    ReadError::Malformed(format!("invalid JSON in an SSE event: {error}"))
                });
                return Some(message.and_then(|message| within_message_limit(message, data.len())));
            },
            Kind::Done => None,
        }
    }
}

/// A response body that fails as soon as its [`Budget`] is exceeded, so that a huge response is
/// never buffered: by default ([`Total`]) more than `limit` bytes in all; per SSE event
/// ([`EventSize`], [`Bounded::per_event`]) one event over `limit` bytes.
pub(crate) struct Bounded<B: Budget = Total> {
    stream: Pin<Box<dyn Stream<Item = Result<Bytes, hyper::Error>> + Send>>,
    budget: B,
    failed: bool,
}

/// How a [`Bounded`] body counts what arrives.
pub(crate) trait Budget: Unpin {
    /// Counts `chunk`; `false` once the bound is passed.
    fn fits(&mut self, chunk: &[u8]) -> bool;
    /// The bound, for the error.
    fn limit(&self) -> u64;
}

/// Every byte of a body, against `limit`.
pub(crate) struct Total {
    limit: u64,
    read: u64,
}

impl Budget for Total {
    fn fits(&mut self, chunk: &[u8]) -> bool {
        self.read += chunk.len() as u64;
        self.read <= self.limit
    }

    fn limit(&self) -> u64 {
        self.limit
    }
}

impl Bounded {
    pub(crate) fn new(response: Response, limit: u64) -> Self {
        Bounded::with(response, Total { limit, read: 0 })
    }
}

impl Bounded<EventSize> {
    /// A body read as an SSE stream, failing once one event (the bytes up to the blank line
    /// that ends it) exceeds `limit`: memory stays bounded per event, however long the stream
    /// runs.
    pub(crate) fn per_event(response: Response, limit: u64) -> Self {
        Bounded::with(response, EventSize::new(limit))
    }
}

impl<B: Budget> Bounded<B> {
    fn with(response: Response, budget: B) -> Self {
        Bounded {
            stream: Box::pin(http_body_util::BodyDataStream::new(response.into_body())),
            budget,
            failed: false,
        }
    }

    pub(crate) async fn collect_all(mut self) -> Result<Vec<u8>, ReadError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = self.next().await {
            bytes.extend_from_slice(&chunk?);
        }
        Ok(bytes)
    }
}

impl<B: Budget> Stream for Bounded<B> {
    type Item = Result<Bytes, ReadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match self.stream.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if !self.budget.fits(&chunk) {
                    self.failed = true;
                    return Poll::Ready(Some(Err(ReadError::TooLarge(self.budget.limit()))));
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(error))) => {
                self.failed = true;
                Poll::Ready(Some(Err(ReadError::Transport(error_chain(&error)))))
            }
            other => other.map(|_| None),
        }
    }
}

/// The size of the SSE event being read, across chunks: lines end with CR, LF or CRLF, and a
/// blank line ends an event.
pub(crate) struct EventSize {
    limit: u64,
    /// Bytes of the event being read.
    in_event: u64,
    /// The line being read is empty so far.
    line_empty: bool,
    /// The last byte was a CR (a following LF belongs to it).
    after_cr: bool,
}

impl EventSize {
    fn new(limit: u64) -> Self {
        EventSize {
            limit,
            in_event: 0,
            line_empty: true,
            after_cr: false,
        }
    }
}

impl Budget for EventSize {
    fn fits(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            self.in_event += 1;
            if byte == b'\r' || byte == b'\n' {
                if self.line_empty {
                    // A blank line ends the event.
                    self.in_event = 0;
                }
                self.line_empty = true;
                self.after_cr = byte == b'\r';
            } else {
                self.line_empty = false;
                if self.in_event > self.limit {
                    return false;
                }
            }
        }
        true
    }

    fn limit(&self) -> u64 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::{Budget, EventSize};

    #[test]
    fn the_bound_is_per_event_whatever_the_line_endings_and_chunks() {
        // Many events of 20 bytes each, under a 32-byte bound: fine, in one chunk or byte by byte.
        for ending in ["\n", "\r", "\r\n"] {
            let event = format!("event: p{ending}data: 1{ending}{ending}");
            let stream = event.repeat(1000);
            assert!(EventSize::new(32).fits(stream.as_bytes()), "{ending:?}");
            let mut size = EventSize::new(32);
            assert!(
                stream.as_bytes().iter().all(|b| size.fits(&[*b])),
                "{ending:?}"
            );
        }
        // One event of 40 bytes: over, even split across chunks and lines.
        let mut size = EventSize::new(32);
        assert!(size.fits(b"data: 0123456789\r\n"));
        assert!(!size.fits(b"data: 0123456789abcdef\r\n\r\n"));
        // A CR then an LF in the next chunk is one line end, not a blank line.
        let mut size = EventSize::new(16);
        assert!(size.fits(b"data: 01234\r"));
        assert!(!size.fits(b"\ndata: 56789"));
    }
}
