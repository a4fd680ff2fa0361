//! A call the policies refused, appended to its tenant's audit chain off the caller's path: the
//! only write a refusal causes, queued, never awaited.

use brain_config::policy::Principal;

use crate::journal::Journaling;
use crate::request::CallRequest;
use crate::tool::Tool;

/// Appends a call the policies refused to its tenant's audit chain, off the caller's path
/// (the gate does no I/O): best effort, a record dropped counted in
/// `brain.audit.denials.dropped`.
pub(crate) fn record(journaling: &Journaling, request: &CallRequest, call_id: &str, tool: &Tool) {
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
        digest: crate::journal::digest(
            &tool.identity,
            &request.arguments,
            crate::store::UpstreamIdentity::of(&tool.binding, request.subject_token.as_ref())
                .as_ref()
                .map(|upstream| upstream.subject.as_str()),
        ),
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
