//! bindings: this deployment's host config, `host.json`.
//!
//! Today the crate only carries the config; `cargo xtask check` validates it and a test keeps it
//! valid. **Not built yet** (issue 5): the generated typed bindings, the build.rs that rejects an
//! invalid or stale config, and the `brain-harness` binary (issue 3).

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
