//! The stateless transport (MCP 2026-07-28): no session. One POST carries each round, with the
//! protocol revision and client capabilities in `_meta`, and the `Mcp-Method`, `Mcp-Name` and
//! `Mcp-Param-*` headers (SEP-2243, `routing.rs`) computed from the pinned schema's
//! `x-mcp-header` annotations (`streamable.rs` writes it). There is no way back to the server:
//! server requests cannot be answered, and a cancelled call is a closed response stream. A task
//! binding declares the tasks extension (SEP-2663); a task the server creates is followed with
//! `tasks/get` POSTs routed by its id (`Mcp-Name`), and one left running is cancelled
//! (`tasks/cancel`) in the cleanup.

use std::sync::Arc;

use serde_json::Value;

use crate::call::{CONTROL_TIMEOUT, CallState, Exchange, Round, Transport};
use crate::http::HttpClient;
use crate::journal::TaskRecord;
use crate::outcome::Failure;
use crate::revision::STATELESS;
use crate::tool::Tool;
use crate::transport::streamable::{self, HttpReading, McpHttp};

/// The JSON-RPC id of the cleanup's `tasks/cancel`.
const CANCEL_ID: u64 = 99;

/// The stateless transport, for one call.
pub(crate) struct Stateless {
    pub(crate) route: Arc<McpHttp>,
}

impl Transport for Stateless {
    type Opened = ();
    type Reading = HttpReading;

    /// Against the upstream's verified listing (`pins.rs`).
    async fn verify(&self, call: &Exchange<'_>, _: &()) -> Result<(), Failure> {
        call.pins
            .verify_http(call.verifying(), call.tool, None)
            .await
    }

    const OPENS: bool = false;

    /// Nothing to open: the revision is all there is.
    async fn open(&self, call: &Exchange<'_>) -> Result<(), Failure> {
        call.state().revision = Some(STATELESS);
        Ok(())
    }

    async fn write(
        &self,
        call: &Exchange<'_>,
        _: &(),
        round: &Round,
    ) -> Result<HttpReading, Failure> {
        streamable::write_stateless(call, &self.route, round).await
    }

    /// A request of the call's task: one POST, routed by the task's id.
    async fn request(
        &self,
        call: &Exchange<'_>,
        _: &(),
        message: &Value,
        heard: &mut Vec<Value>,
    ) -> Result<Value, Failure> {
        let headers = task_headers(message);
        streamable::task_request(call, headers, message, heard).await
    }

    /// Nothing to reopen: a task of the tasks extension is known by its id alone.
    async fn resume(&self, call: &Exchange<'_>, task: &TaskRecord) -> Result<(), Failure> {
        if task.revision != STATELESS {
            return Err(Failure::broken(format!(
                "task {} was created at revision {:?}, and the binding now calls at {STATELESS}; \
                 the tool may have run",
                task.task_id, task.revision
            )));
        }
        call.state().revision = Some(STATELESS);
        Ok(())
    }

    /// Nothing to close: dropping the response closed its stream, which is how 2026-07-28
    /// cancels; a task that has not ended is cancelled.
    fn leaves_work(&self, state: &CallState) -> bool {
        state.task.is_some()
    }

    async fn clean_up(self, http: HttpClient, tool: Arc<Tool>, state: CallState) {
        let Some(task) = &state.task else {
            return;
        };
        let endpoint = streamable::cleanup_endpoint(&http, &tool, &state);
        let cancel = crate::mcp::task_request(CANCEL_ID, "tasks/cancel", task, Some(STATELESS));
        let headers = task_headers(&cancel);
        let _ = tokio::time::timeout(CONTROL_TIMEOUT, endpoint.post(&cancel, headers)).await;
    }
}

/// The routing headers of a task request.
fn task_headers(message: &Value) -> http::HeaderMap {
    crate::routing::task_headers(
        message["method"].as_str().unwrap_or_default(),
        message["params"]["taskId"].as_str().unwrap_or_default(),
    )
}
