//! Google's Gemini API (`streamGenerateContent?alt=sse`), the adapter of
//! [`WireApi::GoogleGenerativeAi`](crate::WireApi::GoogleGenerativeAi):
//! request building (contents, tool schemas in the subset Gemini takes,
//! thinking budgets and levels) and stream parsing, both pure.

mod chunk;
mod contents;
mod request;
mod schema;
mod stream;

use serde_json::Value;

use crate::context::{Context, StreamOptions};
use crate::model::Model;
use crate::wire::{WireAdapter, WireRequest};

use stream::GeminiDecoder;

/// Google's Gemini API as a [`WireAdapter`].
pub(crate) struct GoogleAdapter;

impl WireAdapter for GoogleAdapter {
    /// Gemini's servers take one request shape: what varies by model (how
    /// thinking is set) follows from the model id.
    type Compat = ();
    type Decoder = GeminiDecoder;

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

/// The JSON body of a `streamGenerateContent` request, as pi-ai (through
/// Google's SDK) sends it.
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    request::build_body(model, context, options)
}
