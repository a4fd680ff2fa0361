//! Pins enforced at run time: a call is sent only under a verified, unexpired listing of its
//! server, in which its tool is what the reviewer approved (`brain_config::pin`). The
//! lifecycle asks before the send, for calls the journal found new; a transport supplies the
//! listing:
//!
//! - Streamable HTTP: one listing per upstream (endpoint and credential, or endpoint alone when
//!   a 2026-07-28 list says `"cacheScope": "public"`), kept for its TTL ([`Pins`]), refreshed
//!   off the call path before it expires, at most one listing in flight per upstream; a call
//!   waits only when the listing expired or was never taken; `notifications/tools/list_changed`
//!   expires it at once;
//! - stdio: the call's own process (or a spare's), listed after `initialize`.
//!
//! A change that refuses is [`Fact::PinDrift`]; a listing that cannot be taken refuses the call
//! too ([`Fact::SetupFailed`]). Each change is reported once (a `tool.drift` log event, the
//! `brain.tool.drift` metric, and the store's drift record), not once per call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brain_config::OnDrift;
use brain_config::pin::{self, PinCheck};
use serde_json::Value;

use crate::auth::Credentials;
use crate::http::HttpClient;
use crate::journal::Drift;
use crate::outcome::{Fact, Failure};
use crate::tool::Tool;
use crate::wire::Endpoint;

/// How long a verified HTTP listing is kept by default.
pub const DEFAULT_LISTING_TTL: Duration = Duration::from_secs(60);
/// The longest a listing may be kept, whatever the host asks.
pub const MAX_LISTING_TTL: Duration = Duration::from_secs(3600);

/// What verifying one call's tool needs of the call.
#[derive(Clone, Copy)]
pub(crate) struct Verifying<'a> {
    /// Where the call goes, and for whom.
    pub(crate) endpoint: &'a Endpoint<'a>,
    /// The call's span (a listing taken on its path is a phase of it).
    pub(crate) span: &'a tracing::Span,
}

/// Where a process's drift records go (the journal store's `brain_drift` table; the sink
/// names the process).
pub(crate) type DriftSink = Arc<dyn Fn(Drift) + Send + Sync>;

/// A server's tools as one verification listed them, by name.
pub(crate) struct Listed {
    by_name: HashMap<String, Vec<Value>>,
    /// Each binding's verdict under this listing, once computed.
    verdicts: Mutex<HashMap<String, Result<(), Failure>>>,
    expires: Instant,
    /// When a refresh is due (before it expires).
    refresh_at: Instant,
    /// When its `tools/list` was sent: a call that arrived before then may use it even
    /// expired (`ttlMs: 0`), as it is as fresh as a listing of the call's own.
    requested: Instant,
}

impl Listed {
    pub(crate) fn new(tools: Vec<Value>, ttl: Duration, requested: Instant) -> Listed {
        let mut by_name: HashMap<String, Vec<Value>> = HashMap::new();
        for tool in tools {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            by_name.entry(name.to_owned()).or_default().push(tool);
        }
        let now = Instant::now();
        Listed {
            by_name,
            verdicts: Mutex::default(),
            expires: now + ttl,
            refresh_at: now + ttl * 3 / 4,
            requested,
        }
    }

    /// The entries listed under `name`: none, one, or (drift of its own) several.
    pub(crate) fn named(&self, name: &str) -> Vec<&Value> {
        self.by_name
            .get(name)
            .map_or_else(Vec::new, |tools| tools.iter().collect())
    }
}

/// What a 2026-07-28 `tools/list` result says of caching it: `ttlMs` (the least of its pages')
/// and `cacheScope` (public only when every page says so). Session revisions say nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheHints {
    /// How long the list may be kept.
    pub(crate) ttl: Option<Duration>,
    /// Every page said `"cacheScope": "public"`: the list is the same whatever the credential.
    pub(crate) public: bool,
}

impl CacheHints {
    pub(crate) fn read(&mut self, page: &Value) {
        if let Some(ms) = page.get("ttlMs").and_then(Value::as_u64) {
            let ttl = Duration::from_millis(ms);
            self.ttl = Some(self.ttl.map_or(ttl, |now| now.min(ttl)));
        }
        self.public &= page.get("cacheScope").and_then(Value::as_str) == Some("public");
    }
}

