//! Random entries for the stores' round-trip properties: every body kind,
//! with the values that have broken entries before in the mix (fields and
//! types named like headers or known bodies, unnamed signals, floats that
//! are not numbers or need every digit, integers at their limits, control
//! characters in strings).

use std::sync::Arc;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Diagnostic, ImageContent, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, UserBlock,
};
use roundtable_thread_stream::{
    AssistantEntry, Chat, Chunk, Compaction, EntryBody, FileRef, NewEntry, Signal, ToolResultEntry,
    TurnEnded, TurnFailed, TurnStarted,
};
use serde_json::{Map, Number, Value};

/// Any string, control characters and NUL included, sometimes empty.
pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => vec(any::<char>(), 0..10).prop_map(String::from_iter),
        1 => "[a-z.]{0,8}",
        1 => Just("\0\n\r\t\"\\\u{2028}🎉".to_owned()),
    ]
}

fn shared(s: impl Strategy<Value = String>) -> impl Strategy<Value = Arc<str>> {
    s.prop_map(Arc::from)
}

/// Any double, NaN and the infinities included, with the values that need
/// every digit to read back.
pub(crate) fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => proptest::num::f64::ANY,
        1 => Just(-0.0),
        1 => Just(5e-324),
        1 => Just(1.0715660391465826e-75),
        1 => Just(2.225073858507201e-308),
        1 => Just(0.1 + 0.2),
    ]
}

/// A field name, often one an entry header or a known body uses.
pub(crate) fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(vec![
            "seq", "id", "thread", "author", "at", "more", "type", "Seq", "text", "data",
            "kind", "turn", "message", "",
        ])
        .prop_map(str::to_owned),
        1 => text(),
    ]
}

/// Any JSON value a `serde_json::Value` can hold.
pub(crate) fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![u64::MAX, 1 << 53, (1 << 53) + 1]).prop_map(Value::from),
        float().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(field_name(), inner, 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// A JSON value for the providers' optional JSON fields (a diagnostic's
/// `error`, a tool result's `details`): never `null`, which those fields read
/// back as absent (`Some(Value::Null)` comes back as `None`), a limit of the
/// message types rather than of the stores.
fn optional_json() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(json().prop_filter("null reads back as absent", |v| !v.is_null()))
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    btree_map(field_name(), json(), 0..4).prop_map(|fields| fields.into_iter().collect())
}

fn user_block() -> impl Strategy<Value = UserBlock> {
    prop_oneof![
        shared(text()).prop_map(UserBlock::text),
        (shared(text()), shared(text()))
            .prop_map(|(data, mime_type)| UserBlock::Image(ImageContent { data, mime_type })),
    ]
}

fn assistant_block() -> impl Strategy<Value = AssistantBlock> {
    prop_oneof![
        (shared(text()), proptest::option::of(shared(text()))).prop_map(|(text, signature)| {
            AssistantBlock::Text(TextContent {
                text_signature: signature,
                ..TextContent::new(text)
            })
        }),
        (shared(text()), proptest::option::of(any::<bool>())).prop_map(|(thinking, redacted)| {
            AssistantBlock::Thinking(ThinkingContent {
                redacted,
                ..ThinkingContent::new(thinking)
            })
        }),
        (shared(text()), shared(text()), object())
            .prop_map(|(id, name, args)| AssistantBlock::ToolCall(ToolCall::new(id, name, args))),
    ]
}

fn assistant_message() -> impl Strategy<Value = AssistantMessage> {
    (
        vec(assistant_block(), 0..3),
        vec(any::<u64>(), 5),
        vec(float(), 5),
        prop::sample::select(vec![
            StopReason::Stop,
            StopReason::Length,
            StopReason::ToolUse,
            StopReason::Error,
            StopReason::Aborted,
        ]),
        proptest::option::of(text()),
        proptest::option::of((text(), optional_json())),
        any::<i64>(),
    )
        .prop_map(
            |(content, tokens, costs, stop_reason, error, diagnostic, timestamp)| {
                let mut m = AssistantMessage::empty("api", "provider", "model", timestamp);
                m.content = content;
                m.usage.input = tokens[0];
                m.usage.output = tokens[1];
                m.usage.cache_read = tokens[2];
                m.usage.cache_write = tokens[3];
                m.usage.total_tokens = tokens[4];
                m.usage.cost.input = costs[0];
                m.usage.cost.output = costs[1];
                m.usage.cost.cache_read = costs[2];
                m.usage.cost.cache_write = costs[3];
                m.usage.cost.total = costs[4];
                m.stop_reason = stop_reason;
                m.error_message = error;
                m.diagnostics = diagnostic.map(|(kind, error)| {
                    vec![Diagnostic {
                        kind,
                        timestamp,
                        error,
                        details: None,
                    }]
                });
                m
            },
        )
}

