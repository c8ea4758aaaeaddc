//! What an entry says: the entry bodies, one struct per `type`.

use std::sync::Arc;

use roundtable_providers::{AssistantBlock, AssistantMessage, ToolResultMessage, UserBlock};
use serde::{Deserialize, Serialize};
pub use thin_vec::ThinVec;

use crate::lifecycle::{TurnEnded, TurnFailed, TurnStarted};
use crate::signal_data::SignalData;

/// The body of an [`Entry`](crate::Entry), tagged on disk by its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryBody {
    /// `chat`: something a participant said.
    Chat(Chat),
    /// `pi.assistant`: an assistant message a bot produced.
    Assistant(AssistantEntry),
    /// `pi.tool_result`: the result of one of a bot's tool calls.
    ToolResult(ToolResultEntry),
    /// `chat.chunk`: a live piece of a bot's final text.
    Chunk(Chunk),
    /// `signal.<name>`: free data for hosts (typing indicators, reactions...).
    Signal(Signal),
    /// `compaction`: a summary that stands in for one author's older entries.
    Compaction(Compaction),
    /// `turn.started`: a bot began a turn.
    TurnStarted(TurnStarted),
    /// `turn.ended`: a bot's turn finished.
    TurnEnded(TurnEnded),
    /// `turn.failed`: a bot's turn failed.
    TurnFailed(TurnFailed),
    /// An entry of a `type` this version does not know, kept as it was so that
    /// stores and readers pass it through instead of failing on it.
    Other {
        /// The `type` tag.
        kind: String,
        /// The body's fields, behind a pointer: a map is wide (72 bytes) and
        /// every entry is as wide as its widest body.
        fields: Box<serde_json::Map<String, serde_json::Value>>,
    },
}

impl EntryBody {
    /// The body's `type` tag as stored.
    pub fn kind(&self) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        match self {
            EntryBody::Chat(_) => Cow::Borrowed(CHAT),
            EntryBody::Assistant(_) => Cow::Borrowed(ASSISTANT),
            EntryBody::ToolResult(_) => Cow::Borrowed(TOOL_RESULT),
            EntryBody::Chunk(_) => Cow::Borrowed(CHUNK),
            EntryBody::Signal(s) => Cow::Owned(format!("{SIGNAL_PREFIX}{}", s.name)),
            EntryBody::Compaction(_) => Cow::Borrowed(COMPACTION),
            EntryBody::TurnStarted(_) => Cow::Borrowed(TURN_STARTED),
            EntryBody::TurnEnded(_) => Cow::Borrowed(TURN_ENDED),
            EntryBody::TurnFailed(_) => Cow::Borrowed(TURN_FAILED),
            EntryBody::Other { kind, .. } => Cow::Borrowed(kind),
        }
    }

    /// A chat body with just text.
    pub fn chat(text: impl Into<Arc<str>>) -> Self {
        EntryBody::Chat(Chat::new(text))
    }
}

const CHAT: &str = "chat";
const ASSISTANT: &str = "pi.assistant";
const TOOL_RESULT: &str = "pi.tool_result";
const CHUNK: &str = "chat.chunk";
const SIGNAL_PREFIX: &str = "signal.";
const COMPACTION: &str = "compaction";
const TURN_STARTED: &str = "turn.started";
const TURN_ENDED: &str = "turn.ended";
const TURN_FAILED: &str = "turn.failed";

/// What a `type` tag names, as the reader sees it. Reading picks the body's
/// decoder from it, and the append check (see `storable.rs`) refuses a body
/// whose tag the reader would take for another body, so every stored tag
/// reads back as the body that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind<'a> {
    Chat,
    Assistant,
    ToolResult,
    Chunk,
    /// `signal.<name>`, with a name.
    Signal(&'a str),
    Compaction,
    TurnStarted,
    TurnEnded,
    TurnFailed,
    /// Any other tag, a bare `signal.` included: kept as [`EntryBody::Other`].
    Unknown,
}

