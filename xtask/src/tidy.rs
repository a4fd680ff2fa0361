//! Tidy: rules about the workspace's shape, checked by reading its sources (in the style of
//! rust-analyzer's `xtask/src/tidy.rs`).
//!
//! - No import cycles between the modules of a crate root. Module A has an edge to module B when
//!   A's code (without its `#[cfg(test)]` items) names a path into B: in a `use` (re-exports too)
//!   or anywhere else, macro invocations included. `mod b;` is not an edge.
//! - Layer rules: the lifecycle (`call`) names no transport (`transport`).
//! - No source file over 800 lines.
//! - Functions fit a screen (`functions`): none over 150 lines and at most 8 over 100, in the
//!   hand-written code outside tests.
//! - The docs stand alone: no file cites a document that is not in the repository.
//! - The docs hold together (`docs`): relative links and anchors resolve, Rust snippets compile
//!   as doc tests or say why not, README is a first screen (≤ 10,240 bytes) and ARCHITECTURE
//!   < 25,000 bytes, with no date (an MCP revision's name aside) and no commit id.
//! - No public function of the library crates returns `Result<_, String>` (`docs`).
//! - The documented module order holds (`layers`): brain-runtime's top-level modules name only
//!   modules on their line of ARCHITECTURE.md's map or above; no trait is over 16 methods.
//!
//! `modules` reads a crate root's module tree and its edges (`lex` finds where each edge is
//! written); the checker's own tests run it on the small fake crates in `xtask/tests/tidy/`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use modules::{Graph, graph};

mod docs;
mod functions;
mod layers;
mod lex;
mod modules;

/// Whether module `name` is `prefix` or one of its submodules.
fn under(name: &str, prefix: &str) -> bool {
    name == prefix || name.starts_with(&format!("{prefix}::"))
}

/// The cycles of `graph`, each closed (`a -> b -> a`) and started at its least module: for each
/// edge on a cycle, in order, the shortest cycle through it, unless an earlier one has it.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in graph.edges.keys() {
        next.entry(from).or_default().push(to);
    }
    let mut covered = BTreeSet::new();
    let mut found = Vec::new();
    for (from, to) in graph.edges.keys() {
        if covered.contains(&(from.as_str(), to.as_str())) {
            continue;
        }
        // Breadth first from `to` back to `from`.
        let mut came_from = BTreeMap::from([(to.as_str(), to.as_str())]);
        let mut queue = VecDeque::from([to.as_str()]);
        while let Some(at) = queue.pop_front().filter(|at| *at != from) {
            for &n in next.get(at).into_iter().flatten() {
                if !came_from.contains_key(n) {
                    came_from.insert(n, at);
                    queue.push_back(n);
                }
            }
        }
        if !came_from.contains_key(from.as_str()) {
            continue;
        }
        let mut cycle = vec![from.as_str()];
        while cycle[cycle.len() - 1] != to {
            cycle.push(came_from[cycle[cycle.len() - 1]]);
        }
        cycle.reverse(); // to .. from
        cycle.insert(0, from); // from, to .. from
        for pair in cycle.windows(2) {
            covered.insert((pair[0], pair[1]));
        }
        cycle.pop();
        let least = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap();
        cycle.rotate_left(least);
        cycle.push(cycle[0]);
        found.push(cycle.into_iter().map(String::from).collect());
    }
    found
}

/// `graph`'s cycle `cycle` as a message: the modules, then where each edge is written.
fn render_cycle(graph: &Graph, cycle: &[String]) -> String {
    let mut text = format!("{}: {}\n", graph.label, cycle.join(" -> "));
    for pair in cycle.windows(2) {
        let at = &graph.edges[&(pair[0].clone(), pair[1].clone())];
        text += &format!("    {} -> {}: {at}\n", pair[0], pair[1]);
    }
    text
}

/// The edges of `graph` that break a layer rule `(from, forbidden)`: a module `from` (or one
/// under it) naming `forbidden` (or a module under it); as `from -> to: file:line`.
fn layer_violations(graph: &Graph, rules: &[(&str, &str)]) -> Vec<String> {
    let breaks = |from: &str, to: &str| rules.iter().any(|(f, t)| under(from, f) && under(to, t));
    let edges = graph
        .edges
        .iter()
        .filter(|((from, to), _)| breaks(from, to));
    edges
        .map(|((from, to), at)| format!("{}: {from} -> {to}: {at}", graph.label))
        .collect()
}

