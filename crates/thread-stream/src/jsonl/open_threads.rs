//! The store's table of open thread files, and when an idle one is closed.
//!
//! A thread's file is opened (and checked) on first use and kept open, with
//! its line index, so later appends and reads go straight to it. Kept
//! forever, a server would hold a descriptor for every thread it ever
//! touched; so once more than [`JsonlOptions::max_idle_files`] are open, the
//! least recently used files that nothing uses are closed.
//!
//! A file is only closed when nothing can be using it: every user gets it
//! through this table, under its lock, so when the table holds the only
//! reference (no append, read or subscription holds one) nobody else has
//! it, and the next use opens it again — there is never a second open copy
//! of one thread, whose appends could race the first's. A file whose writes
//! still wait for the background fsync stays open until they are synced.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::OnceCell;

use super::thread_file::ThreadFile;
use super::{FsyncPolicy, JsonlOptions};
use crate::ThreadId;

/// A thread's place in the table: its file once opened (the cell is taken
/// under the table's lock but filled outside it, so checking a long file
/// never holds up the other threads), and when it was last asked for.
struct Slot {
    file: Arc<OnceCell<Arc<ThreadFile>>>,
    last_used: u64,
}

impl Slot {
    /// Nothing but the table holds the file, and closing it loses no
    /// pending fsync.
    fn is_idle(&self, fsync: FsyncPolicy) -> bool {
        if Arc::strong_count(&self.file) > 1 {
            return false;
        }
        match self.file.get() {
            Some(file) => {
                Arc::strong_count(file) == 1
                    && (fsync == FsyncPolicy::Never || !file.has_unsynced_writes())
            }
            // An open that failed: nothing to close, the slot just goes.
            None => true,
        }
    }
}

/// The open thread files, by thread.
#[derive(Default)]
pub(super) struct OpenThreads {
    slots: HashMap<ThreadId, Slot>,
    /// Counts uses, to order them.
    clock: u64,
}

impl OpenThreads {
    /// The cell of `thread`'s file (empty if it is not open yet), marked as
    /// just used.
    pub(super) fn use_slot(&mut self, thread: &ThreadId) -> Arc<OnceCell<Arc<ThreadFile>>> {
        self.clock += 1;
        let clock = self.clock;
        let slot = self.slots.entry(thread.clone()).or_insert_with(|| Slot {
            file: Arc::default(),
            last_used: clock,
        });
        slot.last_used = clock;
        slot.file.clone()
    }

    /// Takes the least recently used idle files out of the table when more
    /// than `max_idle_files` are open, and returns them for the caller to
    /// drop (which closes them) outside the table's lock. The table is let
    /// grow an eighth beyond the bound before it is trimmed back to it, so
    /// the scan runs once every so many opens, not at every one.
    pub(super) fn close_idle(&mut self, options: &JsonlOptions) -> Vec<Arc<ThreadFile>> {
        let bound = options.max_idle_files;
        if self.slots.len() <= bound + bound / 8 {
            return Vec::new();
        }
        let mut idle: Vec<(u64, ThreadId)> = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.is_idle(options.fsync))
            .map(|(thread, slot)| (slot.last_used, thread.clone()))
            .collect();
        let excess = self.slots.len() - bound;
        if idle.len() > excess {
            idle.select_nth_unstable(excess);
            idle.truncate(excess);
        }
        idle.into_iter()
            .filter_map(|(_, thread)| self.slots.remove(&thread))
            .filter_map(|slot| slot.file.get().cloned())
            .collect()
    }

    /// Every open file.
    pub(super) fn files(&self) -> impl Iterator<Item = Arc<ThreadFile>> + '_ {
        self.slots
            .values()
            .filter_map(|slot| slot.file.get().cloned())
    }
}
