//! What a reader of one thread's stored lines knows before it reads them.
//!
//! Every line of a thread names the thread, and a thread has few authors
//! (its humans and bots) who each write many of its entries. Read line by
//! line as free-standing JSON, each line would check and copy the thread id
//! again and give each entry its own copy of its author's name. A reader of
//! one thread compares the id with the thread's instead, and hands out one
//! shared string per author: fewer allocations while reading, and a thread
//! held in memory holds each name once. The same goes for the other names
//! that repeat from entry to entry: the API, provider and model of a bot's
//! messages, the tools it calls, and the turn whose entries follow one
//! another.

use std::sync::Arc;

use crate::{InvalidThreadId, ThreadId};

/// Authors remembered at most; a thread with more keeps sharing the names
/// of the most recent ones (each name met when the list is full replaces
/// the oldest).
const AUTHORS_KEPT: usize = 16;

/// Labels (APIs, providers, models, tool names) remembered at most.
const LABELS_KEPT: usize = 16;

/// Turns remembered at most: a turn's entries come close together, and few
/// turns overlap.
const TURNS_KEPT: usize = 4;

/// The thread a run of stored lines belongs to, and the names met so far.
pub(crate) struct KnownThread {
    thread: ThreadId,
    authors: SharedNames,
    labels: SharedNames,
    turns: SharedNames,
}

impl KnownThread {
    /// A reader of `thread`'s lines that has met no name yet.
    ///
    /// It holds a copy of the id of its own: every entry it reads shares
    /// that copy, and two readers parsing halves of a file at once on two
    /// cores would otherwise count their references on one shared counter,
    /// whose cache line would bounce between the cores at every line.
    pub(crate) fn new(thread: &ThreadId) -> Self {
        Self {
            thread: thread.own_copy(),
            authors: SharedNames::new(AUTHORS_KEPT),
            labels: SharedNames::new(LABELS_KEPT),
            turns: SharedNames::new(TURNS_KEPT),
        }
    }

    /// The thread a line names: the known thread's own id when it is that
    /// one (no copy, no check), otherwise `found` checked as any thread id.
    pub(crate) fn thread(&self, found: &str) -> Result<ThreadId, InvalidThreadId> {
        if found == self.thread.as_str() {
            Ok(self.thread.clone())
        } else {
            ThreadId::new(found)
        }
    }

    /// The known thread's id when `found` is it.
    pub(crate) fn thread_if_known(&self, found: &str) -> Option<ThreadId> {
        (found == self.thread.as_str()).then(|| self.thread.clone())
    }

    /// The author a line names (or a participant it mentions), shared with
    /// the earlier lines that named them.
    pub(crate) fn author(&mut self, name: &str) -> Arc<str> {
        self.authors.share(name)
    }

    /// An API, provider, model or tool name, shared with the earlier lines
    /// that named it.
    pub(crate) fn label(&mut self, name: &str) -> Arc<str> {
        self.labels.share(name)
    }

    /// A turn's id, shared with the turn's earlier entries.
    pub(crate) fn turn(&mut self, id: &str) -> Arc<str> {
        self.turns.share(id)
    }
}

/// The names met most recently, each in one shared string.
struct SharedNames {
    kept: Vec<Arc<str>>,
    /// How many names `kept` holds at most.
    most: usize,
    /// Where the next name met replaces one once `kept` is full.
    next_replaced: usize,
}

impl SharedNames {
    fn new(most: usize) -> Self {
        Self {
            kept: Vec::new(),
            most,
            next_replaced: 0,
        }
    }

    /// `name` in the string shared by every earlier use of it, or in a new
    /// one that the next uses share.
    fn share(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.kept.iter().find(|a| ***a == *name) {
            return known.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        if self.kept.len() < self.most {
            self.kept.push(shared.clone());
        } else {
            self.kept[self.next_replaced] = shared.clone();
            self.next_replaced = (self.next_replaced + 1) % self.most;
        }
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_known_thread_and_an_author_met_before_are_shared() {
        let t = ThreadId::new("t-1").unwrap();
        let mut known = KnownThread::new(&t);
        let same = known.thread("t-1").unwrap();
        assert_eq!(same, t);
        let again = known.thread("t-1").unwrap();
        assert!(std::ptr::eq(same.as_str(), again.as_str()));
        assert_eq!(known.thread("other").unwrap().as_str(), "other");
        assert!(known.thread("../x").is_err());

        let alice = known.author("alice");
        let bob = known.author("bob");
        assert!(Arc::ptr_eq(&known.author("alice"), &alice));
        assert!(Arc::ptr_eq(&known.author("bob"), &bob));
    }

    #[test]
    fn past_the_kept_authors_names_still_read_right() {
        let mut known = KnownThread::new(&ThreadId::new("t").unwrap());
        for round in 0..3 {
            for i in 0..AUTHORS_KEPT * 2 {
                let name = format!("author-{i}");
                assert_eq!(&*known.author(&name), name, "round {round}");
            }
        }
        assert_eq!(known.authors.kept.len(), AUTHORS_KEPT);
    }
}
