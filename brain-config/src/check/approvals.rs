//! `approvals`: each approver is named, decides for tenants some binding allows, and is known by
//! a SHA-256 no other approver shares; an approval's lifetime is in range.

use std::collections::HashSet;

use super::context::Draft;
use crate::approvals::{ApprovalsConfig, MAX_APPROVAL_SECONDS, approver_name_ok, token_sha256_ok};
use crate::diagnostic::{Diagnostic, Rule};

pub(super) fn approvals(config: &ApprovalsConfig, drafts: &[Draft], out: &mut Vec<Diagnostic>) {
    if config.approvers.is_empty() {
        out.push(Diagnostic::new(
            Rule::ApproverInvalid,
            "/approvals/approvers",
            "`approvals` names no approver: no call held for approval could ever run",
            "add an approver: `{\"name\": \"ops\", \"tenants\": [\"TENANT\"], \"token_sha256\": \
             \"<hex>\"}`, or remove `approvals`",
        ));
    }
    if let Some(seconds) = config.expires_seconds
        && !(1..=MAX_APPROVAL_SECONDS).contains(&seconds)
    {
        out.push(Diagnostic::new(
            Rule::ApprovalsExpiryRange,
            "/approvals/expires_seconds",
            format!("`expires_seconds` is {seconds}, outside 1..={MAX_APPROVAL_SECONDS}"),
            "use a number of seconds from 1 to 86400 (a day, the journal's default retention), \
             or remove it for an hour",
        ));
    }
    let (mut names, mut tokens) = (HashSet::new(), HashSet::new());
    for (index, approver) in config.approvers.iter().enumerate() {
        let at = format!("/approvals/approvers/{index}");
        if !approver_name_ok(&approver.name) {
            out.push(Diagnostic::new(
                Rule::ApproverInvalid,
                format!("{at}/name"),
                format!(
                    "the approver's name {:?} is not 1 to 64 of A-Z a-z 0-9 _ . @ -",
                    approver.name
                ),
                "name the approver as it should be recorded with each decision, e.g. `ops`",
            ));
        } else if !names.insert(approver.name.as_str()) {
            out.push(Diagnostic::new(
                Rule::ApproverInvalid,
                format!("{at}/name"),
                format!("two approvers are named {:?}", approver.name),
                "give each approver a name of its own: decisions are recorded by name",
            ));
        }
        if !token_sha256_ok(&approver.token_sha256) {
            out.push(Diagnostic::new(
                Rule::ApproverInvalid,
                format!("{at}/token_sha256"),
                format!(
                    "approver {:?}: `token_sha256` is not 64 lowercase hex digits",
                    approver.name
                ),
                "write the SHA-256 of the approver's token, never the token: \
                 `printf %s \"$TOKEN\" | sha256sum`",
            ));
        } else if !tokens.insert(approver.token_sha256.as_str()) {
            out.push(Diagnostic::new(
                Rule::ApproverInvalid,
                format!("{at}/token_sha256"),
                format!(
                    "approver {:?} shares its token with another approver",
                    approver.name
                ),
                "give each approver a token of its own, so that a decision names who made it",
            ));
        }
        if approver.tenants.is_empty() {
            out.push(Diagnostic::new(
                Rule::ApproverInvalid,
                format!("{at}/tenants"),
                format!("approver {:?} decides for no tenant", approver.name),
                "list the tenants whose calls the approver may decide",
            ));
        }
        for (t, tenant) in approver.tenants.iter().enumerate() {
            if !drafts.iter().any(|d| d.binding.tenants.contains(tenant)) {
                out.push(Diagnostic::new(
                    Rule::ApproverTenantUnknown,
                    format!("{at}/tenants/{t}"),
                    format!(
                        "approver {:?}: no binding allows tenant {tenant:?}",
                        approver.name
                    ),
                    "check the tenant's spelling against the bindings' `tenants`, or remove it",
                ));
            }
        }
    }
}
