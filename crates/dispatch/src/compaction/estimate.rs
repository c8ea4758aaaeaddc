//! Token estimates: about four characters a token, an image a fixed amount,
//! and the provider's own count of the last request when it can be trusted.
//!
//! The estimate is deliberately simple and deterministic: it only has to
//! tell when a conversation nears the model's window, with a reserve to
//! spare, and it errs on the high side for code and prose alike.

use roundtable_providers::{
    AssistantBlock, Message, Model, ToolDefinition, UserBlock, UserContent,
};

use crate::projection::COMPACTION_PREFIX;

/// Characters counted as one token.
pub const CHARS_PER_TOKEN: u64 = 4;

/// Tokens counted for an image (pi's estimate: 4,800 characters).
pub const IMAGE_TOKENS: u64 = 1_200;

/// The tokens of `text`: its characters / 4, rounded up.
///
/// ```
/// use roundtable_dispatch::text_tokens;
///
/// assert_eq!(text_tokens(""), 0);
/// assert_eq!(text_tokens("hello"), 2);
/// assert_eq!(text_tokens("ünï"), 1); // characters, not bytes
/// ```
pub fn text_tokens(text: &str) -> u64 {
    chars(text).div_ceil(CHARS_PER_TOKEN)
}

fn chars(text: &str) -> u64 {
    u64::try_from(text.chars().count()).unwrap_or(u64::MAX)
}

/// The tokens one message adds to a request: its text, thinking, tool
/// calls (name and arguments as JSON) and tool results, characters / 4
/// rounded up per message, plus [`IMAGE_TOKENS`] per image.
pub fn message_tokens(message: &Message) -> u64 {
    let (chars_total, images) = match message {
        Message::User(user) => match &user.content {
            UserContent::Text(text) => (chars(text), 0),
            UserContent::Blocks(blocks) => blocks_size(blocks),
        },
        Message::Assistant(assistant) => {
            let chars_total = assistant
                .content
                .iter()
                .map(|block| match block {
                    AssistantBlock::Text(t) => chars(&t.text),
                    AssistantBlock::Thinking(t) => chars(&t.thinking),
                    AssistantBlock::ToolCall(call) => chars(&call.name).saturating_add(
                        serde_json::to_string(&*call.arguments).map_or(0, |json| chars(&json)),
                    ),
                })
                .fold(0u64, u64::saturating_add);
            (chars_total, 0)
        }
        Message::ToolResult(result) => blocks_size(&result.content),
    };
    chars_total
        .div_ceil(CHARS_PER_TOKEN)
        .saturating_add(images.saturating_mul(IMAGE_TOKENS))
}

/// The characters of the text blocks and the number of images.
pub(crate) fn blocks_size(blocks: &[UserBlock]) -> (u64, u64) {
    blocks
        .iter()
        .fold((0u64, 0u64), |(c, i), block| match block {
            UserBlock::Text(t) => (c.saturating_add(chars(&t.text)), i),
            UserBlock::Image(_) => (c, i.saturating_add(1)),
        })
}

/// The tokens of several messages.
pub fn messages_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(message_tokens)
        .fold(0, u64::saturating_add)
}

/// The fixed part of every request: the system prompt and the tools'
/// names, descriptions and schemas.
pub fn overhead_tokens(system_prompt: Option<&str>, tools: &[ToolDefinition]) -> u64 {
    let tools_chars = tools
        .iter()
        .map(|t| {
            chars(&t.name)
                .saturating_add(chars(&t.description))
                .saturating_add(serde_json::to_string(&t.parameters).map_or(0, |json| chars(&json)))
        })
        .fold(0u64, u64::saturating_add);
    text_tokens(system_prompt.unwrap_or_default())
        .saturating_add(tools_chars.div_ceil(CHARS_PER_TOKEN))
}

/// How large a request is estimated to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextEstimate {
    /// The estimated tokens of the whole request.
    pub tokens: u64,
    /// True when the provider's count of an earlier request of this
    /// conversation is part of it (the rest is counted by characters).
    pub from_usage: bool,
}

/// Estimates the request that sends `messages` to `model`, with `overhead`
/// tokens of system prompt and tools.
///
/// When the last successful assistant message came from the same model
/// (provider and id) and is newer than the conversation's compaction
/// summary (when it opens with one), its usage counts everything up to it,
/// the fixed part included, and only the messages after it are estimated:
/// that is the provider's own count of the request it answered. Otherwise
/// (another model, no usage reported, or a message kept from before the
/// summary, whose count still includes what the summary replaced) every
/// message is estimated, plus `overhead`.
///
/// ```
/// use roundtable_dispatch::{estimate_context, text_tokens};
/// use roundtable_providers::{AssistantBlock, AssistantMessage, Message, Model, UserMessage, OPENAI_COMPLETIONS};
///
/// let model = Model::new(OPENAI_COMPLETIONS, "p", "m", "");
/// let mut answer = AssistantMessage::for_model(&model, 1_000);
/// answer.content.push(AssistantBlock::text("sure"));
/// answer.usage.input = 5_000;
/// answer.usage.total_tokens = 5_010;
/// let messages = vec![
///     Message::from(UserMessage::text("a long question", 900)),
///     Message::from(answer),
///     Message::from(UserMessage::text("and then?", 2_000)),
/// ];
/// let estimate = estimate_context(&messages, 300, &model);
/// assert!(estimate.from_usage);
/// assert_eq!(estimate.tokens, 5_010 + text_tokens("and then?"));
/// ```
pub fn estimate_context(messages: &[Message], overhead: u64, model: &Model) -> ContextEstimate {
    if let Some((at, tokens)) = trusted_usage(messages, model) {
        let after = messages_tokens(&messages[at + 1..]);
        return ContextEstimate {
            tokens: tokens.saturating_add(after),
            from_usage: true,
        };
    }
    ContextEstimate {
        tokens: overhead.saturating_add(messages_tokens(messages)),
        from_usage: false,
    }
}

