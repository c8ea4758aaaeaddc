//! Parsing an OpenAI chat-completions stream: a pure function from each
//! `chat.completion.chunk` to assembler operations.

use serde_json::{Map, Value};

use crate::assemble::Assembler;
use crate::error::{ErrorKind, ProviderError};
use crate::message::{Diagnostic, StopReason};
use crate::wire::WireDecoder;

use super::chunk::{Arguments, Chunk, Delta, RawUsage, ToolDelta};

#[derive(Debug)]
struct ToolSlot {
    stream_index: Option<u64>,
    id: Option<String>,
    block: usize,
}

/// The state of one OpenAI chat-completions stream.
#[derive(Debug, Default)]
pub(crate) struct ChunkDecoder {
    text: Option<usize>,
    thinking: Option<usize>,
    tools: Vec<ToolSlot>,
    finished: bool,
    done: bool,
    failure: Option<ProviderError>,
}

impl WireDecoder for ChunkDecoder {
    /// Applies one SSE event (`name` is its `event:` field): unnamed (or
    /// `message`) events carry the chunks, `error` a server error; servers'
    /// own named events (metadata, keep-alives) are skipped. Everything
    /// after `[DONE]` is ignored, errors included.
    fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        asm: &mut Assembler,
    ) -> Result<(), ProviderError> {
        match name {
            _ if self.done => Ok(()),
            None | Some("message") => self.on_data(data, asm),
            Some("error") => {
                let value: Value = serde_json::from_str(data).unwrap_or_else(|_| Value::from(data));
                Err(stream_error(value.get("error").unwrap_or(&value)))
            }
            Some(_) => Ok(()),
        }
    }

    /// True once `[DONE]` arrived: every later event is ignored.
    fn saw_end_marker(&self) -> bool {
        self.done
    }

    /// The body ended. A stream that never reached `finish_reason` or
    /// `[DONE]` was cut: its content is kept and the error reported.
    fn on_end(&mut self, asm: &mut Assembler) {
        if let Some(failure) = self.failure.take() {
            asm.fail(&failure);
        } else if self.finished || self.done {
            asm.finish();
        } else {
            asm.fail(&ProviderError::protocol(
                "the stream ended before its finish_reason or [DONE]",
            ));
        }
    }
}