/// Takes an upstream's listing off the call path (for `tool`, authorized for `tenant` and, on
/// behalf of users, the calling user).
pub(crate) type Lister = Arc<
    dyn Fn(
            HttpClient,
            Arc<Tool>,
            String,
            Option<crate::subject::SubjectToken>,
        )
            -> futures_util::future::BoxFuture<'static, Result<(Vec<Value>, CacheHints), String>>
        + Send
        + Sync,
>;

/// Takes a listing on a call's path: on its session (its headers), or without one.
pub(crate) type OnCall =
    for<'a> fn(
        &'a Endpoint<'a>,
        Option<&'a http::HeaderMap>,
    )
        -> futures_util::future::BoxFuture<'a, Result<(Vec<Value>, CacheHints), String>>;

/// One upstream's verified listing.
#[derive(Default)]
struct Upstream {
    listed: Mutex<Option<Arc<Listed>>>,
    /// Held while a listing is taken: at most one in flight per upstream.
    taking: tokio::sync::Mutex<()>,
    /// A refresh off the call path is running.
    refreshing: AtomicBool,
}

/// The runtime's verification state: the HTTP listings by upstream, and the drift each binding
/// was last seen with (so that a change is reported once).
pub(crate) struct Pins {
    ttl: Duration,
    upstreams: Mutex<HashMap<String, Arc<Upstream>>>,
    /// Upstreams whose list is public: keyed by endpoint alone.
    public: Mutex<HashMap<String, Arc<Upstream>>>,
    /// Per binding: the digest of the drifted entries last reported.
    seen: Mutex<HashMap<String, String>>,
    sink: Option<DriftSink>,
    /// How a refresh off the call path lists.
    lister: Lister,
    /// How a call lists.
    on_call: OnCall,
    /// False only for a benchmark's baseline (`__bench::without_pin_verification`).
    pub(crate) enforced: bool,
}

impl Pins {
    pub(crate) fn new(
        ttl: Duration,
        sink: Option<DriftSink>,
        lister: Lister,
        on_call: OnCall,
    ) -> Pins {
        Pins {
            ttl: ttl.min(MAX_LISTING_TTL),
            upstreams: Mutex::default(),
            public: Mutex::default(),
            seen: Mutex::default(),
            sink,
            lister,
            on_call,
            enforced: true,
        }
    }

    /// The upstream of a call to `tool` for `tenant` (and `subject`, on behalf of users): its
    /// endpoint and credential, and the revision it is listed at (a server may list otherwise at
    /// another, and to another user).
    fn key(tool: &Tool, tenant: &str, subject: Option<&crate::subject::SubjectToken>) -> String {
        let url = Self::endpoint(tool);
        match (&tool.credentials, &tool.binding.auth) {
            (Credentials::None, _) => format!("{url} none"),
            (Credentials::Static(_), _) => {
                format!(
                    "{url} token_env {}",
                    tool.binding.token_env.as_deref().unwrap_or("")
                )
            }
            (Credentials::OAuth(_), auth) => {
                // Per user only where the upstream sees each user (a listing may differ by
                // user); every other binding shares one listing per tenant.
                let subject = subject
                    .filter(|_| auth.as_ref().is_some_and(|a| a.on_behalf_of_users()))
                    .map_or("", crate::subject::SubjectToken::subject);
                format!(
                    "{url} oauth {} tenant {tenant} subject {subject}",
                    serde_json::to_string(auth).unwrap_or_default(),
                )
            }
        }
    }

    /// The endpoint of `tool`'s listing, and the revision it is listed at.
    fn endpoint(tool: &Tool) -> String {
        format!(
            "{} at {}",
            tool.binding.url.as_deref().unwrap_or_default(),
            tool.binding.pinned_revision().unwrap_or("any")
        )
    }

    fn upstream(&self, key: &str, endpoint: &str) -> Arc<Upstream> {
        if let Some(public) = lock(&self.public).get(endpoint) {
            return Arc::clone(public);
        }
        Arc::clone(lock(&self.upstreams).entry(key.to_owned()).or_default())
    }

