//! Parsing an Anthropic messages stream: a pure function from each SSE event
//! to assembler operations.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::assemble::Assembler;
use crate::error::{ErrorKind, ProviderError, is_context_overflow};
use crate::message::StopReason;

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: u64,
        content_block: Value,
    },
    ContentBlockDelta {
        index: u64,
        delta: Value,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<RawUsage>,
    },
    MessageStop,
}

#[derive(Debug, Deserialize)]
struct MessageStart {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

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
pub struct EventDecoder {
    blocks: HashMap<u64, usize>,
    stopped: bool,
    failure: Option<ProviderError>,
    tokens: (u64, u64, u64, u64),
}

impl EventDecoder {
    /// True once `message_stop` arrived.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Applies one SSE event (`name` is its `event:` field).
    pub fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        asm: &mut Assembler,
    ) -> Result<(), ProviderError> {
        let name = match name {
            Some(n) => n.to_string(),
            None => serde_json::from_str::<Value>(data)
                .ok()
                .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default(),
        };
        if name == "error" {
            return Err(stream_error(data));
        }
        if !MESSAGE_EVENTS.contains(&name.as_str()) {
            // `ping` and event types added after this was written.
            return Ok(());
        }
        let event: Event = serde_json::from_str(data).map_err(|e| {
            ProviderError::protocol(format!(
                "Could not parse Anthropic SSE event {name}: {e}; data={}",
                truncate(data)
            ))
        })?;
        match event {
            Event::MessageStart { message } => {
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
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => {
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
                let block = match kind {
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
                    // Server tools and block types added later are skipped.
                    _ => None,
                };
                if let Some(b) = block {
                    self.blocks.insert(index, b);
                }
            }
            Event::ContentBlockDelta { index, delta } => {
                let Some(&block) = self.blocks.get(&index) else {
                    return Ok(());
                };
                let field = |f: &str| delta.get(f).and_then(Value::as_str).unwrap_or_default();
                match delta
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                {
                    "text_delta" => asm.text_delta(block, field("text")),
                    "thinking_delta" => asm.thinking_delta(block, field("thinking")),
                    "signature_delta" => asm.thinking_signature_delta(block, field("signature")),
                    "input_json_delta" => asm.tool_call_delta(block, field("partial_json")),
                    _ => {}
                }
            }
            Event::ContentBlockStop { index } => {
                if let Some(block) = self.blocks.remove(&index) {
                    asm.close(block);
                }
            }
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason.as_deref() {
                    let stop = match reason {
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
                    };
                    asm.set_stop_reason(stop);
                }
                if let Some(u) = usage {
                    let t = &mut self.tokens;
                    t.0 = u.input_tokens.unwrap_or(t.0);
                    t.1 = u.output_tokens.unwrap_or(t.1);
                    t.2 = u.cache_read_input_tokens.unwrap_or(t.2);
                    t.3 = u.cache_creation_input_tokens.unwrap_or(t.3);
                    self.apply_tokens(asm);
                }
            }
            Event::MessageStop => self.stopped = true,
        }
        Ok(())
    }

    fn apply_tokens(&self, asm: &mut Assembler) {
        let (i, o, r, w) = self.tokens;
        asm.set_usage(i, o, r, w);
    }

    /// The body ended: without `message_stop` the stream was cut, and its
    /// content is kept with the error reported.
    pub fn on_end(&mut self, asm: &mut Assembler) {
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
        "invalid_request_error" if is_context_overflow(&message) => ErrorKind::ContextOverflow,
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
