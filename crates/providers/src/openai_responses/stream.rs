//! Parsing a Responses stream: a pure function from each `response.*`
//! event to assembler operations. Reasoning items become thinking blocks
//! (their summary parts joined by a blank line) signed with the item's
//! JSON, message items text blocks signed with their id, function calls
//! tool calls whose id is `call_id|item_id`.

use serde_json::{Value, json};

use crate::assemble::{Assembler, parse_arguments};
use crate::error::ProviderError;
use crate::message::StopReason;
use crate::wire::WireDecoder;

use super::event::{self, Event, Item, Response};
use super::failure::{error_event, failed, incomplete_failure, truncate};

/// The output item being streamed and its assembler block.
#[derive(Debug, Default, Clone, Copy)]
enum Current {
    #[default]
    None,
    /// A reasoning item; `separator` once a summary part ended, so the
    /// next part's text starts after a blank line.
    Reasoning {
        block: usize,
        has_text: bool,
        separator: bool,
    },
    Message {
        block: usize,
        has_text: bool,
    },
    Call {
        block: usize,
    },
}

/// The state of one Responses stream.
#[derive(Debug, Default)]
pub(crate) struct ResponsesDecoder {
    current: Current,
    saw_call: bool,
    ended: bool,
    failure: Option<ProviderError>,
}

impl WireDecoder for ResponsesDecoder {
    /// Applies one SSE event. Its kind is the data's `type` (the `event:`
    /// field when the data has none); kinds this adapter does not know are
    /// skipped. Everything after the response's end is ignored.
    fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        asm: &mut Assembler,
    ) -> Result<(), ProviderError> {
        let data = data.trim();
        if self.ended || data.is_empty() {
            return Ok(());
        }
        let event = Event::parse(data).map_err(|e| {
            ProviderError::protocol(format!(
                "malformed Responses event: {e}; data={}",
                truncate(data)
            ))
        })?;
        let kind = event.kind.as_deref().or(name).unwrap_or_default();
        match kind {
            "response.created" | "response.in_progress" => {
                let response = read_response(&event)?;
                if let Some(id) = &response.id {
                    asm.set_response_id(id);
                }
            }
            "response.output_item.added" => self.item_added(&event, asm)?,
            "response.output_item.done" => self.item_done(&event, asm)?,
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.thinking_delta(event.delta.as_deref().unwrap_or_default(), asm)
            }
            "response.reasoning_summary_part.done" => {
                if let Current::Reasoning {
                    has_text: true,
                    separator,
                    ..
                } = &mut self.current
                {
                    *separator = true;
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.text_delta(event.delta.as_deref().unwrap_or_default(), asm)
            }
            "response.function_call_arguments.delta" => {
                if let Current::Call { block } = self.current {
                    asm.tool_call_delta(block, event.delta.as_deref().unwrap_or_default());
                }
            }
            "response.function_call_arguments.done" => self.arguments_done(&event, asm),
            "response.completed" | "response.incomplete" => self.end(&read_response(&event)?, asm),
            "response.failed" => return Err(failed(&read_response(&event)?)),
            "error" => return Err(error_event(data)),
            _ => {}
        }
        Ok(())
    }

    /// True once the response ended (`response.completed`, `.incomplete`).
    fn saw_end_marker(&self) -> bool {
        self.ended
    }

    /// The body ended: without the response's end the stream was cut, and
    /// its content is kept with the error reported.
    fn on_end(&mut self, asm: &mut Assembler) {
        if let Some(failure) = self.failure.take() {
            asm.fail(&failure);
        } else if self.ended {
            asm.finish();
        } else {
            asm.fail(&ProviderError::protocol(
                "the Responses stream ended before response.completed",
            ));
        }
    }
}

fn read_response<'a>(event: &Event<'a>) -> Result<Response<'a>, ProviderError> {
    match event.response {
        Some(raw) => event::response(raw)
            .map_err(|e| ProviderError::protocol(format!("malformed Responses response: {e}"))),
        None => Ok(Response::default()),
    }
}

fn read_item<'a>(event: &Event<'a>) -> Result<Option<Item<'a>>, ProviderError> {
    event
        .item
        .map(event::item)
        .transpose()
        .map_err(|e| ProviderError::protocol(format!("malformed Responses output item: {e}")))
}

impl ResponsesDecoder {
    /// A new output item: a block of its kind opens (the one before it
    /// closes, had its end not come).
    fn item_added(&mut self, event: &Event<'_>, asm: &mut Assembler) -> Result<(), ProviderError> {
        let Some(item) = read_item(event)? else {
            return Ok(());
        };
        self.close_current(asm);
        self.current = match item.kind.as_deref() {
            Some("reasoning") => Current::Reasoning {
                block: asm.open_thinking(None),
                has_text: false,
                separator: false,
            },
            Some("message") => Current::Message {
                block: asm.open_text(),
                has_text: false,
            },
            Some("function_call") => Current::Call {
                block: self.open_call(&item, asm),
            },
            // Built-in tools' items and kinds added later are skipped.
            _ => Current::None,
        };
        Ok(())
    }

    fn open_call(&mut self, item: &Item<'_>, asm: &mut Assembler) -> usize {
        self.saw_call = true;
        let id = format!(
            "{}|{}",
            item.call_id.as_deref().unwrap_or_default(),
            item.id.as_deref().unwrap_or_default()
        );
        let block = asm.open_tool_call(Some(&id), item.name.as_deref());
        asm.tool_call_delta(block, item.arguments.as_deref().unwrap_or_default());
        block
    }

