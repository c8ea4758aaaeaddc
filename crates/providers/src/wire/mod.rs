//! The seam between calling a model and the wire APIs that carry the call:
//! which API a model speaks ([`WireApi`]), what every API implements
//! ([`WireAdapter`]: its compat options, its request, its stream decoder),
//! and the table that picks the adapter of a model ([`Adapter`]); and the
//! borrowed string the decoders read chunk JSON into ([`JsonStr`]).

mod adapter;
mod api;
mod json_str;
mod table;

pub(crate) use adapter::{WireAdapter, WireDecoder, WireRequest};
pub use api::{
    ANTHROPIC_MESSAGES, GOOGLE_GENERATIVE_AI, OPENAI_COMPLETIONS, OPENAI_RESPONSES, WireApi,
};
pub(crate) use json_str::JsonStr;
pub(crate) use table::Adapter;
