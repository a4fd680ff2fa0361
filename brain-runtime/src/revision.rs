//! The MCP revisions brain speaks, and what each one defines on the wire.

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The header that names the revision on every request after initialize (from 2025-06-18 on).
pub(crate) const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// The revision without sessions (one POST per call).
pub(crate) const STATELESS: &str = "2026-07-28";
/// The session revisions brain speaks, newest first: the first is the one offered when a binding
/// pins none; the server may answer with any of them.
pub(crate) const SESSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// `revision` as one of brain's own, or `None` when brain does not speak it.
pub(crate) fn known(revision: &str) -> Option<&'static str> {
    SESSIONS
        .iter()
        .chain(&[STATELESS])
        .find(|known| **known == revision)
        .copied()
}

/// The session revision to use when the server answered initialize with `offered`: exactly the
/// `pinned` one, or any session revision brain speaks when none is pinned; else why not.
pub(crate) fn accept(pinned: Option<&str>, offered: &str) -> Result<&'static str, String> {
    let accepted = match pinned {
        Some(pinned) if offered != pinned => None,
        _ => known(offered).filter(|r| *r != STATELESS),
    };
    accepted.ok_or_else(|| match pinned {
        Some(pinned) => format!(
            "offered MCP {offered}, but the binding pins {pinned}; re-pin it with `cargo xtask \
             discover ... --write CONFIG` (or set \"protocol_version\": \"{offered}\" if brain \
             speaks it), or remove `protocol_version` to accept any revision brain speaks"
        ),
        None => format!(
            "offered MCP {offered}, which brain does not speak (brain speaks {} and {STATELESS})",
            SESSIONS.join(", ")
        ),
    })
}

/// Sets the `MCP-Protocol-Version` header, which exists from 2025-06-18 on (earlier revisions
/// do not define it, and brain does not send it to their servers).
pub(crate) fn set_protocol_header(headers: &mut HeaderMap, revision: &str) {
    if revision >= brain_config::STRUCTURED_REVISION
        && let Ok(value) = HeaderValue::from_str(revision)
    {
        headers.insert(HeaderName::from_static(PROTOCOL_HEADER), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_header_exists_from_2025_06_18() {
        for (revision, sent) in [
            ("2024-11-05", false),
            ("2025-03-26", false),
            ("2025-06-18", true),
            ("2025-11-25", true),
            ("2026-07-28", true),
        ] {
            let mut headers = HeaderMap::new();
            set_protocol_header(&mut headers, revision);
            assert_eq!(headers.contains_key(PROTOCOL_HEADER), sent, "{revision}");
        }
    }

    #[test]
    fn every_revision_the_config_allows_is_spoken() {
        for revision in brain_config::PROTOCOL_VERSIONS {
            assert_eq!(known(revision), Some(*revision));
        }
        assert_eq!(SESSIONS[0], brain_config::DEFAULT_PROTOCOL_VERSION);
        assert_eq!(known("2099-01-01"), None);
    }
}
