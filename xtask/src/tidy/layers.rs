//! The documented shape, checked: the order of a crate's top-level modules as ARCHITECTURE.md
//! draws it (a module names only modules on its line or above), and the width of every trait
//! (its methods, provided ones included).

use std::collections::BTreeSet;
use std::path::Path;

use super::modules::Graph;

/// The layers ARCHITECTURE.md draws for `krate`: the lines of the `text` block under its
/// heading (`### \`krate\``), each the top-level modules it names (`gate.rs`, `call/`), lowest
/// first; `lib.rs` is the root, not a layer.
pub(super) fn documented_layers(architecture: &str, krate: &str) -> Vec<Vec<String>> {
    let heading = format!("### `{krate}`");
    let Some(at) = architecture.find(&heading) else {
        return Vec::new();
    };
    let section = &architecture[at..];
    let Some(open) = section.find("```text\n") else {
        return Vec::new();
    };
    let block = &section[open + 8..];
    let block = &block[..block.find("```").unwrap_or(block.len())];
    block
        .lines()
        .map(|line| {
            line.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
                .filter_map(module_of)
                .filter(|m| m != "lib")
                .collect::<Vec<_>>()
        })
        .filter(|layer| !layer.is_empty())
        .collect()
}

/// `gate.rs` → `gate`, `call/` → `call`; anything else is prose.
fn module_of(word: &str) -> Option<String> {
    let name = word
        .strip_suffix(".rs")
        .or_else(|| word.strip_suffix('/'))?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .then(|| name.to_owned())
}

/// The edges between top-level modules that go up the documented layers (`from -> to:
/// file:line`), and the top-level modules the layers do not name.
pub(super) fn order_breaks(graph: &Graph, layers: &[Vec<String>]) -> Vec<String> {
    let layer = |module: &str| {
        let top = module.split("::").next().unwrap_or(module);
        layers.iter().position(|l| l.iter().any(|m| m == top))
    };
    let mut found = Vec::new();
    let mut unnamed = BTreeSet::new();
    for ((from, to), at) in &graph.edges {
        match (layer(from), layer(to)) {
            (Some(f), Some(t)) if t > f => {
                found.push(format!("{}: {from} -> {to}: {at}", graph.label));
            }
            (None, _) if from != "crate" => {
                unnamed.insert(from.split("::").next().unwrap_or(from).to_owned());
            }
            (_, None) if to != "crate" => {
                unnamed.insert(to.split("::").next().unwrap_or(to).to_owned());
            }
            _ => {}
        }
    }
    found.extend(
        unnamed
            .into_iter()
            .map(|m| format!("{}: `{m}` is not in the map", graph.label)),
    );
    found
}

/// The pairs of top-level modules that name each other (each pair once, sorted).
pub(super) fn mutual(graph: &Graph) -> Vec<(String, String)> {
    let top = |m: &str| m.split("::").next().unwrap_or(m).to_owned();
    let edges: BTreeSet<(String, String)> = graph
        .edges
        .keys()
        .map(|(from, to)| (top(from), top(to)))
        .filter(|(from, to)| from != to && from != "crate" && to != "crate")
        .collect();
    edges
        .iter()
        .filter(|(from, to)| from < to && edges.contains(&(to.clone(), from.clone())))
        .cloned()
        .collect()
}

/// Every trait of `source` wider than `max` methods (provided ones included), as
/// `path: Trait (n methods)`.
pub(super) fn wide_traits(path: &Path, source: &str, max: usize) -> Vec<String> {
    let Ok(file) = syn::parse_file(source) else {
        return vec![format!("{}: cannot be parsed", path.display())];
    };
    let mut found = Vec::new();
    let mut items: Vec<&syn::Item> = file.items.iter().collect();
    while let Some(item) = items.pop() {
        match item {
            syn::Item::Trait(t) => {
                let methods = t
                    .items
                    .iter()
                    .filter(|i| matches!(i, syn::TraitItem::Fn(_)))
                    .count();
                if methods > max {
                    found.push(format!(
                        "{}: {} ({methods} methods)",
                        path.display(),
                        t.ident
                    ));
                }
            }
            syn::Item::Mod(m) => items.extend(m.content.iter().flat_map(|(_, i)| i)),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_read_from_the_text_block() {
        let doc = "### `krate`\n\nprose\n\n```text\nstate.rs   a; b\nevent.rs, x.rs  c\n\
                   journal/ audit/   one layer\nlib.rs   root\n```\n";
        assert_eq!(
            documented_layers(doc, "krate"),
            [vec!["state"], vec!["event", "x"], vec!["journal", "audit"]]
        );
    }

    #[test]
    fn a_wide_trait_is_found() {
        let methods: String = (0..17).map(|i| format!("fn m{i}(&self);")).collect();
        let source =
            format!("trait Narrow {{ fn a(&self); }} mod m {{ trait Wide {{ {methods} }} }}");
        let found = wide_traits(Path::new("x.rs"), &source, 16);
        assert_eq!(found, ["x.rs: Wide (17 methods)"]);
    }
}
