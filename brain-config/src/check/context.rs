//! What every rule sees: a binding as it was read ([`Draft`]), and the helpers the rule families
//! share. It names none of its siblings, so each family can use it without a cycle.

use std::collections::BTreeSet;
use std::net::IpAddr;

use url::{Host, Url};

use crate::diagnostic::{Diagnostic, Rule};
use crate::model::ToolBinding;

/// A binding as the rules see it: where it is, and which of its fields are not usable.
#[derive(Debug)]
pub(crate) struct Draft {
    /// Its index in `tools`.
    pub(crate) index: usize,
    pub(crate) binding: ToolBinding,
    /// Fields that were missing or mistyped (already reported).
    pub(crate) unusable: BTreeSet<String>,
}

impl Draft {
    pub(super) fn usable(&self, field: &str) -> bool {
        !self.unusable.contains(field)
    }

    pub(super) fn pointer(&self, field: &str) -> String {
        if field.is_empty() {
            return format!("/tools/{}", self.index);
        }
        format!("/tools/{}/{field}", self.index)
    }

    pub(super) fn error(
        &self,
        rule: Rule,
        field: &str,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::new(rule, self.pointer(field), message, help)
    }
}

/// Whether `name` is an environment variable name: `^[A-Za-z_][A-Za-z0-9_]*$`.
pub(super) fn is_env_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `url`'s host is loopback: `localhost`, 127.0.0.0/8 or `::1`.
pub(super) fn loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}
