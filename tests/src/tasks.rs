//! An MCP server whose tool `research` runs as a task, in both flavours: at 2025-11-25 only as
//! a task (`taskSupport: "required"`, in a session); at 2026-07-28 (no session) as the tasks
//! extension (SEP-2663), when the request declares it — a call that does not is refused with
//! `-32021`, except in mode `direct`, which the server answers at once. The faults a task can
//! meet are chosen per call by the argument `mode`:
//!
//! | `mode` | what the task does |
//! |---|---|
//! | `complete` | three `working` steps (each its own status message), then `completed` |
//! | `fail_result` | the tool's `isError` result: `failed` after a step at 2025-11-25 (kept for `tasks/result`), `completed` with it at 2026-07-28 |
//! | `fail_no_result` | `failed` after a step; `tasks/result` is a JSON-RPC error (2025-11-25), the task carries one (2026-07-28) |
//! | `server_cancel` | `cancelled` by the server after a step |
//! | `input_required` | `input_required` after a step (at 2026-07-28 an elicitation in `inputRequests`; answered with `tasks/update`, the task completes, its report saying the answer) |
//! | `expire` | a ttl of 300 ms: the server forgets the task, `tasks/get` says -32602 |
//! | `unknown_id` | `tasks/get` never knew the task's id: -32602 |
//! | `lose_create` | the task is created, the connection dropped before `CreateTaskResult` |
//! | `slow_poller` | a poll interval of an hour; `completed` after 500 ms |
//! | `hold` | as `complete` (2 s), but the task's first `tasks/get` is held `hold_ms` |
//! | `notify` | as `complete`, and each `tasks/get` answered on an SSE stream that first carries a progress notification for the call's token ("read N sources", progress 10·N of 100) |
//! | `direct` | 2026-07-28: no task, the report at once |
//!
//! Steps last `step_ms` (200 by default); the server asks for polls every 100 ms. At 2025-11-25
//! tasks live in their session (a DELETE ends both; another session does not know them); at
//! 2026-07-28 they are known by id alone, and a task request whose `Mcp-Name` header is not its
//! task's id is refused (HTTP 400, counted as `bad routing`). A task answers only requests with
//! the `Authorization` header of the call that created it (else HTTP 403, counted as
//! `forbidden`). Every request is counted by method, at the server's door.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

const SESSION: &str = "mcp-session-id";
/// The key the 2026-07-28 tasks are kept under, beside the sessions'.
const STATELESS: &str = "(2026-07-28)";
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The task server, serving on a loopback port until dropped.
pub struct TaskServer {
    /// Its MCP endpoint.
    pub url: String,
    shared: Arc<Shared>,
    serving: tokio::task::JoinHandle<()>,
}

impl Drop for TaskServer {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

#[derive(Default)]
struct Shared {
    /// 2025-11-25: the server declares no `tasks.cancel` and refuses `tasks/cancel`.
    no_cancel: bool,
    counts: Mutex<BTreeMap<String, u64>>,
    sessions: Mutex<HashMap<String, HashMap<String, Task>>>,
    next: AtomicU64,
    /// `research` is listed with one more required argument (a change after review).
    drifted: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
struct Task {
    mode: String,
    topic: String,
    created: Instant,
    step: Duration,
    hold: Duration,
    polls: u64,
    cancelled: bool,
    /// A 2026-07-28 task (the tasks extension's shapes).
    extension: bool,
    /// The answer `tasks/update` brought to its input request.
    input: Option<Value>,
    /// The `progressToken` of the call that created it.
    token: Value,
    /// The `Authorization` header of the call that created it: its authorization context.
    auth: Option<String>,
}

impl Task {
    /// Its status and status message now.
    fn status(&self) -> (&'static str, Option<String>) {
        if self.cancelled {
            return (
                "cancelled",
                Some("cancelled at the client's request".into()),
            );
        }
        let elapsed = self.created.elapsed();
        let steps = (elapsed.as_millis() / self.step.as_millis().max(1)) as u64;
        let working = |n: u64| ("working", Some(format!("step {} of 3", n + 1)));
        match self.mode.as_str() {
            "complete" | "hold" | "notify" if steps < 3 => working(steps),
            "complete" | "hold" | "notify" => ("completed", None),
            "slow_poller" if elapsed < Duration::from_millis(500) => ("working", None),
            "slow_poller" => ("completed", None),
            _ if steps < 1 => working(0),
            "fail_result" if self.extension => ("completed", None),
            "fail_result" | "fail_no_result" => ("failed", Some("the tool failed".into())),
            "server_cancel" => ("cancelled", Some("the operator cancelled it".into())),
            "input_required" if self.input.is_some() => ("completed", None),
            "input_required" => ("input_required", Some("which region?".into())),
            _ => ("working", None),
        }
    }

