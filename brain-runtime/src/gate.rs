//! The gate every call goes through before any I/O: the call id and session are ids (at most
//! [`MAX_ID_BYTES`], no control character), the tool exists and is callable, the tenant is
//! allowed, the arguments validate against the binding's schema, and the host config's
//! policies permit the call. Pure: it reads nothing but the request and what the runtime was
//! built with, and it fails closed.

use std::collections::HashMap;
use std::sync::Arc;

use brain_config::Auth;
use brain_config::policy::{Decision, Policies, PolicyRequest, Principal};

use crate::approvals::signed::ApproverKeys;
use crate::event::Reason;
use crate::journal::{Hold, MAX_APPROVAL_ARGUMENTS};
use crate::outcome::{Fact, Failure};
use crate::request::CallRequest;
use crate::tool::{Tool, Unavailable};

/// The most bytes a call id or a session id may have; serve takes no longer ones either.
pub const MAX_ID_BYTES: usize = 256;

/// How much of a refused id its refusal shows (escaped).
const SHOWN_ID_CHARS: usize = 64;

/// Why a call id or a session cannot be taken as an id ([`check_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidId {
    /// Over [`MAX_ID_BYTES`].
    #[error("is {bytes} bytes long, over the {MAX_ID_BYTES} an id may have")]
    TooLong {
        /// Its length in bytes.
        bytes: usize,
    },
    /// It holds a control character (C0, DEL, C1), which a terminal would act on wherever the
    /// id is printed (`approvals`, `journal`) and which would forge a log line.
    #[error("holds a control character (C0, DEL or C1): an id is printable text")]
    ControlCharacter,
}

/// Whether `id` may be a call id or a session: at most [`MAX_ID_BYTES`] bytes, no control
/// character. The gate checks every call's; a front end that derives the runtime's ids from a
/// client's (`serve`) checks the client's with it first.
pub fn check_id(id: &str) -> Result<(), InvalidId> {
    if id.len() > MAX_ID_BYTES {
        Err(InvalidId::TooLong { bytes: id.len() })
    } else if id.chars().any(char::is_control) {
        Err(InvalidId::ControlCharacter)
    } else {
        Ok(())
    }
}

/// The refusal of an id (the call's `field`: "call id" or "session") [`check_id`] refuses: the
/// id shown escaped, and cut when long.
pub(crate) fn id_refusal(field: &str, id: &str, why: InvalidId) -> String {
    let shown: String = id.chars().take(SHOWN_ID_CHARS).collect();
    let cut = if shown.len() < id.len() { "…" } else { "" };
    format!(
        "refused: the {field} \"{}\"{cut} {why}; nothing was journaled, held or sent",
        crate::escape::escape(&shown)
    )
}

/// A binding the gate lets calls through to: whatever the runtime keeps per binding (its
/// transport, its limits), and the facts the gate reads.
pub(crate) trait Gated {
    /// The binding's shared facts: its config, compiled input schema, availability.
    fn tool(&self) -> &Tool;
}

/// The gate every call goes through before any I/O. It owns the bindings (`B`: what the runtime
/// keeps per binding), the host config's compiled policies, and the terms of approvals (how long
/// one lasts, whose keys sign them). Pure: [`Gate::check`] reads nothing but the request and what
/// the gate was built with, and fails closed.
pub(crate) struct Gate<B> {
    /// The bindings, by name.
    pub(crate) tools: HashMap<String, Arc<B>>,
    /// The host config's policies, compiled when the runtime was built.
    pub(crate) policies: Option<Arc<Policies>>,
    /// How long an approval lasts (milliseconds), when calls may be held for one (the runtime
    /// keeps a journal).
    approval_ms: Option<i64>,
    /// The approvers' keys, by tenant: what a held call's approval must be signed by.
    approvers: Arc<ApproverKeys>,
}

