//! The stateless transport (MCP 2026-07-28): no session. One POST carries each round, with the
//! protocol revision and client capabilities in `_meta`, and the `Mcp-Method`, `Mcp-Name` and
//! `Mcp-Param-*` headers (SEP-2243, `routing.rs`) computed from the pinned schema's
//! `x-mcp-header` annotations (`streamable.rs` writes it). There is no way back to the server:
//! server requests cannot be answered, and a cancelled call is a closed response stream.

use std::sync::Arc;

use crate::call::{CallState, Exchange, Round, Transport};
use crate::http::HttpClient;
use crate::outcome::Failure;
use crate::revision::STATELESS;
use crate::tool::Tool;
use crate::transport::streamable::{self, HttpReading, McpHttp};

/// The stateless transport, for one call.
pub(crate) struct Stateless {
    pub(crate) route: Arc<McpHttp>,
}

impl Transport for Stateless {
    type Opened = ();
    type Reading = HttpReading;

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

    /// Nothing to close: dropping the response closed its stream, which is how 2026-07-28
    /// cancels.
    fn leaves_work(&self, _: &CallState) -> bool {
        false
    }

    async fn clean_up(self, _: HttpClient, _: Arc<Tool>, _: CallState) {}
}
