//! The request a call makes of the policies, and their decision.

use std::collections::HashSet;

use cedar_policy::{Entity, EntityUid};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::{NAMESPACE, entity_uid};

/// Who calls, as the policies see it: built only from the authenticated identity, never from
/// arguments, `_meta` or headers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// `Brain::Tenant::"<tenant>"`: the tenant of the session (a static serve token, a Rust host).
    Tenant(String),
    /// `Brain::User::"<issuer>|<subject>"`, in `Brain::Tenant::"<tenant>"`: a user whose access
    /// token serve verified.
    User {
        /// The user's tenant (from the token's tenant claim).
        tenant: String,
        /// The token's `iss`.
        issuer: String,
        /// The token's `sub`.
        subject: String,
    },
}

impl Principal {
    /// The principal's tenant.
    pub fn tenant(&self) -> &str {
        match self {
            Principal::Tenant(tenant) | Principal::User { tenant, .. } => tenant,
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Principal::Tenant(tenant) => write!(f, "{NAMESPACE}::Tenant::{tenant:?}"),
            Principal::User {
                tenant,
                issuer,
                subject,
            } => write!(
                f,
                "{NAMESPACE}::User::{:?} (tenant {tenant:?})",
                format!("{issuer}|{subject}")
            ),
        }
    }
}

impl std::str::FromStr for Principal {
    type Err = UnreadablePrincipal;

    /// Reads a principal back from its [`Display`](std::fmt::Display) text (as an approval or
    /// an audit record keeps it): the exact inverse, so no caller splits the text itself.
    fn from_str(text: &str) -> Result<Principal, UnreadablePrincipal> {
        let unreadable = || UnreadablePrincipal(text.to_owned());
        let tenant = format!("{NAMESPACE}::Tenant::");
        let user = format!("{NAMESPACE}::User::");
        if let Some(rest) = text.strip_prefix(&tenant) {
            let (tenant, rest) = debug_str(rest).ok_or_else(unreadable)?;
            return rest
                .is_empty()
                .then_some(Principal::Tenant(tenant))
                .ok_or_else(unreadable);
        }
        let rest = text.strip_prefix(&user).ok_or_else(unreadable)?;
        let (id, rest) = debug_str(rest).ok_or_else(unreadable)?;
        let rest = rest.strip_prefix(" (tenant ").ok_or_else(unreadable)?;
        let (tenant, rest) = debug_str(rest).ok_or_else(unreadable)?;
        let (issuer, subject) = id.split_once('|').ok_or_else(unreadable)?;
        if rest != ")" || subject.contains('|') {
            return Err(unreadable());
        }
        Ok(Principal::User {
            tenant,
            issuer: issuer.to_owned(),
            subject: subject.to_owned(),
        })
    }
}

/// A principal's text that no [`Principal`] displays as (a store's row edited by hand).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a principal brain writes: {0:?}")]
pub struct UnreadablePrincipal(pub String);

/// A string as `{:?}` writes it at the start of `text` (quoted, escaped), and the rest.
fn debug_str(text: &str) -> Option<(String, &str)> {
    let mut chars = text.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((out, &text[at + 2..])),
            '\\' => out.push(match chars.next()?.1 {
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                '0' => '\0',
                c @ ('\\' | '"' | '\'') => c,
                'u' => {
                    let rest = chars.as_str().strip_prefix('{')?;
                    let (hex, _) = rest.split_once('}')?;
                    for _ in 0..hex.len() + 2 {
                        chars.next();
                    }
                    char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                }
                _ => return None,
            }),
            c => out.push(c),
        }
    }
    None
}

/// Which front end a call came through: `context.call.via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `brain-harness call`.
    Call,
    /// `brain-harness serve`.
    Serve,
    /// A Rust host calling the runtime.
    Rust,
}

impl Via {
    /// `"call"`, `"serve"` or `"rust"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Call => "call",
            Via::Serve => "serve",
            Via::Rust => "rust",
        }
    }
}

