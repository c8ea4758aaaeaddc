//! What a room is, as stored: a room is a thread of the store, and its
//! title, members and overrides are `signal.room.*` entries of that thread,
//! folded here into a [`Room`]. Nothing about a room lives outside its
//! thread, so any process reading the store knows the room as well as the
//! one that wrote it.

use std::collections::BTreeMap;
use std::sync::Arc;

use roundtable_chat_runner::TriggerOverride;
use roundtable_chat_runner::lifecycle::records::{ApprovalDecidedRecord, ApprovalRequestedRecord};
use roundtable_dispatch::Trigger;
use roundtable_thread_stream::{Entry, EntryBody, NewEntry, Signal, ThreadId};
use serde::{Deserialize, Serialize};

/// The signal that opens a room: its first entry.
pub(crate) const OPENED: &str = "room.opened";
/// A participant joined.
pub(crate) const JOINED: &str = "room.joined";
/// A participant left (or was removed).
pub(crate) const LEFT: &str = "room.left";
/// A bot's override was set or cleared.
pub(crate) const OVERRIDE: &str = "room.override";
/// The loop guard or the hop limit stopped every wake of an event.
pub(crate) const HALTED: &str = "room.halted";

/// The author of the entries the server writes itself (halts).
pub(crate) const SERVER_AUTHOR: &str = "roundtable";

/// Whether a participant is a person or a bot of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MemberKind {
    /// A person, by user id.
    Human,
    /// A bot of the server's catalogue, by bot id.
    Bot,
}

/// One participant of a room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct Member {
    /// The user id or bot id (the author of what they write).
    pub(crate) id: Arc<str>,
    /// Human or bot.
    pub(crate) kind: MemberKind,
}

/// How one bot wakes in one room instead of its catalogue trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OverrideMode {
    /// Never wakes, not even when named.
    Mute,
    /// Wakes only when named.
    MentionOnly,
    /// Wakes on every message.
    Always,
}

impl OverrideMode {
    /// The runner's override for this mode.
    pub(crate) fn trigger_override(self) -> TriggerOverride {
        match self {
            Self::Mute => TriggerOverride::muted(),
            Self::MentionOnly => TriggerOverride::default().trigger(Trigger::Mention),
            Self::Always => TriggerOverride::default().trigger(Trigger::Always),
        }
    }
}

/// `signal.room.opened`.
#[derive(Debug, Serialize, Deserialize)]
struct Opened {
    title: String,
    members: Vec<Member>,
}

/// `signal.room.joined`.
#[derive(Debug, Serialize, Deserialize)]
struct Joined {
    member: Member,
}

/// `signal.room.left`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Left {
    pub(crate) member: Arc<str>,
}

/// `signal.room.override`: `mode` absent clears it.
#[derive(Debug, Serialize, Deserialize)]
struct OverrideSet {
    bot: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<OverrideMode>,
}

/// `signal.room.halted`.
#[derive(Debug, Serialize)]
struct Halted {
    trigger: u64,
    halt: &'static str,
}

/// The part of `signal.room.halted` that says which event it stopped.
#[derive(Debug, Deserialize)]
struct HaltedTrigger {
    trigger: u64,
}

/// How many decided calls a room remembers, to tell a late decider that
/// the call was decided already.
const DECIDED_KEPT: usize = 64;

/// A bot's gated call waiting for a member's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct PendingApproval {
    /// The bot asking.
    pub(crate) bot: Arc<str>,
    /// Its turn.
    pub(crate) turn: Arc<str>,
    /// The call's id (what a decision names).
    pub(crate) call_id: Arc<str>,
    /// The tool it calls.
    pub(crate) tool: Arc<str>,
    /// The seq of the request's entry (its arguments are there).
    pub(crate) seq: u64,
}

/// A room: the fold of its thread's room signals and approvals.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Room {
    /// The room's id: its thread.
    pub(crate) id: ThreadId,
    pub(crate) title: String,
    pub(crate) created_by: Arc<str>,
    /// Unix milliseconds.
    pub(crate) created_at: i64,
    /// The participants, in the order they joined.
    pub(crate) members: Vec<Member>,
    /// Per-bot overrides, by bot id.
    pub(crate) overrides: BTreeMap<Arc<str>, OverrideMode>,
    /// Gated calls waiting for a member, in the order asked.
    pub(crate) pending: Vec<PendingApproval>,
    /// The latest decided calls (turn, call id), oldest first.
    pub(crate) decided: std::collections::VecDeque<(Arc<str>, Arc<str>)>,
}

impl Room {
    /// The room a thread's first entry opens, if it opens one.
    pub(crate) fn opened_by(entry: &Entry) -> Option<Self> {
        let opened: Opened = signal(entry, OPENED)?;
        Some(Self {
            id: entry.thread.clone(),
            title: opened.title,
            created_by: entry.author.clone(),
            created_at: entry.at,
            members: opened.members,
            overrides: BTreeMap::new(),
            pending: Vec::new(),
            decided: std::collections::VecDeque::new(),
        })
    }

