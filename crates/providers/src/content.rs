//! Content blocks: the pieces of text, thinking, images and tool calls that
//! messages are made of.
//!
//! Large strings are `Arc<str>` so that projecting a thread into messages
//! (done for every bot on every turn) shares text with the entries instead
//! of copying it.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::tagged::{self, Tagged};

/// A JSON object, shared: tool-call arguments are cloned into every projection
/// that shows the call, so they are reference-counted rather than deep-copied.
pub type JsonObject = Arc<serde_json::Map<String, serde_json::Value>>;

/// Plain text (`{"type":"text","text":...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextContent {
    /// The text.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub text: Arc<str>,
    /// Opaque provider signature of the text block, replayed as received.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::serde_shared::option_arc_str"
    )]
    pub text_signature: Option<Arc<str>>,
}

impl TextContent {
    /// A text block with no signature.
    pub fn new(text: impl Into<Arc<str>>) -> Self {
        Self {
            text: text.into(),
            text_signature: None,
        }
    }
}

/// Model reasoning (`{"type":"thinking","thinking":...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    /// The reasoning text (empty when redacted).
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub thinking: Arc<str>,
    /// The provider's signature over the reasoning; for redacted thinking, the
    /// opaque encrypted payload that must be sent back for multi-turn continuity.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::serde_shared::option_arc_str"
    )]
    pub thinking_signature: Option<Arc<str>>,
    /// True when the provider redacted the reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
}

impl ThinkingContent {
    /// A thinking block with no signature.
    pub fn new(thinking: impl Into<Arc<str>>) -> Self {
        Self {
            thinking: thinking.into(),
            thinking_signature: None,
            redacted: None,
        }
    }

    /// True when the provider redacted this reasoning.
    pub fn is_redacted(&self) -> bool {
        self.redacted.unwrap_or(false)
    }
}

/// An image, base64-encoded (`{"type":"image","data":...,"mimeType":...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64 of the image bytes, without a `data:` prefix.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub data: Arc<str>,
    /// MIME type such as `image/png`.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub mime_type: Arc<str>,
}

/// A call the model makes to a tool (`{"type":"toolCall","id","name","arguments"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's id for the call; the tool result names it in `toolCallId`.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub id: Arc<str>,
    /// The tool's name.
    #[serde(deserialize_with = "crate::serde_shared::arc_str")]
    pub name: Arc<str>,
    /// The parsed arguments (an empty object when the model sent none).
    #[serde(deserialize_with = "crate::serde_shared::arc")]
    pub arguments: JsonObject,
    /// Opaque provider signature tied to the call, replayed as received.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::serde_shared::option_arc_str"
    )]
    pub thought_signature: Option<Arc<str>>,
}

impl ToolCall {
    /// A call with the given id, name and arguments.
    pub fn new(
        id: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: Arc::new(arguments),
            thought_signature: None,
        }
    }
}

/// A block of an assistant message: text, thinking or a tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AssistantBlock {
    /// Text shown to the reader.
    Text(TextContent),
    /// Reasoning.
    Thinking(ThinkingContent),
    /// A tool call.
    ToolCall(ToolCall),
}

impl AssistantBlock {
    /// A text block.
    pub fn text(text: impl Into<Arc<str>>) -> Self {
        Self::Text(TextContent::new(text))
    }
}

impl Tagged for AssistantBlock {
    const TAG: &'static str = "type";
    const EXPECTING: &'static str = "an assistant content block";

    fn variant<'de, D: Deserializer<'de>>(tag: &str, fields: D) -> Result<Self, D::Error> {
        match tag {
            "text" => TextContent::deserialize(fields).map(Self::Text),
            "thinking" => ThinkingContent::deserialize(fields).map(Self::Thinking),
            "toolCall" => ToolCall::deserialize(fields).map(Self::ToolCall),
            other => Err(serde::de::Error::unknown_variant(
                other,
                &["text", "thinking", "toolCall"],
            )),
        }
    }
}

impl<'de> Deserialize<'de> for AssistantBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

/// A block of user or tool-result content: text or an image.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserBlock {
    /// Text.
    Text(TextContent),
    /// An image.
    Image(ImageContent),
}

impl UserBlock {
    /// A text block.
    pub fn text(text: impl Into<Arc<str>>) -> Self {
        Self::Text(TextContent::new(text))
    }
}

impl Tagged for UserBlock {
    const TAG: &'static str = "type";
    const EXPECTING: &'static str = "a user content block";

    fn variant<'de, D: Deserializer<'de>>(tag: &str, fields: D) -> Result<Self, D::Error> {
        match tag {
            "text" => TextContent::deserialize(fields).map(Self::Text),
            "image" => ImageContent::deserialize(fields).map(Self::Image),
            other => Err(serde::de::Error::unknown_variant(other, &["text", "image"])),
        }
    }
}

impl<'de> Deserialize<'de> for UserBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

/// `parts` joined with newlines.
pub(crate) fn join_lines<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, part) in parts.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(part);
    }
    out
}