impl<B: Gated> Gate<B> {
    /// The gate over `tools` and `policies`; with `approval_ms`, calls an `@approval` policy
    /// holds wait for an approval signed by `approvers`.
    pub(crate) fn new(
        tools: HashMap<String, Arc<B>>,
        policies: Option<Arc<Policies>>,
        approval_ms: Option<i64>,
        approvers: Arc<ApproverKeys>,
    ) -> Self {
        Gate {
            tools,
            policies,
            approval_ms,
            approvers,
        }
    }

    /// The check: the call id and session are ids, the tool exists and is callable, the tenant
    /// is allowed, the token is there, the arguments validate, the policies permit the call — or
    /// would permit it once a person approves it: then the call goes on held ([`Hold`]), and
    /// the journal decides whether this very call has its approval.
    pub(crate) fn check(
        &self,
        request: &CallRequest,
        call_id: &str,
    ) -> Result<(Arc<B>, Option<Hold>), Failure> {
        let refused =
            |reason: Reason, message: String| Failure::new(Fact::Refused(reason), message);
        let (name, scope, arguments) = (&request.tool, &request.scope, &request.arguments);
        for (field, id) in [("call id", call_id), ("session", scope.session_id.as_str())] {
            if let Err(why) = check_id(id) {
                return Err(refused(Reason::InvalidId, id_refusal(field, id, why)));
            }
        }
        let bound = self.tools.get(name).ok_or_else(|| {
            refused(
                Reason::UnknownTool,
                format!("refused: there is no tool named {name:?}"),
            )
        })?;
        let tool = bound.tool();
        let binding = &tool.binding;
        if !binding.tenants.contains(&scope.tenant_id) {
            return Err(refused(
                Reason::TenantNotAllowed,
                format!(
                    "refused: tenant {:?} may not call {name:?}",
                    scope.tenant_id
                ),
            ));
        }
        if let Some(Unavailable { why, fix }) = &tool.unavailable {
            return Err(refused(
                Reason::Unavailable,
                format!("refused: {why}; {fix}"),
            ));
        }
        if request.subject_token.is_none()
            && binding.auth.as_ref().is_some_and(Auth::on_behalf_of_users)
        {
            return Err(refused(
                Reason::UserCredentialRequired,
                format!(
                    "refused: {name:?} calls its server on behalf of each user (token exchange) \
                     and this call carries no user token; nothing was sent. Call it as an \
                     authenticated user (serve with JWT users), with `brain-harness call \
                     --subject-token-env VAR`, or with `CallRequest::with_subject_token`"
                ),
            ));
        }
        let errors: Vec<String> = tool
            .input
            .iter_errors(arguments)
            .take(5)
            .map(|error| {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at `{at}`: {error}")
            })
            .collect();
        if !errors.is_empty() {
            return Err(refused(
                Reason::InvalidArguments,
                format!(
                    "refused: the arguments do not match the input schema of {name:?}: {}",
                    errors.join("; ")
                ),
            ));
        }
        if let Some(policies) = &self.policies {
            let tenant;
            let principal = match &request.principal {
                Some(principal) => principal,
                None => {
                    tenant = Principal::Tenant(scope.tenant_id.clone());
                    &tenant
                }
            };
            if principal.tenant() != scope.tenant_id {
                return Err(Failure::new(
                    Fact::PolicyDenied,
                    format!(
                        "refused by policy: the principal {principal} is not of the call's tenant \
                         {:?}",
                        scope.tenant_id
                    ),
                ));
            }
            // Pass A, `granted: false`; a denial an `@approval` policy would turn into a permit
            // (pass B, `granted: true`) holds the call for a person.
            let decision = policies.decide(&PolicyRequest {
                principal,
                binding: name,
                arguments,
                via: request.via,
                session: &scope.session_id,
                granted: false,
                subject: request
                    .subject_token
                    .as_ref()
                    .map(crate::subject::SubjectToken::subject),
            });
            match decision {
                Decision::Allow => {}
                Decision::Deny {
                    reason,
                    approvable: true,
                } => {
                    let hold = self.hold(principal, policies.digest(), arguments, reason)?;
                    return Ok((Arc::clone(bound), Some(hold)));
                }
                Decision::Deny { reason, .. } => {
                    return Err(Failure::new(Fact::PolicyDenied, reason));
                }
                // A decision brain does not know: fail closed.
                _ => {
                    return Err(Failure::new(
                        Fact::PolicyDenied,
                        "refused by policy: an unknown decision",
                    ));
                }
            }
        }
        Ok((Arc::clone(bound), None))
    }

