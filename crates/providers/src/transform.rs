//! Preparing a conversation for a model before it is mapped to a wire
//! format, as pi-ai's `transformMessages`: drop failed assistant turns, turn
//! another model's reasoning into text, normalise tool-call ids, and keep
//! calls and results paired.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::content::{AssistantBlock, TextContent, ToolCall, UserBlock};
use crate::message::{AssistantMessage, Message, ToolResultMessage};
use crate::model::{InputKind, Model};
use crate::user_message::{UserContent, UserMessage};

const USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";
const TOOL_IMAGE_PLACEHOLDER: &str = "(tool image omitted: model does not support images)";

/// The messages to send to `model`:
///
/// - assistant messages that ended in `error` or `aborted` are dropped;
/// - reasoning from another model becomes text (empty reasoning and another
///   model's redacted reasoning are dropped), and another model's tool-call
///   signatures are dropped;
/// - tool-call ids are rewritten by `normalize_id` (for another model's calls)
///   and their results follow;
/// - a call without a result gets an error result `No result provided`, and
///   a result without its call is dropped, so the request never holds one
///   without the other;
/// - images become a placeholder when the model takes no images.
pub(crate) fn transform_messages(
    messages: &[Message],
    model: &Model,
    normalize_id: &dyn Fn(&str) -> String,
) -> Vec<Message> {
    let images = model.input.contains(&InputKind::Image);
    let mut id_map: HashMap<Arc<str>, Arc<str>> = HashMap::new();
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<ToolCall> = Vec::new();
    let mut answered: HashSet<Arc<str>> = HashSet::new();
    for message in messages {
        match message {
            Message::User(user) => {
                answer_missing(&mut out, &mut pending, &mut answered);
                out.push(Message::User(user_for(user, images)));
            }
            Message::Assistant(assistant) => {
                answer_missing(&mut out, &mut pending, &mut answered);
                if assistant.stop_reason.is_failure() {
                    continue;
                }
                let converted = convert_assistant(assistant, model, normalize_id, &mut id_map);
                pending = converted.tool_calls().cloned().collect();
                out.push(Message::Assistant(converted));
            }
            Message::ToolResult(result) => {
                let id = id_map
                    .get(&result.tool_call_id)
                    .cloned()
                    .unwrap_or_else(|| result.tool_call_id.clone());
                let known = pending.iter().any(|c| c.id == id);
                if !known || answered.contains(&id) {
                    // A result whose call is not the last assistant turn's
                    // (or a second result for one call): the APIs reject it.
                    continue;
                }
                answered.insert(id.clone());
                out.push(result_for(result, id, images));
            }
        }
    }
    answer_missing(&mut out, &mut pending, &mut answered);
    out
}

/// Ends the last assistant turn's calls: each call in `pending` without a
/// result in `answered` gets an error result `No result provided`.
fn answer_missing(
    out: &mut Vec<Message>,
    pending: &mut Vec<ToolCall>,
    answered: &mut HashSet<Arc<str>>,
) {
    for call in pending.drain(..) {
        if !answered.contains(&call.id) {
            out.push(Message::from(ToolResultMessage {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                content: vec![UserBlock::text("No result provided")],
                details: None,
                is_error: true,
                timestamp: 0,
            }));
        }
    }
    answered.clear();
}

/// A user message as sent: shared unchanged, or with its images replaced
/// when the model takes none.
fn user_for(user: &Arc<UserMessage>, images: bool) -> Arc<UserMessage> {
    let has_images = matches!(&user.content, UserContent::Blocks(blocks)
        if blocks.iter().any(|b| matches!(b, UserBlock::Image(_))));
    if images || !has_images {
        // Unchanged: share it.
        user.clone()
    } else {
        Arc::new(downgrade_user(user))
    }
}

/// A tool result as sent: under its call's id `id`, with its images
/// replaced when the model takes none (shared when nothing changes).
fn result_for(result: &Arc<ToolResultMessage>, id: Arc<str>, images: bool) -> Message {
    let has_images = result
        .content
        .iter()
        .any(|b| matches!(b, UserBlock::Image(_)));
    if id == result.tool_call_id && (images || !has_images) {
        // Unchanged: share it.
        return Message::ToolResult(result.clone());
    }
    let mut result = ToolResultMessage::clone(result);
    result.tool_call_id = id;
    if !images {
        result.content = downgrade_blocks(&result.content, TOOL_IMAGE_PLACEHOLDER);
    }
    Message::from(result)
}

