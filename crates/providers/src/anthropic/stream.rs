//! Parsing an Anthropic messages stream: a pure function from each SSE event
//! to assembler operations.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::assemble::Assembler;
use crate::error::{ErrorKind, ProviderError};
use crate::message::StopReason;
use crate::overflow::is_overflow_text;
use crate::wire::WireDecoder;

use super::stream_event::Event;

const MESSAGE_EVENTS: [&str; 6] = [
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
];

/// The state of one Anthropic messages stream.
#[derive(Debug, Default)]
pub(crate) struct EventDecoder {
    /// The open blocks: the stream's index of each, and its assembler
    /// block. A few at most, so a list searched from its end is quicker
    /// than hashing the index of every delta.
    blocks: Vec<(u64, usize)>,
    stopped: bool,
    failure: Option<ProviderError>,
    tokens: (u64, u64, u64, u64),
}

impl WireDecoder for EventDecoder {
    /// Applies one SSE event (`name` is its `event:` field). Everything
    /// after `message_stop` is ignored, errors included: the message is
    /// complete, and bytes a server sends after it must not change it.
    fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        asm: &mut Assembler,
    ) -> Result<(), ProviderError> {
        if self.stopped {
            return Ok(());
        }
        let name = event_name(name, data);
        if name == "error" {
            return Err(stream_error(data));
        }
        if !MESSAGE_EVENTS.contains(&&*name) {
            // `ping` and event types added after this was written.
            return Ok(());
        }
        let event = Event::parse(data).map_err(|e| {
            ProviderError::protocol(format!(
                "Could not parse Anthropic SSE event {name}: {e}; data={}",
                truncate(data)
            ))
        })?;
        let index = event.index.unwrap_or(0);
        match &*event.kind {
            "message_start" => self.message_start(event, asm)?,
            "content_block_start" => self.block_start(index, event, asm),
            "content_block_delta" => self.block_delta(index, &event, asm),
            "content_block_stop" => self.block_stop(index, asm),
            "message_delta" => self.message_delta(event, asm),
            "message_stop" => self.stopped = true,
            _ => {}
        }
        Ok(())
    }

    /// True once `message_stop` arrived: every later event is ignored.
    fn saw_end_marker(&self) -> bool {
        self.stopped
    }

    /// The body ended: without `message_stop` the stream was cut, and its
    /// content is kept with the error reported.
    fn on_end(&mut self, asm: &mut Assembler) {
        if let Some(failure) = self.failure.take() {
            asm.fail(&failure);
        } else if self.stopped {
            asm.finish();
        } else {
            asm.fail(&ProviderError::protocol(
                "Anthropic stream ended before message_stop",
            ));
        }
    }
}

impl EventDecoder {
    /// `message_start`: the response id and the first token counts.
    fn message_start(
        &mut self,
        event: Event<'_>,
        asm: &mut Assembler,
    ) -> Result<(), ProviderError> {
        let Some(message) = event.message else {
            return Err(ProviderError::protocol("message_start without message"));
        };
        if let Some(id) = &message.id {
            asm.set_response_id(id);
        }
        let u = message.usage.unwrap_or_default();
        self.tokens = (
            u.input_tokens.unwrap_or(0),
            u.output_tokens.unwrap_or(0),
            u.cache_read_input_tokens.unwrap_or(0),
            u.cache_creation_input_tokens.unwrap_or(0),
        );
        self.apply_tokens(asm);
        Ok(())
    }

    /// `content_block_start`: opens the block and remembers it under the
    /// stream's index (a reused index replaces the older block).
    fn block_start(&mut self, index: u64, event: Event<'_>, asm: &mut Assembler) {
        let content_block = event.content_block.unwrap_or(Value::Null);
        if let Some(b) = open_block(&content_block, asm) {
            self.blocks.retain(|(i, _)| *i != index);
            self.blocks.push((index, b));
        }
    }

    /// `content_block_delta`: appends to the open block at `index`; deltas
    /// for blocks that were skipped or never opened are ignored.
    fn block_delta(&self, index: u64, event: &Event<'_>, asm: &mut Assembler) {
        let Some(&(_, block)) = self.blocks.iter().rev().find(|(i, _)| *i == index) else {
            return;
        };
        let Some(delta) = &event.delta else {
            return;
        };
        match delta.kind.as_deref().unwrap_or_default() {
            "text_delta" => asm.text_delta(block, delta.text.as_deref().unwrap_or_default()),
            "thinking_delta" => {
                asm.thinking_delta(block, delta.thinking.as_deref().unwrap_or_default())
            }
            "signature_delta" => {
                asm.thinking_signature_delta(block, delta.signature.as_deref().unwrap_or_default())
            }
            "input_json_delta" => {
                asm.tool_call_delta(block, delta.partial_json.as_deref().unwrap_or_default())
            }
            _ => {}
        }
    }

