//! Tools for roundtable bots.
//!
//! This crate will own the `Tool` trait, typed tools whose JSON schema comes from
//! `schemars` and whose arguments are validated before `invoke`, `ToolKind`
//! (read, write, exec, network), the `ToolRegistry`, the approval and verify
//! policies, and the built-in toolsets (workspace tools confined to a root,
//! read-only GitHub tools). It never calls a model.
