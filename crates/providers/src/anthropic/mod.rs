//! Anthropic messages, the adapter of
//! [`WireApi::AnthropicMessages`](crate::WireApi::AnthropicMessages):
//! request building and stream parsing, both pure.

mod request;
mod stream;
mod stream_event;

use crate::context::{Context, StreamOptions};
use crate::model::Model;
use crate::wire::{WireAdapter, WireRequest};

use stream::EventDecoder;

pub use request::build_request;

/// Anthropic messages as a [`WireAdapter`].
pub(crate) struct AnthropicAdapter;

impl WireAdapter for AnthropicAdapter {
    /// Anthropic's servers all take the same request: what varies by model
    /// (adaptive thinking, the thinking budget) follows from the model id
    /// and its limits.
    type Compat = ();
    type Decoder = EventDecoder;

    fn compat(_model: &Model) {}

    fn request(
        model: &Model,
        _compat: &(),
        context: &Context,
        options: &StreamOptions,
        api_key: Option<&str>,
    ) -> WireRequest {
        WireRequest {
            url: request::endpoint(model),
            headers: request::headers(model, options, api_key),
            body: build_request(model, context, options),
        }
    }
}
