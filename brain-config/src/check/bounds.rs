//! The bounds of a call: the tenants allowed to make it, how long it may take and how large its
//! result may be.

use std::collections::HashSet;

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::model::{MAX_MAX_OUTPUT_BYTES, MAX_TIMEOUT_SECONDS};

/// `tenants` lists at least one tenant; no tenant is empty or blank, and none is listed twice.
pub(super) fn tenants(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if !draft.usable("tenants") {
        return;
    }
    let tenants = &draft.binding.tenants;
    if tenants.is_empty() {
        out.push(draft.error(
            Rule::EmptyTenants,
            "tenants",
            "`tenants` is empty, so no session could call the tool",
            "list the tenants allowed to call it, e.g. `[\"local\"]`",
        ));
    }
    let mut seen = HashSet::new();
    for (i, tenant) in tenants.iter().enumerate() {
        let field = format!("tenants/{i}");
        if tenant.trim().is_empty() {
            out.push(draft.error(
                Rule::BlankTenant,
                &field,
                format!("tenant {tenant:?} is blank"),
                "remove it or write the tenant's id",
            ));
        } else if !seen.insert(tenant) {
            out.push(draft.error(
                Rule::DuplicateTenant,
                &field,
                format!("tenant {tenant:?} is listed twice"),
                "remove the repeat",
            ));
        }
    }
}

/// `timeout_seconds` is between 1 and 3600.
pub(super) fn timeout_range(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let value = draft.binding.timeout_seconds;
    if !(1..=MAX_TIMEOUT_SECONDS).contains(&value) {
        out.push(draft.error(
            Rule::TimeoutRange,
            "timeout_seconds",
            format!("`timeout_seconds` is {value}, outside 1..={MAX_TIMEOUT_SECONDS}"),
            "use a whole number of seconds from 1 to 3600 (default 300)",
        ));
    }
}

/// `max_output_bytes` is between 1 and 67108864 (64 MiB).
pub(super) fn max_output_range(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let value = draft.binding.max_output_bytes;
    if !(1..=MAX_MAX_OUTPUT_BYTES).contains(&value) {
        out.push(draft.error(
            Rule::MaxOutputRange,
            "max_output_bytes",
            format!("`max_output_bytes` is {value}, outside 1..={MAX_MAX_OUTPUT_BYTES}"),
            "use a number of bytes from 1 to 67108864 (default 1048576)",
        ));
    }
}