    fn json(&self, id: &str) -> Value {
        let (status, message) = self.status();
        let poll = if self.mode == "slow_poller" {
            3_600_000
        } else {
            100
        };
        let ttl = if self.mode == "expire" { 300 } else { 60_000 };
        let mut task = if self.extension {
            json!({
                "taskId": id, "status": status, "createdAt": "2026-12-02T00:00:00Z",
                "lastUpdatedAt": "2026-12-02T00:00:00Z", "ttlMs": ttl, "pollIntervalMs": poll,
            })
        } else {
            json!({
                "taskId": id, "status": status, "createdAt": "2026-12-02T00:00:00Z",
                "lastUpdatedAt": "2026-12-02T00:00:00Z", "ttl": ttl, "pollInterval": poll,
            })
        };
        if let Some(message) = message {
            task["statusMessage"] = json!(message);
        }
        if self.extension {
            // A DetailedTask: what the status needs, inline.
            match status {
                "completed" => task["result"] = self.result(id),
                "failed" => {
                    task["error"] = json!({"code": -32603, "message": "the tool's process crashed"})
                }
                "input_required" => {
                    task["inputRequests"] = json!({"region": {
                        "method": "elicitation/create",
                        "params": {"mode": "form", "message": "Which region?",
                                   "requestedSchema": {"type": "object",
                                       "properties": {"region": {"type": "string"}}}},
                    }});
                }
                _ => {}
            }
        }
        task
    }

    /// The tool's result, once the task has ended well.
    fn result(&self, id: &str) -> Value {
        let related = json!({"io.modelcontextprotocol/related-task": {"taskId": id}});
        if self.mode == "fail_result" {
            return json!({"content": [{"type": "text", "text": "no sources found"}],
                          "isError": true, "_meta": related});
        }
        let text = match &self.input {
            Some(input) => format!("report: {} (input: {input})", self.topic),
            None => format!("report: {}", self.topic),
        };
        json!({"content": [{"type": "text", "text": text}], "isError": false, "_meta": related})
    }

    fn terminal(&self) -> bool {
        matches!(self.status().0, "completed" | "failed" | "cancelled")
    }

    /// The server forgot it (`expire` past its ttl).
    fn forgotten(&self) -> bool {
        self.mode == "expire" && self.created.elapsed() > Duration::from_millis(300)
    }
}

impl TaskServer {
    /// Starts the server on a free loopback port.
    pub async fn start() -> std::io::Result<TaskServer> {
        TaskServer::serve(Shared::default()).await
    }

    /// Starts a server that offers no task cancellation at 2025-11-25 (no `tasks.cancel`
    /// capability; `tasks/cancel` is method not found).
    pub async fn start_without_cancel() -> std::io::Result<TaskServer> {
        TaskServer::serve(Shared {
            no_cancel: true,
            ..Shared::default()
        })
        .await
    }

    async fn serve(shared: Shared) -> std::io::Result<TaskServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let shared = Arc::new(shared);
        lock(&shared.sessions).insert(STATELESS.to_owned(), HashMap::new());
        let app = Router::new()
            .route("/mcp", post(handle).delete(close).get(no_stream))
            .with_state(Arc::clone(&shared));
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(TaskServer {
            url,
            shared,
            serving,
        })
    }

    /// Lists `research` with one more required argument (`drifted`), or as it was.
    pub fn drift(&self, drifted: bool) {
        self.shared.drifted.store(drifted, Ordering::Relaxed);
    }

