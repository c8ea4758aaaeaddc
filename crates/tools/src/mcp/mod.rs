//! MCP servers as toolsets (feature `mcp`).
//!
//! Users bring their tools as [Model Context Protocol] servers, described
//! in the `mcpServers` file other clients read (see [`config`]). An
//! [`McpToolset`] starts them (child processes over stdio, or streamable
//! HTTP endpoints) with the official `rmcp` SDK and offers their tools as
//! [`Tool`](crate::Tool)s:
//!
//! - [`config`]: the file, with per-server timeouts, tool lists, trust,
//!   per-tool overrides and output limits;
//! - [`naming`]: `server__tool` names safe for every wire API, mapped back
//!   to the server's names;
//! - `schema`: input schemas both wire APIs accept, and their size;
//! - `kinds`: a tool's [`ToolKind`](crate::ToolKind) from the trust setting
//!   and its annotations;
//! - `mapping`: a call's result as a [`ToolResult`](crate::ToolResult);
//! - `client`, `connection`, `process`: the session with one server, its
//!   timeouts, cancellation and restart, and its child process;
//! - [`McpToolset`]: the servers together, their status, and refreshing
//!   tool lists that changed.
//!
//! [Model Context Protocol]: https://modelcontextprotocol.io

mod client;
pub mod config;
mod connection;
mod kinds;
mod mapping;
pub mod naming;
mod process;
mod remote_tool;
pub(crate) mod schema;
mod status;
mod toolset;

pub use config::{McpConfig, McpServerConfig, McpToolOverride, McpTransport, McpTrust};
pub use naming::McpToolRef;
pub use status::{
    McpFailureStage, McpServerFailure, McpServerState, McpServerStatus, McpToolListChange,
};
pub use toolset::McpToolset;
