//! A bot's view split at its latest compaction, and the part after it cut
//! into units: the pieces a compaction keeps or summarises whole.
//!
//! - An assistant message of the bot with its tool calls, their results
//!   and whatever approvals came between is one unit: a provider rejects a
//!   call without its result, and a result whose call was summarised would
//!   be dropped from the projection (rule 2), so they never part.
//! - Every other message the projection shows (a participant's `chat`,
//!   another bot's final answer, the bot's own plain `chat` or answer
//!   without calls) is a unit of its own.
//! - A unit whose call still waits for its result (a tool running, an
//!   approval pending) in a turn not yet closed is open: it stays in full.
//!
//! Entries the projection never shows (signals, chunks, lifecycle, other
//! authors' tool traffic, failed messages) belong to no unit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use roundtable_providers::{AssistantBlock, Message};
use roundtable_thread_stream::{AssistantEntry, Chat, Entry, EntryBody, ToolResultEntry};

use super::estimate::{CHARS_PER_TOKEN, IMAGE_TOKENS, blocks_size, message_tokens};
use super::view::ViewNumbering;
use crate::event::is_final;
use crate::roster::Roster;

/// One unit of a bot's view: entries kept or summarised together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewUnit {
    /// The positions of its entries in the view, ascending.
    pub positions: Vec<usize>,
    /// Its estimated tokens as the projection shows it.
    pub tokens: u64,
    /// True while a call of it waits for its result in an open turn.
    pub open: bool,
}

impl ViewUnit {
    /// The position of its first entry.
    pub fn first(&self) -> usize {
        self.positions.first().copied().unwrap_or(0)
    }

    /// The position of its last entry.
    pub fn last(&self) -> usize {
        self.positions.last().copied().unwrap_or(0)
    }
}

/// A bot's view split at its latest compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSplit {
    /// The summary of the bot's latest compaction, if it has one.
    pub summary: Option<Arc<str>>,
    /// The view positions that compaction covers are `0..tail_start`.
    pub tail_start: usize,
    /// The units after it, ordered by their first position (the order the
    /// projection shows them in).
    pub units: Vec<ViewUnit>,
}

impl ViewSplit {
    /// The estimated tokens of the units.
    pub fn tail_tokens(&self) -> u64 {
        self.units
            .iter()
            .map(|u| u.tokens)
            .fold(0, u64::saturating_add)
    }
}

/// Splits bot `self_id`'s `view` (its entries in projection order, store
/// seqs kept, see [`project_view`](crate::compaction::project_view)) at its latest
/// compaction and cuts the rest into units.
pub fn split_view(self_id: &str, view: &[Entry], roster: &Roster) -> ViewSplit {
    let (summary, tail_start) = latest_compaction(self_id, view);
    let closed_turns = closed_turns(self_id, view);
    let units = build_units(self_id, view, tail_start, roster)
        .into_iter()
        .map(|u| ViewUnit {
            open: u.pending > 0
                && u.turn
                    .as_deref()
                    .is_some_and(|turn| !closed_turns.contains(turn)),
            positions: u.positions,
            tokens: u.tokens,
        })
        .collect();
    ViewSplit {
        summary,
        tail_start,
        units,
    }
}

/// The summary of bot `self_id`'s latest compaction in `view`, and the view
/// position its tail starts at (0 without one).
fn latest_compaction(self_id: &str, view: &[Entry]) -> (Option<Arc<str>>, usize) {
    let mut numbering = ViewNumbering::default();
    let mut summary = None;
    let mut tail_start = 0;
    for e in view {
        let numbered = numbering.renumber(e.clone());
        if let EntryBody::Compaction(c) = &numbered.body
            && *e.author == *self_id
        {
            summary = Some(c.summary.clone());
            tail_start = usize::try_from(c.upto.min(numbered.seq)).unwrap_or(usize::MAX);
        }
    }
    (summary, tail_start)
}

/// The turns of bot `self_id` that ended or failed.
fn closed_turns<'a>(self_id: &str, view: &'a [Entry]) -> HashSet<&'a str> {
    view.iter()
        .filter(|e| *e.author == *self_id)
        .filter_map(|e| match &e.body {
            EntryBody::TurnEnded(t) => Some(&*t.turn),
            EntryBody::TurnFailed(t) => Some(&*t.turn),
            _ => None,
        })
        .collect()
}

