//! Tools for roundtable bots.
//!
//! A [`Tool`] has a [`ToolDefinition`] (name, description, JSON schema of its
//! input, [`ToolKind`], approval flag) and an async invoke that gets a
//! [`ToolContext`] (call id, cancellation, progress sink) and returns a
//! [`ToolResult`]. Most tools are [`TypedTool`]s: the input is a Rust type,
//! its schema comes from `schemars`, and arguments are checked before the
//! tool runs.
//!
//! Two kinds of failure are kept apart: a [`ToolResult`] with `ok == false`
//! is an error the model reads and recovers from; a [`ToolError`] ends the
//! turn (cancellation, a call made without its approval). Mistakes in
//! setting tools up (two tools with one name, a workspace root that is not a
//! folder, a bad configuration) are [`SetupError`]s, returned before any
//! turn runs.
//!
//! The [`ToolRegistry`] holds a session's tools and gates them with an
//! [`ApprovalPolicy`]. Tools whose list may change while a host runs (MCP
//! servers) are a [`ToolSource`]; [`LiveTools`] gives a runner, at each
//! turn's start, a registry of its fixed tools and its sources, rebuilt
//! only when a source changed, and the [`ToolsChange`]. [`VerifyPolicy`] and [`PatchReviewPolicy`] configure
//! what happens after the workspace changes. A host that keeps artifacts
//! (whole command outputs, applied patches, rendered diagrams) gives the
//! context an [`Artifacts`] sink, such as [`FolderArtifacts`]; it and the
//! workspace writer write through a [`SafeFolder`], which never follows a
//! symlink and lands a file whole or not at all. Built-in
//! toolsets: the [`workspace`] tools, confined to a root directory, and the
//! read-only [`github`] tools (feature `github`, on by default). With the
//! `mcp` feature, `mcp::McpToolset` offers the tools of MCP servers. This crate
//! never calls a model.
//!
//! ```
//! use roundtable_providers::ToolCall;
//! use roundtable_tools::workspace::Workspace;
//! use roundtable_tools::{ToolContext, ToolError, ToolRegistry};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("notes.txt"), "remember the milk\n").unwrap();
//!
//! let mut registry = ToolRegistry::new(); // writes and commands need approval
//! registry.register_all(Workspace::open(dir.path()).unwrap().toolset()).unwrap();
//!
//! // A read tool runs at once.
//! let args = serde_json::json!({"pattern": "milk"});
//! let search = ToolCall::new("call_1", "search", args.as_object().unwrap().clone());
//! let result = registry.invoke(&search, ToolContext::new("call_1")).await.unwrap();
//! assert_eq!(result.text_content(), "notes.txt:1:remember the milk\n");
//! let message = result.into_message(&search, 1_700_000_000_000);
//! assert!(!message.is_error);
//!
//! // A command waits for a human: invoking it unapproved runs nothing.
//! let args = serde_json::json!({"command": "rm notes.txt"});
//! let shell = ToolCall::new("call_2", "shell", args.as_object().unwrap().clone());
//! assert!(registry.needs_approval(&shell));
//! let refused = registry.invoke(&shell, ToolContext::new("call_2")).await;
//! assert!(matches!(refused, Err(ToolError::ApprovalRequired { .. })));
//! assert!(dir.path().join("notes.txt").exists());
//! # });
//! ```

mod artifacts;
mod coerce;
pub mod context;
mod definition;
mod error;
#[cfg(feature = "github")]
pub mod github;
mod kind;
mod live_tools;
#[cfg(feature = "mcp")]
pub mod mcp;
mod output;
mod policy;
mod process_group;
mod registry;
mod result;
pub mod safe_folder;
mod setup_error;
mod tool;
mod tool_source;
mod typed;
pub mod workspace;

pub use artifacts::{ArtifactError, ArtifactName, Artifacts, FolderArtifacts};
pub use context::{ProgressSink, ToolContext};
pub use definition::ToolDefinition;
pub use error::ToolError;
pub use kind::ToolKind;
pub use live_tools::{LiveTools, TurnTools};
pub use output::OutputLimit;
pub use policy::{ApprovalPolicy, PatchReviewPolicy, VerifyPolicy};
pub use registry::{RegisteredTool, ToolRegistry};
pub use result::ToolResult;
pub use safe_folder::SafeFolder;
pub use setup_error::SetupError;
pub use tool::Tool;
pub use tool_source::{ToolSource, ToolsChange};
pub use typed::TypedTool;
