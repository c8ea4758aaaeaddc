//! Dispatch for roundtable threads.
//!
//! This crate will own the pure dispatcher (event, recent entries, roster,
//! policy, now) -> wake list, the bot-gate trait for ambient bots, and
//! `build_messages`, the projection of a shared thread into one bot's clean
//! one-on-one model conversation. It does no I/O.
