//! One call to make: what a host (or a front end) hands [`crate::Runtime::call`].

use brain_config::ModelApi;
use brain_config::policy::{Principal, Via};
use serde_json::Value;

use crate::subject::SubjectToken;
use crate::tool::Scope;

/// One call to make: [`CallRequest::new`], then `with_…` for the optional parts.
///
/// ```
/// use brain_runtime::{CallRequest, Scope};
///
/// let scope = Scope { tenant_id: "local".into(), session_id: "s1".into() };
/// let request = CallRequest::new("echo", scope, serde_json::json!({"message": "hi"}))
///     .with_call_id("call-1");
/// assert_eq!(request.call_id.as_deref(), Some("call-1"));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallRequest {
    /// The binding's name (the name the model sees).
    pub tool: String,
    /// Who is calling.
    pub scope: Scope,
    /// The call's id, also the progress token; a UUID is generated when absent. At most
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES) bytes and no control character, else the gate
    /// refuses the call.
    pub call_id: Option<String>,
    /// The arguments, validated against the binding's `input_schema`.
    pub arguments: Value,
    /// The model API whose definitions the arguments were produced from: a `null` where the
    /// binding's schema has an optional property without `null` is read as "absent" (strict
    /// definitions make every property required) before the gate validates them. `None`: the
    /// arguments follow the binding's own schema.
    pub from: Option<ModelApi>,
    /// The span the call's span is a child of (its trace continues at the server through
    /// `_meta.traceparent`); the current span when `None`.
    pub parent: Option<tracing::Span>,
    /// Who calls, as the host config's policies see it: the scope's tenant when `None`. A front
    /// end that authenticated a user sets [`Principal::User`] (of the scope's tenant), from the
    /// authenticated identity only.
    pub principal: Option<Principal>,
    /// Which front end the call came through (`context.call.via`): [`Via::Rust`] unless set.
    pub via: Via,
    /// The caller's own token, for a binding whose `auth` exchanges it for the upstream
    /// (`token_exchange`); such a binding refuses a call without one.
    pub subject_token: Option<SubjectToken>,
}

impl CallRequest {
    /// A call of the binding `tool` by `scope` with `arguments`; its call id is generated and its
    /// span is a child of the current span unless set.
    pub fn new(tool: impl Into<String>, scope: Scope, arguments: Value) -> Self {
        CallRequest {
            tool: tool.into(),
            scope,
            call_id: None,
            arguments,
            from: None,
            parent: None,
            principal: None,
            via: Via::Rust,
            subject_token: None,
        }
    }

    /// The call's id (also its progress token and its key in the call journal: a retry with the
    /// same id is answered from the journal, never sent twice).
    pub fn with_call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// The call's id when there is one ([`with_call_id`](Self::with_call_id)), else a generated
    /// UUID.
    pub fn with_optional_call_id(mut self, call_id: Option<String>) -> Self {
        self.call_id = call_id;
        self
    }

    /// The span the call's span is a child of.
    pub fn with_parent(mut self, parent: tracing::Span) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Who calls, as the policies see it (a user serve authenticated); the scope's tenant by
    /// default. A principal of another tenant than the scope's is refused.
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }

    /// The caller's own token: a binding with `auth.type` `token_exchange` exchanges it for a
    /// token issued to brain for the upstream (the caller's token never goes there).
    pub fn with_subject_token(mut self, token: SubjectToken) -> Self {
        self.subject_token = Some(token);
        self
    }

    /// Which front end the call came through (`context.call.via`).
    pub fn with_via(mut self, via: Via) -> Self {
        self.via = via;
        self
    }

    /// The model API whose definitions ([`Runtime::definitions`]) the model produced the
    /// arguments from: they are mapped back to the binding's schema before the gate.
    pub fn with_from(mut self, api: ModelApi) -> Self {
        self.from = Some(api);
        self
    }
}
