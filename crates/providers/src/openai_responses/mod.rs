//! The OpenAI Responses API, the adapter of
//! [`WireApi::OpenAiResponses`](crate::WireApi::OpenAiResponses): request
//! building (the history as input items, encrypted reasoning items sent
//! back as received) and stream parsing (`response.*` events), both pure.

mod event;
mod failure;
mod ids;
mod input;
mod request;
mod stream;

use serde_json::Value;

use crate::context::{Context, StreamOptions};
use crate::model::Model;
use crate::wire::{WireAdapter, WireRequest};

use stream::ResponsesDecoder;

/// The OpenAI Responses API as a [`WireAdapter`].
pub(crate) struct ResponsesAdapter;

impl WireAdapter for ResponsesAdapter {
    /// OpenAI's Responses servers take one request shape: what varies by
    /// model (reasoning) follows from the model itself.
    type Compat = ();
    type Decoder = ResponsesDecoder;

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
            headers: crate::openai::headers(model, options, api_key),
            body: build_request(model, context, options),
        }
    }
}

/// The JSON body of a streaming Responses request, as pi-ai builds it.
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    request::build_body(model, context, options)
}
