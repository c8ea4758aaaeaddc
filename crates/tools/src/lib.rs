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
//! turn (cancellation, a call made without its approval).
//!
//! The [`ToolRegistry`] holds a session's tools and gates them with an
//! [`ApprovalPolicy`]. [`VerifyPolicy`] and [`PatchReviewPolicy`] configure
//! what happens after the workspace changes. Built-in toolsets: the
//! [`workspace`] tools, confined to a root directory, and the read-only
//! [`github`] tools. This crate never calls a model.

mod coerce;
mod context;
mod definition;
mod error;
#[cfg(feature = "github")]
pub mod github;
mod kind;
mod output;
mod policy;
mod registry;
mod result;
mod tool;
mod typed;
pub mod workspace;

pub use context::{ProgressSink, ToolContext, ToolProgress};
pub use definition::ToolDefinition;
pub use error::ToolError;
pub use kind::ToolKind;
pub use output::OutputLimit;
pub use policy::{ApprovalPolicy, PatchReviewPolicy, VerifyPolicy};
pub use registry::ToolRegistry;
pub use result::ToolResult;
pub use tool::Tool;
pub use typed::{TypedTool, input_schema, parse_arguments, parse_arguments_lenient};
