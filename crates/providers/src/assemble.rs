//! The assembler: one pure state machine, shared by every adapter and the
//! scripted provider, that turns "a block opened / grew / closed" into
//! [`AssistantEvent`]s and the final [`AssistantMessage`].
//!
//! Keeping this apart from the wire formats means every adapter emits the
//! same event grammar: `start`, blocks with their `*_start`, deltas and
//! `*_end`, then exactly one `done` or `error`.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::content::{AssistantBlock, TextContent, ThinkingContent, ToolCall};
use crate::error::{ErrorKind, ProviderError};
use crate::event::AssistantEvent;
use crate::message::{AssistantMessage, Diagnostic, StopReason};
use crate::model::{Model, ModelCost};
use crate::usage::Usage;

/// Builds one assistant message from block operations and queues the events
/// that describe it.
///
/// Blocks are addressed by the id `open_*` returns. A block's content index
/// (its place in the message, carried by its events) is given when the
/// block is announced: at once for text and thinking, once id and name are
/// known for a tool call.
///
/// ```
/// use roundtable_providers::assemble::Assembler;
/// use roundtable_providers::{AssistantEvent, Model, StopReason, OPENAI_COMPLETIONS};
///
/// let model = Model::new(OPENAI_COMPLETIONS, "openai", "gpt-4o-mini", "http://localhost");
/// let mut asm = Assembler::new(&model, 0);
/// asm.start();
/// let text = asm.open_text();
/// asm.text_delta(text, "Hel");
/// asm.text_delta(text, "lo");
/// asm.set_stop_reason(StopReason::Stop);
/// asm.finish();
/// let events = asm.take_events();
/// assert_eq!(events.len(), 6); // start, text_start, 2 deltas, text_end, done
/// assert_eq!(events[5].final_message().unwrap().text(), "Hello");
/// ```
#[derive(Debug)]
pub struct Assembler {
    cost: ModelCost,
    message: AssistantMessage,
    blocks: Vec<Block>,
    /// The content index of each block: set when the block is announced
    /// (at once for text and thinking, when id and name are known for a
    /// tool call), so a call that never got its id takes no place.
    slots: Vec<Option<usize>>,
    next_slot: usize,
    events: Vec<AssistantEvent>,
    started: bool,
    finished: bool,
}

#[derive(Debug)]
enum Buf {
    Open(String),
    Closed(Arc<str>),
}

impl Buf {
    /// The text as shared text: the closed block's own, without a copy.
    fn shared(&self) -> Arc<str> {
        match self {
            Buf::Open(s) => Arc::from(s.as_str()),
            Buf::Closed(s) => s.clone(),
        }
    }

    fn close(&mut self) -> Arc<str> {
        if let Buf::Open(s) = self {
            *self = Buf::Closed(Arc::from(std::mem::take(s)));
        }
        match self {
            Buf::Closed(s) => s.clone(),
            Buf::Open(s) => Arc::from(s.as_str()),
        }
    }

    fn push(&mut self, delta: &str) {
        match self {
            Buf::Open(s) => s.push_str(delta),
            Buf::Closed(s) => {
                let mut grown = s.to_string();
                grown.push_str(delta);
                *self = Buf::Open(grown);
            }
        }
    }

    fn is_open(&self) -> bool {
        matches!(self, Buf::Open(_))
    }
}

#[derive(Debug)]
enum Block {
    Text {
        text: Buf,
        signature: Option<String>,
    },
    Thinking {
        text: Buf,
        signature: Option<String>,
        redacted: bool,
    },
    Tool {
        id: Option<String>,
        name: Option<String>,
        raw: String,
        announced: bool,
        open: bool,
        arguments: Option<Map<String, Value>>,
        signature: Option<String>,
    },
}

impl Assembler {
    /// An assembler for a message from `model`, stamped `timestamp` (Unix ms).
    pub fn new(model: &Model, timestamp: i64) -> Self {
        Self {
            cost: model.cost,
            message: AssistantMessage::for_model(model, timestamp),
            blocks: Vec::new(),
            slots: Vec::new(),
            next_slot: 0,
            events: Vec::new(),
            started: false,
            finished: false,
        }
    }

