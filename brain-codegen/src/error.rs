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

/// Why [`compile_config`](crate::compile_config), a [`Builder`](crate::Builder) or
/// [`Builder::write_dir`](crate::Builder::write_dir) wrote nothing.
///
/// Its `Debug` form is its message: a build script's `main` that returns it prints that, after
/// the diagnostics (already on stderr).
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The host config could not be loaded (it could not be read).
    #[error(transparent)]
    Load(brain_config::ConfigError),
    /// The host config breaks rules; every diagnostic was printed to stderr.
    #[error(
        "{} is invalid ({} error{}, printed above): fix it (`cargo xtask check --config {}` shows the same)",
        .0.file, .0.errors.len(), if .0.errors.len() == 1 { "" } else { "s" }, .0.file
    )]
    Invalid(brain_config::Diagnostics),
    /// typify could not generate a binding's types.
    #[error(transparent)]
    Codegen(CodegenError),
    /// No output directory: `OUT_DIR` is set only for build scripts.
    #[error(
        "OUT_DIR is not set: compile_config runs in a build script (build.rs); elsewhere give \
         Builder::out_dir"
    )]
    NoOutDir,
    /// A file could not be written, read or removed.
    #[error("cannot write {}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The output directory holds a file brain-codegen did not write (its first line is not
    /// brain-codegen's): nothing was written or removed.
    #[error(
        "{} holds {}, which brain-codegen did not write: give an empty directory or one brain-codegen \
         wrote, or move that file away",
        .dir.display(), .file.display()
    )]
    NotOurs {
        /// The output directory.
        dir: std::path::PathBuf,
        /// The file brain-codegen did not write.
        file: std::path::PathBuf,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl From<CodegenError> for Error {
    fn from(error: CodegenError) -> Self {
        Error::Codegen(error)
    }
}
