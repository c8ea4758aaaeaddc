//! A change of a room (join, leave, override, a member's decision on a
//! bot's gated call): one entry, checked against the room as its thread holds it and
//! appended only if nothing landed since (optimistic concurrency), so two
//! processes changing one room never both act on the same stale view.

use std::sync::Arc;
use std::time::Duration;

use roundtable_chat_runner::lifecycle::records::{ApprovalDecidedRecord, ApprovalVerdict};
use roundtable_sessions::Caller;
use roundtable_thread_stream::{Expect, NewEntry, StoreError};

use super::directory::{Directory, not_in_room};
use super::identity::{no_room, sees};
use super::record::{self, Member, MemberKind, OverrideMode, Room};
use crate::api_error::{ApiError, ErrorCode};

/// How many times a change is checked again after losing a race with
/// another entry (a busy room: bots streaming chunks).
const TRIES: usize = 32;

/// How long a change waits for this process's fold to reach it, so that
/// the next read of the room shows it.
const FOLD_WAIT: Duration = Duration::from_secs(5);

/// A change of a room's roster or overrides.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// A participant joins.
    Join(Member),
    /// A participant leaves (or is removed).
    Leave(Arc<str>),
    /// A bot's override is set, or cleared with `None`.
    Override(Arc<str>, Option<OverrideMode>),
    /// A member decides a waiting call.
    Decide(Decision),
}

/// A member's decision on a bot's gated call.
#[derive(Debug, Clone)]
pub(crate) struct Decision {
    /// The call's id.
    pub(crate) call_id: String,
    /// Its turn, when the call id alone is ambiguous.
    pub(crate) turn: Option<String>,
    /// Approve or deny.
    pub(crate) verdict: ApprovalVerdict,
    /// Why, shown to the bot.
    pub(crate) reason: Option<String>,
}

/// Applies `change` to the room `id` on behalf of `author`, and answers
/// the room after it.
pub(crate) async fn change(
    directory: &Directory,
    caller: &Caller,
    author: &str,
    id: &str,
    change: Change,
) -> Result<Room, ApiError> {
    let (cell, _) = directory.find(caller, id).await?;
    let _writing = cell.hold().await;
    for _ in 0..TRIES {
        let (room, tip) = directory.current(&cell).await?;
        if !sees(caller, &room) {
            return Err(no_room(id));
        }
        let entry = entry_of(directory, &room, author, &change)?;
        match directory
            .store
            .append(&room.id, Expect::LastSeq(tip), vec![entry])
            .await
        {
            Ok(stored) => {
                let mut next = room;
                for entry in &stored {
                    next.apply(entry);
                }
                let seq = stored.last().map_or(tip, |e| e.seq);
                if !cell.reached(seq, FOLD_WAIT).await {
                    tracing::warn!(room = %next.id, seq, "the room's fold lags its thread");
                }
                return Ok(next);
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(error) => return Err(ApiError::internal(error)),
        }
    }
    Err(ApiError::new(
        ErrorCode::Conflict,
        "the room changed under every try: try again",
    ))
}

/// The entry that makes `change`, or why it cannot be made.
fn entry_of(
    directory: &Directory,
    room: &Room,
    author: &str,
    change: &Change,
) -> Result<NewEntry, ApiError> {
    match change {
        Change::Join(member) => {
            if room.is_member(&member.id) {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!("{} is already in the room", member.id),
                ));
            }
            let mut next = room.clone();
            next.members.push(member.clone());
            directory.roster(&next)?;
            Ok(record::joined(author, member.clone()))
        }
        Change::Leave(member) => {
            if !room.is_member(member) {
                return Err(not_in_room(member));
            }
            Ok(record::left(author, member))
        }
        Change::Decide(decision) => decided(room, author, decision),
        Change::Override(bot, mode) => match room.member(bot) {
            Some(m) if m.kind == MemberKind::Bot => Ok(record::override_set(author, bot, *mode)),
            _ => Err(ApiError::new(
                ErrorCode::NotFound,
                format!("no bot {bot} in the room"),
            )),
        },
    }
}

/// The entry deciding the waiting call `decision` names.
fn decided(room: &Room, author: &str, decision: &Decision) -> Result<NewEntry, ApiError> {
    let named = |turn: &str, call: &str| {
        *call == *decision.call_id && decision.turn.as_deref().is_none_or(|t| t == turn)
    };
    let waiting: Vec<_> = room
        .pending
        .iter()
        .filter(|p| named(&p.turn, &p.call_id))
        .collect();
    let call = match waiting.as_slice() {
        [call] => call,
        [] if room.decided.iter().any(|(t, c)| named(t, c)) => {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                "that call was decided already",
            ));
        }
        [] => {
            let shown: String = decision.call_id.chars().take(80).collect();
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("no call {shown} waits for a decision in this room"),
            ));
        }
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "turn: two waiting calls have this id; name the turn too",
            ));
        }
    };
    let record = ApprovalDecidedRecord {
        turn: call.turn.clone(),
        call_id: call.call_id.clone(),
        tool: call.tool.clone(),
        verdict: decision.verdict,
        reason: decision.reason.clone(),
    };
    let body = record.to_body().map_err(ApiError::internal)?;
    Ok(NewEntry::new(author, body))
}
