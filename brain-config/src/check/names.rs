//! What the model sees and calls: a binding's name (its pattern, unique, unique as a Rust
//! identifier), its description, and the `mcp_tool` it stands for on the server.

use std::collections::{BTreeSet, HashMap};

use super::context::Draft;
use crate::diagnostic::{Diagnostic, Rule};
use crate::ident::{module_ident, type_ident};

/// `name` matches `^[a-zA-Z0-9_-]{1,64}$`: the names model APIs accept.
pub(super) fn name_pattern(draft: &Draft, out: &mut Vec<Diagnostic>) {
    let name = &draft.binding.name;
    if !draft.usable("name") || is_valid_name(name) {
        return;
    }
    let bad: BTreeSet<char> = name
        .chars()
        .filter(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        .collect();
    let message = if name.is_empty() {
        "the name is empty".to_owned()
    } else if name.chars().count() > 64 {
        format!("the name is {} characters long", name.chars().count())
    } else {
        let bad: String = bad.into_iter().map(|c| format!("{c:?} ")).collect();
        format!(
            "the name {name:?} has characters model APIs reject: {}",
            bad.trim_end()
        )
    };
    out.push(draft.error(
        Rule::NamePattern,
        "name",
        message,
        "use 1 to 64 of a-z, A-Z, 0-9, `_` and `-`; the name the model sees may differ from \
         `mcp_tool`, the name on the server",
    ));
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `description` is not empty or blank: the model chooses tools by it.
pub(super) fn empty_description(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if draft.usable("description") && draft.binding.description.trim().is_empty() {
        out.push(draft.error(
            Rule::EmptyDescription,
            "description",
            "the description is empty",
            "say what the tool does and when to use it; the model picks tools by their description",
        ));
    }
}

/// `mcp_tool`, when present, names a tool: it is not empty or blank.
pub(super) fn empty_mcp_tool(draft: &Draft, out: &mut Vec<Diagnostic>) {
    if let Some(tool) = &draft.binding.mcp_tool
        && draft.usable("mcp_tool")
        && tool.trim().is_empty()
    {
        out.push(draft.error(
            Rule::EmptyMcpTool,
            "mcp_tool",
            "`mcp_tool` is empty",
            "set it to the tool's name on the MCP server (`cargo xtask discover` prints it), or \
             remove it for an HTTP tool",
        ));
    }
}

/// Binding names are unique: the model calls a tool by its name.
pub(super) fn duplicate_names(drafts: &[Draft], out: &mut Vec<Diagnostic>) {
    let mut first: HashMap<&str, usize> = HashMap::new();
    for draft in drafts.iter().filter(|d| d.usable("name")) {
        let name = draft.binding.name.as_str();
        if let Some(&index) = first.get(name) {
            out.push(draft.error(
                Rule::DuplicateName,
                "name",
                format!("the name {name:?} is already used by /tools/{index}"),
                "give each binding its own name, e.g. prefix it with the server: `docs_search`",
            ));
        } else {
            first.insert(name, draft.index);
        }
    }
}

/// Distinct names stay distinct as Rust identifiers (module `snake_case` and type
/// `UpperCamelCase`, see [`crate::ident`]): `foo-bar` and `foo_bar` would generate the same items.
pub(super) fn ident_collisions(drafts: &[Draft], out: &mut Vec<Diagnostic>) {
    let mut by_ident: HashMap<String, (usize, &str)> = HashMap::new();
    for draft in drafts
        .iter()
        .filter(|d| d.usable("name") && is_valid_name(&d.binding.name))
    {
        let name = draft.binding.name.as_str();
        let idents = [module_ident(name), type_ident(name)];
        let clash = idents.iter().find_map(|ident| {
            by_ident
                .get(ident)
                .filter(|(_, other)| *other != name)
                .map(|&(index, other)| (ident.clone(), index, other))
        });
        if let Some((ident, index, other)) = clash {
            out.push(draft.error(
                Rule::IdentCollision,
                "name",
                format!(
                    "the name {name:?} and {other:?} (/tools/{index}) both become the Rust \
                     identifier `{ident}`"
                ),
                "rename one of them so they differ by more than case, `-` and `_`",
            ));
            continue;
        }
        for ident in idents {
            by_ident.entry(ident).or_insert((draft.index, name));
        }
    }
}
