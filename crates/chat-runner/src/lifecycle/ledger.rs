//! One author's turns in one thread, read back from its lifecycle entries:
//! which are open, which wakes are still owed.

use std::sync::Arc;

use roundtable_thread_stream::{Entry, EntryBody};

/// How many of an author's latest closed turns a ledger keeps (open turns
/// are always kept).
const KEEP: usize = 64;

/// Where one turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnState {
    /// Started, no end yet.
    Open,
    /// `turn.ended`, or `turn.failed` for a reason of its own.
    Closed,
    /// `turn.failed` with reason `interrupted`: its runner stopped in the
    /// middle of it.
    Interrupted,
}

/// One turn of the author.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRecord {
    /// The turn's id.
    pub turn: Arc<str>,
    /// The seq of its `turn.started`.
    pub started: u64,
    /// When it started (Unix ms).
    pub at: i64,
    /// The trigger it answered.
    pub trigger: Option<u64>,
    /// Where it stands.
    pub state: TurnState,
}

/// The latest turns of one author (a bot, a chat agent) in one thread.
///
/// A turn whose `turn.started` has seq `s` was run on a projection of every
/// entry before `s` (the runner claims it with `Expect::LastSeq(s - 1)`), so
/// it answers every wake whose trigger is below `s`.
#[derive(Debug, Clone, Default)]
pub struct TurnLedger {
    turns: Vec<TurnRecord>,
}

impl TurnLedger {
    /// The ledger of `author` over `entries`.
    pub fn read(author: &str, entries: &[Entry]) -> Self {
        let mut ledger = Self::default();
        for entry in entries {
            ledger.observe(author, entry);
        }
        ledger
    }

    /// Takes note of `entry` if it is a lifecycle entry of `author`.
    pub fn observe(&mut self, author: &str, entry: &Entry) {
        if *entry.author != *author {
            return;
        }
        match &entry.body {
            EntryBody::TurnStarted(started) => {
                let closed = self.turns.iter().filter(|r| r.state != TurnState::Open);
                if closed.count() >= KEEP
                    && let Some(oldest) = self.turns.iter().position(|r| r.state != TurnState::Open)
                {
                    self.turns.remove(oldest);
                }
                self.turns.push(TurnRecord {
                    turn: started.turn.clone(),
                    started: entry.seq,
                    at: entry.at,
                    trigger: started.trigger,
                    state: TurnState::Open,
                });
            }
            EntryBody::TurnEnded(ended) => self.close(&ended.turn, TurnState::Closed),
            EntryBody::TurnFailed(failed) => {
                let state = if failed.reason.is_interrupted() {
                    TurnState::Interrupted
                } else {
                    TurnState::Closed
                };
                self.close(&failed.turn, state);
            }
            _ => {}
        }
    }

    fn close(&mut self, turn: &str, state: TurnState) {
        if let Some(record) = self
            .turns
            .iter_mut()
            .rev()
            .find(|r| *r.turn == *turn && r.state == TurnState::Open)
        {
            record.state = state;
        }
    }

    /// True when the author still owes an answer to the event at `trigger`:
    /// no turn of its started after the event, except interrupted ones, and
    /// the event was not already retried once after an interruption.
    pub fn owes(&self, trigger: u64) -> bool {
        let mut interrupted = 0;
        for record in self.turns.iter().filter(|r| r.started > trigger) {
            match record.state {
                TurnState::Interrupted => interrupted += 1,
                TurnState::Open | TurnState::Closed => return false,
            }
        }
        interrupted < 2
    }

    /// The turn `id`, if it is one of the latest.
    pub fn turn(&self, id: &str) -> Option<&TurnRecord> {
        self.turns.iter().rev().find(|r| *r.turn == *id)
    }

    /// The turns with a start and no end.
    pub fn open(&self) -> impl Iterator<Item = &TurnRecord> {
        self.turns.iter().filter(|r| r.state == TurnState::Open)
    }
}

#[cfg(test)]
mod tests {
    use roundtable_thread_stream::{
        INTERRUPTED, NewEntry, ThreadId, TurnEnded, TurnFailed, TurnStarted,
    };

    use super::*;

    fn entry(seq: u64, author: &str, body: EntryBody) -> Entry {
        NewEntry::new(author, body).into_entry(ThreadId::new("t").unwrap(), seq)
    }

    fn started(turn: &str, trigger: u64) -> EntryBody {
        EntryBody::TurnStarted(TurnStarted {
            turn: turn.into(),
            trigger: Some(trigger),
            depth: 1,
            reason: None,
        })
    }

    fn failed(turn: &str, reason: &str) -> EntryBody {
        EntryBody::TurnFailed(TurnFailed {
            turn: turn.into(),
            reason: reason.into(),
        })
    }

    #[test]
    fn a_turn_after_the_event_answers_it() {
        let mut ledger = TurnLedger::default();
        assert!(ledger.owes(1));
        ledger.observe("b", &entry(2, "b", started("t1", 1)));
        ledger.observe("b", &entry(3, "other", started("x", 1)));
        assert!(!ledger.owes(1), "an open turn answers it");
        assert!(ledger.owes(2), "an event after the start is owed");
        ledger.observe(
            "b",
            &entry(
                4,
                "b",
                EntryBody::TurnEnded(TurnEnded {
                    turn: "t1".into(),
                    reason: "stop".into(),
                }),
            ),
        );
        assert!(!ledger.owes(1));
        assert_eq!(ledger.open().count(), 0);
    }

    #[test]
    fn an_interrupted_turn_is_retried_once() {
        let mut ledger = TurnLedger::default();
        ledger.observe("b", &entry(2, "b", started("t1", 1)));
        assert_eq!(ledger.open().count(), 1);
        ledger.observe("b", &entry(3, "b", failed("t1", INTERRUPTED)));
        assert!(ledger.owes(1), "owed again after the interruption");
        ledger.observe("b", &entry(4, "b", started("t2", 1)));
        ledger.observe("b", &entry(5, "b", failed("t2", INTERRUPTED)));
        assert!(!ledger.owes(1), "retried once already");
    }

    #[test]
    fn an_open_turn_is_never_forgotten() {
        let mut ledger = TurnLedger::default();
        ledger.observe("b", &entry(1, "b", started("open", 0)));
        let mut seq = 1;
        for i in 0..(KEEP + 10) {
            let turn = format!("t{i}");
            seq += 1;
            ledger.observe("b", &entry(seq, "b", started(&turn, 0)));
            seq += 1;
            ledger.observe("b", &entry(seq, "b", failed(&turn, "stop")));
        }
        let open: Vec<_> = ledger.open().map(|r| r.turn.clone()).collect();
        assert_eq!(open, vec![Arc::from("open")]);
        assert_eq!(ledger.turns.len(), KEEP + 1);
    }

    #[test]
    fn a_failed_turn_answers_its_wake() {
        let mut ledger = TurnLedger::default();
        ledger.observe("b", &entry(2, "b", started("t1", 1)));
        ledger.observe("b", &entry(3, "b", failed("t1", "error: boom")));
        assert!(!ledger.owes(1));
    }
}
