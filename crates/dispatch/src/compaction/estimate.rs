//! Token estimates: about four characters a token, an image a fixed amount,
//! and the provider's own count of the last request when it can be trusted.
//!
//! The estimate is deliberately simple and deterministic: it only has to
//! tell when a conversation nears the model's window, with a reserve to
//! spare, and it errs on the high side for code and prose alike.

use std::sync::Arc;

use roundtable_providers::{AssistantBlock, Message, Model, ModelTool, UserBlock, UserContent};

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

/// An upper bound of [`text_tokens`] made without reading the text: its
/// bytes bound its characters.
///
/// ```
/// use roundtable_dispatch::{text_tokens, text_tokens_bound};
///
/// assert_eq!(text_tokens_bound("hello"), text_tokens("hello"));
/// assert!(text_tokens_bound("ünïcödé") >= text_tokens("ünïcödé"));
/// ```
pub fn text_tokens_bound(text: &str) -> u64 {
    Bytes::str(text).div_ceil(CHARS_PER_TOKEN)
}

fn chars(text: &str) -> u64 {
    u64::try_from(text.chars().count()).unwrap_or(u64::MAX)
}

/// How [`tokens_by`] sizes a message's parts: exactly ([`Chars`]) or from
/// above without reading the texts ([`Bytes`]). One walk over a message
/// serves both, so the bound covers every part the count does.
trait Measure {
    /// A text.
    fn str(text: &str) -> u64;
    /// A tool call's arguments as the JSON a request carries.
    fn arguments(arguments: &serde_json::Map<String, serde_json::Value>) -> u64;
}

/// The characters: the count itself.
struct Chars;

impl Measure for Chars {
    fn str(text: &str) -> u64 {
        chars(text)
    }

    fn arguments(arguments: &serde_json::Map<String, serde_json::Value>) -> u64 {
        serde_json::to_string(arguments).map_or(0, |json| chars(&json))
    }
}

/// The bytes, which bound the characters, and the arguments' JSON bounded
/// by its shape ([`json_chars_bound`]) rather than serialised.
struct Bytes;

impl Measure for Bytes {
    fn str(text: &str) -> u64 {
        len(text)
    }

    fn arguments(arguments: &serde_json::Map<String, serde_json::Value>) -> u64 {
        object_chars_bound(arguments)
    }
}

/// The tokens one message adds to a request: its text, thinking, tool
/// calls (name and arguments as JSON) and tool results, characters / 4
/// rounded up per message, plus [`IMAGE_TOKENS`] per image.
pub fn message_tokens(message: &Message) -> u64 {
    tokens_by::<Chars>(message)
}

/// The characters of the text blocks and the number of images.
pub(crate) fn blocks_size(blocks: &[UserBlock]) -> (u64, u64) {
    blocks_by::<Chars>(blocks)
}

/// [`message_tokens`] with each part sized by `M`.
fn tokens_by<M: Measure>(message: &Message) -> u64 {
    let (size, images) = match message {
        Message::User(user) => match &user.content {
            UserContent::Text(text) => (M::str(text), 0),
            UserContent::Blocks(blocks) => blocks_by::<M>(blocks),
        },
        Message::Assistant(assistant) => {
            let size = assistant
                .content
                .iter()
                .map(|block| match block {
                    AssistantBlock::Text(t) => M::str(&t.text),
                    AssistantBlock::Thinking(t) => M::str(&t.thinking),
                    AssistantBlock::ToolCall(call) => {
                        M::str(&call.name).saturating_add(M::arguments(&call.arguments))
                    }
                })
                .fold(0u64, u64::saturating_add);
            (size, 0)
        }
        Message::ToolResult(result) => blocks_by::<M>(&result.content),
    };
    size.div_ceil(CHARS_PER_TOKEN)
        .saturating_add(images.saturating_mul(IMAGE_TOKENS))
}