impl<'a> BodyKind<'a> {
    /// The body a stored `type` tag reads back as.
    pub(crate) fn of(tag: &'a str) -> Self {
        match tag {
            CHAT => BodyKind::Chat,
            ASSISTANT => BodyKind::Assistant,
            TOOL_RESULT => BodyKind::ToolResult,
            CHUNK => BodyKind::Chunk,
            COMPACTION => BodyKind::Compaction,
            TURN_STARTED => BodyKind::TurnStarted,
            TURN_ENDED => BodyKind::TurnEnded,
            TURN_FAILED => BodyKind::TurnFailed,
            _ => match tag.strip_prefix(SIGNAL_PREFIX) {
                Some(name) if !name.is_empty() => BodyKind::Signal(name),
                _ => BodyKind::Unknown,
            },
        }
    }
}

/// `chat`: what a human (or a bot speaking plainly) said.
///
/// Its lists are [`ThinVec`]s, one pointer wide and empty without
/// allocating: almost every chat entry has none, and every entry of a
/// thread is as wide as its widest body. A `Vec` becomes one with `.into()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    /// The text.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub text: Arc<str>,
    /// Attachments and extra parts (images travel to models as image blocks).
    #[serde(default, skip_serializing_if = "ThinVec::is_empty")]
    pub parts: ThinVec<UserBlock>,
    /// Participants named structurally (ids), besides any `@handle` in the text.
    #[serde(default, skip_serializing_if = "ThinVec::is_empty")]
    pub mentions: ThinVec<Arc<str>>,
    /// Files attached by reference (kept by the host, not in the thread).
    /// Projections leave them out; a host that shows them to a model puts
    /// their content into `parts` of the entry it projects.
    #[serde(default, skip_serializing_if = "ThinVec::is_empty")]
    pub files: ThinVec<FileRef>,
}

impl Chat {
    /// Plain text with no parts and no structured mentions.
    pub fn new(text: impl Into<Arc<str>>) -> Self {
        Self {
            text: text.into(),
            parts: ThinVec::new(),
            mentions: ThinVec::new(),
            files: ThinVec::new(),
        }
    }
}

/// A file a message refers to, kept outside the thread (an attachment in a
/// session's folder or object store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// Where the host keeps it (e.g. `attachments/img_01.png`).
    #[serde(
        rename = "ref",
        deserialize_with = "roundtable_providers::serde_shared::arc_str"
    )]
    pub reference: Arc<str>,
    /// Its media type (e.g. `image/png`).
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub mime_type: Arc<str>,
}

/// `pi.assistant`: one assistant message of a bot's turn, usage and cost included.
///
/// The entry also keeps what a reader of the thread sees of its message (its
/// [`Answer`]), worked out once when the entry is made or read: a bot's
/// projection of a busy thread asks it of every other bot's message, and
/// answering from the entry itself saves reading the message, its stop
/// reason and its blocks, each in memory of its own. So the message is
/// read through [`message`](Self::message) and set only through
/// [`new`](Self::new), which keep the two in step. Neither the JSON nor
/// equality changes: the answer is not written, and it follows from the
/// message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "AssistantFields")]
pub struct AssistantEntry {
    /// The turn that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<Arc<str>>,
    /// The message, exactly as the provider assembled it; shared with the
    /// projections and requests that carry it.
    message: Arc<AssistantMessage>,
    /// What readers see of `message`.
    #[serde(skip)]
    answer: Answer,
}

impl AssistantEntry {
    /// The entry of `message`, produced by `turn`.
    pub fn new(turn: Option<Arc<str>>, message: impl Into<Arc<AssistantMessage>>) -> Self {
        let message = message.into();
        Self {
            turn,
            answer: Answer::of(&message),
            message,
        }
    }

    /// The message.
    #[inline]
    pub fn message(&self) -> &Arc<AssistantMessage> {
        &self.message
    }

    /// The message, taking it out of the entry.
    pub fn into_message(self) -> Arc<AssistantMessage> {
        self.message
    }

    /// What a reader of the thread sees of the message.
    #[inline]
    pub fn answer(&self) -> &Answer {
        &self.answer
    }
}

