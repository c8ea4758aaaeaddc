//! The dispatcher: which bots wake for a new entry. Pure: the same inputs
//! always give the same wakes, and it reads no clock, does no I/O and draws no
//! random numbers (`now` is an argument).

use std::sync::Arc;

use roundtable_thread_stream::{Entry, EntryBody};

use crate::event::{Speaker, event_text, speaker};
use crate::handle::mentioned_handles;
use crate::policy::Policy;
use crate::roster::{Role, Roster, Trigger};

/// Why a bot wakes. The order is the dispatcher's priority under the fanout
/// cap: mentions first, then `always` bots, then ambient candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WakeReason {
    /// The bot was named (`@handle` or a structured mention).
    Mention,
    /// The bot wakes on every eligible event.
    Always,
    /// The bot is ambient: it wakes only if the [bot gate](crate::BotGate) admits it.
    Ambient,
}

impl WakeReason {
    /// The reason as written in a `turn.started` entry: `mention`, `always`, `ambient`.
    pub fn as_str(self) -> &'static str {
        match self {
            WakeReason::Mention => "mention",
            WakeReason::Always => "always",
            WakeReason::Ambient => "ambient",
        }
    }
}

/// A decision to wake one bot for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// The bot's id.
    pub bot: Arc<str>,
    /// Why it wakes.
    pub reason: WakeReason,
    /// The hop depth of the turn it starts: 1 for an event a human wrote, the
    /// depth of the turn that wrote the event plus one for a bot's event. The
    /// runner writes it into the turn's `turn.started` entry.
    pub depth: u32,
    /// The seq of the event that woke it.
    pub trigger: u64,
}

/// Decides which bots wake for `event`.
///
/// `recent` is the thread's latest entries in seq order (entries at or after
/// `event.seq` are ignored). It must reach back far enough for the loop guard's
/// window and to the `turn.started` entries of the turns still running; a few
/// hundred entries are plenty. `now` is Unix milliseconds, like `Entry::at`.
///
/// The rules, in order:
///
/// 1. Only a `chat` entry or a bot's final assistant text (no tool calls, not
///    failed, some text) is an event; every other entry wakes nobody.
/// 2. Hop limit: a human's event wakes at depth 1; a bot's event at its turn's
///    depth + 1 (the depth of the `turn.started` of the entry's turn, else of
///    the bot's latest `turn.started`, else 1). Nothing wakes deeper than
///    [`Policy::max_depth`].
/// 3. Loop guard: if the event and the events before it hold
///    [`Policy::loop_events`] bot-authored events with no human `chat` between
///    them, all within [`Policy::loop_window`] of `now`, nobody wakes. A human
///    entry resets the count.
/// 4. Every bot but the author is considered once: named bots wake with
///    [`WakeReason::Mention`] whatever their trigger, unnamed `always` bots with
///    [`WakeReason::Always`], unnamed `ambient` bots as
///    [`WakeReason::Ambient`] candidates for the gate; unnamed `mention` bots
///    stay asleep. Humans are never woken.
/// 5. Fanout cap: at most [`Policy::max_fanout`] wakes, by reason (mention,
///    always, ambient), then least recently woken first (by their latest
///    `turn.started` in `recent`; never woken counts as oldest), then roster
///    order. The result is in that order.
///
/// ```
/// use roundtable_dispatch::{BotProfile, Participant, Policy, Roster, Trigger, WakeReason, dispatch};
/// use roundtable_thread_stream::{EntryBody, NewEntry, ThreadId};
///
/// let roster = Roster::new([
///     Participant::human("u1", "Alice"),
///     Participant::bot("b1", "Archive Bot", BotProfile::new(Trigger::Mention, "You keep the archive.")),
///     Participant::bot("b2", "Coder", BotProfile::new(Trigger::Mention, "You write code.")),
/// ])?;
/// let thread = ThreadId::new("t")?;
/// let event = NewEntry::new("u1", EntryBody::chat("@archive-bot where is the Q3 report?"))
///     .at(1_000)
///     .into_entry(thread, 1);
/// let wakes = dispatch(&event, &[], &roster, &Policy::default(), 1_000);
/// assert_eq!(wakes.len(), 1);
/// assert_eq!(&*wakes[0].bot, "b1");
/// assert_eq!(wakes[0].reason, WakeReason::Mention);
/// assert_eq!(wakes[0].depth, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn dispatch(
    event: &Entry,
    recent: &[Entry],
    roster: &Roster,
    policy: &Policy,
    now: i64,
) -> Vec<Wake> {
    let Some(who) = speaker(event, roster) else {
        return Vec::new();
    };
    if policy.max_fanout == 0 {
        return Vec::new();
    }
    let history = || recent.iter().rev().filter(|e| e.seq < event.seq);
    let Ok(depth) = depth_or_halt(event, who, recent, roster, policy, now) else {
        return Vec::new();
    };

    let named = named_bots(event, roster);
    let mut candidates = wake_candidates(event, roster, &named);
    if candidates.len() > 1 {
        order_by_last_wake(&mut candidates, history(), roster);
    }
    candidates.truncate(policy.max_fanout);
    candidates
        .into_iter()
        .map(|(reason, i)| Wake {
            bot: roster.participants()[i].id.clone(),
            reason,
            depth,
            trigger: event.seq,
        })
        .collect()
}

/// Why the dispatcher woke nobody for an event whatever the roster: a
/// host shows it (a room's "the bots stopped" line) so that a silence is
/// explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Halt {
    /// The event would wake deeper than [`Policy::max_depth`].
    HopLimit,
    /// The event ends [`Policy::loop_events`] bot events in a row: the loop
    /// guard stops every wake until a human speaks.
    LoopGuard,
}