/// The size of the text blocks by `M` and the number of images.
fn blocks_by<M: Measure>(blocks: &[UserBlock]) -> (u64, u64) {
    blocks
        .iter()
        .fold((0u64, 0u64), |(c, i), block| match block {
            UserBlock::Text(t) => (c.saturating_add(M::str(&t.text)), i),
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

/// An upper bound of [`message_tokens`], made without reading the
/// message's texts: a text's bytes bound its characters, and a tool call's
/// arguments are bounded by their shape ([`json_chars_bound`]) rather than
/// serialised.
pub(crate) fn message_tokens_bound(message: &Message) -> u64 {
    tokens_by::<Bytes>(message)
}

/// A text's length in bytes, which bounds its characters.
fn len(text: &str) -> u64 {
    u64::try_from(text.len()).unwrap_or(u64::MAX)
}

/// An upper bound of the characters of `value` written as compact JSON
/// (as `serde_json::to_string` writes it), from its shape: a string takes
/// its quotes and at most six characters a byte (a control character is
/// written `\u00XX`; any other character, one or two); a number its own
/// text; an array or object its brackets, a comma an item, and a colon a
/// key.
fn json_chars_bound(value: &serde_json::Value) -> u64 {
    use serde_json::Value;
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(number) => number_chars(number),
        Value::String(text) => string_chars_bound(text),
        Value::Array(items) => items
            .iter()
            .map(|item| json_chars_bound(item).saturating_add(1))
            .fold(2, u64::saturating_add),
        Value::Object(map) => object_chars_bound(map),
    }
}

/// [`json_chars_bound`] of an object.
fn object_chars_bound(map: &serde_json::Map<String, serde_json::Value>) -> u64 {
    map.iter()
        .map(|(key, value)| {
            string_chars_bound(key)
                .saturating_add(json_chars_bound(value))
                .saturating_add(2)
        })
        .fold(2, u64::saturating_add)
}

/// [`json_chars_bound`] of a string.
fn string_chars_bound(text: &str) -> u64 {
    len(text).saturating_mul(6).saturating_add(2)
}

/// The characters of a number as JSON: its text, whichever way `serde_json`
/// keeps it (written to a counter, not to a string).
fn number_chars(number: &serde_json::Number) -> u64 {
    struct Counter(u64);
    impl std::fmt::Write for Counter {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 = self.0.saturating_add(len(s));
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter cannot fail.
    let _ = std::fmt::write(&mut counter, format_args!("{number}"));
    counter.0
}

/// The fixed part of every request: the system prompt and the tools'
/// names, descriptions and schemas.
pub fn overhead_tokens(system_prompt: Option<&str>, tools: &[ModelTool]) -> u64 {
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
    estimate_with(messages, overhead, model, messages_tokens)
}

/// [`estimate_context`], counting the messages of a request without usage
/// with `all_messages`.
fn estimate_with(
    messages: &[Message],
    overhead: u64,
    model: &Model,
    all_messages: impl FnOnce(&[Message]) -> u64,
) -> ContextEstimate {
    if let Some((at, tokens)) = trusted_usage(messages, model) {
        let after = messages_tokens(&messages[at + 1..]);
        return ContextEstimate {
            tokens: tokens.saturating_add(after),
            from_usage: true,
        };
    }
    ContextEstimate {
        tokens: overhead.saturating_add(all_messages(messages)),
        from_usage: false,
    }
}

/// The running count of a conversation's tokens: each message is counted
/// once, when a request first carries it, and what was counted is reused
/// while the conversation still begins with the same messages.
///
/// A conversation grows by a few messages a round and a turn, and when the
/// provider reports no usage, every request is estimated whole
/// ([`estimate_context`]): counting each message again (its texts'
/// characters, each tool call's arguments serialised) would cost each
/// request as much as the conversation is long. The count keeps each
/// message it counted at its place (a shared `Arc`, not a copy) and reuses
/// the count while the request holds the same or an equal message there,
/// so the count of a request is always the one [`estimate_context`] gives.
///
/// Most requests are far below the point where a conversation is compacted,
/// and only need to be known to be: [`upper_bound`](Self::upper_bound)
/// bounds the messages it has not counted by their bytes (nothing is
/// serialised or read character by character), and the exact count of
/// those messages is made by the next [`estimate`](Self::estimate).
///
/// ```
/// use roundtable_dispatch::compaction::{RunningCount, estimate_context};
/// use roundtable_providers::{Message, Model, UserMessage, OPENAI_COMPLETIONS};
///
/// let model = Model::new(OPENAI_COMPLETIONS, "p", "m", "");
/// let mut count = RunningCount::default();
/// let mut messages = vec![Message::from(UserMessage::text("a question", 1))];
/// assert_eq!(count.estimate(&messages, 10, &model), estimate_context(&messages, 10, &model));
/// // Only the new message is counted.
/// messages.push(Message::from(UserMessage::text("and another", 2)));
/// assert!(count.upper_bound(&messages, 10, &model) >= estimate_context(&messages, 10, &model).tokens);
/// assert_eq!(count.estimate(&messages, 10, &model), estimate_context(&messages, 10, &model));
/// ```
#[derive(Debug, Default)]
pub struct RunningCount {
    /// The messages seen, in order, with the tokens of the messages up to
    /// each one (inclusive): counted exactly for the first `exact`, an
    /// upper bound after them.
    counted: Vec<(Message, u64)>,
    /// How many of the first messages in `counted` are counted exactly.
    exact: usize,
}

/// True when `a` and `b` are the same message (one `Arc`), or equal ones.
fn same_message(a: &Message, b: &Message) -> bool {
    let shared = match (a, b) {
        (Message::User(a), Message::User(b)) => Arc::ptr_eq(a, b),
        (Message::Assistant(a), Message::Assistant(b)) => Arc::ptr_eq(a, b),
        (Message::ToolResult(a), Message::ToolResult(b)) => Arc::ptr_eq(a, b),
        _ => return false,
    };
    shared || a == b
}

impl RunningCount {
    /// [`estimate_context`] of `messages`, counting only the messages this
    /// count has not counted at their place.
    pub fn estimate(
        &mut self,
        messages: &[Message],
        overhead: u64,
        model: &Model,
    ) -> ContextEstimate {
        estimate_with(messages, overhead, model, |all| self.tokens(all))
    }

    /// An upper bound of [`estimate`](Self::estimate)`(messages, overhead,
    /// model).tokens` (with `overhead` an upper bound of the fixed part, it
    /// bounds that of the exact fixed part): what this count has counted,
    /// plus the messages it has not, bounded by their bytes and kept as
    /// bounds until an [`estimate`](Self::estimate) counts them. Cheap: it
    /// neither reads a text character by character nor serialises a tool
    /// call's arguments.
    pub fn upper_bound(&mut self, messages: &[Message], overhead: u64, model: &Model) -> u64 {
        if let Some((at, tokens)) = trusted_usage(messages, model) {
            return messages[at + 1..]
                .iter()
                .map(message_tokens_bound)
                .fold(tokens, u64::saturating_add);
        }
        let mut total = self.keep_same_start(messages);
        for message in &messages[self.counted.len()..] {
            total = total.saturating_add(message_tokens_bound(message));
            self.counted.push((message.clone(), total));
        }
        overhead.saturating_add(total)
    }

    /// [`messages_tokens`] of `messages`: the tokens counted for the
    /// longest start of `messages` this count has seen, plus those of the
    /// messages after it (and of those only bounded so far), which are
    /// counted now and kept.
    pub fn tokens(&mut self, messages: &[Message]) -> u64 {
        self.keep_same_start(messages);
        let exact = self.exact;
        let mut total = exact.checked_sub(1).map_or(0, |last| self.counted[last].1);
        // The messages only bounded so far are counted now.
        for (counted, message) in self.counted[exact..].iter_mut().zip(&messages[exact..]) {
            total = total.saturating_add(message_tokens(message));
            counted.1 = total;
        }
        let seen = self.counted.len();
        self.counted.reserve(messages.len() - seen);
        for message in &messages[seen..] {
            total = total.saturating_add(message_tokens(message));
            self.counted.push((message.clone(), total));
        }
        self.exact = self.counted.len();
        total
    }

    /// Drops what was seen after the longest start of `messages` this count
    /// has seen, and returns the tokens of that start (exact, or a bound).
    fn keep_same_start(&mut self, messages: &[Message]) -> u64 {
        let same = self
            .counted
            .iter()
            .zip(messages)
            .take_while(|((counted, _), message)| same_message(counted, message))
            .count();
        self.counted.truncate(same);
        self.exact = self.exact.min(same);
        self.counted.last().map_or(0, |(_, upto)| *upto)
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
        AssistantMessage, ImageContent, OPENAI_COMPLETIONS, StopReason, TextContent,
        ThinkingContent, ToolCall, ToolResultMessage, UserMessage,
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

    fn call(at: i64, id: &str, path: &str) -> Message {
        let mut a = AssistantMessage::for_model(&model(), at);
        a.content.push(AssistantBlock::text("Let me look."));
        let mut args = serde_json::Map::new();
        args.insert("path".into(), serde_json::Value::from(path));
        a.content.push(AssistantBlock::ToolCall(ToolCall::new(
            id,
            "read_file",
            args,
        )));
        a.stop_reason = StopReason::ToolUse;
        Message::from(a)
    }

    fn result(at: i64, id: &str, text: &str) -> Message {
        Message::from(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "read_file".into(),
            content: vec![UserBlock::text(text)],
            details: None,
            is_error: false,
            timestamp: at,
        })
    }

    #[test]
    fn the_running_count_is_the_full_recount_after_appends_and_after_a_cut() {
        let model = model();
        let mut count = RunningCount::default();
        let check = |count: &mut RunningCount, messages: &[Message]| {
            assert_eq!(count.tokens(messages), messages_tokens(messages));
            assert_eq!(
                count.estimate(messages, 37, &model),
                estimate_context(messages, 37, &model)
            );
        };
        // A conversation growing round after round.
        let mut messages = vec![Message::from(UserMessage::text("read the README", 1))];
        check(&mut count, &messages);
        for round in 0..4 {
            let id = format!("call_{round}");
            messages.push(call(10 + round, &id, "README.md"));
            check(&mut count, &messages);
            messages.push(result(11 + round, &id, &"# Demo ünï\n".repeat(40)));
            check(&mut count, &messages);
        }
        messages.push(Message::from(UserMessage::text("and then?", 50)));
        check(&mut count, &messages);
        // The same conversation projected again (new messages, same
        // contents), and one whose older messages changed.
        let copied: Vec<Message> = messages
            .iter()
            .map(|m| match m {
                Message::User(u) => Message::from((**u).clone()),
                Message::Assistant(a) => Message::Assistant(Arc::new((**a).clone())),
                Message::ToolResult(r) => Message::ToolResult(Arc::new((**r).clone())),
            })
            .collect();
        check(&mut count, &copied);
        let mut changed = copied.clone();
        changed[2] = result(12, "call_0", "much shorter");
        check(&mut count, &changed);
        // A compaction cut: a summary and the newest messages kept.
        let mut cut = vec![Message::from(UserMessage::text(
            format!("{COMPACTION_PREFIX}what came before"),
            60,
        ))];
        cut.extend_from_slice(&changed[5..]);
        check(&mut count, &cut);
        cut.push(call(70, "call_9", "src/lib.rs"));
        check(&mut count, &cut);
        // A shorter conversation, an empty one, and the messages dropped
        // while counted.
        check(&mut count, &cut[..2]);
        check(&mut count, &[]);
        drop(messages);
        drop(copied);
        let fresh = vec![
            Message::from(UserMessage::text("x".repeat(17), 80)),
            result(81, "c", "y"),
        ];
        check(&mut count, &fresh);
        // With the provider's usage the count is that of the messages after
        // it, as before.
        let mut used = fresh.clone();
        used.push(answer(90, 3_000));
        used.push(Message::from(UserMessage::text("more", 91)));
        check(&mut count, &used);
        assert!(count.estimate(&used, 37, &model).from_usage);
    }

    #[test]
    fn a_bound_is_never_below_the_count() {
        // Every kind of value a tool call's arguments hold, escapes,
        // numbers of every kind and non-ASCII text among them.
        let arguments = serde_json::json!({
            "path": "src/lib.rs",
            "quote": "say \"hi\"\\ \n\t\u{1}\u{1f} ünï 日本",
            "numbers": [0, -1, u64::MAX, i64::MIN, 1.5, -2.2250738585072014e-308, 1e300],
            "flags": [true, false, null],
            "nested": {"empty": {}, "list": [], "": ""},
        });
        let mut call = AssistantMessage::for_model(&model(), 0);
        call.content
            .push(AssistantBlock::Thinking(ThinkingContent::new("hmm ünï")));
        call.content.push(AssistantBlock::text("Let me look."));
        call.content.push(AssistantBlock::ToolCall(ToolCall::new(
            "c1",
            "write_file",
            arguments.as_object().unwrap().clone(),
        )));
        let image = UserBlock::Image(ImageContent {
            data: "AAAA".into(),
            mime_type: "image/png".into(),
        });
        let labelled = UserBlock::Text(TextContent::new("[Alice]: hello ünï"));
        let messages = [
            Message::from(call),
            Message::from(UserMessage::text("日本語のテキスト", 0)),
            Message::from(UserMessage::blocks(vec![labelled, image.clone()], 0)),
            result(1, "c1", &"ünï\n".repeat(9)),
            Message::from(UserMessage::text("", 0)),
        ];
        for message in &messages {
            assert!(
                message_tokens_bound(message) >= message_tokens(message),
                "{message:?}"
            );
        }
        // A value's bound against its own text, one value at a time.
        let mut values = vec![arguments.clone()];
        values.extend(arguments.as_object().unwrap().values().cloned());
        values.extend(arguments["numbers"].as_array().unwrap().iter().cloned());
        for value in values {
            let text = serde_json::to_string(&value).unwrap();
            assert!(json_chars_bound(&value) >= chars(&text), "{text}");
        }
        for number in arguments["numbers"].as_array().unwrap() {
            let text = serde_json::to_string(number).unwrap();
            assert_eq!(json_chars_bound(number), chars(&text), "{text}");
        }
    }

    #[test]
    fn bounds_and_exact_counts_interleave_to_the_full_recount() {
        let model = model();
        let mut count = RunningCount::default();
        let mut messages = vec![Message::from(UserMessage::text("read the README", 1))];
        for round in 0..6 {
            let id = format!("call_{round}");
            messages.push(call(10 + round, &id, "README.md"));
            let bound = count.upper_bound(&messages, 37, &model);
            assert!(bound >= estimate_context(&messages, 37, &model).tokens);
            messages.push(result(11 + round, &id, &"# Demo ünï\n".repeat(40)));
            let bound = count.upper_bound(&messages, 37, &model);
            assert!(bound >= estimate_context(&messages, 37, &model).tokens);
            // Every other round, the exact count of what was only bounded.
            if round % 2 == 1 {
                assert_eq!(
                    count.estimate(&messages, 37, &model),
                    estimate_context(&messages, 37, &model)
                );
                // Counted exactly, the bound is the count.
                assert_eq!(
                    count.upper_bound(&messages, 37, &model),
                    estimate_context(&messages, 37, &model).tokens
                );
            }
        }
        // Bounded messages cut away and others put in their place.
        let bound = count.upper_bound(&messages, 37, &model);
        assert!(bound >= estimate_context(&messages, 37, &model).tokens);
        messages.truncate(5);
        messages.push(result(99, "call_1", "short"));
        assert!(count.upper_bound(&messages, 37, &model) >= messages_tokens(&messages) + 37);
        assert_eq!(count.tokens(&messages), messages_tokens(&messages));
        // With the provider's usage, the messages after it are bounded.
        messages.push(answer(100, 3_000));
        messages.push(Message::from(UserMessage::text("more ünï", 101)));
        let estimate = estimate_context(&messages, 37, &model);
        assert!(estimate.from_usage);
        assert!(count.upper_bound(&messages, 37, &model) >= estimate.tokens);
        assert_eq!(count.estimate(&messages, 37, &model), estimate);
    }
}
