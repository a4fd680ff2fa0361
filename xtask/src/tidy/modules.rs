//! A crate root's module tree, read the way rustc finds it, and the edges between its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::visit_mut::{self, VisitMut};

use super::lex::line_of;

/// A module of a crate root's tree.
struct Module {
    /// The file its code is in (the parent's file for an inline `mod x { .. }`).
    file: PathBuf,
    /// The inline modules of `file` it is in (itself included), outermost first.
    inline: Vec<String>,
    /// The submodules it declares.
    children: BTreeSet<String>,
    /// Every path its own code names that may start at a module, as written.
    paths: Vec<Vec<String>>,
}

/// The edges between the modules of a crate root's tree.
pub(super) struct Graph {
    /// The crate (and the root file, when it is not `src/lib.rs`).
    pub(super) label: String,
    /// `(from, to)` by module name, and where (`file:line`) the first path from `from` into `to`
    /// is written.
    pub(super) edges: BTreeMap<(String, String), String>,
}

/// A module's name in messages: its path from the crate root, `crate` for the root.
fn name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        path.join("::")
    }
}

/// Reads the module tree of the crate root `root` and the edges between its modules; locations
/// name files relative to `base`.
pub(super) fn graph(label: &str, root: &Path, base: &Path) -> Graph {
    let mut modules = BTreeMap::new();
    let dir = root.parent().unwrap();
    load(
        &mut modules,
        Vec::new(),
        (root, Vec::new()),
        dir,
        dir,
        parse(root),
    );
    let mut edges = BTreeMap::new();
    let mut sources = BTreeMap::new();
    for (from, module) in &modules {
        for path in &module.paths {
            let Some((to, used)) = resolve(&modules, from, path) else {
                continue;
            };
            if to == *from {
                continue;
            }
            edges.entry((name(from), name(&to))).or_insert_with(|| {
                let source = sources
                    .entry(module.file.clone())
                    .or_insert_with(|| std::fs::read_to_string(&module.file).unwrap());
                let file = module
                    .file
                    .strip_prefix(base)
                    .unwrap_or(&module.file)
                    .display();
                // The module's segments and the one after them: `super::Secret`, not `super`.
                match line_of(source, &module.inline, &path[..path.len().min(used + 1)]) {
                    Some(line) => format!("{file}:{line}"),
                    None => file.to_string(),
                }
            });
        }
    }
    Graph {
        label: label.into(),
        edges,
    }
}

/// Parses `file`, without its `#[cfg(test)]` code.
fn parse(file: &Path) -> Vec<syn::Item> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    StripTests.visit_file_mut(&mut syntax);
    syntax.items
}

/// Adds module `path` (its code `items`, in `file` within its `inline` modules) and its
/// submodules to `modules`, the way rustc finds them: `mod x;` is `dir/x.rs` or `dir/x/mod.rs`,
/// or `path_base/P` for `#[path = "P"]`.
fn load(
    modules: &mut BTreeMap<Vec<String>, Module>,
    path: Vec<String>,
    (file, inline): (&Path, Vec<String>),
    dir: &Path,
    path_base: &Path,
    items: Vec<syn::Item>,
) {
    let (children, paths) = (BTreeSet::new(), Vec::new());
    let mut module = Module {
        file: file.into(),
        inline,
        children,
        paths,
    };
    let mut submodules = Vec::new();
    for item in items {
        match item {
            syn::Item::Mod(m) => {
                module.children.insert(m.ident.unraw().to_string());
                submodules.push(m);
            }
            syn::Item::Use(u) if u.leading_colon.is_none() => {
                use_paths(&u.tree, &mut Vec::new(), &mut module.paths)
            }
            other => token_paths(other.into_token_stream(), &mut module.paths),
        }
    }
    modules.insert(path.clone(), module);
    for m in submodules {
        let name = m.ident.unraw().to_string();
        let child: Vec<String> = path.iter().cloned().chain([name.clone()]).collect();
        let explicit = m.attrs.iter().find(|a| a.path().is_ident("path")).map(|a| {
            let syn::Meta::NameValue(nv) = &a.meta else {
                panic!("#[path] without a value")
            };
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
            else {
                panic!("#[path] without a string")
            };
            s.value()
        });
        if let Some((_, items)) = m.content {
            let sub = dir.join(explicit.unwrap_or(name.clone()));
            let inline = [&modules[&path].inline[..], &[name]].concat();
            load(modules, child, (file, inline), &sub, &sub, items);
            continue;
        }
        let (child_file, child_dir) = match explicit {
            // A file named by `#[path]` is treated like a mod.rs: its submodules are next to it.
            Some(p) => (
                path_base.join(&p),
                path_base.join(p).parent().unwrap().to_owned(),
            ),
            None if dir.join(format!("{name}.rs")).exists() => {
                (dir.join(format!("{name}.rs")), dir.join(&name))
            }
            None => (dir.join(&name).join("mod.rs"), dir.join(&name)),
        };
        let base = child_file.parent().unwrap().to_owned();
        load(
            modules,
            child,
            (&child_file, Vec::new()),
            &child_dir,
            &base,
            parse(&child_file),
        );
    }
}

/// Removes every item, impl or trait item and statement under `#[cfg(test)]`.
struct StripTests;