/// Cuts `view` from position `tail_start` into units, in the order of their
/// first entries.
fn build_units(self_id: &str, view: &[Entry], tail_start: usize, roster: &Roster) -> Vec<Building> {
    let mut units: Vec<Building> = Vec::new();
    // Call id -> the unit waiting for its result.
    let mut open_calls: HashMap<Arc<str>, usize> = HashMap::new();
    for (position, e) in view.iter().enumerate().skip(tail_start) {
        let own = *e.author == *self_id;
        match &e.body {
            EntryBody::Chat(chat) => {
                let label = if own {
                    0
                } else {
                    label_chars(roster.name_of(&e.author))
                };
                units.push(Building::single(position, chat_tokens(chat, label)));
            }
            EntryBody::Assistant(a) if own && !a.message().stop_reason.is_failure() => {
                push_own_message(&mut units, &mut open_calls, position, a);
            }
            EntryBody::Assistant(a) if !own && is_final(a.message()) => {
                let label = label_chars(roster.name_of(&e.author));
                units.push(Building::single(position, answer_tokens(a, label)));
            }
            EntryBody::ToolResult(r) if own => {
                add_result(&mut units, &mut open_calls, position, r);
            }
            _ => {}
        }
    }
    units
}

/// The tokens of a `chat` shown after a label of `label` characters.
fn chat_tokens(chat: &Chat, label: u64) -> u64 {
    let (chars, images) = blocks_size(&chat.parts);
    let chars = label
        .saturating_add(text_chars(&chat.text))
        .saturating_add(chars);
    size(chars, images)
}

/// The tokens of another bot's final answer: its text after its label.
fn answer_tokens(a: &AssistantEntry, label: u64) -> u64 {
    let chars = a
        .message()
        .content
        .iter()
        .filter_map(|b| match b {
            AssistantBlock::Text(t) => Some(text_chars(&t.text)),
            _ => None,
        })
        .fold(label, u64::saturating_add);
    size(chars, 0)
}

/// Starts the unit of the bot's own message `a`, its calls waiting for
/// their results in `open_calls`.
fn push_own_message(
    units: &mut Vec<Building>,
    open_calls: &mut HashMap<Arc<str>, usize>,
    position: usize,
    a: &AssistantEntry,
) {
    let index = units.len();
    let mut unit = Building::single(
        position,
        message_tokens(&Message::Assistant(a.message().clone())),
    );
    unit.turn = a.turn.clone();
    for call in a.message().tool_calls() {
        unit.pending += 1;
        // An older call with the same id is answered for good by a
        // back-fill (it may be one of this message's).
        match open_calls.insert(call.id.clone(), index) {
            Some(older) if older == index => {
                unit.pending = unit.pending.saturating_sub(1);
            }
            Some(older) => {
                if let Some(older) = units.get_mut(older) {
                    older.pending = older.pending.saturating_sub(1);
                }
            }
            None => {}
        }
    }
    units.push(unit);
}

/// Adds the bot's tool result `r` to the unit of its call, when that call
/// is waiting for it; other results belong to no unit.
fn add_result(
    units: &mut [Building],
    open_calls: &mut HashMap<Arc<str>, usize>,
    position: usize,
    r: &ToolResultEntry,
) {
    if let Some(unit) = open_calls
        .remove(&r.message.tool_call_id)
        .and_then(|index| units.get_mut(index))
    {
        unit.positions.push(position);
        unit.tokens = unit
            .tokens
            .saturating_add(message_tokens(&Message::ToolResult(r.message.clone())));
        unit.pending = unit.pending.saturating_sub(1);
    }
}

/// A unit while its results are gathered.
struct Building {
    positions: Vec<usize>,
    tokens: u64,
    pending: u32,
    turn: Option<Arc<str>>,
}

impl Building {
    fn single(position: usize, tokens: u64) -> Self {
        Self {
            positions: vec![position],
            tokens,
            pending: 0,
            turn: None,
        }
    }
}

fn text_chars(text: &str) -> u64 {
    u64::try_from(text.chars().count()).unwrap_or(u64::MAX)
}

/// `[Name]: ` and the newline between merged turns.
fn label_chars(name: &str) -> u64 {
    text_chars(name).saturating_add(4)
}

fn size(chars: u64, images: u64) -> u64 {
    chars
        .div_ceil(CHARS_PER_TOKEN)
        .saturating_add(images.saturating_mul(IMAGE_TOKENS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::estimate::text_tokens;

    #[test]
    fn a_label_costs_its_name_and_punctuation() {
        assert_eq!(size(label_chars("Al"), 0), text_tokens("[Al]: "));
    }
}
