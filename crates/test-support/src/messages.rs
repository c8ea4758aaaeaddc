//! Reading messages in tests: the history validator, the text a model
//! reads, a one-line rendering of each message.

// A history that breaks its invariants must fail the test that checks it.
#![allow(clippy::panic)]

use std::collections::HashSet;

use roundtable_providers::{
    AssistantBlock, Message, TextContent, ToolResultMessage, UserBlock, UserContent,
};

/// Checks that every tool call has exactly one result after it, before the
/// next assistant or user message, and that every result answers an open
/// call.
///
/// # Panics
///
/// When the history breaks one of these rules, naming the call.
pub fn assert_history_valid(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    let mut answered = HashSet::new();
    for m in messages {
        match m {
            Message::Assistant(a) => {
                assert!(
                    open.is_empty(),
                    "calls {open:?} unanswered before the next assistant message"
                );
                open = a.tool_calls().map(|c| c.id.to_string()).collect();
            }
            Message::ToolResult(r) => {
                let id = r.tool_call_id.to_string();
                let Some(pos) = open.iter().position(|o| *o == id) else {
                    panic!("result {id} answers no open call");
                };
                open.remove(pos);
                assert!(answered.insert(id), "call answered twice");
            }
            Message::User(_) => assert!(
                open.is_empty(),
                "calls {open:?} unanswered before a user message"
            ),
        }
    }
    assert!(open.is_empty(), "calls {open:?} left without a result");
}

/// The tool results among `messages`, in order.
pub fn tool_results(messages: &[Message]) -> Vec<&ToolResultMessage> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

/// The text blocks of a tool result, one a line.
pub fn result_text(r: &ToolResultMessage) -> String {
    blocks_text(&r.content)
}

/// The text of a message as a model reads it (text blocks one a line).
pub fn message_text(m: &Message) -> String {
    match m {
        Message::User(u) => match &u.content {
            UserContent::Text(t) => t.to_string(),
            UserContent::Blocks(blocks) => blocks_text(blocks),
        },
        Message::Assistant(a) => a.text(),
        Message::ToolResult(r) => result_text(r),
    }
}

fn blocks_text(blocks: &[UserBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            UserBlock::Text(t) => Some(t.text.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line per message: `user: <block> | <block>`, `assistant: <block>, ...`,
/// `result <id>: <text>` (with `!` after `result` for an error).
pub fn render(messages: &[Message]) -> Vec<String> {
    messages.iter().map(render_one).collect()
}

fn render_one(m: &Message) -> String {
    match m {
        Message::User(u) => {
            let blocks = match &u.content {
                UserContent::Text(t) => vec![t.to_string()],
                UserContent::Blocks(b) => b.iter().map(render_block).collect(),
            };
            format!("user: {}", blocks.join(" | "))
        }
        Message::Assistant(a) => {
            let blocks: Vec<String> = a
                .content
                .iter()
                .map(|b| match b {
                    AssistantBlock::Text(TextContent { text, .. }) => text.to_string(),
                    AssistantBlock::Thinking(t) => format!("thinking({})", t.thinking),
                    AssistantBlock::ToolCall(c) => format!("call({})", c.id),
                })
                .collect();
            format!("assistant: {}", blocks.join(", "))
        }
        Message::ToolResult(r) => {
            let text: Vec<String> = r.content.iter().map(render_block).collect();
            format!(
                "result{} {}: {}",
                if r.is_error { "!" } else { "" },
                r.tool_call_id,
                text.join(" | ")
            )
        }
    }
}

fn render_block(b: &UserBlock) -> String {
    match b {
        UserBlock::Text(t) => t.text.to_string(),
        UserBlock::Image(i) => format!("image({})", i.mime_type),
    }
}
