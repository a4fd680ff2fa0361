//! One line on stderr per call: JSON when stderr is not a terminal, `key=value` on one. It names
//! the call (tool, tenant, client, session, the client's call id and the upstream one, the MCP
//! session for telemetry) and its outcome — never an argument, a result or a credential. A
//! failure's `detail` is the runtime's own text, which the client is not told (`answer.rs`).
//! Control characters in every field are escaped in both formats: no field can forge a line.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use brain_runtime::{OutcomeKind, ToolResult};

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
    pub(crate) fn write(
        &self,
        result: &ToolResult,
        detail: Option<&str>,
        elapsed: Duration,
        json: bool,
    ) {
        let ms = elapsed.as_secs_f64() * 1000.0;
        let error_type = result.kind.map(OutcomeKind::as_str);
        if json {
            let at = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis();
            let line = JsonLine {
                time_ms: at as u64,
                event: "tools/call",
                tool: self.tool,
                tenant: &self.client.tenant,
                client: &self.client.id,
                session: self.session,
                call_id: self.call_id,
                upstream_call_id: self.upstream,
                mcp_session_id: self.mcp_session,
                is_error: result.is_error,
                unknown_outcome: result.unknown_outcome,
                replayed: result.replayed,
                error_type,
                reason: result.reason.map(brain_runtime::Reason::as_str),
                detail,
                ms: (ms * 1000.0).round() / 1000.0,
            };
            // serde_json escapes every control character in a string.
            if let Ok(line) = serde_json::to_string(&line) {
                emit(line);
            }
        } else {
            let mut line = format!(
                "tools/call {} tenant={} client={} session={} call_id={} upstream_call_id={} \
                 is_error={} unknown_outcome={} replayed={} error_type={} ms={ms:.1}",
                escaped(self.tool),
                escaped(&self.client.tenant),
                escaped(&self.client.id),
                escaped(self.session),
                escaped(self.call_id),
                escaped(self.upstream),
                result.is_error,
                result.unknown_outcome,
                result.replayed,
                error_type.unwrap_or("-"),
            );
            if let Some(reason) = result.reason {
                line.push_str(&format!(" reason={reason}"));
            }
            if let Some(detail) = detail {
                line.push_str(&format!(" detail={:?}", detail));
            }
            emit(line);
        }
    }
}

/// The JSON form of the line (a struct, not a map: no allocation per field).
#[derive(serde::Serialize)]
struct JsonLine<'a> {
    time_ms: u64,
    event: &'static str,
    tool: &'a str,
    tenant: &'a str,
    client: &'a str,
    session: &'a str,
    call_id: &'a str,
    upstream_call_id: &'a str,
    mcp_session_id: Option<&'a str>,
    is_error: bool,
    unknown_outcome: bool,
    replayed: bool,
    error_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    detail: Option<&'a str>,
    ms: f64,
}

/// `field` with its control characters escaped (`\n`, `\u{1b}`), and borrowed when it has none.
fn escaped(field: &str) -> std::borrow::Cow<'_, str> {
    if field.chars().any(char::is_control) {
        std::borrow::Cow::Owned(field.chars().flat_map(char::escape_default).collect())
    } else {
        std::borrow::Cow::Borrowed(field)
    }
}

/// Writes `line` and a newline to stderr in one `write` (stderr is unbuffered: formatting into
/// it directly costs a system call per piece).
fn emit(mut line: String) {
    use std::io::Write;
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn control_characters_cannot_forge_a_line() {
        assert_eq!(escaped("c1"), "c1");
        let forged = escaped("c1 is_error=false\ntools/call fake tenant=other\r\u{1b}[2J");
        assert!(!forged.chars().any(char::is_control), "{forged}");
        assert!(forged.contains("\\n"), "{forged}");
    }
}
