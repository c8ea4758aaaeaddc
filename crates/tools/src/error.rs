//! Errors that end a turn, as opposed to error results the model reads.

use std::path::PathBuf;
use std::sync::Arc;

/// An error that must end the turn (or fail setup), never shown to the model
/// as a tool result: cancellation, a call made without its approval, a
/// registry configuration mistake, a broken host environment.
///
/// Failures the model can act on are [`ToolResult::error`](crate::ToolResult::error)
/// results instead.
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
    /// Two tools with one name were registered.
    #[error("a tool named {name:?} is already registered")]
    DuplicateTool {
        /// The clashing name.
        name: Arc<str>,
    },
    /// A tool's input type has a schema that is not a JSON object schema.
    #[error("the input schema of tool {tool:?} is not an object schema")]
    InvalidSchema {
        /// The tool's name.
        tool: Arc<str>,
    },
    /// A workspace root that does not exist or is not a directory.
    #[error("workspace root {path} is unusable: {source}")]
    InvalidRoot {
        /// The root given.
        path: PathBuf,
        /// Why it cannot be used.
        #[source]
        source: std::io::Error,
    },
    /// A toolset was configured wrongly (an invalid URL, an HTTP client
    /// that cannot be built).
    #[error("invalid tool configuration: {message}")]
    Config {
        /// What is wrong.
        message: String,
    },
    /// An MCP configuration that cannot be read or makes no sense; the
    /// message names the offending entry (`mcpServers.github.url: ...`).
    #[cfg(feature = "mcp")]
    #[error("invalid MCP configuration{}: {message}", path.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default())]
    McpConfig {
        /// The file, when the configuration came from one.
        path: Option<PathBuf>,
        /// What is wrong.
        message: String,
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