impl VisitMut for StripTests {
    fn visit_file_mut(&mut self, file: &mut syn::File) {
        file.items.retain(|item| !test_only(item));
        visit_mut::visit_file_mut(self, file);
    }
    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        if let Some((_, items)) = &mut m.content {
            items.retain(|item| !test_only(item));
        }
        visit_mut::visit_item_mod_mut(self, m);
    }
    fn visit_item_impl_mut(&mut self, i: &mut syn::ItemImpl) {
        i.items.retain(|item| !test_only(item));
        visit_mut::visit_item_impl_mut(self, i);
    }
    fn visit_item_trait_mut(&mut self, t: &mut syn::ItemTrait) {
        t.items.retain(|item| !test_only(item));
        visit_mut::visit_item_trait_mut(self, t);
    }
    fn visit_block_mut(&mut self, block: &mut syn::Block) {
        block.stmts.retain(|stmt| !test_only(stmt));
        visit_mut::visit_block_mut(self, block);
    }
}

/// Whether `node`'s outer attributes hold `#[cfg(test)]` or `#[cfg(all(.., test, ..))]` (read
/// from its tokens: syn has no `attrs()` common to items, impl items and statements).
fn test_only(node: &impl ToTokens) -> bool {
    let mut tokens = node.to_token_stream().into_iter();
    while let (Some(TokenTree::Punct(p)), Some(TokenTree::Group(g))) =
        (tokens.next(), tokens.next())
    {
        if p.as_char() != '#' || g.delimiter() != Delimiter::Bracket {
            break;
        }
        if let Ok(syn::Meta::List(cfg)) = syn::parse2::<syn::Meta>(g.stream())
            && cfg.path.is_ident("cfg")
            && cfg.parse_args::<syn::Meta>().is_ok_and(|m| needs_test(&m))
        {
            return true;
        }
    }
    false
}

/// Whether the cfg predicate `meta` holds only when `test` does.
fn needs_test(meta: &syn::Meta) -> bool {
    match meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(all) if all.path.is_ident("all") => all
            .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
            .is_ok_and(|list| list.iter().any(needs_test)),
        _ => false,
    }
}

/// Adds the paths of a `use` tree to `out`, one per leaf (`a::{b, c::*}`: `a::b`, `a::c::*`).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let leaf = |prefix: &Vec<String>, last: &syn::Ident| {
        let mut path = prefix.clone();
        if last != "self" {
            path.push(last.unraw().to_string());
        }
        path
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.unraw().to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push(leaf(prefix, &n.ident)),
        syn::UseTree::Rename(r) => out.push(leaf(prefix, &r.ident)),
        syn::UseTree::Glob(_) => out.push(prefix.iter().cloned().chain(["*".into()]).collect()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|tree| use_paths(tree, prefix, out)),
    }
}

/// Adds to `out` every path in `tokens` that may start at a module: an identifier that does not
/// follow `::` or `.`, then `::` and identifiers, inside groups and macro invocations too (and a
/// `use` group in a function body, `a::{b, c}`, read as a `use` tree).
fn token_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let punct =
        |i: usize, c: char| matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == c);
    let colons = |i: usize| {
        matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
            && punct(i + 1, ':')
    };
    for (i, tree) in tokens.iter().enumerate() {
        let ident = match tree {
            TokenTree::Group(g) => {
                token_paths(g.stream(), out);
                continue;
            }
            TokenTree::Ident(ident) if colons(i + 1) => ident,
            _ => continue,
        };
        if (i >= 2 && colons(i - 2)) || (i >= 1 && punct(i - 1, '.')) {
            continue;
        }
        let mut path = vec![ident.unraw().to_string()];
        let mut at = i + 1;
        while colons(at) {
            match tokens.get(at + 2) {
                Some(TokenTree::Ident(next)) => path.push(next.unraw().to_string()),
                Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                    let parser = Punctuated::<syn::UseTree, syn::Token![,]>::parse_terminated;
                    if let Ok(trees) = syn::parse::Parser::parse2(parser, g.stream()) {
                        trees
                            .iter()
                            .for_each(|tree| use_paths(tree, &mut path.clone(), out));
                    }
                    path.clear(); // `a::{..}` names what is in the group, not `a`.
                    break;
                }
                _ => break,
            }
            at += 3;
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
}

/// The module `path` (written in module `from`) names and how many of its segments lead there,
/// or `None` when it starts anywhere but `crate`, `self`, `super` or a submodule of `from`.
fn resolve(
    modules: &BTreeMap<Vec<String>, Module>,
    from: &[String],
    path: &[String],
) -> Option<(Vec<String>, usize)> {
    let (mut at, mut used) = match path[0].as_str() {
        "crate" => (Vec::new(), 1),
        "self" => (from.to_vec(), 1),
        "super" => {
            let mut at = from.to_vec();
            let supers = path.iter().take_while(|s| *s == "super").count();
            for _ in 0..supers {
                at.pop()?;
            }
            (at, supers)
        }
        first if modules[from].children.contains(first) => ([from, &path[..1]].concat(), 1),
        _ => return None,
    };
    while let Some(next) = path
        .get(used)
        .filter(|next| modules[&at].children.contains(*next))
    {
        at.push(next.clone());
        used += 1;
    }
    Some((at, used))
}