fn convert_assistant(
    assistant: &Arc<AssistantMessage>,
    model: &Model,
    normalize_id: &dyn Fn(&str) -> String,
    id_map: &mut HashMap<Arc<str>, Arc<str>>,
) -> Arc<AssistantMessage> {
    let same_model = *assistant.provider == *model.provider
        && *assistant.api == *model.api.as_str()
        && *assistant.model == *model.id;
    // The model's own message goes back as it is unless it holds empty
    // reasoning to drop: then it is shared, not copied.
    let empty_reasoning = |b: &AssistantBlock| {
        matches!(b, AssistantBlock::Thinking(t)
            if !t.is_redacted() && t.thinking_signature.is_none() && t.thinking.trim().is_empty())
    };
    if same_model && !assistant.content.iter().any(empty_reasoning) {
        return assistant.clone();
    }
    let mut converted = AssistantMessage::clone(assistant);
    converted.content = assistant
        .content
        .iter()
        .filter_map(|block| match block {
            AssistantBlock::Thinking(t) => {
                if t.is_redacted() {
                    return same_model.then(|| block.clone());
                }
                if same_model && t.thinking_signature.is_some() {
                    return Some(block.clone());
                }
                if t.thinking.trim().is_empty() {
                    return None;
                }
                if same_model {
                    return Some(block.clone());
                }
                Some(AssistantBlock::Text(TextContent::new(t.thinking.clone())))
            }
            AssistantBlock::Text(t) => Some(if same_model {
                block.clone()
            } else {
                AssistantBlock::Text(TextContent::new(t.text.clone()))
            }),
            AssistantBlock::ToolCall(call) => {
                let mut call = call.clone();
                if !same_model {
                    call.thought_signature = None;
                    let normalized = normalize_id(&call.id);
                    if *normalized != *call.id {
                        let normalized: Arc<str> = normalized.into();
                        id_map.insert(call.id.clone(), normalized.clone());
                        call.id = normalized;
                    }
                }
                Some(AssistantBlock::ToolCall(call))
            }
        })
        .collect();
    Arc::new(converted)
}

fn downgrade_user(user: &UserMessage) -> UserMessage {
    match &user.content {
        UserContent::Text(_) => user.clone(),
        UserContent::Blocks(blocks) => UserMessage {
            content: UserContent::Blocks(downgrade_blocks(blocks, USER_IMAGE_PLACEHOLDER)),
            timestamp: user.timestamp,
        },
    }
}

fn downgrade_blocks(blocks: &[UserBlock], placeholder: &str) -> Vec<UserBlock> {
    let mut out = Vec::with_capacity(blocks.len());
    let mut previous_placeholder = false;
    for block in blocks {
        match block {
            UserBlock::Image(_) => {
                if !previous_placeholder {
                    out.push(UserBlock::text(placeholder));
                }
                previous_placeholder = true;
            }
            UserBlock::Text(t) => {
                previous_placeholder = &*t.text == placeholder;
                out.push(block.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::StopReason;
    use crate::wire::OPENAI_COMPLETIONS;

    fn model() -> Model {
        Model::new(OPENAI_COMPLETIONS, "openai", "gpt", "http://x")
    }

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "read", serde_json::Map::new())
    }

    #[test]
    fn pairs_calls_with_results() {
        let mut a = AssistantMessage::empty(OPENAI_COMPLETIONS, "openai", "gpt", 1);
        a.content.push(AssistantBlock::ToolCall(call("c1")));
        a.content.push(AssistantBlock::ToolCall(call("c2")));
        a.stop_reason = StopReason::ToolUse;
        let messages = vec![
            Message::from(UserMessage::text("hi", 0)),
            Message::from(a.clone()),
            Message::from(ToolResultMessage::text(&call("c1"), "ok", false, 2)),
            Message::from(ToolResultMessage::text(&call("zz"), "orphan", false, 2)),
            Message::from(UserMessage::text("next", 3)),
        ];
        let out = transform_messages(&messages, &model(), &|id| id.to_string());
        let roles: Vec<String> = out
            .iter()
            .map(|m| match m {
                Message::User(_) => "user".to_string(),
                Message::Assistant(_) => "assistant".to_string(),
                Message::ToolResult(r) => format!("result:{}", r.tool_call_id),
            })
            .collect();
        assert_eq!(
            roles,
            ["user", "assistant", "result:c1", "result:c2", "user"]
        );
    }

    #[test]
    fn drops_failed_turns_and_converts_foreign_thinking() {
        let mut failed = AssistantMessage::empty(OPENAI_COMPLETIONS, "openai", "gpt", 1);
        failed.stop_reason = StopReason::Error;
        let mut foreign = AssistantMessage::empty("anthropic-messages", "anthropic", "claude", 1);
        foreign.content.push(AssistantBlock::Thinking(
            crate::content::ThinkingContent::new("hmm"),
        ));
        let out = transform_messages(
            &[Message::from(failed), Message::from(foreign)],
            &model(),
            &|id| id.to_string(),
        );
        assert_eq!(out.len(), 1);
        let Message::Assistant(a) = &out[0] else {
            panic!()
        };
        assert!(matches!(&a.content[0], AssistantBlock::Text(t) if &*t.text == "hmm"));
    }
}