    /// How many requests of `method` the server received.
    pub fn count(&self, method: &str) -> u64 {
        lock(&self.shared.counts).get(method).copied().unwrap_or(0)
    }

    /// Every method's count.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        lock(&self.shared.counts).clone()
    }

    /// The binding of `research` at this server, as `cargo xtask discover` writes it.
    pub fn binding(&self, name: &str, timeout_seconds: u64) -> Value {
        json!({
            "name": name, "description": "A report, run as an MCP task.",
            "url": self.url, "mcp_tool": "research", "tenants": ["local"],
            "input_schema": input_schema(), "timeout_seconds": timeout_seconds,
            "max_output_bytes": 65536, "protocol_version": "2025-11-25",
            "execution": {"taskSupport": "required"}, "task": true, "server_tasks": true,
        })
    }

    /// The binding of `research` at this server at 2026-07-28, as `cargo xtask discover` writes
    /// it, opted into the tasks extension (`task`).
    pub fn stateless_binding(&self, name: &str, timeout_seconds: u64) -> Value {
        json!({
            "name": name, "description": "A report, run as an MCP task.",
            "url": self.url, "mcp_tool": "research", "tenants": ["local"],
            "input_schema": input_schema(), "timeout_seconds": timeout_seconds,
            "max_output_bytes": 65536, "protocol_version": "2026-07-28",
            "task": true, "server_tasks": true,
        })
    }
}

/// `research`'s input schema as the server lists it now.
fn listed_schema(shared: &Shared) -> Value {
    let mut schema = input_schema();
    if shared.drifted.load(Ordering::Relaxed) {
        schema["properties"]["budget"] = json!({"type": "integer"});
        schema["required"] = json!(["topic", "mode", "budget"]);
    }
    schema
}

fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "topic": {"type": "string"},
            "mode": {"type": "string"},
            "step_ms": {"type": "integer"},
            "hold_ms": {"type": "integer"},
        },
        "required": ["topic", "mode"],
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

async fn no_stream() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

