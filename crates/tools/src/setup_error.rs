//! Errors of setting tools up, before any call runs.

use std::path::PathBuf;
use std::sync::Arc;

/// A toolset or registry that could not be set up: a configuration mistake
/// of the host, reported when it builds its tools, never during a turn.
///
/// Errors of a call are [`ToolError`](crate::ToolError)s (the turn ends) or
/// [`ToolResult::error`](crate::ToolResult::error) results (the model reads
/// them).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// Two tools with one name were registered.
    #[error("a tool named {name:?} is already registered")]
    DuplicateTool {
        /// The clashing name.
        name: Arc<str>,
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
}
