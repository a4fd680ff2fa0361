//! Failed calls, and whether the tool may have run (`unknown_outcome`, DESIGN.md §3).

/// A call that did not produce a tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// Whether `tools/call` may have reached the tool.
    pub(crate) unknown_outcome: bool,
    /// What happened, for the model and the operator (never a token).
    pub(crate) message: String,
}

impl Failure {
    /// `tools/call` was never sent, or was rejected before the tool ran.
    pub(crate) fn not_sent(message: impl Into<String>) -> Self {
        Failure {
            unknown_outcome: false,
            message: message.into(),
        }
    }

    /// The failure came after `tools/call` was sent: the tool may have run.
    pub(crate) fn sent(message: impl Into<String>) -> Self {
        Failure {
            unknown_outcome: true,
            message: message.into(),
        }
    }
}
