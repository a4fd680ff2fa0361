//! Which upstream a binding calls: what two bindings of one upstream tool share.

use crate::model::ToolBinding;

/// The upstream id of a binding: its URL's origin and path, or `stdio:<command[0]>`.
pub fn upstream_id(binding: &ToolBinding) -> String {
    if let Some(url) = &binding.url
        && let Ok(parsed) = url::Url::parse(url)
    {
        return format!("{}{}", parsed.origin().ascii_serialization(), parsed.path());
    }
    match binding.command.as_ref().and_then(|c| c.first()) {
        Some(program) => format!("stdio:{program}"),
        None => binding.url.clone().unwrap_or_default(),
    }
}