async fn close(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> StatusCode {
    *lock(&shared.counts).entry("DELETE".into()).or_default() += 1;
    let session = headers.get(SESSION).and_then(|v| v.to_str().ok());
    match session.and_then(|s| lock(&shared.sessions).remove(s)) {
        Some(_) => StatusCode::OK,
        None => StatusCode::NOT_FOUND,
    }
}

fn answer(id: &Value, result: Value) -> Response {
    json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn error(id: &Value, code: i64, message: &str) -> Response {
    json_response(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn json_response(message: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        message.to_string(),
    )
        .into_response()
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let method = message["method"]
        .as_str()
        .unwrap_or("(response)")
        .to_owned();
    *lock(&shared.counts).entry(method.clone()).or_default() += 1;
    let id = message["id"].clone();
    let params = &message["params"];
    let task_id = params["taskId"].as_str().unwrap_or_default().to_owned();
    let extension = params["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28";
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let key = if extension {
        if method.starts_with("tasks/") && !routed(&headers, &method, &task_id) {
            *lock(&shared.counts)
                .entry("bad routing".into())
                .or_default() += 1;
            return (
                StatusCode::BAD_REQUEST,
                "Mcp-Method/Mcp-Name do not match the body",
            )
                .into_response();
        }
        match method.as_str() {
            "server/discover" => {
                return answer(
                    &id,
                    json!({
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": {"tools": {}, "extensions": {EXTENSION: {}}},
                        "serverInfo": {"name": "brain-task-server", "version": "1"},
                    }),
                );
            }
            "tools/list" => {
                return answer(
                    &id,
                    json!({"tools": [{
                        "name": "research", "description": "A report, run as an MCP task.",
                        "inputSchema": listed_schema(&shared),
                    }]}),
                );
            }
            _ => STATELESS.to_owned(),
        }
    } else {
        if method == "initialize" {
            return initialize(&shared, &id);
        }
        let Some(session) = headers
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .filter(|s| lock(&shared.sessions).contains_key(*s))
            .map(str::to_owned)
        else {
            return (StatusCode::NOT_FOUND, "no such session").into_response();
        };
        session
    };
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    // A task answers only the authorization context that created it.
    let owner = lock(&shared.sessions)
        .get(&key)
        .and_then(|t| t.get(&task_id))
        .map(|task| task.auth.clone());
    if method.starts_with("tasks/")
        && let Some(owner) = owner
        && owner.as_deref() != auth
    {
        *lock(&shared.counts).entry("forbidden".into()).or_default() += 1;
        return (
            StatusCode::FORBIDDEN,
            "the task belongs to another authorization context",
        )
            .into_response();
    }
    match method.as_str() {
        "tools/list" => answer(
            &id,
            json!({"tools": [{
                "name": "research", "description": "A report, run as an MCP task.",
                "inputSchema": listed_schema(&shared), "execution": {"taskSupport": "required"},
            }]}),
        ),
        "tools/call" => call(&shared, &key, &id, params, auth),
        "tasks/get" => {
            let held = {
                let mut sessions = lock(&shared.sessions);
                let task = sessions.get_mut(&key).and_then(|t| t.get_mut(&task_id));
                match task {
                    Some(task) if task.mode != "unknown_id" && !task.forgotten() => {
                        task.polls += 1;
                        (task.polls == 1).then_some(task.hold)
                    }
                    _ => return error(&id, -32602, &format!("unknown task {task_id:?}")),
                }
            };
            if let Some(hold) = held {
                tokio::time::sleep(hold).await;
            }
            let sessions = lock(&shared.sessions);
            let Some(task) = sessions.get(&key).and_then(|t| t.get(&task_id)) else {
                return error(&id, -32602, &format!("unknown task {task_id:?}"));
            };
            let mut state = task.json(&task_id);
            if task.extension {
                state["resultType"] = json!("complete");
            }
            if task.mode == "notify" {
                return with_progress(task, &id, state);
            }
            answer(&id, state)
        }
        "tasks/update" if extension => update(&shared, &id, &task_id, params),
        "tasks/result" if !extension => result(&shared, &key, &id, &task_id).await,
        "tasks/cancel" if shared.no_cancel && !extension => {
            error(&id, -32601, "method not found: tasks/cancel")
        }
        "tasks/cancel" => {
            let mut sessions = lock(&shared.sessions);
            match sessions.get_mut(&key).and_then(|t| t.get_mut(&task_id)) {
                Some(task) if task.forgotten() || task.mode == "unknown_id" => {
                    error(&id, -32602, &format!("unknown task {task_id:?}"))
                }
                Some(task) if task.terminal() => {
                    error(&id, -32602, "the task has ended: it cannot be cancelled")
                }
                Some(task) => {
                    task.cancelled = true;
                    if task.extension {
                        answer(&id, json!({"resultType": "complete"}))
                    } else {
                        answer(&id, task.json(&task_id))
                    }
                }
                None => error(&id, -32602, &format!("unknown task {task_id:?}")),
            }
        }
        other => error(&id, -32601, &format!("method not found: {other}")),
    }
}

/// The answer `result` to `tasks/get` as an SSE stream that first carries a progress
/// notification of the task's call.
fn with_progress(task: &Task, id: &Value, result: Value) -> Response {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
        "progressToken": task.token, "progress": task.polls * 10, "total": 100,
        "message": format!("read {} sources", task.polls),
    }});
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
    let body = format!("event: message\ndata: {note}\n\nevent: message\ndata: {reply}\n\n");
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(body))
        .expect("a valid response")
}

/// A 2025-11-25 session opened.
fn initialize(shared: &Shared, id: &Value) -> Response {
    let session = format!("session-{}", shared.next.fetch_add(1, Ordering::Relaxed));
    lock(&shared.sessions).insert(session.clone(), HashMap::new());
    let tasks = if shared.no_cancel {
        json!({"list": {}, "requests": {"tools": {"call": {}}}})
    } else {
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    };
    let result = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}, "tasks": tasks},
        "serverInfo": {"name": "brain-task-server", "version": "1"},
    });
    let mut response = answer(id, result);
    response
        .headers_mut()
        .insert(SESSION, session.parse().expect("a header value"));
    response
}

