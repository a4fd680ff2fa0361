//! The generated code of `tests/fixtures/stdio.json` (in `tests/snapshots/stdio`) compiles
//! without a warning, and its compiled-in binding is the config's, stdio fields included, as is
//! its `audit` with its public key's text.
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
    // The audit's public keys travel with it, their text compiled in.
    let audit = generated::host_config().audit.unwrap();
    assert_eq!(Some(&audit), config.audit.as_ref());
    assert_eq!(audit.verifying_keys().unwrap().len(), 1);
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
