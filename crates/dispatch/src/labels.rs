//! The `[Name]: ` labels a projection puts before other speakers' words.

use std::sync::Arc;

use crate::roster::Roster;

/// Each author's label, made once per projection and shared by every text
/// it labels.
///
/// A thread has few authors and a projection looks one up per shown entry,
/// so they are kept in a list searched by id (the same `Arc` is found by
/// address before any byte is compared) rather than hashed.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    roster: Roster,
    /// `(author id, "[Name]: ")`, in the order met.
    known: Vec<(Arc<str>, Arc<str>)>,
}

impl Labels {
    pub(crate) fn new(roster: Roster) -> Self {
        Self {
            roster,
            known: Vec::new(),
        }
    }

    /// `author`'s label: `[Name]: ` (the id stands for the name of someone
    /// not in the roster).
    pub(crate) fn of(&mut self, author: &Arc<str>) -> Arc<str> {
        if let Some((_, label)) = self
            .known
            .iter()
            .find(|(id, _)| Arc::ptr_eq(id, author) || **id == **author)
        {
            return label.clone();
        }
        let label: Arc<str> = format!("[{}]: ", self.roster.name_of(author)).into();
        self.known.push((author.clone(), label.clone()));
        label
    }
}