    /// Queues `start` (once).
    pub fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.events.push(AssistantEvent::Start);
        }
    }

    /// The message's timestamp (Unix ms), also used for its diagnostics.
    pub fn timestamp(&self) -> i64 {
        self.message.timestamp
    }

    /// True once `start` was queued.
    pub fn is_started(&self) -> bool {
        self.started
    }

    /// True once a terminal event was queued.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// True when any content block was opened.
    pub fn has_content(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// The queued events, oldest first; the queue is emptied.
    pub fn take_events(&mut self) -> Vec<AssistantEvent> {
        std::mem::take(&mut self.events)
    }

    /// Moves the queued events to the end of `out`.
    pub fn drain_events_into(&mut self, out: &mut Vec<AssistantEvent>) {
        out.append(&mut self.events);
    }

    /// Runs `f` with the events it queues going straight to the end of
    /// `out` (after the events already queued): a decoder feeding a long
    /// stream moves each event once, not once into the queue and again out
    /// of it.
    pub(crate) fn queue_into(
        &mut self,
        out: &mut Vec<AssistantEvent>,
        f: impl FnOnce(&mut Assembler),
    ) {
        out.append(&mut self.events);
        std::mem::swap(&mut self.events, out);
        f(self);
        std::mem::swap(&mut self.events, out);
    }

    fn push_block(&mut self, block: Block) -> usize {
        self.start();
        self.blocks.push(block);
        self.slots.push(None);
        self.blocks.len() - 1
    }

    fn assign_slot(&mut self, block: usize) -> usize {
        match self.slots.get(block).copied().flatten() {
            Some(slot) => slot,
            None => {
                let slot = self.next_slot;
                self.next_slot += 1;
                if let Some(s) = self.slots.get_mut(block) {
                    *s = Some(slot);
                }
                slot
            }
        }
    }

    /// The content index of a block (its place in the final message).
    pub fn content_index(&self, block: usize) -> Option<usize> {
        self.slots.get(block).copied().flatten()
    }

    fn slot(&self, block: usize) -> usize {
        self.content_index(block).unwrap_or(usize::MAX)
    }

    /// Opens a text block and returns its block id.
    pub fn open_text(&mut self) -> usize {
        let index = self.push_block(Block::Text {
            text: Buf::Open(String::new()),
            signature: None,
        });
        let ci = self.assign_slot(index);
        self.events
            .push(AssistantEvent::TextStart { content_index: ci });
        index
    }

    /// Appends text to the text block at `index`.
    pub fn text_delta(&mut self, index: usize, delta: &str) {
        let ci = self.slot(index);
        if let Some(Block::Text { text, .. }) = self.blocks.get_mut(index) {
            text.push(delta);
            self.events.push(AssistantEvent::TextDelta {
                content_index: ci,
                delta: Arc::from(delta),
            });
        }
    }

    /// Sets the opaque signature of the text block at `index`.
    pub fn text_signature(&mut self, index: usize, value: &str) {
        if let Some(Block::Text { signature, .. }) = self.blocks.get_mut(index) {
            *signature = Some(value.to_string());
        }
    }

    /// Opens a thinking block (with an optional signature) and returns its
    /// block id.
    pub fn open_thinking(&mut self, signature: Option<&str>) -> usize {
        let index = self.push_block(Block::Thinking {
            text: Buf::Open(String::new()),
            signature: signature.map(str::to_string),
            redacted: false,
        });
        let ci = self.assign_slot(index);
        self.events
            .push(AssistantEvent::ThinkingStart { content_index: ci });
        index
    }

    /// Opens a redacted thinking block whose opaque payload is `data`, shown
    /// as `[Reasoning redacted]` as pi-ai shows it.
    pub fn open_redacted_thinking(&mut self, data: &str) -> usize {
        let index = self.push_block(Block::Thinking {
            text: Buf::Open("[Reasoning redacted]".to_string()),
            signature: Some(data.to_string()),
            redacted: true,
        });
        let ci = self.assign_slot(index);
        self.events
            .push(AssistantEvent::ThinkingStart { content_index: ci });
        index
    }

    /// Appends reasoning to the thinking block at `index`.
    pub fn thinking_delta(&mut self, index: usize, delta: &str) {
        let ci = self.slot(index);
        if let Some(Block::Thinking { text, .. }) = self.blocks.get_mut(index) {
            text.push(delta);
            self.events.push(AssistantEvent::ThinkingDelta {
                content_index: ci,
                delta: Arc::from(delta),
            });
        }
    }

    /// Sets the signature of the thinking block at `index`.
    pub fn thinking_signature(&mut self, index: usize, value: &str) {
        if let Some(Block::Thinking { signature, .. }) = self.blocks.get_mut(index) {
            *signature = Some(value.to_string());
        }
    }

    /// Appends to the signature of the thinking block at `index`.
    pub fn thinking_signature_delta(&mut self, index: usize, delta: &str) {
        if let Some(Block::Thinking { signature, .. }) = self.blocks.get_mut(index) {
            signature.get_or_insert_with(String::new).push_str(delta);
        }
    }

    /// Opens a tool call. Its `toolcall_start` is queued once both id and name
    /// are known (argument fragments that arrive earlier are held until then).
    pub fn open_tool_call(&mut self, id: Option<&str>, name: Option<&str>) -> usize {
        let index = self.push_block(Block::Tool {
            id: id.filter(|s| !s.is_empty()).map(str::to_string),
            name: name.filter(|s| !s.is_empty()).map(str::to_string),
            raw: String::new(),
            announced: false,
            open: true,
            arguments: None,
            signature: None,
        });
        self.announce_if_ready(index);
        index
    }

    /// Sets the id of the tool call at `index` when it has none yet.
    pub fn tool_call_id(&mut self, index: usize, value: &str) {
        if let Some(Block::Tool { id, .. }) = self.blocks.get_mut(index)
            && id.is_none()
            && !value.is_empty()
        {
            *id = Some(value.to_string());
        }
        self.announce_if_ready(index);
    }

    /// Sets the name of the tool call at `index` when it has none yet.
    pub fn tool_call_name(&mut self, index: usize, value: &str) {
        if let Some(Block::Tool { name, .. }) = self.blocks.get_mut(index)
            && name.is_none()
            && !value.is_empty()
        {
            *name = Some(value.to_string());
        }
        self.announce_if_ready(index);
    }

    /// The id of the tool call at `index`, when known.
    pub fn tool_call_id_of(&self, index: usize) -> Option<&str> {
        match self.blocks.get(index) {
            Some(Block::Tool { id, .. }) => id.as_deref(),
            _ => None,
        }
    }

    /// The argument text received so far for the tool call at `index`.
    pub fn tool_call_raw(&self, index: usize) -> Option<&str> {
        match self.blocks.get(index) {
            Some(Block::Tool { raw, .. }) => Some(raw),
            _ => None,
        }
    }

    /// Sets the opaque signature of the tool call at `index`.
    pub fn tool_call_signature(&mut self, index: usize, value: &str) {
        if let Some(Block::Tool { signature, .. }) = self.blocks.get_mut(index) {
            *signature = Some(value.to_string());
        }
    }

    /// Sets already-parsed arguments (a server that sends the whole input at
    /// once); later fragments replace them.
    pub fn tool_call_arguments(&mut self, index: usize, value: Map<String, Value>) {
        if let Some(Block::Tool { arguments, .. }) = self.blocks.get_mut(index) {
            *arguments = Some(value);
        }
    }

    /// Appends argument JSON text to the tool call at `index`. Empty
    /// fragments are ignored.
    pub fn tool_call_delta(&mut self, index: usize, delta: &str) {
        if delta.is_empty() {
            return;
        }
        let ci = self.slot(index);
        if let Some(Block::Tool {
            raw,
            announced,
            arguments,
            ..
        }) = self.blocks.get_mut(index)
        {
            raw.push_str(delta);
            *arguments = None;
            if *announced {
                self.events.push(AssistantEvent::ToolCallDelta {
                    content_index: ci,
                    delta: Arc::from(delta),
                });
            }
        }
    }

    fn announce_if_ready(&mut self, index: usize) {
        let ready = matches!(
            self.blocks.get(index),
            Some(Block::Tool {
                id: Some(_),
                name: Some(_),
                announced: false,
                ..
            })
        );
        if !ready {
            return;
        }
        let ci = self.assign_slot(index);
        if let Some(Block::Tool {
            id: Some(id),
            name: Some(name),
            raw,
            announced,
            ..
        }) = self.blocks.get_mut(index)
        {
            *announced = true;
            self.events.push(AssistantEvent::ToolCallStart {
                content_index: ci,
                id: Arc::from(id.as_str()),
                name: Arc::from(name.as_str()),
            });
            if !raw.is_empty() {
                self.events.push(AssistantEvent::ToolCallDelta {
                    content_index: ci,
                    delta: Arc::from(raw.as_str()),
                });
            }
        }
    }

    /// True when the block at `index` exists and has not been closed.
    pub fn is_open(&self, index: usize) -> bool {
        match self.blocks.get(index) {
            Some(Block::Text { text, .. } | Block::Thinking { text, .. }) => text.is_open(),
            Some(Block::Tool { open, .. }) => *open,
            None => false,
        }
    }

    /// Closes the block at `index` and queues its `*_end`. A tool call's
    /// arguments are parsed here; text that is not a JSON object is recorded
    /// in a diagnostic and the call keeps `{}`. A call that never got its id
    /// gets a generated one; a call that never got its name is dropped, with
    /// its argument text in a diagnostic.
    pub fn close(&mut self, index: usize) {
        if !self.is_open(index) {
            return;
        }
        let timestamp = self.message.timestamp;
        let ci = self.slot(index);
        let mut diagnostics = Vec::new();
        let event = match self.blocks.get_mut(index) {
            Some(Block::Text { text, .. }) => Some(AssistantEvent::TextEnd {
                content_index: ci,
                content: text.close(),
            }),
            Some(Block::Thinking { text, .. }) => Some(AssistantEvent::ThinkingEnd {
                content_index: ci,
                content: text.close(),
            }),
            Some(Block::Tool {
                id,
                name,
                raw,
                open,
                arguments,
                ..
            }) => {
                *open = false;
                if name.is_none() {
                    diagnostics.push(incomplete_call_diagnostic(id.as_deref(), raw, timestamp));
                    None
                } else {
                    if id.is_none() {
                        diagnostics.push(missing_id_diagnostic(timestamp));
                        *id = Some(format!("call_{}", self.next_slot));
                    }
                    if arguments.is_none() {
                        match parse_arguments(raw) {
                            Ok(map) => *arguments = Some(map),
                            Err(e) => {
                                diagnostics.push(invalid_arguments_diagnostic(
                                    id.as_deref().unwrap_or_default(),
                                    name.as_deref().unwrap_or_default(),
                                    raw,
                                    &e,
                                    timestamp,
                                ));
                                *arguments = Some(Map::new());
                            }
                        }
                    }
                    self.announce_if_ready(index);
                    let ci = self.slot(index);
                    self.tool_call_at(index)
                        .map(|tool_call| AssistantEvent::ToolCallEnd {
                            content_index: ci,
                            tool_call,
                        })
                }
            }
            None => None,
        };
        for d in diagnostics {
            self.add_diagnostic(d);
        }
        if let Some(event) = event {
            self.events.push(event);
        }
    }

    /// Closes every open block, in content order.
    pub fn close_all(&mut self) {
        for index in 0..self.blocks.len() {
            self.close(index);
        }
    }

    /// Closes every open block of the given kinds.
    pub fn close_open_text_and_thinking(&mut self) {
        for index in 0..self.blocks.len() {
            if matches!(
                self.blocks[index],
                Block::Text { .. } | Block::Thinking { .. }
            ) {
                self.close(index);
            }
        }
    }

    /// Closes every open tool call.
    pub fn close_open_tool_calls(&mut self) {
        for index in 0..self.blocks.len() {
            if matches!(self.blocks[index], Block::Tool { .. }) {
                self.close(index);
            }
        }
    }

    /// Sets the token counts; the total (saturating) and the cost follow
    /// from the model.
    pub fn set_usage(&mut self, input: u64, output: u64, cache_read: u64, cache_write: u64) {
        let mut usage = Usage::from_counts(input, output, cache_read, cache_write);
        self.cost.apply(&mut usage);
        self.message.usage = usage;
    }

    /// Multiplies the cost of the usage so far by `factor` (a price tier
    /// the server reports, such as OpenAI's flex or priority processing).
    pub fn scale_cost(&mut self, factor: f64) {
        let cost = &mut self.message.usage.cost;
        cost.input *= factor;
        cost.output *= factor;
        cost.cache_read *= factor;
        cost.cache_write *= factor;
        cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write;
    }

    /// The id of the model the message is from.
    pub fn model_id(&self) -> &str {
        &self.message.model
    }

    /// The usage so far.
    pub fn usage(&self) -> Usage {
        self.message.usage
    }

    /// Sets why the model stopped.
    pub fn set_stop_reason(&mut self, reason: StopReason) {
        self.message.stop_reason = reason;
    }

    /// The stop reason so far.
    pub fn stop_reason(&self) -> StopReason {
        self.message.stop_reason
    }

    /// Sets the error message (for a stop reason that is an error).
    pub fn set_error_message(&mut self, message: impl Into<String>) {
        self.message.error_message = Some(message.into());
    }

    /// Sets the server's response id, unless one is set.
    pub fn set_response_id(&mut self, id: &str) {
        if self.message.response_id.is_none() && !id.is_empty() {
            self.message.response_id = Some(Arc::from(id));
        }
    }

    /// Records the model the server says answered, when it differs from the
    /// one asked.
    pub fn set_response_model(&mut self, model: &str) {
        if self.message.response_model.is_none()
            && !model.is_empty()
            && model != &*self.message.model
        {
            self.message.response_model = Some(Arc::from(model));
        }
    }

    /// Records a diagnostic on the message.
    pub fn add_diagnostic(&mut self, diagnostic: Diagnostic) {
        self.message
            .diagnostics
            .get_or_insert_with(Vec::new)
            .push(diagnostic);
    }

    fn tool_call_at(&self, index: usize) -> Option<ToolCall> {
        match self.blocks.get(index) {
            Some(Block::Tool {
                id,
                name,
                raw,
                arguments,
                signature,
                ..
            }) => Some(ToolCall {
                id: Arc::from(id.as_deref().unwrap_or_default()),
                name: Arc::from(name.as_deref().unwrap_or_default()),
                arguments: Arc::new(match arguments {
                    Some(a) => a.clone(),
                    None => parse_arguments(raw).unwrap_or_default(),
                }),
                thought_signature: signature.as_deref().map(Arc::from),
            }),
            _ => None,
        }
    }

    /// The message as it stands: content so far (open tool calls with their
    /// arguments parsed as far as they are valid), usage, stop reason.
    pub fn partial(&self) -> AssistantMessage {
        let mut message = self.message.clone();
        let mut placed: Vec<(usize, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(block, slot)| slot.map(|s| (s, block)))
            .collect();
        placed.sort_unstable();
        message.content = placed
            .into_iter()
            .filter_map(|(_, block)| self.block_at(block))
            .collect();
        message
    }

    fn block_at(&self, index: usize) -> Option<AssistantBlock> {
        Some(match self.blocks.get(index)? {
            Block::Text { text, signature } => AssistantBlock::Text(TextContent {
                text: text.shared(),
                text_signature: signature.as_deref().map(Arc::from),
            }),
            Block::Thinking {
                text,
                signature,
                redacted,
            } => AssistantBlock::Thinking(ThinkingContent {
                thinking: text.shared(),
                thinking_signature: signature.as_deref().map(Arc::from),
                redacted: redacted.then_some(true),
            }),
            Block::Tool { .. } => AssistantBlock::ToolCall(self.tool_call_at(index)?),
        })
    }

    /// Ends the message normally: closes open blocks and queues `done`, or
    /// `error` when the stop reason is `error` or `aborted`.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.start();
        match self.message.stop_reason {
            StopReason::Error => {
                let message = self
                    .message
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "Provider returned an error stop reason".to_string());
                self.fail(&ProviderError::Refused { message });
            }
            StopReason::Aborted => self.fail(&ProviderError::Aborted),
            reason => {
                self.close_all();
                self.finished = true;
                let message = self.partial();
                self.events.push(AssistantEvent::Done {
                    reason,
                    message: Arc::new(message),
                });
            }
        }
    }

    /// Ends the message in failure: keeps the content so far, closes open
    /// text and thinking blocks (an unfinished tool call gets no
    /// `toolcall_end`: it must not run), and queues `error` with
    /// `stopReason: "aborted"` for [`ProviderError::Aborted`], else `"error"`.
    pub fn fail(&mut self, error: &ProviderError) {
        if self.finished {
            return;
        }
        self.close_open_text_and_thinking();
        let timestamp = self.message.timestamp;
        let unannounced: Vec<Diagnostic> = self
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Tool {
                    id,
                    raw,
                    announced: false,
                    ..
                } => Some(incomplete_call_diagnostic(id.as_deref(), raw, timestamp)),
                _ => None,
            })
            .collect();
        for d in unannounced {
            self.add_diagnostic(d);
        }
        self.finished = true;
        let kind = error.kind();
        let reason = if kind == ErrorKind::Aborted {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        self.message.stop_reason = reason;
        self.message.error_message = Some(error.to_string());
        let message = self.partial();
        self.events.push(AssistantEvent::Error {
            reason,
            kind,
            error: Arc::new(message),
        });
    }
}

