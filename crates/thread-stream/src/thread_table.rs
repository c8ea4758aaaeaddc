//! A store's table of per-thread state (an open file, a cache of positions),
//! kept while a thread is used and let go when it has been idle longest.
//!
//! Stores keep some state for each thread they serve so later calls go
//! straight to it. Kept forever, a long-running server would hold state
//! (for the JSONL store, a file descriptor) for every thread it ever
//! touched; so once the table holds more than its bound, the least recently
//! used entries that nothing uses are dropped, and made again on the
//! thread's next use.
//!
//! An entry is only dropped when the table holds its sole reference: every
//! user gets it from the table, under the store's lock on it, so then nobody
//! else has it, and there is never a second copy of one thread's state
//! (whose appends could race the first's). A store may keep an entry longer
//! still (`may_drop`), e.g. while its writes wait for an fsync.

use std::collections::HashMap;
use std::sync::Arc;

use crate::ThreadId;

/// One thread's state, and when it was last asked for.
struct Slot<T> {
    state: Arc<T>,
    last_used: u64,
}

/// Per-thread state by thread, least recently used dropped first.
pub(crate) struct ThreadTable<T> {
    slots: HashMap<ThreadId, Slot<T>>,
    /// Counts uses, to order them.
    clock: u64,
}

impl<T> Default for ThreadTable<T> {
    fn default() -> Self {
        Self {
            slots: HashMap::new(),
            clock: 0,
        }
    }
}

impl<T: Default> ThreadTable<T> {
    /// `thread`'s state (made if the table has none), marked as just used.
    pub(crate) fn get(&mut self, thread: &ThreadId) -> Arc<T> {
        self.clock += 1;
        let clock = self.clock;
        let slot = self.slots.entry(thread.clone()).or_insert_with(|| Slot {
            state: Arc::default(),
            last_used: clock,
        });
        slot.last_used = clock;
        slot.state.clone()
    }
}

impl<T> ThreadTable<T> {
    /// When the table holds more than `bound` entries, takes out the least
    /// recently used of those nobody else holds and `may_drop` lets go,
    /// down to `bound`, and returns them for the caller to drop outside its
    /// lock (dropping may close a file). The table grows an eighth beyond
    /// the bound before it is trimmed, so the scan runs once every so many
    /// new threads, not at every call.
    pub(crate) fn trim(&mut self, bound: usize, may_drop: impl Fn(&T) -> bool) -> Vec<Arc<T>> {
        if self.slots.len() <= bound + bound / 8 {
            return Vec::new();
        }
        let mut idle: Vec<(u64, ThreadId)> = self
            .slots
            .iter()
            .filter(|(_, slot)| Arc::strong_count(&slot.state) == 1 && may_drop(&slot.state))
            .map(|(thread, slot)| (slot.last_used, thread.clone()))
            .collect();
        let excess = self.slots.len() - bound;
        if idle.len() > excess {
            idle.select_nth_unstable(excess);
            idle.truncate(excess);
        }
        idle.into_iter()
            .filter_map(|(_, thread)| self.slots.remove(&thread))
            .map(|slot| slot.state)
            .collect()
    }

    /// Takes `thread`'s state out of the table (the thread was deleted).
    pub(crate) fn remove(&mut self, thread: &ThreadId) -> Option<Arc<T>> {
        self.slots.remove(thread).map(|slot| slot.state)
    }

    /// Every thread's state.
    pub(crate) fn states(&self) -> impl Iterator<Item = &Arc<T>> + '_ {
        self.slots.values().map(|slot| &slot.state)
    }

    /// How many threads have state.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn tid(n: usize) -> ThreadId {
        ThreadId::new(format!("t{n}")).unwrap()
    }

    #[test]
    fn the_least_recently_used_idle_states_go_first_and_held_ones_stay() {
        let mut table: ThreadTable<u32> = ThreadTable::default();
        let held = table.get(&tid(0));
        for n in 1..20 {
            table.get(&tid(n));
        }
        // t1 is used again: it is now the most recent.
        table.get(&tid(1));
        let dropped = table.trim(8, |_| true);
        assert_eq!(dropped.len(), 12);
        assert_eq!(table.len(), 8);
        let kept: Vec<bool> = (0..20).map(|n| table.slots.contains_key(&tid(n))).collect();
        // Held (t0), most recent (t1), and the six newest (t14..t19).
        assert!(kept[0] && kept[1]);
        assert!((14..20).all(|n| kept[n]));
        assert!((2..14).all(|n| !kept[n]));
        drop(held);
    }

    #[test]
    fn nothing_goes_within_the_slack_or_against_may_drop() {
        let mut table: ThreadTable<u32> = ThreadTable::default();
        for n in 0..9 {
            table.get(&tid(n));
        }
        assert!(table.trim(8, |_| true).is_empty());
        table.get(&tid(9));
        assert!(table.trim(8, |_| false).is_empty());
        assert_eq!(table.len(), 10);
    }
}
