//! A binding ready to call, as every transport and the call lifecycle see it: its schemas
//! compiled once, its credentials read once, where its calls go. What only one transport needs
//! (a stdio server's launch, a 2026-07-28 binding's routing headers, an HTTP tool's session
//! token key) is that transport's own value, kept beside it (`transport::Route`).

use std::sync::Arc;

use brain_config::ToolBinding;

use crate::auth::Credentials;
use crate::session_token::{MIN_SESSION_TOKEN_KEY_BYTES, SESSION_TOKEN_KEY_ENV};
use crate::telemetry::{Instruments, Peer};

/// The facts of one binding that the lifecycle and every transport share.
pub(crate) struct Tool {
    pub(crate) binding: ToolBinding,
    pub(crate) input: jsonschema::Validator,
    pub(crate) output: Option<jsonschema::Validator>,
    /// How its requests are authorized (`token_env` or `auth`).
    pub(crate) credentials: Credentials,
    /// Why calls to it are refused before any I/O: a variable it needs was not set (only with
    /// `RuntimeBuilder::allow_missing_tokens`).
    pub(crate) unavailable: Option<Unavailable>,
    /// Where its calls go, as spans and metrics name it.
    pub(crate) peer: Peer,
    /// The runtime's metric instruments.
    pub(crate) instruments: Arc<Instruments>,
    /// What its calls ask besides their arguments, hashed once (the call journal's digests).
    pub(crate) identity: [u8; 32],
}

/// A binding that cannot be called: what is missing, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unavailable {
    /// What is missing (`the token variable X is not set`).
    pub(crate) why: String,
    /// How to fix it.
    pub(crate) fix: String,
}

impl Unavailable {
    /// Why calls to a binding are refused before any I/O, if they are: the first variable it needs
    /// that is missing (its token, its session token key, its `auth`'s, its `env_from`'s).
    pub(crate) fn of(
        binding: &ToolBinding,
        missing_token: bool,
        missing_auth: &[String],
        missing_session_key: bool,
        missing_env: &[String],
    ) -> Option<Unavailable> {
        let (why, fix) = if missing_token {
            (
                format!(
                    "the token variable {} is not set",
                    binding.token_env.as_deref().unwrap_or_default()
                ),
                "set it to the server's API key and restart".to_owned(),
            )
        } else if missing_session_key {
            (
                format!(
                    "the session token key {SESSION_TOKEN_KEY_ENV} (inspect_session) is not set"
                ),
                format!(
                    "set it to a secret of at least {MIN_SESSION_TOKEN_KEY_BYTES} bytes, shared \
                     with the host's session inspection endpoint, and restart"
                ),
            )
        } else if !missing_auth.is_empty() {
            (
                format!("the auth variable {} is not set", missing_auth.join(", ")),
                "set it to the secret its `auth` field names (docs/src/guides/oauth.md) and restart"
                    .to_owned(),
            )
        } else if !missing_env.is_empty() {
            (
                format!(
                    "the env_from variable {} is not set",
                    missing_env.join(", ")
                ),
                "set it to the server's API key and restart".to_owned(),
            )
        } else {
            return None;
        };
        Some(Unavailable { why, fix })
    }
}

impl Tool {
    /// How many raw response bytes a result may take before brain stops reading: JSON escaping
    /// can take 6 bytes per byte of text (`\u0000`), plus room for the envelope.
    pub(crate) fn raw_limit(&self) -> u64 {
        self.binding.max_output_bytes.saturating_mul(6) + 64 * 1024
    }

    /// Where its server is, for logs and messages: its URL, or its program.
    pub(crate) fn server(&self) -> &str {
        let binding = &self.binding;
        match (&binding.url, &binding.command) {
            (Some(url), _) => url,
            (None, Some(command)) => command.first().map_or("", String::as_str),
            (None, None) => "",
        }
    }
}

/// Who is calling: the session's identity, sent to the server as `_meta["brain.dev/scope"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The tenant the session belongs to; checked against the binding's `tenants`.
    pub tenant_id: String,
    /// The agent session. At most [`MAX_ID_BYTES`](crate::MAX_ID_BYTES) bytes and no control
    /// character, else the gate refuses the call.
    pub session_id: String,
}
