//! Messages: what a user said, what the assistant answered, what a tool returned.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::content::{AssistantBlock, ToolCall, UserBlock, join_lines};
use crate::model::Model;
use crate::serde_shared;
use crate::tagged::{self, Tagged};
use crate::usage::Usage;
use crate::user_message::UserMessage;

/// One message of a model conversation, tagged by `role`.
///
/// Every message is shared (an `Arc`): the same message sits in a thread
/// entry, in every bot's projection and in each request built from it, so
/// cloning a conversation costs a reference count per message and never
/// copies what was said. `Message::from(owned)` wraps one; `Arc::make_mut`
/// edits one copy when needed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// `role: "user"`.
    User(Arc<UserMessage>),
    /// `role: "assistant"`.
    Assistant(Arc<AssistantMessage>),
    /// `role: "toolResult"`.
    ToolResult(Arc<ToolResultMessage>),
}

impl Message {
    /// The message's timestamp in Unix milliseconds.
    pub fn timestamp(&self) -> i64 {
        match self {
            Message::User(m) => m.timestamp,
            Message::Assistant(m) => m.timestamp,
            Message::ToolResult(m) => m.timestamp,
        }
    }
}

impl Tagged for Message {
    const TAG: &'static str = "role";
    const EXPECTING: &'static str = "a message";

    fn variant<'de, D: Deserializer<'de>>(tag: &str, fields: D) -> Result<Self, D::Error> {
        match tag {
            "user" => serde_shared::arc(fields).map(Self::User),
            "assistant" => serde_shared::arc(fields).map(Self::Assistant),
            "toolResult" => serde_shared::arc(fields).map(Self::ToolResult),
            other => Err(serde::de::Error::unknown_variant(
                other,
                &["user", "assistant", "toolResult"],
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

impl From<UserMessage> for Message {
    fn from(m: UserMessage) -> Self {
        Message::User(Arc::new(m))
    }
}

impl From<Arc<UserMessage>> for Message {
    fn from(m: Arc<UserMessage>) -> Self {
        Message::User(m)
    }
}

impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Message::Assistant(Arc::new(m))
    }
}

impl From<Arc<AssistantMessage>> for Message {
    fn from(m: Arc<AssistantMessage>) -> Self {
        Message::Assistant(m)
    }
}

impl From<ToolResultMessage> for Message {
    fn from(m: ToolResultMessage) -> Self {
        Message::ToolResult(Arc::new(m))
    }
}

impl From<Arc<ToolResultMessage>> for Message {
    fn from(m: Arc<ToolResultMessage>) -> Self {
        Message::ToolResult(m)
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The model finished its answer.
    Stop,
    /// The output hit the token limit.
    Length,
    /// The model is waiting for tool results.
    ToolUse,
    /// The call failed; `errorMessage` says why.
    Error,
    /// The call was cancelled.
    Aborted,
}

impl StopReason {
    /// True for `error` and `aborted`, the stop reasons of a failed call.
    pub fn is_failure(self) -> bool {
        matches!(self, StopReason::Error | StopReason::Aborted)
    }
}

/// Something worth recording about how an assistant message came to be (a
/// recovered parse error, a retry), as pi-ai's `diagnostics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// What kind of diagnostic this is, e.g. `invalid_tool_arguments`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix milliseconds.
    pub timestamp: i64,
    /// The error, when there was one (`{"message": ...}` and optional `name`, `code`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
    /// Free-form details (for a bad tool call: its id and the raw argument text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What the assistant answered, with the model that answered and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks in the order the model produced them.
    pub content: Vec<AssistantBlock>,
    /// The wire API, e.g. `openai-completions` or `anthropic-messages`.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub api: Arc<str>,
    /// The provider, e.g. `openai`, `anthropic`, `openrouter`.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub provider: Arc<str>,
    /// The model id that was asked.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub model: Arc<str>,
    /// The model id the server says answered, when it differs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::serde_shared::option_arc_str"
    )]
    pub response_model: Option<Arc<str>>,
    /// The server's id for the response.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::serde_shared::option_arc_str"
    )]
    pub response_id: Option<Arc<str>>,
    /// Diagnostics recorded while the message was assembled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<Diagnostic>>,
    /// Tokens and cost.
    pub usage: Usage,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Why the call failed, when `stop_reason` is `error` or `aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Unix milliseconds.
    pub timestamp: i64,
}

impl AssistantMessage {
    /// An empty message for the given API, provider and model, as a stream
    /// starts it: no content, zero usage, `stop_reason: stop`.
    pub fn empty(
        api: impl Into<Arc<str>>,
        provider: impl Into<Arc<str>>,
        model: impl Into<Arc<str>>,
        timestamp: i64,
    ) -> Self {
        Self {
            content: Vec::new(),
            api: api.into(),
            provider: provider.into(),
            model: model.into(),
            response_model: None,
            response_id: None,
            diagnostics: None,
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp,
        }
    }

    /// An empty message from `model` (its API, provider and id).
    pub fn for_model(model: &Model, timestamp: i64) -> Self {
        Self::empty(
            model.api.as_str(),
            model.provider.as_str(),
            model.id.as_str(),
            timestamp,
        )
    }

    /// A message from `model` that failed before it said anything:
    /// `reason` (`error` or `aborted`) with `error` as its `errorMessage`.
    pub fn failure(
        model: &Model,
        reason: StopReason,
        error: impl Into<String>,
        timestamp: i64,
    ) -> Self {
        let mut message = Self::for_model(model, timestamp);
        message.stop_reason = reason;
        message.error_message = Some(error.into());
        message
    }

    /// The text blocks joined with newlines: what a reader of the thread sees.
    pub fn text(&self) -> String {
        join_lines(self.content.iter().filter_map(|b| match b {
            AssistantBlock::Text(t) => Some(&*t.text),
            _ => None,
        }))
    }

    /// True when this is a bot's *final* message of a turn: the answer
    /// readers see. It has no tool calls and did not fail (`error`,
    /// `aborted`). Intermediate messages (narration next to tool calls) and
    /// failed ones are not final.
    pub fn is_final(&self) -> bool {
        !self.stop_reason.is_failure()
            && !self
                .content
                .iter()
                .any(|b| matches!(b, AssistantBlock::ToolCall(_)))
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|b| match b {
            AssistantBlock::ToolCall(c) => Some(c),
            _ => None,
        })
    }
}

/// What a tool returned for one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The id of the call this answers.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub tool_call_id: Arc<str>,
    /// The name of the tool that was called.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub tool_name: Arc<str>,
    /// Text and image blocks for the model.
    pub content: Vec<UserBlock>,
    /// Structured details for hosts; never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    /// True when the tool failed and the content explains why.
    pub is_error: bool,
    /// Unix milliseconds.
    pub timestamp: i64,
}

impl ToolResultMessage {
    /// A result holding one text block.
    pub fn text(
        call: &ToolCall,
        text: impl Into<Arc<str>>,
        is_error: bool,
        timestamp: i64,
    ) -> Self {
        Self {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: vec![UserBlock::text(text)],
            details: None,
            is_error,
            timestamp,
        }
    }
}