    /// Expires the listing of `tool`'s upstream for `tenant` and `subject` (the server said its
    /// list changed).
    pub(crate) fn expire(
        &self,
        tool: &Tool,
        tenant: &str,
        subject: Option<&crate::subject::SubjectToken>,
    ) {
        let upstream = self.upstream(&Self::key(tool, tenant, subject), &Self::endpoint(tool));
        *lock(&upstream.listed) = None;
    }

    /// Verifies an HTTP call's tool against its upstream's listing, taking the listing when it
    /// expired or was never taken (the call waits), refreshing it off the call path when due.
    /// Calls that wait together share one listing sent after they arrived (at most one in
    /// flight per upstream): under `ttlMs: 0` concurrent calls pay one round trip between them,
    /// never a listing older than themselves.
    ///
    /// A listing taken for the call goes on the call's own session (`session`: its headers),
    /// or without one at 2026-07-28 (`None`): one round trip, no session of its own.
    pub(crate) async fn verify_http(
        self: &Arc<Self>,
        call: Verifying<'_>,
        tool: &Arc<Tool>,
        session: Option<&http::HeaderMap>,
    ) -> Result<(), Failure> {
        let arrived = Instant::now();
        let key = Self::key(tool, call.endpoint.auth.tenant, call.endpoint.auth.subject);
        let upstream = self.upstream(&key, &Self::endpoint(tool));
        let current = lock(&upstream.listed).clone();
        let listed = match current {
            Some(listed) if listed.expires > Instant::now() => {
                if listed.refresh_at <= Instant::now()
                    && !upstream.refreshing.swap(true, Ordering::SeqCst)
                {
                    self.refresh(call, tool, key, Arc::clone(&upstream));
                }
                listed
            }
            _ => {
                let _taking = upstream.taking.lock().await;
                let again = lock(&upstream.listed).clone();
                let fresh = |listed: &Arc<Listed>| {
                    listed.expires > Instant::now() || listed.requested >= arrived
                };
                match again.filter(fresh) {
                    Some(listed) => listed,
                    None => {
                        let _listing = crate::telemetry::phase("tools/list", None, call.span);
                        let listing = (self.on_call)(call.endpoint, session);
                        self.take(listing, tool, &key, &upstream).await?
                    }
                }
            }
        };
        // Each binding's verdict is computed once per listing: a call under a kept listing
        // pays a lookup, not a digest of the tool.
        let name = &tool.binding.name;
        if let Some(verdict) = lock(&listed.verdicts).get(name) {
            return verdict.clone();
        }
        let verdict = self.verdict(tool, &listed.named(mcp_tool(tool)));
        lock(&listed.verdicts).insert(name.clone(), verdict.clone());
        verdict
    }

    /// Takes `upstream`'s listing now, and keeps it.
    async fn take(
        &self,
        listing: impl Future<Output = Result<(Vec<Value>, CacheHints), String>>,
        tool: &Tool,
        key: &str,
        upstream: &Arc<Upstream>,
    ) -> Result<Arc<Listed>, Failure> {
        let requested = Instant::now();
        let (tools, hints) = listing.await.map_err(|error| {
            Failure::new(
                Fact::SetupFailed,
                format!(
                    "the server's tools/list could not be taken to verify {:?} against its \
                         pin ({error}); tools/call was not sent",
                    tool.binding.name
                ),
            )
        })?;
        let listed = Arc::new(Listed::new(tools, self.lifetime(hints), requested));
        *lock(&upstream.listed) = Some(Arc::clone(&listed));
        if hints.public {
            lock(&self.public).insert(Self::endpoint(tool), Arc::clone(upstream));
        } else {
            lock(&self.upstreams).insert(key.to_owned(), Arc::clone(upstream));
        }
        Ok(listed)
    }

    /// The TTL of a listing: the host's, shorter where the server's hints say so.
    fn lifetime(&self, hints: CacheHints) -> Duration {
        hints.ttl.map_or(self.ttl, |ttl| ttl.min(self.ttl))
    }

