//! The gate every call goes through before any I/O: the call id and session are ids (at most
//! [`MAX_ID_BYTES`], no control character), the tool exists and is callable, the tenant is
//! allowed, the arguments validate against the binding's schema, and the host config's
//! policies permit the call. Pure: it reads nothing but the request and what the runtime was
//! built with, and it fails closed.

use std::sync::Arc;

use brain_config::policy::{Decision, PolicyRequest, Principal};

use crate::event::Reason;
use crate::journal::{Hold, MAX_APPROVAL_ARGUMENTS};
use crate::outcome::{Fact, Failure};
use crate::request::CallRequest;
use crate::runtime::{Bound, Runtime};
use crate::tool::Unavailable;

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

impl Runtime {
    /// The gate: the call id and session are ids, the tool exists and is callable, the tenant is allowed, the token is there, the
    /// arguments validate, the policies permit the call — or would permit it once a person
    /// approves it: then the call goes on held ([`Hold`]), and the journal decides whether this
    /// very call has its approval.
    pub(crate) fn check(
        &self,
        request: &CallRequest,
        call_id: &str,
    ) -> Result<(Arc<Bound>, Option<Hold>), Failure> {
        let refused =
            |reason: Reason, message: String| Failure::new(Fact::Refused(reason), message);
        let (name, scope, arguments) = (&request.tool, &request.scope, &request.arguments);
        for (field, id) in [("call id", call_id), ("session", scope.session_id.as_str())] {
            if let Err(why) = check_id(id) {
                return Err(refused(Reason::InvalidId, id_refusal(field, id, why)));
            }
        }
        let bound = self.inner.tools.get(name).ok_or_else(|| {
            refused(
                Reason::UnknownTool,
                format!("refused: there is no tool named {name:?}"),
            )
        })?;
        let tool = &bound.tool;
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
        if let Some(policies) = &self.inner.policies {
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

    /// Appends a call the policies refused to its tenant's audit chain, off the caller's path
    /// (the gate does no I/O): best effort, a record dropped counted in
    /// `brain.audit.denials.dropped`.
    pub(crate) fn audit_denial(&self, request: &CallRequest, call_id: &str) {
        let (Some(journaling), Some(bound)) =
            (&self.inner.journal, self.inner.tools.get(&request.tool))
        else {
            return;
        };
        let principal = match &request.principal {
            Some(principal) => principal.to_string(),
            None => Principal::Tenant(request.scope.tenant_id.clone()).to_string(),
        };
        let denial = crate::journal::Denial {
            key: crate::journal::Key {
                tenant: request.scope.tenant_id.clone(),
                session: request.scope.session_id.clone(),
                call_id: call_id.to_owned(),
            },
            binding: request.tool.clone(),
            principal,
            digest: crate::journal::digest(&bound.tool.identity, &request.arguments),
        };
        journaling.shared_store().audit_denial(
            denial,
            Box::new(|| {
                tracing::warn!("cannot record a policy denial in the audit chain");
                opentelemetry::global::meter(crate::telemetry::METER)
                    .u64_counter("brain.audit.denials.dropped")
                    .with_description("Policy denials the audit chain could not record")
                    .build()
                    .add(1, &[]);
            }),
        );
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
        let Some(expires_ms) = self.inner.approval_ms else {
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
            approvers: Arc::clone(&self.inner.approvers),
        })
    }

    /// Whether `tools/list` (serve's, `brain-harness tools`) shows the binding `name` to
    /// `principal`: the tenant may call it, and, when the host config has policies, a `forbid`
    /// that never reads `context` does not apply and some `permit`'s scope matches. Never reads
    /// arguments: a tool whose calls a policy decides by their arguments stays listed.
    pub fn visible(&self, principal: &Principal, name: &str) -> bool {
        let Some(bound) = self.inner.tools.get(name) else {
            return false;
        };
        if !bound
            .tool
            .binding
            .tenants
            .iter()
            .any(|t| t == principal.tenant())
        {
            return false;
        }
        self.inner
            .policies
            .as_ref()
            .is_none_or(|policies| policies.visible(principal, name))
    }

    /// The host config's policies, compiled, when it has any.
    pub fn policies(&self) -> Option<&brain_config::policy::Policies> {
        self.inner.policies.as_deref()
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
