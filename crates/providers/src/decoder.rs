//! `StreamDecoder`: response bytes in, assistant events out. SSE framing,
//! the wire format's parser and the assembler together, with no I/O, so the
//! same code runs over HTTP, over recorded fixtures and in benchmarks.

use crate::assemble::Assembler;
use crate::error::ProviderError;
use crate::event::AssistantEvent;
use crate::message::AssistantMessage;
use crate::model::Model;
use crate::sse::SseParser;
use crate::wire::{Adapter, WireDecoder};

/// Decodes one streamed response of the model's wire API into events.
///
/// ```
/// use roundtable_providers::decoder::StreamDecoder;
/// use roundtable_providers::{Model, OPENAI_COMPLETIONS};
///
/// let model = Model::new(OPENAI_COMPLETIONS, "openai", "gpt-4o-mini", "http://localhost");
/// let mut decoder = StreamDecoder::new(&model, 0).unwrap();
/// let mut events = decoder.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n");
/// events.extend(decoder.feed(b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"));
/// events.extend(decoder.finish());
/// assert_eq!(events.last().unwrap().final_message().unwrap().text(), "Hi");
/// ```
#[derive(Debug)]
pub struct StreamDecoder {
    sse: SseParser,
    wire: Box<dyn WireDecoder>,
    asm: Assembler,
}

impl StreamDecoder {
    /// A decoder for `model`'s wire API, stamping the message `timestamp`;
    /// an invalid request when no adapter speaks that API.
    pub fn new(model: &Model, timestamp: i64) -> Result<Self, ProviderError> {
        Ok(Self::with_adapter(
            Adapter::for_api(&model.api)?,
            model,
            timestamp,
        ))
    }

    /// A decoder with `adapter`'s stream parser, for a caller that already
    /// chose the adapter of `model`.
    pub(crate) fn with_adapter(adapter: Adapter, model: &Model, timestamp: i64) -> Self {
        Self {
            sse: SseParser::default(),
            wire: adapter.decoder(),
            asm: Assembler::new(model, timestamp),
        }
    }

    /// Queues `start`: the server accepted the request.
    pub fn start(&mut self) -> Vec<AssistantEvent> {
        self.asm.start();
        self.asm.take_events()
    }

    /// True once the terminal event was produced.
    pub fn is_finished(&self) -> bool {
        self.asm.is_finished()
    }

    /// True once any content block was produced.
    pub fn has_content(&self) -> bool {
        self.asm.has_content()
    }

    /// Feeds response bytes; returns the events they complete. A malformed
    /// frame ends the stream with an `error` event; the wire format's end
    /// marker (`[DONE]`, `message_stop`) ends it with its terminal event at
    /// once. Once the stream has ended, bytes are ignored: what a server
    /// sends after its end marker is not part of the message, and the
    /// message must not depend on how the network split the bytes.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<AssistantEvent> {
        let mut out = Vec::new();
        self.feed_into(bytes, &mut out);
        out
    }

    /// As [`StreamDecoder::feed`], appending to `out`.
    pub fn feed_into(&mut self, bytes: &[u8], out: &mut Vec<AssistantEvent>) {
        if self.asm.is_finished() {
            return;
        }
        self.asm.start();
        self.sse.feed(bytes);
        let (sse, wire) = (&self.sse, &mut self.wire);
        self.asm.queue_into(out, |asm| wire.apply_frames(sse, asm));
        self.sse.clear_frames();
    }

    /// The body ended cleanly: returns the remaining events, ending with the
    /// terminal one (an `error` when the stream was cut short).
    pub fn finish(&mut self) -> Vec<AssistantEvent> {
        let mut out = Vec::new();
        if !self.asm.is_finished() {
            self.asm.start();
            self.sse.finish();
            self.wire.apply_frames(&self.sse, &mut self.asm);
            self.sse.clear_frames();
            if !self.asm.is_finished() {
                self.wire.on_end(&mut self.asm);
            }
        }
        self.asm.drain_events_into(&mut out);
        out
    }

    /// The body broke or the call was cancelled: ends with `error` (or
    /// `aborted`), keeping the content so far.
    pub fn fail(&mut self, error: &ProviderError) -> Vec<AssistantEvent> {
        self.asm.fail(error);
        self.asm.take_events()
    }

    /// The message as it stands.
    pub fn partial(&self) -> AssistantMessage {
        self.asm.partial()
    }
}

/// Decodes a whole recorded response body, delivered in `chunks`, into its
/// events: what an adapter would emit for that body.
pub fn decode_recorded<'a>(
    model: &Model,
    timestamp: i64,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<AssistantEvent>, ProviderError> {
    let mut decoder = StreamDecoder::new(model, timestamp)?;
    let mut out = decoder.start();
    for chunk in chunks {
        decoder.feed_into(chunk, &mut out);
    }
    out.extend(decoder.finish());
    Ok(out)
}
