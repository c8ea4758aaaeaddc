//! A bot's view of its thread: the entries its projection takes, in the
//! order it takes them.
//!
//! Usually that is the thread's order. A runner may place a bot's turn
//! where it started, projecting what others wrote during the turn after
//! it (the bot had not seen it); the entries then reach the projection out
//! of store order and are numbered anew, and a compaction's `upto` (a
//! store seq) is read as "everything numbered so far up to that seq".
//! [`ViewNumbering`] is that numbering, one definition for the runner that
//! keeps a view incrementally and for [`project_view`], which projects a
//! whole view at once.

use roundtable_providers::Message;
use roundtable_thread_stream::{Entry, EntryBody};

use crate::projection::build_messages;
use crate::roster::Roster;

/// Numbers the entries of a view in the order they are projected.
///
/// ```
/// use roundtable_dispatch::compaction::ViewNumbering;
/// use roundtable_thread_stream::{Compaction, EntryBody, NewEntry, ThreadId};
///
/// let thread = ThreadId::new("t")?;
/// let entry = |seq, body| NewEntry::new("bot", body).into_entry(thread.clone(), seq);
/// let mut numbering = ViewNumbering::default();
/// // Seq 11 was held back and comes after 12.
/// assert_eq!(numbering.renumber(entry(10, EntryBody::chat("a"))).seq, 1);
/// assert_eq!(numbering.renumber(entry(12, EntryBody::chat("c"))).seq, 2);
/// assert_eq!(numbering.renumber(entry(11, EntryBody::chat("b"))).seq, 3);
/// let compaction = EntryBody::Compaction(Compaction { summary: "…".into(), upto: 12 });
/// let renumbered = numbering.renumber(entry(13, compaction));
/// let EntryBody::Compaction(c) = &renumbered.body else { unreachable!() };
/// assert_eq!(c.upto, 3); // everything up to store seq 12 was numbered up to 3
/// assert_eq!(numbering.store_seqs().collect::<Vec<_>>(), [10, 12, 11, 13]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ViewNumbering {
    /// The store seq of every entry numbered so far, in view order (the
    /// view seq of the entry at index `i` is `i + 1`).
    store: Vec<u64>,
}

impl ViewNumbering {
    /// Gives `entry` the next view seq; a compaction's `upto` becomes the
    /// last view seq of the entries numbered so far whose store seq is at
    /// most `upto`.
    pub fn renumber(&mut self, mut entry: Entry) -> Entry {
        if let EntryBody::Compaction(c) = &mut entry.body {
            c.upto = self
                .store
                .iter()
                .rposition(|store| *store <= c.upto)
                .map_or(0, |i| i as u64 + 1);
        }
        self.store.push(entry.seq);
        entry.seq = self.store.len() as u64;
        entry
    }

    /// The store seqs of the numbered entries, in view order.
    pub fn store_seqs(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.store.iter().copied()
    }

    /// How many entries are numbered.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// True before any entry is numbered.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }
}

/// The messages bot `self_id` sends for `view`: [`build_messages`] over the
/// view's entries numbered in view order ([`ViewNumbering`]). For a view in
/// store order it is `build_messages` itself.
pub fn project_view(self_id: &str, view: &[Entry], roster: &Roster) -> Vec<Message> {
    let mut numbering = ViewNumbering::default();
    let renumbered: Vec<Entry> = view.iter().map(|e| numbering.renumber(e.clone())).collect();
    build_messages(self_id, &renumbered, roster)
}
