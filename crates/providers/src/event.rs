//! The events a provider streams while the assistant message is produced.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::content::ToolCall;
use crate::error::ErrorKind;
use crate::message::{AssistantMessage, StopReason};

/// One step of a streamed assistant message, tagged by `type` as pi-ai's
/// `AssistantMessageEvent` (without pi's per-event `partial` snapshot: the
/// deltas carry everything, and [`Assembler`](crate::assemble::Assembler) rebuilds the message).
///
/// A stream is `start`, then for each content block its `*_start`, deltas and
/// `*_end` (an `*_end` comes as soon as its block ends), then exactly one
/// terminal `done` or `error` carrying the final message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantEvent {
    /// The server accepted the request and the message begins.
    Start,
    /// A text block begins at `content_index`.
    #[serde(rename_all = "camelCase")]
    TextStart {
        /// Index of the block in the message's content.
        content_index: usize,
    },
    /// More text.
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// Index of the block in the message's content.
        content_index: usize,
        /// The new text.
        delta: Arc<str>,
    },
    /// The text block is complete.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        /// Index of the block in the message's content.
        content_index: usize,
        /// The block's whole text.
        content: Arc<str>,
    },
    /// A thinking block begins.
    #[serde(rename_all = "camelCase")]
    ThinkingStart {
        /// Index of the block in the message's content.
        content_index: usize,
    },
    /// More reasoning.
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        /// Index of the block in the message's content.
        content_index: usize,
        /// The new reasoning text.
        delta: Arc<str>,
    },
    /// The thinking block is complete.
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        /// Index of the block in the message's content.
        content_index: usize,
        /// The block's whole reasoning text.
        content: Arc<str>,
    },
    /// A tool call begins; its id and name are known.
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolCallStart {
        /// Index of the block in the message's content.
        content_index: usize,
        /// The call's id.
        id: Arc<str>,
        /// The tool's name.
        name: Arc<str>,
    },
    /// More argument JSON text.
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolCallDelta {
        /// Index of the block in the message's content.
        content_index: usize,
        /// The new argument text (a fragment of JSON).
        delta: Arc<str>,
    },
    /// The tool call is complete and its arguments are parsed.
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolCallEnd {
        /// Index of the block in the message's content.
        content_index: usize,
        /// The complete call.
        tool_call: ToolCall,
    },
    /// The message ended normally (`stop`, `length` or `toolUse`).
    Done {
        /// Why the model stopped.
        reason: StopReason,
        /// The final message, shared: an event stays a few words whatever
        /// the message holds (every delta event is as large as the largest
        /// variant, and moves that size), and the consumer usually keeps
        /// the message shared anyway (a conversation holds its messages as
        /// `Arc`s).
        message: Arc<AssistantMessage>,
    },
    /// The message ended in failure (`error` or `aborted`); the message keeps
    /// whatever content arrived and says why in `errorMessage`.
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// What kind of failure it was.
        kind: ErrorKind,
        /// The final message, shared as `done`'s.
        error: Arc<AssistantMessage>,
    },
}

impl AssistantEvent {
    /// True for `done` and `error`, the events that end a stream.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            AssistantEvent::Done { .. } | AssistantEvent::Error { .. }
        )
    }

    /// The final message of a terminal event.
    pub fn final_message(&self) -> Option<&AssistantMessage> {
        match self {
            AssistantEvent::Done { message, .. } => Some(message),
            AssistantEvent::Error { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The content index a block event refers to.
    pub fn content_index(&self) -> Option<usize> {
        match self {
            AssistantEvent::TextStart { content_index }
            | AssistantEvent::TextDelta { content_index, .. }
            | AssistantEvent::TextEnd { content_index, .. }
            | AssistantEvent::ThinkingStart { content_index }
            | AssistantEvent::ThinkingDelta { content_index, .. }
            | AssistantEvent::ThinkingEnd { content_index, .. }
            | AssistantEvent::ToolCallStart { content_index, .. }
            | AssistantEvent::ToolCallDelta { content_index, .. }
            | AssistantEvent::ToolCallEnd { content_index, .. } => Some(*content_index),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_a_few_words() {
        // Every delta moves an event of the largest variant's size: the
        // terminal events share their message rather than hold it.
        assert!(std::mem::size_of::<AssistantEvent>() <= 80);
    }

    #[test]
    fn events_serialise_with_pi_type_names() {
        let e = AssistantEvent::ToolCallStart {
            content_index: 2,
            id: "call_1".into(),
            name: "ls".into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"toolcall_start","contentIndex":2,"id":"call_1","name":"ls"}"#
        );
        let e = AssistantEvent::TextDelta {
            content_index: 0,
            delta: "hi".into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"text_delta","contentIndex":0,"delta":"hi"}"#
        );
    }
}
