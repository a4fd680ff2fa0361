//! Cedar's diagnostics (miette, with source spans) rendered as brain's own: file:line:column,
//! what, help.

use crate::diagnostic::{Diagnostic, Rule};
use crate::source::Location;

/// Line and column (1-based, columns in characters) of byte `offset` in `text`.
pub(crate) fn location(text: &str, offset: usize) -> Location {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

/// One diagnostic for a policy file: `file`'s text is `text`; `policy` names the policy when
/// one is known.
pub(crate) fn policy_diagnostic(
    rule: Rule,
    file: &str,
    text: &str,
    offset: Option<usize>,
    policy: Option<&str>,
    message: String,
    help: String,
) -> Diagnostic {
    let message = match policy {
        Some(id) => format!("policy {id:?}: {message}"),
        None => message,
    };
    Diagnostic {
        location: offset.map(|o| location(text, o)),
        file: Some(file.to_owned()),
        ..Diagnostic::new(rule, "", message, help)
    }
}

/// A Cedar diagnostic: its message, its first label's position (else `fallback`), its help
/// (else `help`).
pub(crate) fn from_cedar(
    rule: Rule,
    diagnostic: &dyn miette::Diagnostic,
    file: &str,
    text: &str,
    policy: Option<&str>,
    fallback: Option<usize>,
    help: &str,
) -> Diagnostic {
    let offset = diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset())
        .or(fallback);
    let mut message = diagnostic.to_string();
    if let Some(first) = message.get(..1) {
        message = first.to_lowercase() + &message[1..];
    }
    let help = diagnostic
        .help()
        .map(|h| h.to_string())
        .unwrap_or_else(|| help.to_owned());
    policy_diagnostic(rule, file, text, offset, policy, message, help)
}

#[cfg(test)]
mod tests {
    #[test]
    fn offsets_become_lines_and_columns() {
        let text = "ab\ncdé\nf";
        assert_eq!(super::location(text, 0).to_string(), "1:1");
        assert_eq!(super::location(text, 5).to_string(), "2:3");
        assert_eq!(super::location(text, 7).to_string(), "2:4");
        assert_eq!(super::location(text, 8).to_string(), "3:1");
    }
}