/// The files under `dir` whose names end in one of `extensions`, but none under `skip` or in a
/// `target`, `node_modules` or `.git` directory; in order.
fn files(dir: &Path, extensions: &[&str], skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    let mut entries: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let file_name = path.file_name().unwrap().to_string_lossy();
        if skip.contains(&path) || ["target", "node_modules", ".git"].contains(&&*file_name) {
            continue;
        }
        if path.is_dir() {
            found.extend(files(&path, extensions, skip));
        } else if extensions
            .iter()
            .any(|e| file_name.ends_with(&format!(".{e}")))
        {
            found.push(path);
        }
    }
    found
}

/// The `.rs` files under `dirs` (of `base`, without `skip`) longer than `max` lines, as
/// `path: N lines`.
fn long_files(base: &Path, dirs: &[&str], skip: &[&str], max: usize) -> Vec<String> {
    let skip: Vec<PathBuf> = skip.iter().map(|s| base.join(s)).collect();
    let all = dirs
        .iter()
        .flat_map(|dir| files(&base.join(dir), &["rs"], &skip));
    let lines = all.map(|file| {
        (
            std::fs::read_to_string(&file).unwrap().lines().count(),
            file,
        )
    });
    let long = lines.filter(|(lines, _)| *lines > max);
    long.map(|(lines, file)| {
        format!(
            "{}: {lines} lines",
            file.strip_prefix(base).unwrap().display()
        )
    })
    .collect()
}

/// What a stand-alone doc must not cite (split so that this file does not cite them).
const CITATIONS: [&str; 4] = [
    concat!("../", "shared"),
    concat!("DESIGN", ".md"),
    concat!("DESIGN", " §"),
    concat!("STYLE", ".md"),
];

/// Every line of the `.md`, `.rs`, `.toml` and `.sh` files under `base` that names one of
/// [`CITATIONS`], as `path:line: `citation``.
fn citations(base: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for file in files(base, &["md", "rs", "toml", "sh"], &[]) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        for (n, line) in text.lines().enumerate() {
            for citation in CITATIONS.iter().filter(|c| line.contains(**c)) {
                let path = file.strip_prefix(base).unwrap().display();
                found.push(format!("{path}:{}: `{citation}`", n + 1));
            }
        }
    }
    found
}

/// The workspace's crates (their directories).
const CRATES: [&str; 8] = [
    "brain-config",
    "brain-codegen",
    "brain-codegen/corpus",
    "brain-runtime",
    "brain-serve",
    "bindings",
    "tests",
    "xtask",
];

/// Generated code: not held to the file length, and a cycle it makes on its own (typify's
/// `defaults` module and its parent name each other) is its generator's shape.
const GENERATED: [&str; 2] = [
    "brain-codegen/corpus/src/generated",
    "bindings/src/generated",
];

/// The files that still hold a function over 100 lines while another change splits them: left
/// out of [`FUNCTIONS_OVER_100`]'s count, and each must still hold one (drop it from here once
/// it does not).
///
/// issue 62: split in progress.
const NOT_YET_SPLIT: &[&str] = &[];

/// How many functions may be over 100 lines (none over 150).
const FUNCTIONS_OVER_100: usize = 8;

