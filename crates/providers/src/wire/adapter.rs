//! What every wire API implements: building its request and decoding its
//! streamed answer, both pure (data in, data out), so the same code runs
//! over HTTP, over recorded captures and in benchmarks.

use std::fmt;

use serde_json::Value;

use crate::assemble::Assembler;
use crate::context::{Context, StreamOptions};
use crate::error::ProviderError;
use crate::model::Model;
use crate::sse::SseParser;

/// One streaming call as the wire sees it: where it goes, with which
/// headers, and its JSON body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WireRequest {
    /// The endpoint's URL.
    pub(crate) url: String,
    /// Header names and values, in the order they are sent.
    pub(crate) headers: Vec<(String, String)>,
    /// The JSON body.
    pub(crate) body: Value,
}

/// A wire API: the one trait each API's folder implements (`openai/`,
/// `anthropic/`). The HTTP layer and [`StreamDecoder`](crate::decoder::StreamDecoder)
/// reach it through [`Adapter`](super::Adapter), chosen once per call from
/// `Model.api`.
pub(crate) trait WireAdapter {
    /// The quirks of the servers that speak this API, settled for one model
    /// (which fields a server accepts, how it wants the thinking level):
    /// the model's explicit settings first, the rest detected from its
    /// provider and base URL. `()` for an API whose servers all behave alike.
    type Compat;

    /// The state of one streamed answer.
    type Decoder: WireDecoder + Default + 'static;

    /// The quirks of `model`'s server.
    fn compat(model: &Model) -> Self::Compat;

    /// The request for one streaming call of `model` on `context`, as
    /// pi-ai builds it. `api_key` is the options' key or the provider's
    /// environment variable; without one no key header is sent.
    fn request(
        model: &Model,
        compat: &Self::Compat,
        context: &Context,
        options: &StreamOptions,
        api_key: Option<&str>,
    ) -> WireRequest;
}

/// Reads one streamed answer of a wire API, one SSE event at a time, into
/// the [`Assembler`] that turns it into assistant events. An API implements
/// the three required methods; `StreamDecoder` owns the SSE framing and
/// feeds the frames through [`WireDecoder::apply_frames`].
pub(crate) trait WireDecoder: fmt::Debug + Send {
    /// Applies one SSE event (`name` is its `event:` field, `data` its
    /// data). An error ends the message with an `error` event that keeps
    /// the content so far.
    fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        asm: &mut Assembler,
    ) -> Result<(), ProviderError>;

    /// True once the API's end marker arrived (`[DONE]`, `message_stop`):
    /// the message is complete, and nothing after it may change it.
    fn saw_end_marker(&self) -> bool;

    /// The stream ended (its end marker, or the end of the body): ends the
    /// message with `done`, or with `error` when it failed or was cut
    /// short before its end.
    fn on_end(&mut self, asm: &mut Assembler);

    /// Applies the frames `sse` completed, in order, until the message
    /// ends: a failing event ends it with `error`, the end marker with its
    /// terminal event at once. The frames after the end are dropped (the
    /// message must not depend on how the network split the bytes).
    ///
    /// The one loop every API shares. It is compiled for each decoder, so
    /// the calls inside are direct: a decoder behind `dyn` costs one
    /// indirect call per chunk of bytes, not one per event.
    fn apply_frames(&mut self, sse: &SseParser, asm: &mut Assembler) {
        for frame in sse.frames() {
            if asm.is_finished() {
                break;
            }
            match self.on_event(frame.event, frame.data, asm) {
                Err(error) => asm.fail(&error),
                Ok(()) if self.saw_end_marker() => self.on_end(asm),
                Ok(()) => {}
            }
        }
    }
}
