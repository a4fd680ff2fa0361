//! bindings: this deployment's host config, `host.json`, and the `brain-harness` binary.
//!
//! `cargo xtask check` validates the config and a test keeps it valid. **Not built yet**
//! (issue 5): the generated typed bindings and the build.rs that rejects an invalid or stale
//! config; until then the harness parses the compiled-in `host.json` at start.

pub mod harness;

/// The text of `bindings/host.json`, as compiled in.
pub const HOST_CONFIG: &str = include_str!("../host.json");

#[cfg(test)]
mod tests {
    #[test]
    fn host_config_is_valid() {
        if let Err(errors) =
            brain_config::parse(super::HOST_CONFIG.as_bytes(), "bindings/host.json")
        {
            panic!("{errors}");
        }
    }
}