impl ChunkDecoder {
    /// Applies one SSE `data:` payload; after `[DONE]` nothing.
    fn on_data(&mut self, data: &str, asm: &mut Assembler) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk = Chunk::parse(data).map_err(|e| {
            ProviderError::protocol(format!(
                "malformed chat.completion.chunk: {e}; data={}",
                truncate(data)
            ))
        })?;
        if let Some(error) = chunk.error {
            return Err(stream_error(&error));
        }
        if let Some(id) = &chunk.id {
            asm.set_response_id(id);
        }
        if let Some(model) = &chunk.model {
            asm.set_response_model(model);
        }
        if let Some(usage) = &chunk.usage {
            apply_usage(usage, asm);
        }
        let Some(choice) = chunk.choices.as_ref().and_then(|c| c.0.as_ref()) else {
            return Ok(());
        };
        if chunk.usage.is_none()
            && let Some(usage) = &choice.usage
        {
            apply_usage(usage, asm);
        }
        if let Some(delta) = &choice.delta {
            self.apply_delta(delta, asm);
        }
        if let Some(reason) = choice.finish_reason.as_deref() {
            self.finish(reason, asm);
        }
        Ok(())
    }

    fn apply_delta(&mut self, delta: &Delta<'_>, asm: &mut Assembler) {
        let reasoning = [
            ("reasoning_content", &delta.reasoning_content),
            ("reasoning", &delta.reasoning),
            ("reasoning_text", &delta.reasoning_text),
        ]
        .into_iter()
        .find_map(|(field, v)| v.as_deref().filter(|s| !s.is_empty()).map(|s| (field, s)));
        if let Some((field, text)) = reasoning {
            let index = match self.thinking.filter(|i| asm.is_open(*i)) {
                Some(i) => i,
                None => {
                    self.close_text(asm);
                    let i = asm.open_thinking(Some(field));
                    self.thinking = Some(i);
                    i
                }
            };
            asm.thinking_delta(index, text);
        }
        if let Some(text) = delta.content.as_deref().filter(|s| !s.is_empty()) {
            let index = match self.text.filter(|i| asm.is_open(*i)) {
                Some(i) => i,
                None => {
                    self.close_thinking(asm);
                    let i = asm.open_text();
                    self.text = Some(i);
                    i
                }
            };
            asm.text_delta(index, text);
        }
        for call in delta.tool_calls.iter().flatten() {
            self.apply_tool_delta(call, asm);
        }
        for detail in delta.reasoning_details.iter().flatten() {
            if detail.get("type").and_then(Value::as_str) == Some("reasoning.encrypted")
                && let (Some(id), Some(_)) =
                    (detail.get("id").and_then(Value::as_str), detail.get("data"))
                && let Some(slot) = self.tools.iter().find(|s| s.id.as_deref() == Some(id))
            {
                asm.tool_call_signature(slot.block, &detail.to_string());
            }
        }
    }

    fn close_text(&mut self, asm: &mut Assembler) {
        if let Some(i) = self.text.take() {
            asm.close(i);
        }
    }

    fn close_thinking(&mut self, asm: &mut Assembler) {
        if let Some(i) = self.thinking.take() {
            asm.close(i);
        }
    }

    /// Finds the call a fragment belongs to: by `index`, unless the fragment
    /// names another id or restarts a complete call (servers such as Ollama
    /// send `index: 0` for every call); else by id; else the last open call.
    fn slot_for(&self, call: &ToolDelta<'_>, asm: &Assembler) -> Option<usize> {
        let id = call.id.as_deref().filter(|s| !s.is_empty());
        if let Some(id) = id
            && let Some(pos) = self.tools.iter().position(|s| s.id.as_deref() == Some(id))
        {
            return Some(pos);
        }
        let by_index = match call.index {
            Some(index) => self
                .tools
                .iter()
                .rposition(|s| s.stream_index == Some(index)),
            None => {
                if id.is_some() {
                    None
                } else {
                    self.tools.len().checked_sub(1)
                }
            }
        }?;
        let slot = &self.tools[by_index];
        if !asm.is_open(slot.block) {
            return None;
        }
        if id.is_some() && slot.id.is_some() {
            // Same index, another id: a new call.
            return None;
        }
        let renames = call
            .function
            .as_ref()
            .and_then(|f| f.name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if renames
            && id.is_none()
            && asm.tool_call_raw(slot.block).is_some_and(|raw| {
                !raw.trim().is_empty() && crate::assemble::parse_arguments(raw).is_ok()
            })
        {
            // A name again, no id, and the old call's arguments are complete:
            // a new call (rather than a server that repeats the name).
            return None;
        }
        Some(by_index)
    }

    fn apply_tool_delta(&mut self, call: &ToolDelta<'_>, asm: &mut Assembler) {
        let id = call.id.as_deref().filter(|s| !s.is_empty());
        let name = call
            .function
            .as_ref()
            .and_then(|f| f.name.as_deref())
            .filter(|s| !s.is_empty());
        let slot = match self.slot_for(call, asm) {
            Some(pos) => pos,
            None => {
                self.close_text(asm);
                self.close_thinking(asm);
                let block = asm.open_tool_call(id, name);
                self.tools.push(ToolSlot {
                    stream_index: call.index,
                    id: id.map(str::to_string),
                    block,
                });
                self.tools.len() - 1
            }
        };
        let block = self.tools[slot].block;
        if let Some(id) = id {
            if self.tools[slot].id.is_none() {
                self.tools[slot].id = Some(id.to_string());
            }
            asm.tool_call_id(block, id);
        }
        if let Some(name) = name {
            asm.tool_call_name(block, name);
        }
        if self.tools[slot].stream_index.is_none() {
            self.tools[slot].stream_index = call.index;
        }
        match call.function.as_ref().and_then(|f| f.arguments.as_ref()) {
            Some(Arguments::Fragment(fragment)) => asm.tool_call_delta(block, fragment),
            Some(Arguments::Object(map)) => {
                // Some servers send the arguments as an object, whole
                // (written as compact JSON, as `Value`'s `Display` does).
                asm.tool_call_delta(block, &serde_json::to_string(map).unwrap_or_default());
            }
            Some(Arguments::Other) | None => {}
        }
    }

    fn finish(&mut self, reason: &str, asm: &mut Assembler) {
        self.finished = true;
        let stop = match reason {
            "stop" | "end" => StopReason::Stop,
            "length" => StopReason::Length,
            "function_call" | "tool_calls" => StopReason::ToolUse,
            "content_filter" | "network_error" => {
                self.failure = Some(ProviderError::Refused {
                    message: format!("Provider finish_reason: {reason}"),
                });
                StopReason::Error
            }
            other => {
                self.failure = Some(ProviderError::Stream {
                    kind: ErrorKind::Protocol,
                    message: format!("Provider finish_reason: {other}"),
                });
                StopReason::Error
            }
        };
        asm.set_stop_reason(stop);
        if stop == StopReason::Length {
            for slot in &self.tools {
                if asm.is_open(slot.block) {
                    let mut details = Map::new();
                    details.insert(
                        "toolCallId".into(),
                        Value::from(asm.tool_call_id_of(slot.block).unwrap_or_default()),
                    );
                    asm.add_diagnostic(Diagnostic {
                        kind: "truncated_tool_call".into(),
                        timestamp: asm.timestamp(),
                        error: Some(serde_json::json!({
                            "message": "finish_reason length: the tool call's arguments may be cut short"
                        })),
                        details: Some(details),
                    });
                }
            }
        }
        asm.close_all();
    }
}

fn apply_usage(raw: &RawUsage, asm: &mut Assembler) {
    let prompt = raw.prompt_tokens.unwrap_or(0);
    let details = raw.prompt_tokens_details.as_ref();
    let reported_cached = details
        .and_then(|d| d.cached_tokens)
        .or(raw.prompt_cache_hit_tokens)
        .unwrap_or(0);
    let cache_write = details.and_then(|d| d.cache_write_tokens).unwrap_or(0);
    // Some servers count this request's cache writes in cached_tokens too.
    let cache_read = if cache_write > 0 {
        reported_cached.saturating_sub(cache_write)
    } else {
        reported_cached
    };
    let input = prompt.saturating_sub(cache_read.saturating_add(cache_write));
    asm.set_usage(
        input,
        raw.completion_tokens.unwrap_or(0),
        cache_read,
        cache_write,
    );
}

fn stream_error(error: &Value) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    let code = error.get("code").map(|c| match c {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    let kind = match code.as_deref() {
        Some("429") | Some("rate_limit_exceeded") => ErrorKind::RateLimit,
        Some("529") | Some("overloaded") => ErrorKind::Overloaded,
        Some("401") | Some("403") => ErrorKind::Auth,
        Some("context_length_exceeded") => ErrorKind::ContextOverflow,
        _ if crate::overflow::is_overflow_text(&message) => ErrorKind::ContextOverflow,
        Some(c) if c.starts_with('5') => ErrorKind::Server,
        _ => ErrorKind::Server,
    };
    ProviderError::Stream { kind, message }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
