//! What a chat turn leaves in its session's thread.
//!
//! Per turn, in one session thread (`chat-<uuid>`):
//!
//! 1. before the model runs, in one append: a `chat` entry with the prompt
//!    (authored by the user) and `turn.started` (authored by the agent);
//! 2. while the turn runs, authored by the agent: every new message as a
//!    `pi.assistant` / `pi.tool_result` entry carrying the turn id, as soon
//!    as it is complete (so a crash keeps what the turn had done);
//! 3. after the turn, in one append: `turn.ended` (reason = the finish
//!    reason) or `turn.failed` (reason = the error), then
//!    `signal.turn_result` whose `data` is a [`TurnResultRecord`] (finish
//!    reason, final text, rounds, token usage and cost, duration).
//!
//! A turn the process stopped in the middle of (a `turn.started` with no
//! end) is closed as `turn.failed {reason: "interrupted"}` before the
//! session's next prompt.
//!
//! The session index thread (`chat-sessions` by default) maps session keys
//! to session ids: `signal.chat_session` `{key, session}` when a session is
//! opened and `signal.chat_reset` `{key, session}` when it is reset.

use std::sync::Arc;

use roundtable_providers::Usage;
use roundtable_thread_stream::{Entry, EntryBody, NewEntry, Signal, TurnEnded, TurnFailed};
use serde::{Deserialize, Serialize};

use crate::event::FinishReason;
use crate::turn::TurnOutcome;

/// The signal name of a turn's result record (`signal.turn_result`).
pub const TURN_RESULT_SIGNAL: &str = "turn_result";
/// The signal name of a session opened for a key (`signal.chat_session`).
pub const SESSION_SIGNAL: &str = "chat_session";
/// The signal name of a session reset (`signal.chat_reset`).
pub const RESET_SIGNAL: &str = "chat_reset";

/// The final record of a turn, stored as the `data` of `signal.turn_result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnResultRecord {
    /// The turn's id.
    pub turn: Arc<str>,
    /// Why it ended.
    pub finish_reason: FinishReason,
    /// The final assistant text.
    pub text: String,
    /// What went wrong, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Model calls made.
    pub rounds: u32,
    /// Tokens and cost summed over the rounds (pi-ai's usage shape).
    pub usage: Usage,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// The model, as `provider/id`.
    pub model: String,
}

impl TurnResultRecord {
    /// The record of `outcome`.
    pub fn new(outcome: &TurnOutcome, model: String) -> Self {
        Self {
            turn: outcome.turn_id.clone(),
            finish_reason: outcome.finish_reason,
            text: outcome.text.clone(),
            error: outcome.error.clone(),
            rounds: outcome.rounds,
            usage: outcome.usage,
            duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            model,
        }
    }

    /// True when the turn's prompt and answer join the replayed history.
    pub fn replayable(&self) -> bool {
        self.finish_reason.is_success() && !self.text.trim().is_empty()
    }
}

/// The entries that close a finished turn (step 3 above): `turn.ended` or
/// `turn.failed`, then `signal.turn_result`.
pub(crate) fn closing_entries(
    agent: &Arc<str>,
    outcome: &TurnOutcome,
    record: &TurnResultRecord,
) -> Vec<NewEntry> {
    let end = match &outcome.error {
        None => EntryBody::TurnEnded(TurnEnded {
            turn: outcome.turn_id.clone(),
            reason: outcome.finish_reason.as_str().to_string(),
        }),
        Some(error) => EntryBody::TurnFailed(TurnFailed {
            turn: outcome.turn_id.clone(),
            reason: format!("{}: {error}", outcome.finish_reason),
        }),
    };
    vec![
        NewEntry::new(agent.clone(), end),
        NewEntry::new(
            agent.clone(),
            EntryBody::Signal(Signal {
                name: TURN_RESULT_SIGNAL.to_string(),
                data: serde_json::to_value(record).unwrap_or_default(),
            }),
        ),
    ]
}

/// The turns `agent` started in `entries` that never ended or failed (the
/// process stopped in the middle of them).
pub(crate) fn open_turns(agent: &str, entries: &[Entry]) -> Vec<Arc<str>> {
    let mut open: Vec<Arc<str>> = Vec::new();
    for e in entries.iter().filter(|e| &*e.author == agent) {
        match &e.body {
            EntryBody::TurnStarted(s) => open.push(s.turn.clone()),
            EntryBody::TurnEnded(TurnEnded { turn, .. })
            | EntryBody::TurnFailed(TurnFailed { turn, .. }) => open.retain(|t| t != turn),
            _ => {}
        }
    }
    open
}

/// The data of the index signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    pub(crate) key: String,
    pub(crate) session: Arc<str>,
}