/// The index and reported context tokens of the last successful assistant
/// message, when its count can stand for everything up to it.
fn trusted_usage(messages: &[Message], model: &Model) -> Option<(usize, u64)> {
    let (at, message) = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m {
            Message::Assistant(a) if !a.stop_reason.is_failure() => Some((i, a)),
            _ => None,
        })?;
    if *message.provider != *model.provider || *message.model != *model.id {
        return None;
    }
    if summary_time(messages).is_some_and(|boundary| message.timestamp <= boundary) {
        return None;
    }
    let usage = &message.usage;
    let tokens = if usage.total_tokens > 0 {
        usage.total_tokens
    } else {
        usage
            .input
            .saturating_add(usage.output)
            .saturating_add(usage.cache_read)
            .saturating_add(usage.cache_write)
    };
    (tokens > 0).then_some((at, tokens))
}

/// When the conversation opens with a compaction summary, the time of the
/// compaction.
fn summary_time(messages: &[Message]) -> Option<i64> {
    let Some(Message::User(first)) = messages.first() else {
        return None;
    };
    let opens_with_summary = match &first.content {
        UserContent::Text(t) => t.starts_with(COMPACTION_PREFIX),
        UserContent::Blocks(blocks) => {
            matches!(blocks.first(), Some(UserBlock::Text(t)) if t.text.starts_with(COMPACTION_PREFIX))
        }
    };
    opens_with_summary.then_some(first.timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_providers::{
        AssistantMessage, ImageContent, OPENAI_COMPLETIONS, StopReason, ToolCall,
        ToolResultMessage, UserMessage,
    };

    fn model() -> Model {
        Model::new(OPENAI_COMPLETIONS, "p", "m", "")
    }

    fn answer(at: i64, total: u64) -> Message {
        let mut a = AssistantMessage::for_model(&model(), at);
        a.content.push(AssistantBlock::text("ok"));
        a.usage.total_tokens = total;
        Message::from(a)
    }

    #[test]
    fn every_kind_of_content_counts() {
        let image = UserBlock::Image(ImageContent {
            data: "AAAA".into(),
            mime_type: "image/png".into(),
        });
        let user = Message::from(UserMessage::blocks(
            vec![UserBlock::text("12345678"), image.clone()],
            0,
        ));
        assert_eq!(message_tokens(&user), 2 + IMAGE_TOKENS);
        let mut call = AssistantMessage::for_model(&model(), 0);
        call.content.push(AssistantBlock::ToolCall(ToolCall::new(
            "c1",
            "ls",
            serde_json::Map::new(),
        )));
        // "ls" + "{}"
        assert_eq!(message_tokens(&Message::from(call)), 1);
        let result = Message::from(ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: "ls".into(),
            content: vec![UserBlock::text("a".repeat(9)), image],
            details: None,
            is_error: false,
            timestamp: 0,
        });
        assert_eq!(message_tokens(&result), 3 + IMAGE_TOKENS);
    }

    #[test]
    fn usage_counts_only_when_newer_than_the_summary_and_from_the_same_model() {
        let summary = Message::from(UserMessage::text(
            format!("{COMPACTION_PREFIX}earlier"),
            5_000,
        ));
        let after = Message::from(UserMessage::text("next", 7_000));
        // Kept from before the compaction: its count is stale.
        let stale = vec![summary.clone(), answer(4_000, 90_000), after.clone()];
        let e = estimate_context(&stale, 10, &model());
        assert!(!e.from_usage);
        assert_eq!(e.tokens, 10 + messages_tokens(&stale));
        let fresh = vec![summary, answer(6_000, 3_000), after.clone()];
        let e = estimate_context(&fresh, 10, &model());
        assert!(e.from_usage);
        assert_eq!(e.tokens, 3_000 + message_tokens(&after));
        // Another model's count says nothing about this one's.
        let mut other =
            AssistantMessage::for_model(&Model::new(OPENAI_COMPLETIONS, "p", "other", ""), 6_000);
        other.usage.total_tokens = 3_000;
        let e = estimate_context(&[Message::from(other)], 10, &model());
        assert!(!e.from_usage);
        // A failed message's usage is skipped, and so is no usage at all.
        let mut failed = AssistantMessage::for_model(&model(), 6_000);
        failed.stop_reason = StopReason::Error;
        failed.usage.total_tokens = 50;
        let e = estimate_context(&[answer(1, 0), Message::from(failed)], 0, &model());
        assert!(!e.from_usage);
    }
}
