//! `limits` on a binding and `tenant_limits` beside the bindings: each sets a limit, a rate has
//! both halves, every number is in range, a wait fits in the call's timeout, and each tenant
//! named is one some binding allows.

use std::collections::BTreeMap;

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::limits::{MAX_LIMIT_CALLS, MAX_LIMIT_CONCURRENT, MAX_LIMIT_PER_SECONDS, TenantLimits};
use crate::source::escape_token;

/// The numbers of one set of limits, whichever section it is in.
struct Numbers {
    calls: Option<u32>,
    per_seconds: Option<u32>,
    concurrent: Option<u32>,
}

/// The rules both sections share; `at` is the limits object's pointer, `whose` names it.
fn numbers(numbers: &Numbers, at: &str, whose: &str, out: &mut Vec<Diagnostic>) {
    if numbers.calls.is_none() && numbers.per_seconds.is_none() && numbers.concurrent.is_none() {
        out.push(Diagnostic::new(
            Rule::LimitsEmpty,
            at,
            format!("{whose}: no rate and no `concurrent`, so nothing is limited"),
            "set a rate (`\"calls\": N, \"per_seconds\": S`), a quota (`\"concurrent\": C`) or \
             both, or remove the object",
        ));
        return;
    }
    match (numbers.calls, numbers.per_seconds) {
        (Some(_), None) => out.push(Diagnostic::new(
            Rule::LimitsRateIncomplete,
            format!("{at}/calls"),
            format!("{whose}: `calls` without `per_seconds`"),
            "add `per_seconds`, the window the calls are counted over (e.g. `\"calls\": 5, \
             \"per_seconds\": 60`)",
        )),
        (None, Some(_)) => out.push(Diagnostic::new(
            Rule::LimitsRateIncomplete,
            format!("{at}/per_seconds"),
            format!("{whose}: `per_seconds` without `calls`"),
            "add `calls`, how many calls the window admits, or remove `per_seconds`",
        )),
        _ => {}
    }
    for (field, value, max) in [
        ("calls", numbers.calls, MAX_LIMIT_CALLS),
        ("per_seconds", numbers.per_seconds, MAX_LIMIT_PER_SECONDS),
        ("concurrent", numbers.concurrent, MAX_LIMIT_CONCURRENT),
    ] {
        if let Some(value) = value
            && !(1..=max).contains(&value)
        {
            out.push(Diagnostic::new(
                Rule::LimitsRange,
                format!("{at}/{field}"),
                format!("`{field}` is {value}, outside 1..={max}"),
                format!(
                    "use a whole number from 1 to {max}; to forbid a tool, remove the tenant from \
                     its `tenants` instead"
                ),
            ));
        }
    }
}

/// A binding's `limits`: what both sections need, and a `wait_seconds` within the timeout.
pub(super) fn binding(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let Some(limits) = draft
        .binding
        .limits
        .as_ref()
        .filter(|_| draft.usable("limits"))
    else {
        return;
    };
    let at = draft.pointer("limits");
    numbers(
        &Numbers {
            calls: limits.calls,
            per_seconds: limits.per_seconds,
            concurrent: limits.concurrent,
        },
        &at,
        "`limits`",
        out,
    );
    if let Some(wait) = limits.wait_seconds {
        let timeout = draft.binding.timeout_seconds;
        if wait == 0 {
            out.push(Diagnostic::new(
                Rule::LimitsRange,
                format!("{at}/wait_seconds"),
                "`wait_seconds` is 0",
                "remove it to refuse a call over the limit at once, or wait at least 1 second",
            ));
        } else if u64::from(wait) >= timeout {
            out.push(Diagnostic::new(
                Rule::LimitsWaitTimeout,
                format!("{at}/wait_seconds"),
                format!(
                    "`wait_seconds` is {wait}, not less than `timeout_seconds` ({timeout}): the \
                     wait counts against the call's timeout and would leave nothing for the call"
                ),
                format!("wait less than {timeout} seconds, or raise `timeout_seconds`"),
            ));
        }
    }
}

/// `tenant_limits`: each key a tenant some binding allows, each value a set of limits.
pub(super) fn tenants(
    limits: &BTreeMap<String, TenantLimits>,
    drafts: &[Draft],
    out: &mut Vec<Diagnostic>,
) {
    for (tenant, limits) in limits {
        let at = format!("/tenant_limits/{}", escape_token(tenant));
        if !drafts.iter().any(|d| d.binding.tenants.contains(tenant)) {
            out.push(Diagnostic::new(
                Rule::TenantLimitsUnknown,
                &at,
                format!("no binding allows tenant {tenant:?}: its limits would limit nothing"),
                "check the tenant's spelling against the bindings' `tenants`, or remove the entry",
            ));
        }
        numbers(
            &Numbers {
                calls: limits.calls,
                per_seconds: limits.per_seconds,
                concurrent: limits.concurrent,
            },
            &at,
            &format!("the limits of tenant {tenant:?}"),
            out,
        );
    }
}