/// One call, as the policies decide it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyRequest<'a> {
    /// Who calls.
    pub principal: &'a Principal,
    /// The binding's name.
    pub binding: &'a str,
    /// The arguments, already valid for the binding's `input_schema`.
    pub arguments: &'a Value,
    /// Which front end.
    pub via: Via,
    /// The session.
    pub session: &'a str,
    /// `context.call.approval.granted`: whether a person approved this call (always false until
    /// brain has approvals).
    pub granted: bool,
    /// `context.upstream.subject`, for a binding on behalf of users: whom brain will ask a token
    /// for (`issuer|subject` of a verified user, else `sha256:` of the token); `None` otherwise.
    pub subject: Option<&'a str>,
}

impl PolicyRequest<'_> {
    /// `context.upstream` of a binding on behalf of users: whom brain will ask the
    /// authorization server for, and the client it asks as (`actor`). The exchange comes after
    /// the gate, for a permitted call only.
    pub(crate) fn upstream(
        &self,
        actor: &str,
    ) -> Result<cedar_policy::RestrictedExpression, String> {
        use cedar_policy::RestrictedExpression as Expression;
        Expression::new_record([
            (
                "subject".to_owned(),
                Expression::new_string(self.subject.unwrap_or_default().to_owned()),
            ),
            ("actor".to_owned(), Expression::new_string(actor.to_owned())),
        ])
        .map_err(|e| e.to_string())
    }
}

/// What the policies decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// A `permit` applies and no `forbid` does.
    Allow,
    /// Refused: no `permit` applies, a `forbid` does, or a policy or the arguments could not be
    /// evaluated (every error denies).
    Deny {
        /// Why, naming the deciding `forbid`s' ids and `@reason`s, or "no policy permits".
        reason: String,
        /// Whether the same call with `granted: true` would be allowed (an `@approval` policy
        /// would permit it).
        approvable: bool,
    },
}

/// The principal's uid, and its entity when it has a parent (a user in a tenant).
pub(super) fn principal_entity(principal: &Principal) -> (EntityUid, Option<Entity>) {
    let uid = entity_uid;
    match principal {
        Principal::Tenant(tenant) => (uid("Tenant", tenant), None),
        Principal::User {
            tenant,
            issuer,
            subject,
        } => {
            let user = uid("User", &format!("{issuer}|{subject}"));
            let entity = Entity::new_no_attrs(user.clone(), HashSet::from([uid("Tenant", tenant)]));
            (user, Some(entity))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Principal;

    /// A principal reads back from its text exactly, whatever its parts hold (quotes, `|`,
    /// backslashes, control and zero-width characters), and edited text is unreadable.
    #[test]
    fn a_principal_reads_back_from_its_text() {
        let odd = [
            "acme",
            "",
            "a\"b",
            "a\\\"",
            "x) (tenant \"y\")",
            "\u{1b}[31m\n\t\0",
            "\u{200b}é\u{301}",
        ];
        for tenant in odd {
            let principal = Principal::Tenant(tenant.to_owned());
            assert_eq!(principal.to_string().parse::<Principal>(), Ok(principal));
            for issuer in odd {
                let principal = Principal::User {
                    tenant: tenant.to_owned(),
                    issuer: issuer.to_owned(),
                    subject: format!("sub{tenant}").replace('|', ""),
                };
                let text = principal.to_string();
                assert_eq!(text.parse::<Principal>(), Ok(principal), "{text}");
            }
        }
        for edited in [
            "Brain::Tenant::acme",
            "Brain::Tenant::\"acme\" ",
            "Brain::User::\"iss|sub\"",
            "Brain::User::\"iss|sub\" (tenant \"acme\") ",
            "Brain::User::\"iss\" (tenant \"acme\")",
            "Brain::Tenant::\"a\\q\"",
            "acme",
        ] {
            assert!(edited.parse::<Principal>().is_err(), "{edited}");
        }
    }
}