    /// What a held call's approval is asked with: refused when the runtime keeps no journal
    /// (a builder refuses that), or when the arguments are too large to show an approver.
    fn hold(
        &self,
        principal: &Principal,
        policies: &str,
        arguments: &serde_json::Value,
        reason: String,
    ) -> Result<Hold, Failure> {
        let Some(expires_ms) = self.approval_ms else {
            return Err(Failure::new(
                Fact::PolicyDenied,
                format!("{reason}; no approval can be kept (the runtime has no call journal)"),
            ));
        };
        let canonical = serde_jcs::to_string(arguments).unwrap_or_else(|_| arguments.to_string());
        if canonical.len() > MAX_APPROVAL_ARGUMENTS {
            return Err(Failure::new(
                Fact::PolicyDenied,
                format!(
                    "{reason}; the arguments are {} bytes, over the {} an approver can be shown, \
                     so this call cannot be held for approval",
                    canonical.len(),
                    MAX_APPROVAL_ARGUMENTS
                ),
            ));
        }
        Ok(Hold {
            principal: principal.to_string(),
            policies: policies.to_owned(),
            arguments: canonical,
            reason,
            expires_ms,
            approvers: Arc::clone(&self.approvers),
        })
    }

    /// Whether the binding `name` is listed to `principal` (see `Runtime::visible`).
    pub(crate) fn visible(&self, principal: &Principal, name: &str) -> bool {
        let Some(bound) = self.tools.get(name) else {
            return false;
        };
        if !bound
            .tool()
            .binding
            .tenants
            .iter()
            .any(|t| t == principal.tenant())
        {
            return false;
        }
        self.policies
            .as_ref()
            .is_none_or(|policies| policies.visible(principal, name))
    }
}

#[cfg(test)]
mod tests {
    use super::{InvalidId, MAX_ID_BYTES, check_id, id_refusal};

    /// `check_id`'s verdict and, for a refused id, its refusal.
    fn refusal(field: &str, id: &str) -> Option<String> {
        check_id(id).err().map(|why| id_refusal(field, id, why))
    }

    #[test]
    fn ids_with_controls_or_over_the_bound_are_refused_and_shown_escaped() {
        assert_eq!(refusal("call id", "c1"), None);
        assert_eq!(refusal("call id", &"a".repeat(MAX_ID_BYTES)), None);
        assert_eq!(refusal("session", "ünï \u{202e} \\"), None);
        assert_eq!(
            check_id(&"a".repeat(MAX_ID_BYTES + 1)),
            Err(InvalidId::TooLong { bytes: 257 })
        );
        let long = refusal("session", &"a".repeat(MAX_ID_BYTES + 1)).unwrap();
        assert!(long.contains("the session \"aaaa"), "{long}");
        assert!(long.contains("\"… is 257 bytes long"), "{long}");
        for control in ['\u{0}', '\n', '\u{1b}', '\u{7f}', '\u{85}', '\u{9f}'] {
            let id = format!("c1{control}[2K");
            assert_eq!(check_id(&id), Err(InvalidId::ControlCharacter));
            let refusal = refusal("call id", &id).unwrap();
            assert!(
                refusal.starts_with("refused: the call id \"c1\\"),
                "{refusal}"
            );
            assert!(!refusal.chars().any(char::is_control), "{refusal}");
        }
    }
}
