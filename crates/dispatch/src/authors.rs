//! The authors a projection meets: who is the bot itself, and the
//! `[Name]: ` label put before everyone else's words.

use std::sync::Arc;

use crate::roster::Roster;

/// Each author whose words a projection shows: its label, made once per
/// projection and written before every text it labels.
///
/// Whether an entry's author is the projected bot is asked of every entry
/// the projection may show, and answered by comparing with the bot's id
/// alone; the other authors are looked up only for the entries actually
/// shown. A thread has few authors, so they are kept in a list rather than
/// hashed, and an id is found by address (entries of one author often share
/// the one `Arc` of its id) before any byte is compared.
#[derive(Debug, Clone)]
pub(crate) struct Authors {
    roster: Roster,
    /// The bot itself is `known[0]`.
    known: Vec<Author>,
}

#[derive(Debug, Clone)]
struct Author {
    id: Arc<str>,
    /// `[Name]: ` (the id stands for the name of someone not in the roster).
    label: Box<str>,
}

/// An author's place in [`Authors`]; [`AuthorIndex::SELF`] is the bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AuthorIndex(usize);

impl AuthorIndex {
    /// The projected bot.
    pub(crate) const SELF: AuthorIndex = AuthorIndex(0);

    fn get(self) -> usize {
        self.0
    }
}

impl Authors {
    /// No author met yet; `self_id` is the projected bot.
    pub(crate) fn new(self_id: Arc<str>, roster: Roster) -> Self {
        let label = Self::label_of(&roster, &self_id);
        Self {
            roster,
            known: vec![Author { id: self_id, label }],
        }
    }

    fn label_of(roster: &Roster, id: &str) -> Box<str> {
        format!("[{}]: ", roster.name_of(id)).into()
    }

    /// The projected bot's id.
    pub(crate) fn self_id(&self) -> &Arc<str> {
        &self.known[AuthorIndex::SELF.get()].id
    }

    /// True when `author` is the projected bot's id.
    pub(crate) fn is_self_id(&self, author: &Arc<str>) -> bool {
        let own = self.self_id();
        // Other ids of the thread mostly differ in length or last byte
        // (`bot-0`, `bot-1`): no byte comparison for them.
        Arc::ptr_eq(own, author)
            || (own.len() == author.len()
                && own.as_bytes().last() == author.as_bytes().last()
                && **own == **author)
    }

    /// Finds `author` (someone other than the bot), adding it when met for
    /// the first time.
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
        let label = Self::label_of(&self.roster, author);
        self.known.push(Author {
            id: author.clone(),
            label,
        });
        AuthorIndex(self.known.len() - 1)
    }

    /// The author's label.
    #[inline]
    pub(crate) fn label(&self, author: AuthorIndex) -> &str {
        &self.known[author.get()].label
    }

    /// The author's display name.
    pub(crate) fn name(&self, author: AuthorIndex) -> &str {
        self.roster.name_of(&self.known[author.get()].id)
    }
}

/// The authors of a borrowed thread, resolved by the address of their id
/// before any byte is compared.
///
/// Stores share one `Arc` of each author's id from entry to entry, so the
/// entries of a thread carry a handful of distinct addresses: one probe of a
/// small open-addressed table answers both "is this the bot?" and "which
/// label?", where [`Authors`] compares ids (the bot's, then the list's).
///
/// An address names a string only while the string lives. `build_messages`
/// keeps one cache for one call over a borrowed slice of entries, so every
/// id whose address the cache holds stays alive (and unmoved) as long as the
/// cache: an address seen once always means the same id. (The incremental
/// [`Projection`](crate::Projection) outlives the entries it is given, so it
/// asks [`Authors`] directly.)
pub(crate) struct AuthorCache {
    /// (address of an id's bytes, its place); address 0 marks an empty slot.
    slots: [(usize, AuthorIndex); AuthorCache::SLOTS],
    /// Slots in use; the table is emptied when it is half full (ids that
    /// are not shared, one `Arc` per entry, would fill it otherwise).
    used: usize,
}

impl AuthorCache {
    const SLOTS: usize = 32;

    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self {
            slots: [(0, AuthorIndex::SELF); Self::SLOTS],
            used: 0,
        }
    }

    /// `author`'s place in `authors` (adding it when met for the first time);
    /// [`AuthorIndex::SELF`] when it is the projected bot.
    #[inline]
    pub(crate) fn resolve(&mut self, authors: &mut Authors, author: &Arc<str>) -> AuthorIndex {
        let address = Arc::as_ptr(author).cast::<u8>().addr();
        let mut slot = Self::home(address);
        loop {
            let (key, index) = self.slots[slot];
            if key == address {
                return index;
            }
            if key == 0 {
                break;
            }
            slot = (slot + 1) % Self::SLOTS;
        }
        self.miss(authors, author, address)
    }

    /// The first slot probed for `address` (Fibonacci hashing: the ids'
    /// addresses differ in their middle bits).
    fn home(address: usize) -> usize {
        // `usize` is at most 64 bits: the top five bits of the product.
        ((address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59) as usize % Self::SLOTS
    }

    #[cold]
    fn miss(&mut self, authors: &mut Authors, author: &Arc<str>, address: usize) -> AuthorIndex {
        let index = if authors.is_self_id(author) {
            AuthorIndex::SELF
        } else {
            authors.find(author)
        };
        if self.used >= Self::SLOTS / 2 {
            *self = Self::new();
        }
        let mut slot = Self::home(address);
        while self.slots[slot].0 != 0 {
            slot = (slot + 1) % Self::SLOTS;
        }
        self.slots[slot] = (address, index);
        self.used += 1;
        index
    }
}
