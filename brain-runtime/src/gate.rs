//! The gate every call goes through before any I/O: the tool exists and is callable, the tenant
//! is allowed, the arguments validate against the binding's schema, and the host config's
//! policies permit the call. Pure: it reads nothing but the request and what the runtime was
//! built with, and it fails closed.

use std::sync::Arc;

use brain_config::policy::{Decision, PolicyRequest, Principal};

use crate::outcome::{Fact, Failure};
use crate::request::CallRequest;
use crate::runtime::{Bound, Runtime};
use crate::tool::Unavailable;

impl Runtime {
    /// The gate: the tool exists and is callable, the tenant is allowed, the token is there, the
    /// arguments validate, the policies permit the call.
    pub(crate) fn check(&self, request: &CallRequest) -> Result<Arc<Bound>, Failure> {
        let refused = |message: String| Failure::new(Fact::Refused, message);
        let (name, scope, arguments) = (&request.tool, &request.scope, &request.arguments);
        let bound = self
            .inner
            .tools
            .get(name)
            .ok_or_else(|| refused(format!("refused: there is no tool named {name:?}")))?;
        let tool = &bound.tool;
        let binding = &tool.binding;
        if !binding.tenants.contains(&scope.tenant_id) {
            return Err(refused(format!(
                "refused: tenant {:?} may not call {name:?}",
                scope.tenant_id
            )));
        }
        if let Some(Unavailable { why, fix }) = &tool.unavailable {
            return Err(refused(format!("refused: {why}; {fix}")));
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
            return Err(refused(format!(
                "refused: the arguments do not match the input schema of {name:?}: {}",
                errors.join("; ")
            )));
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
            // Until approvals exist, `context.call.approval.granted` is false.
            let decision = policies.decide(&PolicyRequest {
                principal,
                binding: name,
                arguments,
                via: request.via,
                session: &scope.session_id,
                granted: false,
            });
            if let Decision::Deny { reason, .. } = decision {
                return Err(Failure::new(Fact::PolicyDenied, reason));
            }
        }
        Ok(Arc::clone(bound))
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
