//! OpenAI chat completions (and the servers that copy it: vLLM, llama.cpp,
//! Ollama, OpenRouter, DeepSeek, Groq), the adapter of
//! [`WireApi::OpenAiCompletions`](crate::WireApi::OpenAiCompletions): the
//! servers' quirks, request building and stream parsing, all pure.

mod chunk;
pub(crate) mod compat;
mod request;
mod stream;

use serde_json::Value;

use crate::context::{Context, StreamOptions};
use crate::model::Model;
use crate::wire::{WireAdapter, WireRequest};

use compat::ResolvedCompat;
use stream::ChunkDecoder;

/// The headers of an OpenAI request (chat completions and Responses alike).
pub(crate) use request::headers;

pub use compat::{MaxTokensField, OpenAiCompat, ThinkingFormat};

/// OpenAI chat completions as a [`WireAdapter`].
pub(crate) struct OpenAiAdapter;

impl WireAdapter for OpenAiAdapter {
    type Compat = ResolvedCompat;
    type Decoder = ChunkDecoder;

    fn compat(model: &Model) -> ResolvedCompat {
        ResolvedCompat::detect(&model.provider, &model.base_url, model.compat.as_ref())
    }

    fn request(
        model: &Model,
        compat: &ResolvedCompat,
        context: &Context,
        options: &StreamOptions,
        api_key: Option<&str>,
    ) -> WireRequest {
        WireRequest {
            url: request::endpoint(model),
            headers: request::headers(model, options, api_key),
            body: request::build_request_with(model, compat, context, options),
        }
    }
}

/// The JSON body of a streaming chat-completions request, as pi-ai builds
/// it, for the compat flags of `model` (its `compat` settings, the rest
/// detected from its provider and base URL).
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    request::build_request_with(model, &OpenAiAdapter::compat(model), context, options)
}
