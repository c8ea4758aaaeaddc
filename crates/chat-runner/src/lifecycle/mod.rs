//! A turn's lifecycle on its thread, in one place: every runner opens,
//! writes and closes its turns through this module, and nothing else builds
//! a lifecycle entry.
//!
//! 1. **Open**: [`turn_started`] is the `turn.started` entry; the runner
//!    appends it its own way (the chat runner with the prompt, the thread
//!    runner as an optimistic-concurrency claim).
//! 2. **Write**: a [`TurnWriter`] appends the turn's assistant messages and
//!    tool results as they complete (and, for shared threads, its text as
//!    coalesced `chat.chunk` entries), so a crash keeps what the turn did,
//!    with the [`records`] of its approvals, compactions and retries in
//!    their place among them.
//! 3. **Close**: [`TurnWriter::end`] appends what the writer did not write,
//!    then `turn.ended` (the loop's finish reason) or `turn.failed` (the
//!    finish reason and the error), then any closing entries of the
//!    runner's own; [`TurnWriter::end_interrupted`] closes a turn its
//!    runner is shutting down in the middle of.
//! 4. **Hold**: with [`TurnLeases`], the process running an open turn
//!    holds its lease and renews it, so that another process sharing the
//!    leases sees when it died and takes the turn over.
//! 5. **Recover**: a [`TurnLedger`] reads a thread's lifecycle entries back
//!    (which turns are open, which wakes are still owed);
//!    [`turn_interrupted`] and [`close_interrupted`] close a turn a stopped
//!    process left open, so that the wake it answered is answered again.

mod interrupt;
mod lease;
mod ledger;
pub mod records;
mod signals;
mod writer;

use std::sync::Arc;

use roundtable_dispatch::Wake;
use roundtable_thread_stream::{
    EntryBody, NewEntry, TurnEnded, TurnFailed, TurnReason, TurnStarted,
};

pub use interrupt::close_interrupted;
pub use lease::{Held, TurnLeases};
pub use ledger::{TurnLedger, TurnRecord, TurnState};
pub use writer::{FlushedTurn, StoredEntries, TurnWriteLoop, TurnWriter, WriterSink};

use crate::turn::TurnOutcome;

/// The `turn.started` entry of `author`'s turn `turn`, answering `wake`
/// (`None`: a turn the host asked for, which no entry woke).
pub fn turn_started(author: &Arc<str>, turn: &Arc<str>, wake: Option<&Wake>) -> NewEntry {
    let started = match wake {
        None => TurnStarted::new(turn.clone()),
        Some(wake) => TurnStarted {
            turn: turn.clone(),
            trigger: Some(wake.trigger),
            depth: wake.depth,
            reason: Some(wake.reason.as_str().into()),
        },
    };
    NewEntry::new(author.clone(), EntryBody::TurnStarted(started))
}

/// The `turn.started` entry of `author`'s turn `turn`, answering the entry
/// at `trigger` (a human's message, so at depth 1) for `reason` (a host's
/// word: `message`, `retry`, `follow_up`, ...).
pub fn turn_started_by(author: &Arc<str>, turn: &Arc<str>, trigger: u64, reason: &str) -> NewEntry {
    NewEntry::new(
        author.clone(),
        EntryBody::TurnStarted(TurnStarted {
            turn: turn.clone(),
            trigger: Some(trigger),
            depth: 1,
            reason: Some(reason.into()),
        }),
    )
}

/// The `turn.failed {reason: "interrupted"}` entry that closes `author`'s
/// turn `turn`, which its runner stopped in the middle of.
pub fn turn_interrupted(author: &Arc<str>, turn: &Arc<str>) -> NewEntry {
    NewEntry::new(
        author.clone(),
        EntryBody::TurnFailed(TurnFailed::interrupted(turn.clone())),
    )
}

/// The `turn.failed` entry that closes `author`'s turn `turn` for `reason`
/// without the turn loop having run (the turn could not be set up).
pub fn turn_failed(author: &Arc<str>, turn: &Arc<str>, reason: TurnReason) -> NewEntry {
    NewEntry::new(
        author.clone(),
        EntryBody::TurnFailed(TurnFailed {
            turn: turn.clone(),
            reason,
        }),
    )
}

/// The entry that closes a turn the loop ran to `outcome`: `turn.ended`
/// with the finish reason, or `turn.failed` with the finish reason and the
/// error.
fn turn_closed(author: &Arc<str>, outcome: &TurnOutcome) -> NewEntry {
    let turn = outcome.turn_id.clone();
    let body = match &outcome.error {
        None => EntryBody::TurnEnded(TurnEnded {
            turn,
            reason: TurnReason::finished(outcome.finish_reason),
        }),
        Some(error) => EntryBody::TurnFailed(TurnFailed {
            turn,
            reason: TurnReason::failed(outcome.finish_reason, error.clone()),
        }),
    };
    NewEntry::new(author.clone(), body)
}
