//! Parsing a Gemini stream: a pure function from each chunk to assembler
//! operations. Parts of one kind in a row (text, or thoughts) make one
//! block; a function call is a whole tool call at once, named as pi-ai
//! names it when the server gives it no id. Gemini has no end marker: the
//! last chunk carries the finish reason (and usage may follow it).

use serde_json::Value;

use crate::assemble::Assembler;
use crate::error::{ErrorKind, ProviderError};
use crate::message::StopReason;
use crate::overflow::is_overflow_text;
use crate::wire::WireDecoder;

use super::chunk::{Chunk, FunctionCall, Part};

/// The state of one Gemini stream.
#[derive(Debug, Default)]
pub(crate) struct GeminiDecoder {
    /// The open text or thinking block, and whether it is thinking.
    current: Option<(usize, bool)>,
    /// The ids of the calls so far (a repeated id gets a new one).
    call_ids: Vec<String>,
    /// Ids made for calls that came without one.
    made_ids: u64,
    finished: bool,
    failure: Option<ProviderError>,
}

impl WireDecoder for GeminiDecoder {
    /// Applies one SSE event: unnamed events carry the chunks (Google's
    /// SDK reads no other); an `error` object in a chunk is a server error.
    fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        asm: &mut Assembler,
    ) -> Result<(), ProviderError> {
        let data = data.trim();
        if !matches!(name, None | Some("message")) || data.is_empty() {
            return Ok(());
        }
        let chunk = Chunk::parse(data).map_err(|e| {
            ProviderError::protocol(format!(
                "malformed Gemini chunk: {e}; data={}",
                truncate(data)
            ))
        })?;
        if let Some(error) = &chunk.error {
            return Err(stream_error(error));
        }
        if let Some(id) = &chunk.response_id {
            asm.set_response_id(id);
        }
        if let Some(reason) = chunk
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
        {
            return Err(ProviderError::Refused {
                message: format!("Gemini blocked the prompt: {reason}"),
            });
        }
        let candidate = chunk.candidates.as_ref().and_then(|c| c.first());
        for part in candidate
            .and_then(|c| c.content.as_ref())
            .and_then(|c| c.parts.as_ref())
            .into_iter()
            .flatten()
        {
            self.apply_part(part, asm);
        }
        if let Some(candidate) = candidate
            && let Some(reason) = candidate.finish_reason.as_deref()
        {
            self.finish(reason, candidate.finish_message.as_deref(), asm);
        }
        if let Some(usage) = &chunk.usage_metadata {
            let cached = usage.cached_content_token_count.unwrap_or(0);
            let input = usage.prompt_token_count.unwrap_or(0).saturating_sub(cached);
            let output = usage
                .candidates_token_count
                .unwrap_or(0)
                .saturating_add(usage.thoughts_token_count.unwrap_or(0));
            asm.set_usage(input, output, cached, 0);
        }
        Ok(())
    }

    /// Gemini has no end marker: the message ends with the body.
    fn saw_end_marker(&self) -> bool {
        false
    }

    /// The body ended: without a finish reason the stream was cut, and its
    /// content is kept with the error reported.
    fn on_end(&mut self, asm: &mut Assembler) {
        if let Some(failure) = self.failure.take() {
            asm.fail(&failure);
        } else if self.finished {
            asm.finish();
        } else {
            asm.fail(&ProviderError::protocol(
                "the Gemini stream ended before its finishReason",
            ));
        }
    }
}

