//! The seam between calling a model and the wire APIs that carry the call:
//! which API a model speaks ([`WireApi`]), what every API implements
//! ([`WireAdapter`]: its compat options, its request, its stream decoder),
//! and the table that picks the adapter of a model ([`Adapter`]); and what
//! the decoders share to read chunk JSON ([`JsonStr`], [`JsonScan`]).

mod adapter;
mod api;
mod json_str;
mod scan;
mod table;

pub(crate) use adapter::{WireAdapter, WireDecoder, WireRequest};
pub use api::{ANTHROPIC_MESSAGES, OPENAI_COMPLETIONS, WireApi};
pub(crate) use json_str::JsonStr;
#[cfg(test)]
pub(crate) use scan::serde_only;
pub(crate) use scan::{JsonScan, SeenKeys, fast_path_on};
pub(crate) use table::Adapter;