/// Whether a 2026-07-28 task request carries the routing headers SEP-2663 asks for: `Mcp-Method`
/// its method, `Mcp-Name` its task's id.
fn routed(headers: &HeaderMap, method: &str, task_id: &str) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    header("mcp-method") == Some(method) && header("mcp-name") == Some(task_id)
}

/// `tasks/update` (2026-07-28): the answer to the task's input request taken in.
fn update(shared: &Shared, id: &Value, task_id: &str, params: &Value) -> Response {
    let mut sessions = lock(&shared.sessions);
    let Some(task) = sessions
        .get_mut(STATELESS)
        .and_then(|t| t.get_mut(task_id))
        .filter(|t| !t.forgotten() && t.mode != "unknown_id")
    else {
        return error(id, -32602, &format!("unknown task {task_id:?}"));
    };
    if let Some(answer) = params["inputResponses"].get("region")
        && task.status().0 == "input_required"
    {
        task.input = Some(answer.clone());
    }
    answer(id, json!({"resultType": "complete"}))
}

/// `tools/call`: the task created (or refused without `task`).
fn call(
    shared: &Shared,
    session: &str,
    id: &Value,
    params: &Value,
    auth: Option<&str>,
) -> Response {
    let arguments = &params["arguments"];
    let extension = session == STATELESS;
    if extension {
        let declared = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            [EXTENSION]
            .is_object();
        let topic = arguments["topic"].as_str().unwrap_or_default();
        if arguments["mode"] == "direct" {
            return answer(
                id,
                json!({"content": [{"type": "text", "text": format!("report: {topic}")}],
                       "isError": false}),
            );
        }
        if !declared {
            return json_response(json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32021, "message": "Missing required client capability",
                "data": {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            }}));
        }
    } else if !params["task"].is_object() {
        return error(
            id,
            -32601,
            "research runs only as a task: augment the call with `task`",
        );
    }
    let millis = |name: &str, default: u64| {
        Duration::from_millis(arguments[name].as_u64().unwrap_or(default))
    };
    let task = Task {
        mode: arguments["mode"].as_str().unwrap_or("complete").to_owned(),
        topic: arguments["topic"].as_str().unwrap_or_default().to_owned(),
        created: Instant::now(),
        step: millis(
            "step_ms",
            if arguments["mode"] == "hold" {
                700
            } else {
                200
            },
        ),
        hold: millis("hold_ms", 0),
        polls: 0,
        cancelled: false,
        extension,
        input: None,
        token: params["_meta"]["progressToken"].clone(),
        auth: auth.map(str::to_owned),
    };
    let task_id = format!("task-{}", shared.next.fetch_add(1, Ordering::Relaxed));
    let created = task.json(&task_id);
    let lose = task.mode == "lose_create";
    if let Some(tasks) = lock(&shared.sessions).get_mut(session) {
        tasks.insert(task_id, task);
    }
    if lose {
        let body = futures_util::stream::once(async {
            Err::<Bytes, std::io::Error>(std::io::Error::other("fault: connection dropped"))
        });
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(body))
            .expect("a valid response");
    }
    if extension {
        let mut created = created;
        created["resultType"] = json!("task");
        return answer(id, created);
    }
    answer(id, json!({"task": created}))
}

/// `tasks/result`: waits until the task ends (bounded), then its result.
async fn result(shared: &Shared, session: &str, id: &Value, task_id: &str) -> Response {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let task = lock(&shared.sessions)
            .get(session)
            .and_then(|t| t.get(task_id))
            .cloned();
        let Some(task) = task.filter(|t| !t.forgotten() && t.mode != "unknown_id") else {
            return error(id, -32602, &format!("unknown task {task_id:?}"));
        };
        if task.terminal() || Instant::now() > deadline {
            return match (task.status().0, task.mode.as_str()) {
                ("completed", _) | ("failed", "fail_result") => answer(id, task.result(task_id)),
                _ => error(id, -32603, "the task kept no result"),
            };
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
