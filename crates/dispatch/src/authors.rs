//! The authors a projection meets: who is the bot itself, and the
//! `[Name]: ` label put before everyone else's words.

use std::sync::Arc;

use roundtable_providers::Label;

use crate::roster::Roster;

/// Each author met by a projection, looked up once per entry it may show:
/// whether it is the projected bot, and its label, made once per
/// projection and copied into every text it labels (short labels are kept
/// inline: no reference count).
///
/// A thread has few authors, so they are kept in a list rather than hashed,
/// and an id is found by address (entries of one author often share the one
/// `Arc` of its id) before any byte is compared.
#[derive(Debug, Clone)]
pub(crate) struct Authors {
    roster: Roster,
    self_id: Arc<str>,
    /// In the order met.
    known: Vec<Author>,
}

#[derive(Debug, Clone)]
struct Author {
    id: Arc<str>,
    /// `[Name]: ` (the id stands for the name of someone not in the roster).
    label: Label,
    is_self: bool,
}

/// An author's place in [`Authors`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct AuthorIndex(usize);

impl Authors {
    /// No author met yet; `self_id` is the projected bot.
    pub(crate) fn new(self_id: Arc<str>, roster: Roster) -> Self {
        Self {
            roster,
            self_id,
            known: Vec::new(),
        }
    }

    /// The projected bot's id.
    pub(crate) fn self_id(&self) -> &Arc<str> {
        &self.self_id
    }

    /// Finds `author`, adding it when met for the first time.
    pub(crate) fn find(&mut self, author: &Arc<str>) -> AuthorIndex {
        if let Some(i) = self.known.iter().position(|a| Arc::ptr_eq(&a.id, author)) {
            return AuthorIndex(i);
        }
        // Ids of one thread often share their length and their first bytes
        // (`human-0`, `human-1`): the last byte tells most apart before the
        // bytes are compared.
        let last = author.as_bytes().last();
        if let Some(i) = self.known.iter().position(|a| {
            a.id.len() == author.len() && a.id.as_bytes().last() == last && *a.id == **author
        }) {
            return AuthorIndex(i);
        }
        self.known.push(Author {
            id: author.clone(),
            label: Label::new(&format!("[{}]: ", self.roster.name_of(author))),
            is_self: **author == *self.self_id,
        });
        AuthorIndex(self.known.len() - 1)
    }

    /// True when the author is the projected bot.
    pub(crate) fn is_self(&self, author: AuthorIndex) -> bool {
        self.known[author.0].is_self
    }

    /// The author's label.
    pub(crate) fn label(&self, author: AuthorIndex) -> Label {
        self.known[author.0].label.clone()
    }

    /// The author's display name.
    pub(crate) fn name(&self, author: AuthorIndex) -> &str {
        self.roster.name_of(&self.known[author.0].id)
    }
}
