//! `approvals`: each approver is named, decides for tenants some binding allows, and is known by
//! a public key or a SHA-256 (one of them) no other approver shares, never an audit key; an
//! approval's lifetime is in range.

use std::collections::HashSet;

use super::context::Draft;
use crate::approvals::{
    ApprovalsConfig, ApproverConfig, MAX_APPROVAL_SECONDS, approver_name_ok, token_sha256_ok,
};
use crate::diagnostic::{Diagnostic, Rule};

pub(super) fn approvals(
    config: &ApprovalsConfig,
    audit: Option<&crate::audit::AuditConfig>,
    drafts: &[Draft],
    out: &mut Vec<Diagnostic>,
) {
    if config.approvers.is_empty() {
        out.push(Diagnostic::new(
            Rule::ApproverInvalid,
            "/approvals/approvers",
            "`approvals` names no approver: no call held for approval could ever run",
            "add an approver: `{\"name\": \"ops\", \"tenants\": [\"TENANT\"], \"public_key\": \
             \"keys/ops.pub\"}`, or remove `approvals`",
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
    let (mut names, mut tokens, mut keys) = (HashSet::new(), HashSet::new(), HashSet::new());
    let audit_keys = audit
        .and_then(|audit| audit.verifying_keys().ok())
        .unwrap_or_default();
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
        credential(
            approver,
            &at,
            audit_keys.as_slice(),
            &mut tokens,
            &mut keys,
            out,
        );
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

/// The approver's credential: a token's SHA-256 or a public key, exactly one, shared with no
/// other approver, and never one of the audit's keys (an approver's signature and a
/// checkpoint's must not be one key's).
fn credential(
    approver: &ApproverConfig,
    at: &str,
    audit_keys: &[ed25519_dalek::VerifyingKey],
    tokens: &mut HashSet<String>,
    keys: &mut HashSet<[u8; 32]>,
    out: &mut Vec<Diagnostic>,
) {
    let invalid = |field: &str, message: String, help: &str| {
        Diagnostic::new(
            Rule::ApproverInvalid,
            format!("{at}/{field}"),
            message,
            help,
        )
    };
    match (&approver.token_sha256, &approver.public_key) {
        (Some(_), Some(_)) => out.push(invalid(
            "token_sha256",
            format!(
                "approver {:?} has both `token_sha256` and `public_key`",
                approver.name
            ),
            "keep `public_key` (its decisions are signed), and remove `token_sha256`",
        )),
        (None, None) => out.push(invalid(
            "name",
            format!(
                "approver {:?} has neither `public_key` nor `token_sha256`",
                approver.name
            ),
            "name the approver's Ed25519 public key file: `\"public_key\": \"keys/ops.pub\"` \
             (`openssl genpkey -algorithm ed25519 -out ops.pem && openssl pkey -in ops.pem \
             -pubout -out keys/ops.pub`)",
        )),
        (Some(token), None) => {
            if !token_sha256_ok(token) {
                out.push(invalid(
                    "token_sha256",
                    format!(
                        "approver {:?}: `token_sha256` is not 64 lowercase hex digits",
                        approver.name
                    ),
                    "write the SHA-256 of the approver's token, never the token: \
                     `printf %s \"$TOKEN\" | sha256sum`",
                ));
            } else if !tokens.insert(token.clone()) {
                out.push(invalid(
                    "token_sha256",
                    format!(
                        "approver {:?} shares its token with another approver",
                        approver.name
                    ),
                    "give each approver a token of its own, so that a decision names who made it",
                ));
            }
        }
        (None, Some(_)) => match approver.verifying_key() {
            // Not read (an error said why when the file was read).
            None => {}
            Some(Err(why)) => out.push(invalid(
                "public_key",
                format!("approver {:?}: {why}", approver.name),
                "name the SPKI PEM public key that `openssl pkey -in ops.pem -pubout -out \
                 ops.pub` writes",
            )),
            Some(Ok(key)) if audit_keys.contains(&key) => out.push(invalid(
                "public_key",
                format!(
                    "approver {:?}'s public key is also one of `audit.public_keys`",
                    approver.name
                ),
                "give the approver a key of its own: a key that signs the audit's checkpoints \
                 must not also approve calls",
            )),
            Some(Ok(key)) if !keys.insert(key.to_bytes()) => out.push(invalid(
                "public_key",
                format!(
                    "approver {:?} shares its public key with another approver",
                    approver.name
                ),
                "give each approver a key of its own, so that a decision names who made it",
            )),
            Some(Ok(_)) => {}
        },
    }
}