/// What a reader of the thread sees of an assistant message: whether it is a
/// final answer (no tool call, not failed), and its text when it is one plain
/// text, as almost every answer is.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Not a final answer: the message calls tools (the narration of a tool
    /// round) or failed (`error`, `aborted`). Readers do not see it.
    Intermediate,
    /// A final answer of one text block, not empty: its text, shared with
    /// the message.
    Text(Arc<str>),
    /// A final answer of another shape (several blocks, thinking, no text or
    /// an empty one): read the message itself.
    Other,
}

impl Answer {
    /// What readers see of `message`.
    pub fn of(message: &AssistantMessage) -> Self {
        if !message.is_final() {
            return Answer::Intermediate;
        }
        match message.content.as_slice() {
            [AssistantBlock::Text(t)] if !t.text.is_empty() => Answer::Text(t.text.clone()),
            _ => Answer::Other,
        }
    }

    /// True for a final answer (see [`AssistantMessage::is_final`]): no
    /// tool call, not failed.
    #[inline]
    pub fn is_final(&self) -> bool {
        !matches!(self, Answer::Intermediate)
    }
}

/// The stored fields of a `pi.assistant` entry, read before the entry works
/// out its [`Answer`].
#[derive(Deserialize)]
struct AssistantFields {
    #[serde(
        default,
        deserialize_with = "roundtable_providers::serde_shared::option_arc_str"
    )]
    turn: Option<Arc<str>>,
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc")]
    message: Arc<AssistantMessage>,
}

impl From<AssistantFields> for AssistantEntry {
    fn from(fields: AssistantFields) -> Self {
        Self::new(fields.turn, fields.message)
    }
}

/// `pi.tool_result`: the result of one tool call of a bot's turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultEntry {
    /// The turn that produced it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "roundtable_providers::serde_shared::option_arc_str"
    )]
    pub turn: Option<Arc<str>>,
    /// The tool-result message; shared with the projections and requests
    /// that carry it.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc")]
    pub message: Arc<ToolResultMessage>,
}

/// `chat.chunk`: a piece of a bot's output, streamed while the turn runs.
/// The turn's text chunks, in seq order, concatenate to its final text; its
/// thinking chunks (`"kind": "thinking"`) to its reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// The turn the text belongs to.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub turn: Arc<str>,
    /// The new text.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub delta: Arc<str>,
    /// Answer text or reasoning (written only for reasoning, so a text
    /// chunk reads as it always did).
    #[serde(default, skip_serializing_if = "ChunkKind::is_text")]
    pub kind: ChunkKind,
}

impl Chunk {
    /// A piece of the turn's answer text.
    pub fn text(turn: impl Into<Arc<str>>, delta: impl Into<Arc<str>>) -> Self {
        Self {
            turn: turn.into(),
            delta: delta.into(),
            kind: ChunkKind::Text,
        }
    }

    /// A piece of the turn's reasoning.
    pub fn thinking(turn: impl Into<Arc<str>>, delta: impl Into<Arc<str>>) -> Self {
        Self {
            kind: ChunkKind::Thinking,
            ..Self::text(turn, delta)
        }
    }
}

/// What a [`Chunk`] carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkKind {
    /// The answer's text.
    #[default]
    Text,
    /// The model's reasoning.
    Thinking,
}

impl ChunkKind {
    /// True for answer text.
    pub fn is_text(&self) -> bool {
        *self == ChunkKind::Text
    }
}

/// `signal.<name>`: data for hosts that no projection interprets.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// The name after `signal.` (`typing`, `reaction`, ...).
    pub name: String,
    /// Free JSON data, shared by every clone of the entry.
    pub data: SignalData,
}

impl Signal {
    /// A signal named `name` carrying `data` as JSON. Fails only when
    /// `data` cannot be written as JSON (a map with non-string keys, a
    /// failing `Serialize` impl): never writes `null` instead.
    pub fn encode(
        name: impl Into<String>,
        data: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            name: name.into(),
            data: SignalData::encode(data)?,
        })
    }
}