/// Parses tool-call argument text: empty text is `{}`; raw control
/// characters inside strings are repaired as pi-ai repairs them; anything
/// that is still not a JSON object is an error.
pub fn parse_arguments(raw: &str) -> Result<Map<String, Value>, String> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    let parsed = serde_json::from_str::<Value>(raw).or_else(|first| {
        let repaired = repair_json(raw);
        if repaired == raw {
            Err(first)
        } else {
            serde_json::from_str::<Value>(&repaired)
        }
    });
    match parsed {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("tool arguments are not a JSON object: {other}")),
        Err(e) => Err(format!("invalid tool arguments JSON: {e}")),
    }
}

/// Escapes raw control characters inside JSON strings and doubles
/// backslashes before characters that are not valid escapes.
fn repair_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 8);
    let mut in_string = false;
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if !in_string {
            out.push(c);
            in_string = c == '"';
            continue;
        }
        match c {
            '"' => {
                out.push(c);
                in_string = false;
            }
            '\\' => match chars.peek() {
                Some(&n) if "\"\\/bfnrtu".contains(n) => {
                    out.push('\\');
                    out.push(n);
                    chars.next();
                }
                _ => out.push_str("\\\\"),
            },
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn invalid_arguments_diagnostic(
    id: &str,
    name: &str,
    raw: &str,
    error: &str,
    timestamp: i64,
) -> Diagnostic {
    let mut details = Map::new();
    details.insert("toolCallId".into(), Value::from(id));
    details.insert("toolName".into(), Value::from(name));
    details.insert("rawArguments".into(), Value::from(raw));
    Diagnostic {
        kind: "invalid_tool_arguments".to_string(),
        timestamp,
        error: Some(serde_json::json!({ "message": error })),
        details: Some(details),
    }
}

fn missing_id_diagnostic(timestamp: i64) -> Diagnostic {
    Diagnostic {
        kind: "missing_tool_call_id".to_string(),
        timestamp,
        error: Some(serde_json::json!({
            "message": "the server sent a tool call without an id; one was generated"
        })),
        details: None,
    }
}

fn incomplete_call_diagnostic(id: Option<&str>, raw: &str, timestamp: i64) -> Diagnostic {
    let mut details = Map::new();
    if let Some(id) = id {
        details.insert("toolCallId".into(), Value::from(id));
    }
    details.insert("rawArguments".into(), Value::from(raw));
    Diagnostic {
        kind: "incomplete_tool_call".to_string(),
        timestamp,
        error: Some(serde_json::json!({
            "message": "a tool call never got its name (or id) and was left out"
        })),
        details: Some(details),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::OPENAI_COMPLETIONS;

    fn asm() -> Assembler {
        Assembler::new(&Model::new(OPENAI_COMPLETIONS, "p", "m", "http://x"), 7)
    }

    #[test]
    fn tool_call_is_announced_once_id_and_name_are_known() {
        let mut a = asm();
        let i = a.open_tool_call(None, None);
        a.tool_call_delta(i, "{\"a\":");
        a.tool_call_id(i, "call_9");
        a.tool_call_delta(i, "1}");
        a.tool_call_name(i, "f");
        a.close(i);
        let events = a.take_events();
        assert!(
            matches!(&events[1], AssistantEvent::ToolCallStart { id, name, .. } if &**id == "call_9" && &**name == "f")
        );
        assert!(
            matches!(&events[2], AssistantEvent::ToolCallDelta { delta, .. } if &**delta == "{\"a\":1}")
        );
        let AssistantEvent::ToolCallEnd { tool_call, .. } = &events[3] else {
            panic!("{events:?}")
        };
        assert_eq!(tool_call.arguments["a"], 1);
    }

    #[test]
    fn invalid_arguments_keep_raw_text_in_a_diagnostic() {
        let mut a = asm();
        let i = a.open_tool_call(Some("c"), Some("f"));
        a.tool_call_delta(i, "{\"a\": tru");
        a.set_stop_reason(StopReason::ToolUse);
        a.finish();
        let m = a.partial();
        assert!(m.tool_calls().next().unwrap().arguments.is_empty());
        let d = &m.diagnostics.unwrap()[0];
        assert_eq!(d.kind, "invalid_tool_arguments");
        assert_eq!(d.details.as_ref().unwrap()["rawArguments"], "{\"a\": tru");
    }

    #[test]
    fn a_call_that_never_gets_its_name_takes_no_place() {
        let mut a = asm();
        let nameless = a.open_tool_call(Some("c0"), None);
        a.tool_call_delta(nameless, "{}");
        let t = a.open_text();
        a.text_delta(t, "x");
        a.set_stop_reason(StopReason::Stop);
        a.finish();
        let events = a.take_events();
        assert!(matches!(
            events[1],
            AssistantEvent::TextStart { content_index: 0 }
        ));
        let AssistantEvent::Done { message, .. } = events.last().unwrap() else {
            panic!()
        };
        assert_eq!(message.content.len(), 1);
        assert_eq!(
            message.diagnostics.as_ref().unwrap()[0].kind,
            "incomplete_tool_call"
        );
        assert!(crate::validate::validate_events(&events).is_empty());
    }

    #[test]
    fn arguments_parse_with_repair() {
        assert!(parse_arguments("  ").unwrap().is_empty());
        assert_eq!(parse_arguments("{\"a\":\"x\ny\"}").unwrap()["a"], "x\ny");
        assert!(parse_arguments("[1]").is_err());
    }

    #[test]
    fn failure_keeps_content_and_does_not_end_unfinished_tool_calls() {
        let mut a = asm();
        let t = a.open_text();
        a.text_delta(t, "hi");
        let c = a.open_tool_call(Some("c"), Some("f"));
        a.tool_call_delta(c, "{\"p\":");
        a.fail(&ProviderError::Network {
            message: "reset".into(),
        });
        let events = a.take_events();
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, AssistantEvent::ToolCallEnd { .. }))
        );
        let AssistantEvent::Error {
            reason,
            kind,
            error,
        } = events.last().unwrap()
        else {
            panic!()
        };
        assert_eq!((*reason, *kind), (StopReason::Error, ErrorKind::Network));
        assert_eq!(error.text(), "hi");
        assert_eq!(error.error_message.as_deref(), Some("network error: reset"));
    }
}