    fn close_current(&mut self, asm: &mut Assembler) {
        match std::mem::take(&mut self.current) {
            Current::Reasoning { block, .. }
            | Current::Message { block, .. }
            | Current::Call { block } => asm.close(block),
            Current::None => {}
        }
    }

    fn thinking_delta(&mut self, delta: &str, asm: &mut Assembler) {
        if let Current::Reasoning {
            block,
            has_text,
            separator,
        } = &mut self.current
            && !delta.is_empty()
        {
            if std::mem::take(separator) {
                asm.thinking_delta(*block, "\n\n");
            }
            asm.thinking_delta(*block, delta);
            *has_text = true;
        }
    }

    fn text_delta(&mut self, delta: &str, asm: &mut Assembler) {
        if let Current::Message { block, has_text } = &mut self.current
            && !delta.is_empty()
        {
            asm.text_delta(*block, delta);
            *has_text = true;
        }
    }

    /// The call's whole arguments: what was not streamed of them is added,
    /// or, when they are not what was streamed, they replace it.
    fn arguments_done(&mut self, event: &Event<'_>, asm: &mut Assembler) {
        let (Current::Call { block }, Some(whole)) = (self.current, event.arguments.as_deref())
        else {
            return;
        };
        let streamed = asm.tool_call_raw(block).unwrap_or_default();
        if let Some(rest) = whole.strip_prefix(streamed) {
            asm.tool_call_delta(block, rest);
        } else if let Ok(arguments) = parse_arguments(whole) {
            asm.tool_call_arguments(block, arguments);
        }
    }
}

impl ResponsesDecoder {
    /// An output item is complete: its block takes what the item holds
    /// that was not streamed, and closes. A reasoning item is kept whole
    /// as the thinking's signature, to go back in the next request.
    fn item_done(&mut self, event: &Event<'_>, asm: &mut Assembler) -> Result<(), ProviderError> {
        let (Some(raw), Some(item)) = (event.item, read_item(event)?) else {
            return Ok(());
        };
        match (item.kind.as_deref(), self.current) {
            (
                Some("reasoning"),
                Current::Reasoning {
                    block, has_text, ..
                },
            ) => {
                if !has_text {
                    let text = joined(item.summary.as_deref(), "\n\n");
                    let text = if text.is_empty() {
                        joined(item.content.as_deref(), "\n\n")
                    } else {
                        text
                    };
                    if !text.is_empty() {
                        asm.thinking_delta(block, &text);
                    }
                }
                asm.thinking_signature_delta(block, raw.get());
            }
            (Some("message"), Current::Message { block, has_text }) => {
                let text = joined(item.content.as_deref(), "");
                if !has_text && !text.is_empty() {
                    asm.text_delta(block, &text);
                }
                let mut signature = json!({ "v": 1 });
                if let Some(id) = &item.id {
                    signature["id"] = Value::from(&**id);
                }
                if let Some(phase) = &item.phase {
                    signature["phase"] = Value::from(&**phase);
                }
                asm.text_signature(block, &signature.to_string());
            }
            (Some("function_call"), current) => {
                let block = match current {
                    Current::Call { block } => block,
                    _ => {
                        self.close_current(asm);
                        self.open_call(&item, asm)
                    }
                };
                if asm.tool_call_raw(block).is_some_and(str::is_empty) {
                    asm.tool_call_delta(block, item.arguments.as_deref().unwrap_or_default());
                }
                self.current = Current::Call { block };
            }
            _ => return Ok(()),
        }
        self.close_current(asm);
        Ok(())
    }

    /// The response ended (`response.completed` or `.incomplete`): its
    /// usage and why it stopped.
    fn end(&mut self, response: &Response<'_>, asm: &mut Assembler) {
        self.ended = true;
        if let Some(id) = &response.id {
            asm.set_response_id(id);
        }
        if let Some(usage) = &response.usage {
            let cached = usage
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            let input = usage.input_tokens.unwrap_or(0).saturating_sub(cached);
            asm.set_usage(input, usage.output_tokens.unwrap_or(0), cached, 0);
        }
        // Flex is billed at half the price, priority at twice (2.5 times
        // for gpt-5.5), as pi-ai prices them.
        match response.service_tier.as_deref() {
            Some("flex") => asm.scale_cost(0.5),
            Some("priority") if asm.model_id() == "gpt-5.5" => asm.scale_cost(2.5),
            Some("priority") => asm.scale_cost(2.0),
            _ => {}
        }
        let stop = match response.status.as_deref() {
            None | Some("completed" | "in_progress" | "queued") => StopReason::Stop,
            Some("incomplete") => match incomplete_failure(response) {
                Some(failure) => {
                    self.failure = Some(failure);
                    StopReason::Error
                }
                None => StopReason::Length,
            },
            Some(other) => {
                self.failure = Some(ProviderError::protocol(format!(
                    "Unhandled stop reason: {other}"
                )));
                StopReason::Error
            }
        };
        let stop = if stop == StopReason::Stop && self.saw_call {
            StopReason::ToolUse
        } else {
            stop
        };
        asm.set_stop_reason(stop);
    }
}

/// The texts of an item's parts, joined by `separator`.
fn joined(parts: Option<&[event::Part<'_>]>, separator: &str) -> String {
    let mut out = String::new();
    for (i, part) in parts.unwrap_or_default().iter().enumerate() {
        if i > 0 {
            out.push_str(separator);
        }
        out.push_str(part.text());
    }
    out
}