    /// Takes `upstream`'s listing again off the call path (its listing is due for refresh).
    fn refresh(
        self: &Arc<Self>,
        call: Verifying<'_>,
        tool: &Arc<Tool>,
        key: String,
        upstream: Arc<Upstream>,
    ) {
        let pins = Arc::clone(self);
        let tool = Arc::clone(tool);
        let http = call.endpoint.http.clone();
        let tenant = call.endpoint.auth.tenant.to_owned();
        let subject = call.endpoint.auth.subject.cloned();
        tokio::spawn(async move {
            {
                let _taking = upstream.taking.lock().await;
                let listing = (pins.lister)(http, Arc::clone(&tool), tenant, subject);
                if let Err(failure) = pins.take(listing, &tool, &key, &upstream).await {
                    tracing::debug!(binding = %tool.binding.name, error = %failure.message,
                        "refreshing the verified listing failed; the next call after it expires \
                         takes it again");
                }
            }
            upstream.refreshing.store(false, Ordering::SeqCst);
        });
    }

    /// What the entries `listed` under the tool's name mean for a call: refused (the fields
    /// named, never the server's text), warned about, or nothing changed. A change is reported
    /// once per binding until it changes again or goes back to the pin.
    pub(crate) fn verdict(&self, tool: &Tool, listed: &[&Value]) -> Result<(), Failure> {
        let binding = &tool.binding;
        let check = pin::check(binding, listed, binding.on_drift() == OnDrift::Refuse);
        if check.unchanged() {
            lock(&self.seen).remove(&binding.name);
            return Ok(());
        }
        let digest = listed_digest(listed);
        let new =
            lock(&self.seen).insert(binding.name.clone(), digest.clone()) != Some(digest.clone());
        if new {
            self.report(tool, &check, digest);
        }
        if check.refused.is_empty() {
            return Ok(());
        }
        Err(Failure::new(Fact::PinDrift, refusal(tool, &check)))
    }

    fn report(&self, tool: &Tool, check: &PinCheck, listed: String) {
        let refused = !check.refused.is_empty();
        let fields: Vec<String> = check.refused.iter().chain(&check.warned).cloned().collect();
        tracing::warn!(
            name: "tool.drift",
            binding = %tool.binding.name,
            fields = %fields.join(", "),
            refused,
            listed = %listed,
            "the server lists the tool otherwise than its pin{}: review with `cargo xtask \
             discover --check`",
            if refused { "; its calls are refused" } else { "; only its texts changed, calls go on" }
        );
        tool.instruments.drifted(&tool.binding.name, refused);
        if let Some(sink) = &self.sink {
            sink(Drift {
                binding: tool.binding.name.clone(),
                pinned: (tool.binding.pin.as_ref()).map_or_else(String::new, |p| p.digest.clone()),
                listed,
                fields,
                refused,
                tenants: tool.binding.tenants.clone(),
                process: String::new(),
                first_seen_ms: 0,
            });
        }
    }
}

/// The tool's name on its server.
pub(crate) fn mcp_tool(tool: &Tool) -> &str {
    tool.binding
        .mcp_tool
        .as_deref()
        .unwrap_or(&tool.binding.name)
}

/// The refusal's message: what changed, by field name only.
fn refusal(tool: &Tool, check: &PinCheck) -> String {
    let name = mcp_tool(tool);
    let what = match check.refused.first().map(String::as_str) {
        Some("(absent)") => format!("the server no longer lists the tool {name:?}"),
        Some("(listed twice)") => format!("the server lists the tool {name:?} more than once"),
        _ => format!(
            "the server now lists the tool {name:?} otherwise than it was reviewed: {} changed",
            check
                .refused
                .iter()
                .map(|field| format!("`{field}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        "refused: {what} (pin_drift); tools/call was not sent. Review the change with `cargo \
         xtask discover --check`, then re-pin the binding {:?} with `discover --write`",
        tool.binding.name
    )
}

/// The digest of the entries listed under one name, in RFC 8785 canonical JSON.
fn listed_digest(listed: &[&Value]) -> String {
    use sha2::{Digest, Sha256};
    let entries = Value::Array(listed.iter().map(|v| (*v).clone()).collect());
    let text = serde_jcs::to_string(&entries).unwrap_or_else(|_| entries.to_string());
    let hash = Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