    /// Folds a later entry in (anything but a room signal, an approval or
    /// a turn's end changes nothing).
    pub(crate) fn apply(&mut self, entry: &Entry) {
        if let Some(Joined { member }) = signal(entry, JOINED) {
            if !self.is_member(&member.id) {
                self.members.push(member);
            }
        } else if let Some(Left { member }) = signal(entry, LEFT) {
            self.members.retain(|m| m.id != member);
            self.overrides.remove(&member);
        } else if let Some(OverrideSet { bot, mode }) = signal(entry, OVERRIDE) {
            match mode {
                Some(mode) => self.overrides.insert(bot, mode),
                None => self.overrides.remove(&bot),
            };
        } else {
            self.apply_approval(entry);
        }
    }

    /// Folds an approval's request or decision, or the end of a turn
    /// (whose calls no longer wait).
    fn apply_approval(&mut self, entry: &Entry) {
        match &entry.body {
            EntryBody::Signal(_) => {
                if let Some(asked) = ApprovalRequestedRecord::from_body(&entry.body) {
                    self.pending.push(PendingApproval {
                        bot: entry.author.clone(),
                        turn: asked.turn,
                        call_id: asked.call_id,
                        tool: asked.tool,
                        seq: entry.seq,
                    });
                } else if let Some(decided) = ApprovalDecidedRecord::from_body(&entry.body) {
                    self.pending
                        .retain(|p| p.turn != decided.turn || p.call_id != decided.call_id);
                    if self.decided.len() == DECIDED_KEPT {
                        self.decided.pop_front();
                    }
                    self.decided.push_back((decided.turn, decided.call_id));
                }
            }
            EntryBody::TurnEnded(end) => self.pending.retain(|p| p.turn != end.turn),
            EntryBody::TurnFailed(end) => self.pending.retain(|p| p.turn != end.turn),
            _ => {}
        }
    }

    /// The member with this id.
    pub(crate) fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| *m.id == *id)
    }

    /// True when `id` is in the room.
    pub(crate) fn is_member(&self, id: &str) -> bool {
        self.member(id).is_some()
    }
}

/// The data of `entry` when it is the signal `name`, read as a `T`.
fn signal<T: serde::de::DeserializeOwned>(entry: &Entry, name: &str) -> Option<T> {
    match &entry.body {
        EntryBody::Signal(s) if s.name == name => s.data.decode().ok(),
        _ => None,
    }
}

/// A room signal `name` by `author` carrying `data`.
fn entry(author: &str, name: &str, data: &impl Serialize) -> NewEntry {
    // The records are plain structs of strings and numbers: they always
    // encode; an empty object stands in if one ever did not.
    let signal = Signal::encode(name, data).unwrap_or_else(|_| Signal {
        name: name.to_string(),
        data: serde_json::json!({}).into(),
    });
    NewEntry::new(author, EntryBody::Signal(signal))
}

/// The entry that opens a room.
pub(crate) fn opened(author: &str, title: &str, members: &[Member]) -> NewEntry {
    let data = Opened {
        title: title.to_string(),
        members: members.to_vec(),
    };
    entry(author, OPENED, &data)
}

/// The entry of `member` joining.
pub(crate) fn joined(author: &str, member: Member) -> NewEntry {
    entry(author, JOINED, &Joined { member })
}

/// The entry of `member` leaving.
pub(crate) fn left(author: &str, member: &str) -> NewEntry {
    let member = Arc::from(member);
    entry(author, LEFT, &Left { member })
}

/// The entry setting (or, with `None`, clearing) `bot`'s override.
pub(crate) fn override_set(author: &str, bot: &str, mode: Option<OverrideMode>) -> NewEntry {
    let bot = Arc::from(bot);
    entry(author, OVERRIDE, &OverrideSet { bot, mode })
}

/// True when `entry` records a halt of event `trigger`.
pub(crate) fn halts(entry: &Entry, trigger: u64) -> bool {
    signal::<HaltedTrigger>(entry, HALTED).is_some_and(|h| h.trigger == trigger)
}

/// The entry saying that `halt` stopped every wake of event `trigger`.
pub(crate) fn halted(trigger: u64, halt: roundtable_dispatch::Halt) -> NewEntry {
    let data = Halted {
        trigger,
        halt: halt.as_str(),
    };
    entry(SERVER_AUTHOR, HALTED, &data)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn stored(seq: u64, entry: NewEntry) -> Entry {
        entry.into_entry(ThreadId::new("room-1").unwrap(), seq)
    }

    fn human(id: &str) -> Member {
        Member {
            id: id.into(),
            kind: MemberKind::Human,
        }
    }

    #[test]
    fn a_room_is_the_fold_of_its_signals() {
        let bot = Member {
            id: "chatty".into(),
            kind: MemberKind::Bot,
        };
        let first = stored(1, opened("alice", "Launch", &[human("alice"), bot]));
        let mut room = Room::opened_by(&first).unwrap();
        assert_eq!(room.title, "Launch");
        assert_eq!(&*room.created_by, "alice");
        room.apply(&stored(2, joined("alice", human("bob"))));
        room.apply(&stored(
            3,
            override_set("bob", "chatty", Some(OverrideMode::Mute)),
        ));
        room.apply(&stored(4, NewEntry::new("bob", EntryBody::chat("hi"))));
        assert!(room.is_member("bob"));
        assert_eq!(room.overrides.get("chatty"), Some(&OverrideMode::Mute));
        room.apply(&stored(5, left("alice", "chatty")));
        assert!(!room.is_member("chatty"));
        assert!(room.overrides.is_empty());
        let chat = stored(1, NewEntry::new("bob", EntryBody::chat("hi")));
        assert!(Room::opened_by(&chat).is_none());
    }
}