    /// `content_block_stop`: closes the block at `index`, if one is open.
    fn block_stop(&mut self, index: u64, asm: &mut Assembler) {
        if let Some(at) = self.blocks.iter().position(|(i, _)| *i == index) {
            let (_, block) = self.blocks.remove(at);
            asm.close(block);
        }
    }

    /// `message_delta`: the stop reason and the updated token counts.
    fn message_delta(&mut self, event: Event<'_>, asm: &mut Assembler) {
        if let Some(reason) = event.delta.as_ref().and_then(|d| d.stop_reason.as_deref()) {
            let stop = self.stop_reason(reason);
            asm.set_stop_reason(stop);
        }
        if let Some(u) = event.usage {
            let t = &mut self.tokens;
            t.0 = u.input_tokens.unwrap_or(t.0);
            t.1 = u.output_tokens.unwrap_or(t.1);
            t.2 = u.cache_read_input_tokens.unwrap_or(t.2);
            t.3 = u.cache_creation_input_tokens.unwrap_or(t.3);
            self.apply_tokens(asm);
        }
    }

    /// Maps Anthropic's `stop_reason`; a refusal or an unknown reason ends
    /// the message in error and records the failure reported at the end.
    fn stop_reason(&mut self, reason: &str) -> StopReason {
        match reason {
            "end_turn" | "pause_turn" | "stop_sequence" => StopReason::Stop,
            "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
            "tool_use" => StopReason::ToolUse,
            "refusal" | "sensitive" => {
                self.failure = Some(ProviderError::Refused {
                    message: format!("Provider stop_reason: {reason}"),
                });
                StopReason::Error
            }
            other => {
                self.failure = Some(ProviderError::protocol(format!(
                    "Unhandled stop reason: {other}"
                )));
                StopReason::Error
            }
        }
    }

    fn apply_tokens(&self, asm: &mut Assembler) {
        let (i, o, r, w) = self.tokens;
        asm.set_usage(i, o, r, w);
    }
}

/// The event's type: its `event:` field, or else the `type` in its data.
fn event_name<'a>(name: Option<&'a str>, data: &str) -> Cow<'a, str> {
    match name {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(
            serde_json::from_str::<Value>(data)
                .ok()
                .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default(),
        ),
    }
}

/// Opens the assembler block for a `content_block_start`; `None` for
/// server tools and block types added later, which are skipped.
fn open_block(content_block: &Value, asm: &mut Assembler) -> Option<usize> {
    let kind = content_block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let str_field = |f: &str| {
        content_block
            .get(f)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match kind {
        "text" => {
            let i = asm.open_text();
            let initial = str_field("text");
            if !initial.is_empty() {
                asm.text_delta(i, initial);
            }
            Some(i)
        }
        "thinking" => {
            let i = asm.open_thinking(Some(""));
            let initial = str_field("thinking");
            if !initial.is_empty() {
                asm.thinking_delta(i, initial);
            }
            Some(i)
        }
        "redacted_thinking" => Some(asm.open_redacted_thinking(str_field("data"))),
        "tool_use" => {
            let i = asm.open_tool_call(Some(str_field("id")), Some(str_field("name")));
            if let Some(Value::Object(input)) = content_block.get("input")
                && !input.is_empty()
            {
                asm.tool_call_arguments(i, input.clone());
            }
            Some(i)
        }
        _ => None,
    }
}

fn stream_error(data: &str) -> ProviderError {
    let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
    let error = value
        .get("error")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let kind_name = error
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| data.to_string());
    let kind = match kind_name {
        "overloaded_error" => ErrorKind::Overloaded,
        "rate_limit_error" => ErrorKind::RateLimit,
        "authentication_error" | "permission_error" => ErrorKind::Auth,
        "invalid_request_error" if is_overflow_text(&message) => ErrorKind::ContextOverflow,
        "invalid_request_error" | "not_found_error" | "request_too_large" => {
            ErrorKind::InvalidRequest
        }
        "timeout_error" => ErrorKind::Timeout,
        _ => ErrorKind::Server,
    };
    ProviderError::Stream {
        kind,
        message: if message.is_empty() {
            data.to_string()
        } else {
            message
        },
    }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
