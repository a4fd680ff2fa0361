//! The HTTP clients a runtime's bindings call through: the one shared pool (and its plain
//! twin for HTTP tools), a binding's own when it trusts a CA of its own, and a pool per user for
//! a binding on behalf of users.

use std::collections::HashMap;

use brain_config::{BindingKind, ToolBinding};

use super::{Bound, Inner, RuntimeBuilder, RuntimeError};
use crate::http::HttpClient;

impl RuntimeBuilder<'_> {
    /// One shared, pooled HTTP client (see `http.rs`): rustls (ring), redirects never followed (the
    /// token only goes to the configured origin), no proxies, TCP_NODELAY and quick ACKs,
    /// `localhost` always loopback.
    pub(super) fn shared_client(&self) -> Result<HttpClient, RuntimeError> {
        crate::http::client(true, &[]).map_err(RuntimeError::Http)
    }

    /// The client of a binding with a `ca_file`: the platform's roots and the file's CAs, quick ACKs
    /// unless it is a plain HTTP tool (see `http.rs`). Bindings naming the same file share one.
    pub(super) fn own_client(
        &self,
        binding: &ToolBinding,
        path: &str,
        clients: &mut HashMap<(String, bool), HttpClient>,
    ) -> Result<HttpClient, RuntimeError> {
        let quick_ack = binding.kind() != BindingKind::Http;
        let key = (path.to_owned(), quick_ack);
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let failed = |message: String| RuntimeError::CaFile {
            tool: binding.name.clone(),
            message,
        };
        let roots = crate::http::read_roots(std::path::Path::new(path)).map_err(failed)?;
        let client = crate::http::client(quick_ack, &roots).map_err(failed)?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// The per-user pools of a binding on behalf of users (trusting its `ca_file`, if any).
    pub(super) fn user_pools(
        &self,
        binding: &ToolBinding,
    ) -> Result<crate::http::UserPools, RuntimeError> {
        let failed = |message: String| RuntimeError::CaFile {
            tool: binding.name.clone(),
            message,
        };
        let roots = match &binding.ca_file {
            Some(path) => crate::http::read_roots(std::path::Path::new(path)).map_err(failed)?,
            None => Vec::new(),
        };
        crate::http::UserPools::new(binding.kind() != BindingKind::Http, &roots).map_err(failed)
    }
}

impl Bound {
    /// The client of the calling user's own pool, for a binding on behalf of users.
    pub(super) fn user_client(
        &self,
        subject: Option<&crate::subject::SubjectToken>,
    ) -> Option<HttpClient> {
        Some(self.users.as_ref()?.of(subject?.subject()))
    }

    /// The client of every other call: the binding's own, else the runtime's shared one (its
    /// plain twin for an HTTP tool).
    pub(super) fn client<'a>(&'a self, inner: &'a Inner) -> &'a HttpClient {
        match (&self.http, self.tool.binding.kind()) {
            (Some(own), _) => own,
            (None, BindingKind::Http) => &inner.http_plain,
            (None, _) => &inner.http,
        }
    }
}