fn tool_result() -> impl Strategy<Value = ToolResultMessage> {
    (
        shared(text()),
        shared(text()),
        vec(user_block(), 0..3),
        optional_json(),
        any::<bool>(),
        any::<i64>(),
    )
        .prop_map(
            |(tool_call_id, tool_name, content, details, is_error, timestamp)| ToolResultMessage {
                tool_call_id,
                tool_name,
                content,
                details,
                is_error,
                timestamp,
            },
        )
}

/// A `type` for an unknown body, often one a known body or the signal
/// prefix owns.
fn unknown_kind() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(vec![
            "poll.vote", "", "signal.", "signal", "chat", "signal.typing", "pi.assistant",
            "pi.tool_result", "chat.chunk", "compaction", "turn.started", "turn.ended",
            "turn.failed",
        ])
        .prop_map(str::to_owned),
        1 => text(),
    ]
}

/// Any entry body.
pub(crate) fn body() -> impl Strategy<Value = EntryBody> {
    prop_oneof![
        (
            shared(text()),
            vec(user_block(), 0..3),
            vec(shared(text()), 0..3),
            vec((shared(text()), shared(text())), 0..2)
        )
            .prop_map(|(text, parts, mentions, files)| EntryBody::Chat(Chat {
                text,
                parts: parts.into(),
                mentions: mentions.into(),
                files: files
                    .into_iter()
                    .map(|(reference, mime_type)| FileRef {
                        reference,
                        mime_type
                    })
                    .collect(),
            })),
        (proptest::option::of(shared(text())), assistant_message()).prop_map(|(turn, message)| {
            EntryBody::Assistant(AssistantEntry::new(turn, message))
        }),
        (proptest::option::of(shared(text())), tool_result()).prop_map(|(turn, message)| {
            EntryBody::ToolResult(ToolResultEntry {
                turn,
                message: message.into(),
            })
        }),
        (shared(text()), shared(text()))
            .prop_map(|(turn, delta)| EntryBody::Chunk(Chunk::text(turn, delta))),
        (text(), json()).prop_map(|(name, data)| EntryBody::Signal(Signal {
            name,
            data: data.into(),
        })),
        (shared(text()), any::<u64>())
            .prop_map(|(summary, upto)| EntryBody::Compaction(Compaction { summary, upto })),
        (
            shared(text()),
            proptest::option::of(any::<u64>()),
            any::<u32>(),
            proptest::option::of(text())
        )
            .prop_map(|(turn, trigger, depth, reason)| {
                EntryBody::TurnStarted(TurnStarted {
                    turn,
                    trigger,
                    depth,
                    reason: reason.map(Into::into),
                })
            }),
        (shared(text()), text()).prop_map(|(turn, reason)| {
            EntryBody::TurnEnded(TurnEnded {
                turn,
                reason: reason.into(),
            })
        }),
        (shared(text()), text()).prop_map(|(turn, reason)| {
            EntryBody::TurnFailed(TurnFailed {
                turn,
                reason: reason.into(),
            })
        }),
        (unknown_kind(), object()).prop_map(|(kind, fields)| EntryBody::Other {
            kind,
            fields: Box::new(fields),
        }),
    ]
}

/// Any new entry. Its id is random too; [`batches`] makes ids unique within
/// a thread, as the stores expect of their callers.
pub(crate) fn new_entry() -> impl Strategy<Value = NewEntry> {
    (text(), text(), any::<i64>(), body()).prop_map(|(id, author, at, body)| NewEntry {
        id: Arc::from(id),
        author: Arc::from(author),
        at,
        body,
    })
}

/// A few appends' batches of entries, with ids unique across them.
pub(crate) fn batches() -> impl Strategy<Value = Vec<Vec<NewEntry>>> {
    vec(vec(new_entry(), 1..4), 1..5).prop_map(|mut batches| {
        for (b, batch) in batches.iter_mut().enumerate() {
            for (e, entry) in batch.iter_mut().enumerate() {
                entry.id = Arc::from(format!("{b}.{e}:{}", entry.id));
            }
        }
        batches
    })
}
