//! One line on stderr per call: JSON when stderr is not a terminal, `key=value` on one. It names
//! the call (tool, tenant, client, session, the client's call id and the upstream one, the MCP
//! session for telemetry) and its outcome — never an argument, a result or a credential.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use brain_runtime::{OutcomeKind, ToolResult};
use serde_json::json;

use super::clients::Client;

/// What the line says about a call.
pub(crate) struct CallLine<'a> {
    pub(crate) tool: &'a str,
    pub(crate) client: &'a Client,
    pub(crate) session: &'a str,
    pub(crate) call_id: &'a str,
    pub(crate) upstream: &'a str,
    pub(crate) mcp_session: Option<&'a str>,
}

impl CallLine<'_> {
    /// Writes the line for `result`, which took `elapsed`.
    pub(crate) fn write(&self, result: &ToolResult, elapsed: Duration, json: bool) {
        let ms = elapsed.as_secs_f64() * 1000.0;
        let error_type = result.kind.map(OutcomeKind::as_str);
        if json {
            let at = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis();
            let line = json!({
                "time_ms": at as u64,
                "event": "tools/call",
                "tool": self.tool,
                "tenant": self.client.tenant,
                "client": self.client.id,
                "session": self.session,
                "call_id": self.call_id,
                "upstream_call_id": self.upstream,
                "mcp_session_id": self.mcp_session,
                "is_error": result.is_error,
                "unknown_outcome": result.unknown_outcome,
                "replayed": result.replayed,
                "error_type": error_type,
                "ms": (ms * 1000.0).round() / 1000.0,
            });
            emit(line.to_string());
        } else {
            emit(format!(
                "tools/call {} tenant={} client={} session={} call_id={} upstream_call_id={} \
                 is_error={} unknown_outcome={} replayed={} error_type={} ms={ms:.1}",
                self.tool,
                self.client.tenant,
                self.client.id,
                self.session,
                self.call_id,
                self.upstream,
                result.is_error,
                result.unknown_outcome,
                result.replayed,
                error_type.unwrap_or("-"),
            ));
        }
    }
}

/// Writes `line` and a newline to stderr in one `write` (stderr is unbuffered: formatting into
/// it directly costs a system call per piece).
fn emit(mut line: String) {
    use std::io::Write;
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
