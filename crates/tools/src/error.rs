//! Errors that end a turn, as opposed to error results the model reads.

use std::sync::Arc;

/// An error of a call that must end the turn, never shown to the model as a
/// tool result: cancellation, a call made without its approval, a broken
/// host environment.
///
/// Failures the model can act on are [`ToolResult::error`](crate::ToolResult::error)
/// results instead; mistakes in setting tools up are
/// [`SetupError`](crate::SetupError)s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The call was cancelled through its cancellation token.
    #[error("tool call {call_id} ({tool}) was cancelled")]
    Cancelled {
        /// The tool's name.
        tool: Arc<str>,
        /// The call's id.
        call_id: Arc<str>,
    },
    /// The approval policy requires approval for this call and it was invoked
    /// without one. Nothing ran.
    #[error("tool call {call_id} ({tool}) needs approval and was not approved")]
    ApprovalRequired {
        /// The tool's name.
        tool: Arc<str>,
        /// The call's id.
        call_id: Arc<str>,
    },
    /// A tool hit a failure of the host environment that the model cannot fix.
    #[error("tool {tool} failed fatally: {message}")]
    Fatal {
        /// The tool's name.
        tool: Arc<str>,
        /// What happened.
        message: String,
    },
}

impl ToolError {
    /// An error result saying what happened, for a turn loop that answers
    /// every tool call even when the call ended the turn.
    pub fn to_result(&self) -> crate::ToolResult {
        match self {
            Self::Cancelled { .. } => crate::ToolResult::cancelled(),
            other => crate::ToolResult::error(other.to_string()),
        }
    }
}
