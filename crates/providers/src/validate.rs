//! A validator of event streams: the grammar every provider must follow,
//! checked in the tests of every adapter (and usable by hosts' tests).

use std::collections::BTreeMap;

use crate::content::AssistantBlock;
use crate::event::AssistantEvent;

/// Checks that `events` form one well-made stream:
///
/// - exactly one terminal event (`done` or `error`), and it is the last;
/// - `start` first when present, at most once;
/// - every block's deltas come between its `*_start` and `*_end`, each
///   start and end at most once, and the deltas concatenate to the block's
///   text in the final message;
/// - every tool call is started with its id and name, completed at most once
///   and after its deltas, and on `done` every tool call is completed;
/// - the final message's content has one block per started index.
///
/// Returns every violation found (empty when the stream is valid).
pub fn validate_events(events: &[AssistantEvent]) -> Vec<String> {
    let mut problems = Vec::new();
    check_framing(events, &mut problems);
    let blocks = stream_blocks(events, &mut problems);
    if let Some(terminal) = events.last().filter(|e| e.is_terminal()) {
        check_final(terminal, &blocks, &mut problems);
    }
    problems
}

/// Exactly one terminal event, last; `start` at most once, first.
fn check_framing(events: &[AssistantEvent], problems: &mut Vec<String>) {
    let terminals = events.iter().filter(|e| e.is_terminal()).count();
    if terminals != 1 {
        problems.push(format!("{terminals} terminal events (expected exactly 1)"));
    }
    if let Some(last) = events.last()
        && !last.is_terminal()
    {
        problems.push("the last event is not terminal".to_string());
    }
    let starts = events
        .iter()
        .filter(|e| matches!(e, AssistantEvent::Start))
        .count();
    if starts > 1 || (starts == 1 && !matches!(events.first(), Some(AssistantEvent::Start))) {
        problems.push("start is not the first event or comes twice".to_string());
    }
}

/// What the stream said about one content block.
#[derive(Default)]
struct Seen {
    kind: &'static str,
    started: bool,
    ended: bool,
    text: String,
    end_content: Option<String>,
    tool_id: Option<String>,
}

/// Each streamed block by content index, checking its events' order.
fn stream_blocks(events: &[AssistantEvent], problems: &mut Vec<String>) -> BTreeMap<usize, Seen> {
    let mut blocks: BTreeMap<usize, Seen> = BTreeMap::new();
    for (n, event) in events.iter().enumerate() {
        let Some(index) = event.content_index() else {
            continue;
        };
        let seen = blocks.entry(index).or_default();
        let kind = block_kind(event);
        if seen.kind.is_empty() {
            seen.kind = kind;
        } else if seen.kind != kind {
            problems.push(format!("event {n}: block {index} changes kind to {kind}"));
        }
        seen.observe(n, index, event, problems);
    }
    blocks
}

/// The kind of block a block event belongs to.
fn block_kind(event: &AssistantEvent) -> &'static str {
    match event {
        AssistantEvent::TextStart { .. }
        | AssistantEvent::TextDelta { .. }
        | AssistantEvent::TextEnd { .. } => "text",
        AssistantEvent::ThinkingStart { .. }
        | AssistantEvent::ThinkingDelta { .. }
        | AssistantEvent::ThinkingEnd { .. } => "thinking",
        _ => "toolCall",
    }
}