/// The stored fields of a signal besides its `type`.
#[derive(Serialize, Deserialize)]
pub(crate) struct SignalFields {
    #[serde(default)]
    pub(crate) data: SignalData,
}

/// `compaction`: a summary of the author's view of entries `1..=upto`; the
/// author's projection shows the summary instead of what it covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compaction {
    /// The summary text.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub summary: Arc<str>,
    /// The last seq the summary covers.
    pub upto: u64,
}

#[cfg(test)]
mod tests {
    use roundtable_providers::{StopReason, ThinkingContent, ToolCall};

    use super::*;

    fn message(content: Vec<AssistantBlock>, stop_reason: StopReason) -> AssistantMessage {
        let mut m = AssistantMessage::empty("api", "p", "m", 1);
        m.content = content;
        m.stop_reason = stop_reason;
        m
    }

    #[test]
    fn an_entry_knows_what_readers_see_of_its_message() {
        let call = AssistantBlock::ToolCall(ToolCall::new("c1", "read", Default::default()));
        let thinking = AssistantBlock::Thinking(ThinkingContent::new("hmm"));
        let answer = AssistantBlock::text("the answer");
        let cases = [
            (vec![answer.clone()], StopReason::Stop, Some("the answer")),
            (vec![answer.clone()], StopReason::Length, Some("the answer")),
            (vec![answer.clone()], StopReason::Error, None),
            (vec![answer.clone()], StopReason::Aborted, None),
            (
                vec![thinking.clone(), call.clone()],
                StopReason::ToolUse,
                None,
            ),
            (vec![answer.clone(), call], StopReason::Stop, None),
        ];
        for (content, stop, text) in cases {
            let answer = Answer::of(&message(content, stop));
            match text {
                Some(t) => assert_eq!(answer, Answer::Text(Arc::from(t))),
                None => assert_eq!(answer, Answer::Intermediate),
            }
        }
        for other in [
            vec![],
            vec![AssistantBlock::text("")],
            vec![thinking, answer.clone()],
            vec![answer.clone(), answer],
        ] {
            let answer = Answer::of(&message(other, StopReason::Stop));
            assert_eq!(answer, Answer::Other);
            assert!(answer.is_final());
        }
        assert!(!Answer::Intermediate.is_final());
        // Kept inside the widest body: an entry does not grow for it.
        assert_eq!(std::mem::size_of::<AssistantEntry>(), 48);
        assert!(std::mem::size_of::<AssistantEntry>() <= std::mem::size_of::<crate::TurnStarted>());
    }

    #[test]
    fn an_entry_is_two_cache_lines_wide() {
        // A projection streams every entry of a thread: the widest body sets
        // the width of all. The rare or wide parts are behind a pointer.
        assert_eq!(std::mem::size_of::<Chat>(), 40);
        assert!(std::mem::size_of::<crate::TurnStarted>() <= 56);
        assert!(std::mem::size_of::<Signal>() <= 56);
        assert!(std::mem::size_of::<EntryBody>() <= 64);
        assert!(std::mem::size_of::<crate::Entry>() <= 128);
    }

    #[test]
    fn the_answer_is_not_written_and_is_worked_out_again_when_read() {
        let entry = AssistantEntry::new(
            Some("turn-1".into()),
            message(vec![AssistantBlock::text("hello")], StopReason::Stop),
        );
        assert_eq!(entry.answer(), &Answer::Text(Arc::from("hello")));
        let json = serde_json::to_value(&entry).unwrap();
        assert_eq!(
            json.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["turn", "message"]
        );
        let back: AssistantEntry = serde_json::from_value(json).unwrap();
        assert_eq!(back, entry);
        assert_eq!(back.answer(), entry.answer());
        // The answer shares the message's text.
        let Answer::Text(text) = entry.answer() else {
            unreachable!()
        };
        let AssistantBlock::Text(t) = &entry.message().content[0] else {
            unreachable!()
        };
        assert!(Arc::ptr_eq(text, &t.text));
    }
}
