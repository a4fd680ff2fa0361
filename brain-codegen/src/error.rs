//! Why code could not be generated: a module of its own, so that `module` names the error
//! without going through the crate root (which names `module`).

/// Why code could not be generated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodegenError {
    /// The config breaks a rule; generate only from a valid config.
    #[error("the config is invalid ({} errors); run `cargo xtask check`", .0.len())]
    Invalid(Vec<brain_config::Diagnostic>),
    /// typify could not turn a schema into types.
    #[error("typify cannot generate {field} of {tool:?}: {message}")]
    Typify {
        /// The binding.
        tool: String,
        /// `input_schema` or `output_schema`.
        field: &'static str,
        /// typify's message.
        message: String,
    },
}