impl Seen {
    /// Records event `n`, for block `index`, checking it comes in order.
    fn observe(
        &mut self,
        n: usize,
        index: usize,
        event: &AssistantEvent,
        problems: &mut Vec<String>,
    ) {
        match event {
            AssistantEvent::TextStart { .. }
            | AssistantEvent::ThinkingStart { .. }
            | AssistantEvent::ToolCallStart { .. } => {
                if self.started {
                    problems.push(format!("event {n}: block {index} started twice"));
                }
                self.started = true;
                if let AssistantEvent::ToolCallStart { id, name, .. } = event {
                    if id.is_empty() || name.is_empty() {
                        problems.push(format!(
                            "event {n}: tool call {index} starts without id or name"
                        ));
                    }
                    self.tool_id = Some(id.to_string());
                }
            }
            AssistantEvent::TextDelta { delta, .. }
            | AssistantEvent::ThinkingDelta { delta, .. }
            | AssistantEvent::ToolCallDelta { delta, .. } => {
                if !self.started || self.ended {
                    problems.push(format!("event {n}: delta outside block {index}"));
                }
                self.text.push_str(delta);
            }
            AssistantEvent::TextEnd { content, .. }
            | AssistantEvent::ThinkingEnd { content, .. } => {
                if !self.started || self.ended {
                    problems.push(format!(
                        "event {n}: end of block {index} unstarted or repeated"
                    ));
                }
                self.ended = true;
                self.end_content = Some(content.to_string());
            }
            AssistantEvent::ToolCallEnd { tool_call, .. } => {
                if !self.started || self.ended {
                    problems.push(format!(
                        "event {n}: end of tool call {index} unstarted or repeated"
                    ));
                }
                self.ended = true;
                if self.tool_id.as_deref() != Some(&*tool_call.id) {
                    problems.push(format!("event {n}: tool call {index} ends with another id"));
                }
            }
            _ => {}
        }
    }
}

/// The terminal event's message against its stop reason and the streamed
/// blocks.
fn check_final(
    terminal: &AssistantEvent,
    blocks: &BTreeMap<usize, Seen>,
    problems: &mut Vec<String>,
) {
    let Some(message) = terminal.final_message() else {
        return;
    };
    let is_done = matches!(terminal, AssistantEvent::Done { .. });
    if is_done && message.stop_reason.is_failure() {
        problems.push("done with a failure stop reason".to_string());
    }
    if !is_done && !message.stop_reason.is_failure() {
        problems.push("error with a success stop reason".to_string());
    }
    if !is_done && message.error_message.is_none() {
        problems.push("error without errorMessage".to_string());
    }
    if message.content.len() != blocks.len() {
        problems.push(format!(
            "final message has {} blocks but {} were streamed",
            message.content.len(),
            blocks.len()
        ));
    }
    for (index, seen) in blocks {
        let Some(block) = message.content.get(*index) else {
            problems.push(format!("block {index} missing from the final message"));
            continue;
        };
        check_block(*index, seen, block, is_done, problems);
    }
}

/// One final block against what was streamed for it.
fn check_block(
    index: usize,
    seen: &Seen,
    block: &AssistantBlock,
    is_done: bool,
    problems: &mut Vec<String>,
) {
    match block {
        AssistantBlock::Text(t) => {
            if seen.text != *t.text {
                problems.push(format!("text deltas of block {index} do not make its text"));
            }
            if seen.end_content.as_deref().is_some_and(|c| c != &*t.text) {
                problems.push(format!(
                    "text_end of block {index} differs from the final text"
                ));
            }
        }
        AssistantBlock::Thinking(t) => {
            if !t.is_redacted() && seen.text != *t.thinking {
                problems.push(format!(
                    "thinking deltas of block {index} do not make its text"
                ));
            }
        }
        AssistantBlock::ToolCall(call) => {
            if is_done && !seen.ended {
                problems.push(format!("tool call {index} never completed"));
            }
            if seen.tool_id.as_deref() != Some(&*call.id) {
                problems.push(format!(
                    "tool call {index} has another id in the final message"
                ));
            }
        }
    }
    if is_done && !seen.ended {
        problems.push(format!("block {index} never ended"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AssistantMessage, StopReason};

    #[test]
    fn catches_two_terminals_and_stray_deltas() {
        let done = AssistantEvent::Done {
            reason: StopReason::Stop,
            message: AssistantMessage::empty("a", "p", "m", 0).into(),
        };
        let events = vec![
            AssistantEvent::Start,
            AssistantEvent::TextDelta {
                content_index: 0,
                delta: "x".into(),
            },
            done.clone(),
            done,
        ];
        let problems = validate_events(&events);
        assert!(problems.iter().any(|p| p.contains("terminal")));
        assert!(problems.iter().any(|p| p.contains("delta outside")));
    }
}
