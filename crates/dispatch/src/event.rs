//! Which entries are events: what can wake a bot, and who spoke.

use std::borrow::Cow;

use roundtable_providers::{AssistantBlock, AssistantMessage};
use roundtable_thread_stream::{Entry, EntryBody};

use crate::roster::Roster;

/// True when `message` is a bot's *final* message of a turn: the answer
/// readers see. It has no tool calls and did not fail (`error`, `aborted`).
/// Intermediate messages (narration next to tool calls) and failed ones are
/// not final.
pub fn is_final(message: &AssistantMessage) -> bool {
    message.is_final()
}

/// The text of `message` if it is final and has any text.
pub(crate) fn final_text(message: &AssistantMessage) -> Option<String> {
    if !is_final(message) {
        return None;
    }
    let text = message.text();
    (!text.is_empty()).then_some(text)
}

/// The text of an entry that can wake bots: a `chat` entry's text, or the
/// final text of a `pi.assistant` entry. `None` for every other entry (tool
/// results, chunks, signals, compaction, lifecycle, intermediate or failed
/// assistant messages): those never wake anyone.
pub fn event_text(entry: &Entry) -> Option<Cow<'_, str>> {
    match &entry.body {
        EntryBody::Chat(chat) => Some(Cow::Borrowed(&chat.text)),
        EntryBody::Assistant(a) => final_text(a.message()).map(Cow::Owned),
        _ => None,
    }
}

/// Who spoke an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speaker {
    /// A human (anyone who is not a bot in the roster and wrote `chat`).
    Human,
    /// A bot: a roster bot, or the author of a `pi.assistant` entry.
    Bot,
}

/// The speaker of `entry` if it is an event (it could wake someone).
pub(crate) fn speaker(entry: &Entry, roster: &Roster) -> Option<Speaker> {
    match &entry.body {
        EntryBody::Chat(_) if roster.is_bot(&entry.author) => Some(Speaker::Bot),
        EntryBody::Chat(_) => Some(Speaker::Human),
        EntryBody::Assistant(a) if is_final(a.message()) && has_text(a.message()) => {
            Some(Speaker::Bot)
        }
        _ => None,
    }
}

fn has_text(message: &AssistantMessage) -> bool {
    message
        .content
        .iter()
        .any(|b| matches!(b, AssistantBlock::Text(t) if !t.text.is_empty()))
}
