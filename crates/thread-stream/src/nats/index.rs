//! What one process knows about a thread of the NATS store: where its batches
//! sit in the stream (a cache of facts that hold as long as nobody purges the
//! stream: messages are never rewritten) and the last batch this process saw,
//! so appends need not ask the server for the thread's tip first.
//!
//! The cache only saves round trips: a read whose cached positions lead it
//! astray (the server's messages disagree with them) forgets them and looks
//! again with the server's answers alone.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::batch::BatchPos;

/// Most batch positions kept per thread; past it the cache starts over (it
/// only saves round trips, it is never needed for correctness).
const MAX_KNOWN: usize = 65_536;

/// The local state of one thread.
#[derive(Default)]
pub(crate) struct ThreadState {
    /// Held across one append, so this process's appends to a thread queue
    /// here instead of racing each other at the server. The value is the
    /// thread's tip as last seen: `None` unknown, `Some(None)` empty.
    pub(crate) append: tokio::sync::Mutex<Option<Option<BatchPos>>>,
    /// Known batches by their first seq.
    known: Mutex<BTreeMap<u64, BatchPos>>,
}

impl ThreadState {
    /// Records where a batch sits.
    pub(crate) fn remember(&self, pos: BatchPos) {
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= MAX_KNOWN {
                known.clear();
            }
            known.insert(pos.first, pos);
        }
    }

    /// Forgets every known batch (they disagree with the server).
    pub(crate) fn forget(&self) {
        if let Ok(mut known) = self.known.lock() {
            known.clear();
        }
    }

    /// Whether any batch position is known.
    pub(crate) fn knows_any(&self) -> bool {
        self.known.lock().is_ok_and(|k| !k.is_empty())
    }

    /// The known batches around `seq`: the last one starting at or before it
    /// and the first one starting after it.
    pub(crate) fn around(&self, seq: u64) -> (Option<BatchPos>, Option<BatchPos>) {
        let Ok(known) = self.known.lock() else {
            return (None, None);
        };
        let before = known.range(..=seq).next_back().map(|(_, p)| *p);
        let after = known.range(seq + 1..).next().map(|(_, p)| *p);
        (before, after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_batches_around_a_seq() {
        let state = ThreadState::default();
        let pos = |stream_seq, first, count| BatchPos {
            stream_seq,
            first,
            count,
        };
        state.remember(pos(10, 1, 3));
        state.remember(pos(20, 4, 1));
        state.remember(pos(30, 8, 2));
        assert_eq!(state.around(2), (Some(pos(10, 1, 3)), Some(pos(20, 4, 1))));
        assert_eq!(state.around(4), (Some(pos(20, 4, 1)), Some(pos(30, 8, 2))));
        assert_eq!(state.around(6), (Some(pos(20, 4, 1)), Some(pos(30, 8, 2))));
        assert_eq!(state.around(9), (Some(pos(30, 8, 2)), None));
        assert!(state.knows_any());
        state.forget();
        assert!(!state.knows_any());
        assert_eq!(state.around(2), (None, None));
    }
}
