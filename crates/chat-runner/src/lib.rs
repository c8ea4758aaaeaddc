//! Runners for roundtable.
//!
//! This crate will own the provider-agnostic turn loop (stream, tool calls,
//! approvals, results, repeat), the one-on-one `ChatRunner` and the multi-party
//! thread runner. It depends on no particular provider or store.