impl Halt {
    /// The halt as a host writes it: `hop_limit`, `loop_guard`.
    pub fn as_str(self) -> &'static str {
        match self {
            Halt::HopLimit => "hop_limit",
            Halt::LoopGuard => "loop_guard",
        }
    }
}

/// Why [`dispatch`] wakes nobody for `event` (same arguments): the hop
/// limit or the loop guard, or `None` when neither stops it (it may still
/// wake nobody, for want of a named, `always` or ambient bot).
pub fn halt(
    event: &Entry,
    recent: &[Entry],
    roster: &Roster,
    policy: &Policy,
    now: i64,
) -> Option<Halt> {
    let who = speaker(event, roster)?;
    depth_or_halt(event, who, recent, roster, policy, now).err()
}

/// The depth `event` wakes at, or why it wakes nobody (rules 2 and 3 of
/// [`dispatch`]).
fn depth_or_halt(
    event: &Entry,
    who: Speaker,
    recent: &[Entry],
    roster: &Roster,
    policy: &Policy,
    now: i64,
) -> Result<u32, Halt> {
    let history = || recent.iter().rev().filter(|e| e.seq < event.seq);
    let depth = match who {
        Speaker::Human => 1,
        Speaker::Bot => turn_depth(event, history()).saturating_add(1),
    };
    if depth > policy.max_depth {
        return Err(Halt::HopLimit);
    }
    if who == Speaker::Bot && loop_guard_trips(event, history(), roster, policy, now) {
        return Err(Halt::LoopGuard);
    }
    Ok(depth)
}

/// Which participants `event` names, by roster index: its structured
/// mentions and the `@handle`s in its text.
fn named_bots(event: &Entry, roster: &Roster) -> Vec<bool> {
    let mut named = vec![false; roster.len()];
    if let EntryBody::Chat(chat) = &event.body {
        for id in &chat.mentions {
            if let Some(i) = roster.index_of(id) {
                named[i] = true;
            }
        }
    }
    if let Some(text) = event_text(event) {
        for handle in mentioned_handles(&text) {
            if let Some(i) = roster.index_of_handle(&handle) {
                named[i] = true;
            }
        }
    }
    named
}

/// The bots that may wake (every bot but the author that is named, or
/// `always` or `ambient`), as (reason, roster index), in roster order.
fn wake_candidates(event: &Entry, roster: &Roster, named: &[bool]) -> Vec<(WakeReason, usize)> {
    let mut candidates: Vec<(WakeReason, usize)> = Vec::new();
    for (i, p) in roster.participants().iter().enumerate() {
        let Role::Bot(profile) = &p.role else {
            continue;
        };
        if *p.id == *event.author {
            continue;
        }
        let reason = if named[i] {
            WakeReason::Mention
        } else {
            match profile.trigger {
                Trigger::Always => WakeReason::Always,
                Trigger::Ambient => WakeReason::Ambient,
                Trigger::Mention => continue,
            }
        };
        candidates.push((reason, i));
    }
    candidates
}

/// Orders `candidates` by reason, then least recently woken first (by each
/// bot's latest `turn.started` in `history`, newest first), then roster
/// order.
fn order_by_last_wake<'a>(
    candidates: &mut [(WakeReason, usize)],
    history: impl Iterator<Item = &'a Entry>,
    roster: &Roster,
) {
    // Fairness: the seq of each bot's latest wake (`turn.started`), 0 if none.
    let mut last_woken = vec![0u64; roster.len()];
    for e in history {
        if let EntryBody::TurnStarted(_) = e.body
            && let Some(i) = roster.index_of(&e.author)
            && last_woken[i] == 0
        {
            last_woken[i] = e.seq;
        }
    }
    candidates.sort_by_key(|&(reason, i)| (reason, last_woken[i], i));
}

/// The depth of the turn that wrote a bot's `event`: its own turn's
/// `turn.started` when the entry names a turn and it is in sight, else the
/// author's latest `turn.started`, else 1 (as if a human had woken it).
fn turn_depth<'a>(event: &Entry, history: impl Iterator<Item = &'a Entry>) -> u32 {
    let turn = match &event.body {
        EntryBody::Assistant(a) => a.turn.as_deref(),
        _ => None,
    };
    let mut latest = None;
    for e in history {
        let EntryBody::TurnStarted(started) = &e.body else {
            continue;
        };
        if e.author != event.author {
            continue;
        }
        let depth = started.depth.max(1);
        match turn {
            Some(turn) if *started.turn == *turn => return depth,
            Some(_) => {
                latest.get_or_insert(depth);
            }
            None => return depth,
        }
    }
    latest.unwrap_or(1)
}

/// True when `event` and the events before it are `loop_events` bot events
/// in a row inside the window.
fn loop_guard_trips<'a>(
    event: &'a Entry,
    history: impl Iterator<Item = &'a Entry>,
    roster: &Roster,
    policy: &Policy,
    now: i64,
) -> bool {
    if policy.loop_events == 0 {
        return false;
    }
    let window = i64::try_from(policy.loop_window.as_millis()).unwrap_or(i64::MAX);
    let since = now.saturating_sub(window);
    let mut count = 0;
    for e in std::iter::once(event).chain(history) {
        if e.at < since {
            break;
        }
        match speaker(e, roster) {
            Some(Speaker::Human) => break,
            Some(Speaker::Bot) => {
                count += 1;
                if count >= policy.loop_events {
                    return true;
                }
            }
            None => {}
        }
    }
    false
}
