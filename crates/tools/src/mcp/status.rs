//! What a host can see of its MCP servers: which run, which failed and
//! why, what their tools cost in context, and what changed in a refresh.

use std::fmt;
use std::sync::Arc;

/// One server, as the toolset sees it now.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerStatus {
    /// The server's name in the configuration.
    pub name: Arc<str>,
    /// Running, failed or disabled.
    pub state: McpServerState,
    /// Tools offered from it (after the enabled and disabled lists).
    pub tools: usize,
    /// Bytes its tool definitions add to every model request; about four
    /// bytes make a token.
    pub schema_bytes: usize,
    /// The process id of a stdio server that is running.
    pub pid: Option<u32>,
}

/// Whether a server is usable.
#[derive(Debug, Clone, PartialEq)]
pub enum McpServerState {
    /// Started and answering.
    Running,
    /// It did not start, or stopped and could not be restarted. The toolset
    /// does not try again; a host that wants to starts a new toolset.
    Failed(McpServerFailure),
    /// `"disabled": true` in the configuration: never started.
    Disabled,
}

/// Why a server is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerFailure {
    /// What was being done when it failed.
    pub stage: McpFailureStage,
    /// What went wrong.
    pub message: String,
    /// The last lines the process wrote to stderr (stdio servers), where
    /// the reason usually is: a missing token, a package not found.
    pub stderr: Option<String>,
}

/// The step of a server's life a failure happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpFailureStage {
    /// Starting the process or opening the connection.
    Spawn,
    /// The MCP handshake.
    Handshake,
    /// Listing the tools.
    ListTools,
    /// The startup timeout ran out during one of the above.
    StartupTimeout,
    /// It stopped while in use, after it had already been started again once.
    Stopped,
}

impl fmt::Display for McpServerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(stderr) = &self.stderr {
            write!(f, "; its stderr ended with:\n{stderr}")?;
        }
        Ok(())
    }
}

impl std::error::Error for McpServerFailure {}

/// What a refresh of stale tool lists changed, by registry name. A host
/// that holds a [`ToolRegistry`](crate::ToolRegistry) built from the
/// toolset builds it again from [`McpToolset::tools`](super::McpToolset::tools).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpToolListChange {
    /// The servers whose lists were read again.
    pub servers: Vec<Arc<str>>,
    /// Tools that are new.
    pub added: Vec<Arc<str>>,
    /// Tools that are gone.
    pub removed: Vec<Arc<str>>,
    /// Tools whose description, schema, kind or approval changed.
    pub changed: Vec<Arc<str>>,
    /// Servers whose list could not be read (their tools stay as they were).
    pub failures: Vec<(Arc<str>, String)>,
}

impl McpToolListChange {
    /// True when the offered tools are the same as before.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}