impl GeminiDecoder {
    fn apply_part(&mut self, part: &Part<'_>, asm: &mut Assembler) {
        if let Some(text) = part.text.as_deref() {
            let thinking = part.thought == Some(true);
            let block = match self.current {
                Some((block, kind)) if kind == thinking => block,
                _ => {
                    self.close_current(asm);
                    let block = if thinking {
                        asm.open_thinking(None)
                    } else {
                        asm.open_text()
                    };
                    self.current = Some((block, thinking));
                    block
                }
            };
            let signature = part.thought_signature.as_deref().filter(|s| !s.is_empty());
            if thinking {
                if !text.is_empty() {
                    asm.thinking_delta(block, text);
                }
                if let Some(signature) = signature {
                    asm.thinking_signature(block, signature);
                }
            } else {
                if !text.is_empty() {
                    asm.text_delta(block, text);
                }
                if let Some(signature) = signature {
                    asm.text_signature(block, signature);
                }
            }
        }
        if let Some(call) = &part.function_call {
            self.close_current(asm);
            self.apply_call(call, part.thought_signature.as_deref(), asm);
        }
    }

    fn close_current(&mut self, asm: &mut Assembler) {
        if let Some((block, _)) = self.current.take() {
            asm.close(block);
        }
    }

    /// A whole function call. Without an id, or with one already used, it
    /// is named `<name>_<timestamp>_<n>` as pi-ai names it (pi's timestamp
    /// is the clock's when the call arrives, ours the message's).
    fn apply_call(
        &mut self,
        call: &FunctionCall<'_>,
        signature: Option<&str>,
        asm: &mut Assembler,
    ) {
        let name = call.name.as_deref().unwrap_or_default();
        let id = match call.id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) if !self.call_ids.iter().any(|used| used == id) => id.to_string(),
            _ => {
                self.made_ids += 1;
                format!("{name}_{}_{}", asm.timestamp(), self.made_ids)
            }
        };
        let block = asm.open_tool_call(Some(&id), Some(name));
        self.call_ids.push(id);
        match &call.args {
            None | Some(Value::Null) => asm.tool_call_delta(block, "{}"),
            Some(Value::Object(args)) => {
                asm.tool_call_delta(block, &Value::Object(args.clone()).to_string());
                asm.tool_call_arguments(block, args.clone());
            }
            // Not an object: reported by the assembler, and the call gets {}.
            Some(other) => asm.tool_call_delta(block, &other.to_string()),
        }
        if let Some(signature) = signature.filter(|s| !s.is_empty()) {
            asm.tool_call_signature(block, signature);
        }
        asm.close(block);
    }

    /// The candidate's finish reason: `STOP` and `MAX_TOKENS` end it (as
    /// `toolUse` when it called tools); every other reason (safety,
    /// recitation, a malformed call, ...) is an error that names it.
    fn finish(&mut self, reason: &str, detail: Option<&str>, asm: &mut Assembler) {
        self.finished = true;
        let stop = match reason {
            "STOP" => StopReason::Stop,
            "MAX_TOKENS" => StopReason::Length,
            _ => {
                let mut message = format!("Provider finishReason: {reason}");
                if let Some(detail) = detail.filter(|d| !d.is_empty()) {
                    message.push_str(": ");
                    message.push_str(detail);
                }
                self.failure = Some(ProviderError::Refused { message });
                StopReason::Error
            }
        };
        let stop = if stop != StopReason::Error && !self.call_ids.is_empty() {
            StopReason::ToolUse
        } else {
            stop
        };
        asm.set_stop_reason(stop);
    }
}

/// An `error` object sent in the stream (`{code, message, status}`), typed
/// by its status.
fn stream_error(error: &Value) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    let status = error
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let code = error.get("code").and_then(Value::as_u64).unwrap_or(0);
    let kind = match (status, code) {
        ("RESOURCE_EXHAUSTED", _) | (_, 429) => ErrorKind::RateLimit,
        ("UNAVAILABLE", _) | (_, 503) => ErrorKind::Overloaded,
        ("UNAUTHENTICATED" | "PERMISSION_DENIED", _) | (_, 401 | 403) => ErrorKind::Auth,
        ("DEADLINE_EXCEEDED", _) | (_, 504) => ErrorKind::Timeout,
        _ if is_overflow_text(&message) => ErrorKind::ContextOverflow,
        ("INVALID_ARGUMENT" | "NOT_FOUND" | "FAILED_PRECONDITION", _) | (_, 400..=499) => {
            ErrorKind::InvalidRequest
        }
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
