//! The seam between calling a model and the wire APIs that carry the call.

mod api;

pub use api::{ANTHROPIC_MESSAGES, OPENAI_COMPLETIONS, WireApi};
