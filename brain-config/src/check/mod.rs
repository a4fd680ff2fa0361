//! The validation rules of a host config's bindings: one function per rule, its doc comment the
//! rule, grouped by family in the submodules, with what they share in `context`. The rest of the
//! format (size, encoding, JSON syntax and nesting, duplicate keys, types, missing and unknown
//! fields, unknown `transport` and `on_input_request` values) is checked while loading.
//!
//! Rules see bindings that have already been read field by field; a field that was missing or had
//! the wrong type is marked unusable and has been reported, so the rules about it stay silent
//! instead of piling a second error on the first.

mod approvals;
mod audit;
mod auth;
mod bounds;
mod context;
mod endpoint;
mod kind;
mod limits;
mod model_apis;
mod names;
mod pins;
mod schemas;
mod serve;
mod stdio;

pub use stdio::sandbox_warnings;

use std::collections::{BTreeMap, BTreeSet};

pub(crate) use context::Draft;
pub use names::is_valid_name;

use crate::diagnostic::Diagnostic;
use crate::limits::TenantLimits;
use crate::model::{HostConfig, ModelApi};
use crate::serve::Serve;

/// The config's sections beside its bindings, as the rules see them.
#[derive(Default, Clone, Copy)]
pub(crate) struct Sections<'a> {
    pub(crate) model_apis: Option<&'a [ModelApi]>,
    pub(crate) serve: Option<&'a Serve>,
    pub(crate) tenant_limits: Option<&'a BTreeMap<String, TenantLimits>>,
    pub(crate) approvals: Option<&'a crate::approvals::ApprovalsConfig>,
    pub(crate) audit: Option<&'a crate::audit::AuditConfig>,
}

/// Checks a config built in code (for example by discovery) against every rule. Positions are not
/// known, so the diagnostics carry pointers only.
pub fn validate(config: &HostConfig) -> Vec<Diagnostic> {
    let drafts: Vec<Draft> = config
        .tools
        .iter()
        .enumerate()
        .map(|(index, binding)| Draft {
            index,
            binding: binding.clone(),
            unusable: BTreeSet::new(),
        })
        .collect();
    check(
        &drafts,
        Sections {
            model_apis: config.model_apis.as_deref(),
            serve: config.serve.as_ref(),
            tenant_limits: config.tenant_limits.as_ref(),
            approvals: config.approvals.as_ref(),
            audit: config.audit.as_ref(),
        },
    )
}

/// Runs every rule over the bindings and the config's other sections.
pub(crate) fn check(drafts: &[Draft], sections: Sections<'_>) -> Vec<Diagnostic> {
    let Sections {
        model_apis,
        serve,
        tenant_limits,
        approvals,
        audit,
    } = sections;
    let mut out = Vec::new();
    for draft in drafts {
        names::name_pattern(draft, &mut out);
        names::empty_description(draft, &mut out);
        schemas::schemas(draft, &mut out);
        schemas::x_mcp_headers(draft, &mut out);
        endpoint::endpoint(draft, &mut out);
        endpoint::url(draft, &mut out);
        endpoint::ca_file(draft, &mut out);
        auth::token_over_plain_http(draft, &mut out);
        stdio::command(draft, &mut out);
        stdio::stdio_fields(draft, &mut out);
        stdio::env(draft, &mut out);
        stdio::prewarm_range(draft, &mut out);
        stdio::sandbox(draft, &mut out);
        names::empty_mcp_tool(draft, &mut out);
        auth::token_env_name(draft, &mut out);
        bounds::tenants(draft, &mut out);
        bounds::timeout_range(draft, &mut out);
        bounds::max_output_range(draft, &mut out);
        limits::binding(draft, &mut out);
        kind::inspect_session_on_mcp(draft, &mut out);
        kind::transport_on_mcp(draft, &mut out);
        pins::protocol_version(draft, &mut out);
        pins::output_schema_before_structured(draft, &mut out);
        pins::task_required(draft, &mut out);
        pins::task_invalid(draft, &mut out);
        kind::on_input_request_on_http(draft, &mut out);
        kind::on_drift_on_http(draft, &mut out);
        auth::auth(draft, &mut out);
        model_apis::rejects(draft, model_apis, &mut out);
        model_apis::strict(draft, model_apis, &mut out);
    }
    names::duplicate_names(drafts, &mut out);
    names::ident_collisions(drafts, &mut out);
    if let Some(config) = serve {
        serve::serve(config, drafts, &mut out);
    }
    if let Some(limits) = tenant_limits {
        limits::tenants(limits, drafts, &mut out);
    }
    if let Some(config) = approvals {
        approvals::approvals(config, audit, drafts, &mut out);
    }
    if let Some(config) = audit {
        audit::audit(config, &mut out);
    }
    out
}