/// The hand-written `.rs` files whose functions must fit a screen: every crate's (examples,
/// benches and xtask too), but not its `tests/` folder, `#[cfg(test)]` code or generated code.
fn checked_sources(base: &Path) -> Vec<PathBuf> {
    let examples = files(&base.join("examples"), &["toml"], &[]).into_iter();
    let examples = examples.filter(|f| f.ends_with("Cargo.toml"));
    let crates = CRATES.iter().map(|c| base.join(c));
    let crates: Vec<PathBuf> = crates
        .chain(examples.map(|f| f.parent().unwrap().to_owned()))
        .collect();
    let tests = crates.iter().map(|c| c.join("tests"));
    let skip: Vec<PathBuf> = GENERATED
        .iter()
        .map(|g| base.join(g))
        .chain(tests)
        .collect();
    let mut found: Vec<PathBuf> = crates
        .iter()
        .flat_map(|c| files(c, &["rs"], &skip))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The workspace's directory.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The module graph of each root of crate `krate` (a directory of `base`): `src/lib.rs`,
/// `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs` and `build.rs`.
fn crate_graphs(base: &Path, krate: &str) -> Vec<Graph> {
    let dir = base.join(krate);
    let bins = files(&dir.join("src/bin"), &["rs"], &[]).into_iter();
    let bins = bins.filter(|f| f.parent().unwrap().ends_with("src/bin") || f.ends_with("main.rs"));
    let roots = ["src/lib.rs", "src/main.rs", "build.rs"]
        .map(|r| dir.join(r))
        .into_iter();
    let roots = roots.filter(|r| r.exists()).chain(bins);
    let label = |root: &Path| match root.strip_prefix(&dir).unwrap().to_str().unwrap() {
        "src/lib.rs" => krate.to_owned(),
        other => format!("{krate} ({other})"),
    };
    roots
        .map(|root| graph(&label(&root), &root, base))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The graph of fixture crate `case` (`xtask/tests/tidy/<case>/src/lib.rs`).
    fn fixture(case: &str) -> Graph {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tidy")
            .join(case);
        graph(case, &dir.join("src/lib.rs"), &dir)
    }

    /// Asserts that fixture `case` has exactly the cycles `expected`, rendered.
    #[track_caller]
    fn check(case: &str, expected: &[&str]) {
        let graph = fixture(case);
        let found: Vec<String> = cycles(&graph)
            .iter()
            .map(|c| render_cycle(&graph, c))
            .collect();
        assert_eq!(found, expected, "edges: {:#?}", graph.edges);
    }

    /// The edges of fixture `case`, as `from -> to: file:line`.
    fn edges(case: &str) -> Vec<String> {
        let graph = fixture(case);
        graph
            .edges
            .iter()
            .map(|((from, to), at)| format!("{from} -> {to}: {at}"))
            .collect()
    }

    #[test]
    fn a_cycle_through_use() {
        check(
            "use_cycle",
            &["use_cycle: a -> b -> a\n    a -> b: src/a.rs:1\n    b -> a: src/b.rs:3\n"],
        );
        assert_eq!(
            edges("use_cycle"),
            [
                "a -> b: src/a.rs:1",
                "a -> c: src/a.rs:1",
                "b -> a: src/b.rs:3"
            ]
        );
    }

    #[test]
    fn a_cycle_through_inline_paths_and_a_macro() {
        check(
            "inline_paths",
            &["inline_paths: a -> b -> a\n    a -> b: src/a.rs:4\n    b -> a: src/b.rs:7\n"],
        );
    }

    #[test]
    fn a_cycle_through_a_reexport() {
        check(
            "reexport",
            &[
                "reexport: auth -> auth::grant -> auth\n    auth -> auth::grant: src/auth/mod.rs:4\n    auth::grant -> auth: src/auth/grant.rs:3\n",
            ],
        );
        let edge = "auth::grant -> auth::metadata: src/auth/grant.rs:8";
        assert!(edges("reexport").contains(&edge.to_owned()));
    }

    #[test]
    fn test_code_makes_no_cycle() {
        check("test_only", &[]);
        assert_eq!(edges("test_only"), ["b -> a: src/b.rs:1"]);
    }

    #[test]
    fn a_cycle_through_super_super() {
        check(
            "super_chain",
            &[
                "super_chain: x::inner -> y -> x::inner\n    x::inner -> y: src/x/inner.rs:2\n    y -> x::inner: src/y.rs:2\n",
            ],
        );
    }

    #[test]
    fn a_layer_violation() {
        let graph = fixture("layers");
        assert_eq!(
            layer_violations(&graph, &[("call", "transport")]),
            ["layers: call::retry -> transport::stdio: src/call/retry.rs:1"]
        );
        assert!(cycles(&graph).is_empty());
    }

    #[test]
    fn a_clean_crate() {
        check("clean", &[]);
        assert!(layer_violations(&fixture("clean"), &[("a", "b")]).is_empty());
        assert_eq!(
            edges("clean"),
            [
                "b -> a: src/b.rs:1",
                "b::inner -> a: src/b.rs:8",
                "crate -> a: src/lib.rs:6",
                "crate -> thing: src/lib.rs:7",
                "inline -> a: src/lib.rs:10",
                "thing -> a: src/elsewhere/thing.rs:1",
                "thing -> b: src/elsewhere/thing.rs:4",
            ]
        );
    }

    #[test]
    fn long_files_and_citations_are_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/skipped")).unwrap();
        std::fs::write(dir.path().join("src/ok.rs"), "\n".repeat(800)).unwrap();
        std::fs::write(dir.path().join("src/long.rs"), "\n".repeat(801)).unwrap();
        std::fs::write(dir.path().join("src/skipped/long.rs"), "\n".repeat(801)).unwrap();
        let long = long_files(dir.path(), &["src"], &["src/skipped"], 800);
        assert_eq!(long, ["src/long.rs: 801 lines"]);
        let cited = format!("# Notes\n\nSee {}.\n", CITATIONS[1]);
        std::fs::write(dir.path().join("README.md"), cited).unwrap();
        assert_eq!(
            citations(dir.path()),
            [format!("README.md:3: `{}`", CITATIONS[1])]
        );
    }

    #[test]
    fn no_import_cycles() {
        let base = workspace();
        let mut found = String::new();
        for graph in CRATES.iter().flat_map(|krate| crate_graphs(&base, krate)) {
            for cycle in cycles(&graph) {
                let at = |pair: &[String]| &graph.edges[&(pair[0].clone(), pair[1].clone())];
                let generated = |at: &String| GENERATED.iter().any(|g| at.starts_with(g));
                if !cycle.windows(2).all(|pair| generated(at(pair))) {
                    found += &render_cycle(&graph, &cycle);
                }
            }
        }
        assert!(
            found.is_empty(),
            "import cycles between modules:\n\n{found}\nFix: move the item both sides need into \
             a leaf module that each imports (and that imports neither), and name every item by \
             the module that defines it, never through a parent's re-export (`crate::X` or \
             `super::X` for a `pub use child::X`)."
        );
    }

    #[test]
    fn the_lifecycle_names_no_transport() {
        let transports = ["session", "stateless", "stdio", "http_tool"];
        let named: Vec<String> = transports
            .iter()
            .map(|t| format!("transport::{t}"))
            .collect();
        let mut rules = vec![("call", "transport")];
        for from in &named {
            for to in named.iter().filter(|to| *to != from) {
                rules.push((from.as_str(), to.as_str()));
            }
        }
        let graphs = crate_graphs(&workspace(), "brain-runtime");
        let found: Vec<String> = graphs
            .iter()
            .flat_map(|g| layer_violations(g, &rules))
            .collect();
        assert!(
            found.is_empty(),
            "the lifecycle (`call`) names a transport (`transport`):\n{}\nFix: the transport \
             implements a trait or takes a callback that `call` defines.",
            found.join("\n")
        );
    }

    /// brain-runtime's top-level modules name only modules on their line of ARCHITECTURE.md's
    /// map or above, and every module is on the map: the map cannot drift from the code. The
    /// pairs of top-level modules that name each other are exactly [`MUTUAL`]: none (the journal,
    /// audit and approval rooms were separated; keep it empty).
    #[test]
    fn the_documented_module_order_holds() {
        const MUTUAL: [(&str, &str); 0] = [];
        let base = workspace();
        let architecture = std::fs::read_to_string(base.join("ARCHITECTURE.md")).unwrap();
        let layers = layers::documented_layers(&architecture, "brain-runtime");
        assert!(
            layers.len() > 10,
            "ARCHITECTURE.md draws no layers for brain-runtime"
        );
        let graphs = crate_graphs(&base, "brain-runtime");
        let lib = graphs.iter().find(|g| g.label == "brain-runtime").unwrap();
        let found = layers::order_breaks(lib, &layers);
        assert!(
            found.is_empty(),
            "brain-runtime's modules against ARCHITECTURE.md's map:\n{}\nFix: name only modules \
             drawn above (move the item down a layer, or pass it in), or correct the map.",
            found.join("\n")
        );
        let mut expected: Vec<(String, String)> = MUTUAL
            .iter()
            .map(|(a, b)| (a.min(b).to_string(), a.max(b).to_string()))
            .collect();
        expected.sort();
        assert_eq!(
            layers::mutual(lib),
            expected,
            "top-level modules that name each other (a pair gone: drop it from MUTUAL)"
        );
    }

    /// No trait is over 16 methods, provided ones included: a store is a floor of small
    /// capabilities (`CallStore`, `LimitStore`…), not one wide seam.
    #[test]
    fn no_trait_over_16_methods() {
        let base = workspace();
        let skip: Vec<PathBuf> = GENERATED.iter().map(|g| base.join(g)).collect();
        let mut found = Vec::new();
        for krate in CRATES.iter().chain(["examples"].iter()) {
            for file in files(&base.join(krate), &["rs"], &skip) {
                let source = std::fs::read_to_string(&file).unwrap();
                let path = file.strip_prefix(&base).unwrap();
                found.extend(layers::wide_traits(path, &source, 16));
            }
        }
        assert!(
            found.is_empty(),
            "traits over 16 methods:\n{}\nFix: split the trait by capability (a supertrait \
             may join them).",
            found.join("\n")
        );
    }

    /// The at-most-once point and the classifier are one each: only `call/send.rs` marks a call
    /// sent, and only `outcome.rs` turns a failure into a `tool.result` (its `unknown_outcome`
    /// and kind) — for the front ends in `bindings` and `brain-serve` too, whose refusals go through
    /// `ToolResult::refused`.
    #[test]
    fn one_send_point_and_one_classifier() {
        let base = workspace();
        let rules: [(&str, &str, &str); 7] = [
            ("brain-runtime/src", "call_sent = true", "call/send.rs"),
            ("brain-runtime/src", "ToolResult::failure(", "outcome.rs"),
            ("brain-runtime/src", "unknown_outcome = true", "outcome.rs"),
            ("bindings/src", "unknown_outcome = true", ""),
            ("bindings/src", "kind = Some(", ""),
            ("brain-serve/src", "unknown_outcome = true", ""),
            ("brain-serve/src", "kind = Some(", ""),
        ];
        let mut found = Vec::new();
        for (dir, needle, only) in rules {
            let src = base.join(dir);
            for file in files(&src, &["rs"], &[]) {
                let text = std::fs::read_to_string(&file).unwrap();
                let name = file
                    .strip_prefix(&src)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                for (n, line) in text.lines().enumerate() {
                    if line.contains(needle) && name != only {
                        found.push(format!("{dir}/{name}:{}: `{needle}`", n + 1));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "a second send point or classifier:\n{}\nFix: mark a call sent only in \
             `call::send::claim`; report a `Fact` and let `outcome::Failure::into_result` \
             classify it (a front end: `ToolResult::refused`).",
            found.join("\n")
        );
    }

    /// `unsafe_code` is denied in the workspace; one module opts out, with a `SAFETY` comment at
    /// each block: the stdio sandbox, which must act between `fork` and `exec`.
    #[test]
    fn unsafe_code_in_one_module_only() {
        let base = workspace();
        let only = base.join("brain-runtime/src/transport/stdio/sandbox.rs");
        // Spelled in two halves, so that this test does not find itself.
        let needle = concat!("allow(", "unsafe_code)");
        let mut found = Vec::new();
        for file in checked_sources(&base) {
            let text = std::fs::read_to_string(&file).unwrap();
            if text.contains(needle) && file != only {
                found.push(
                    file.strip_prefix(&base)
                        .unwrap_or(&file)
                        .display()
                        .to_string(),
                );
            }
        }
        assert!(
            found.is_empty(),
            "`{needle}` outside the stdio sandbox: {found:?}\nFix: find a safe API; \
             the one exception is brain-runtime/src/transport/stdio/sandbox.rs"
        );
        let sandbox = std::fs::read_to_string(&only).unwrap();
        assert_eq!(
            sandbox.matches("unsafe {").count(),
            sandbox.matches("// SAFETY:").count(),
            "every unsafe block in the sandbox says why it is sound (`// SAFETY:`)"
        );
    }

    #[test]
    fn no_file_over_800_lines() {
        let dirs = [
            "brain-config",
            "brain-codegen",
            "brain-runtime",
            "brain-serve",
            "bindings",
            "xtask",
        ];
        let skip = [&GENERATED[..], &["brain-codegen/tests/snapshots"]].concat();
        let found = long_files(&workspace(), &dirs, &skip, 800);
        assert!(
            found.is_empty(),
            "files over 800 lines:\n{}\nFix: split each by subject into modules (or test \
             files) of their own.",
            found.join("\n")
        );
    }

    #[test]
    fn functions_fit_a_screen() {
        let base = workspace();
        let sources = checked_sources(&base);
        let long = functions::long_functions(&base, &sources, 100);
        let listed = |at: &str| {
            NOT_YET_SPLIT
                .iter()
                .any(|f| at.starts_with(&format!("{f}:")))
        };
        let (waiting, counted): (Vec<_>, Vec<_>) = long.iter().partition(|(_, at)| listed(at));
        let list = |found: &[&(usize, String)]| {
            found
                .iter()
                .map(|(_, at)| at.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        };
        println!("functions over 100 lines:\n{}", list(&counted));
        println!("and in NOT_YET_SPLIT files:\n{}", list(&waiting));
        let stale: Vec<&&str> = NOT_YET_SPLIT
            .iter()
            .filter(|f| {
                !waiting
                    .iter()
                    .any(|(_, at)| at.starts_with(&format!("{f}:")))
            })
            .collect();
        assert!(
            stale.is_empty(),
            "NOT_YET_SPLIT files with no function over 100 lines: {stale:?}\nFix: drop them from \
             the list."
        );
        assert!(
            counted.len() <= FUNCTIONS_OVER_100 && counted.iter().all(|(n, _)| *n <= 150),
            "functions must fit a screen: at most {FUNCTIONS_OVER_100} over 100 lines and none \
             over 150 (from the `fn` line to the closing brace); found {} over 100:\n{}\nFix: \
             split each along its meaning: a helper function per step, named and documented for \
             what it does (or a method per item emitted, as prost and tonic-build do), not cut \
             at an arbitrary line.",
            counted.len(),
            list(&counted)
        );
    }

    #[test]
    fn docs_stand_alone() {
        let found = citations(&workspace());
        assert!(
            found.is_empty(),
            "docs that cite a document outside the repository:\n{}\nFix: say what the cited \
             text says, here, or leave it out.",
            found.join("\n")
        );
    }

    /// README, ARCHITECTURE, SECURITY, the book and the examples' READMEs.
    fn markdown() -> Vec<PathBuf> {
        let base = workspace();
        let mut found: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "SECURITY.md"]
            .iter()
            .map(|f| base.join(f))
            .collect();
        found.extend(files(&base.join("docs"), &["md"], &[]));
        found.extend(files(&base.join("examples"), &["md"], &[]));
        found
    }

    #[test]
    fn doc_links_resolve() {
        let found = docs::broken_links(&workspace(), &markdown());
        assert!(
            found.is_empty(),
            "broken links:\n{}\nFix: point each at a file of the repository and a heading of \
             that page (GitHub's anchors: lowercase, spaces as `-`, punctuation dropped).",
            found.join("\n")
        );
    }

    #[test]
    fn doc_snippets_compile_or_say_why() {
        let base = workspace();
        let compiled = docs::compiled_docs(&base);
        let files: Vec<PathBuf> = markdown()
            .into_iter()
            .map(|f| f.canonicalize().unwrap())
            .collect();
        let found = docs::unchecked_snippets(&base.canonicalize().unwrap(), &files, &compiled);
        assert!(
            found.is_empty(),
            "Rust snippets that no doc test compiles:\n{}\nFix: include the file in the `docs` \
             module of tests/src/lib.rs (its snippets become doc tests), or mark the snippet \
             `rust,ignore` and say \"not compiled here: <why>\" just before it.",
            found.join("\n")
        );
    }

    #[test]
    fn readme_and_architecture_fit() {
        let base = workspace();
        let mut found: Vec<String> = [("README.md", 10_240), ("ARCHITECTURE.md", 25_000)]
            .into_iter()
            .filter_map(|(file, max)| docs::oversized(&base, file, max))
            .collect();
        // ARCHITECTURE holds what rarely changes: no date (an MCP revision's name aside), no
        // commit id.
        let architecture = std::fs::read_to_string(base.join("ARCHITECTURE.md")).unwrap();
        for (n, line) in architecture.lines().enumerate() {
            for word in line.split(|c: char| !c.is_ascii_alphanumeric() && c != '-') {
                if docs::dated(word) || docs::commit_id(word) {
                    found.push(format!("ARCHITECTURE.md:{}: `{word}`", n + 1));
                }
            }
        }
        assert!(
            found.is_empty(),
            "{}\nFix: README is the first screen and ARCHITECTURE the structure and invariants; \
             move guides and reference into the book (docs/src), measurements into \
             docs/src/dev/performance-log.md.",
            found.join("\n")
        );
    }

    #[test]
    fn no_public_string_errors() {
        let dirs = ["brain-config/src", "brain-codegen/src", "brain-runtime/src"];
        let found = docs::string_errors(&workspace(), &dirs);
        assert!(
            found.is_empty(),
            "public functions returning Result<_, String>:\n{}\nFix: return a \
             #[non_exhaustive] thiserror enum whose variants are what a host acts on.",
            found.join("\n")
        );
    }
}
