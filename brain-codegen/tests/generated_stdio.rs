//! The generated code of `tests/fixtures/stdio.json` (in `tests/snapshots/stdio`) compiles
//! without a warning, and its compiled-in binding is the config's, stdio fields included.
#![deny(warnings)]

// A private module of a test crate, as a host's `mod tools { include_bindings!(); }` is: the
// generated code allows `dead_code` and `unreachable_pub` itself. The snapshot is compared byte for byte with what codegen writes: rustfmt leaves it.
#[rustfmt::skip]
#[path = "snapshots/stdio/mod.rs"]
mod generated;

#[test]
fn the_compiled_in_binding_is_the_configs() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stdio.json");
    let config = brain_config::load_file(&path).unwrap();
    assert_eq!(generated::host_config().tools, config.tools);
    let binding = &generated::BINDINGS[0];
    assert_eq!(
        binding.command,
        Some(&["node", "/opt/mcp/server-memory/dist/index.js"][..])
    );
    assert_eq!(
        binding.env_from,
        Some(&[("GITHUB_PERSONAL_ACCESS_TOKEN", "GH_TOKEN")][..])
    );
    assert_eq!(binding.prewarm, Some(1));
}
