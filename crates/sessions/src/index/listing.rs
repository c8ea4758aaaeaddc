//! The index in memory: every session's entry, ordered newest first (by
//! `updated_at`, then id) overall and per owner, so a page is a range of
//! an ordered set.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::cursor::SessionCursor;
use super::entry::IndexEntry;
use crate::state::SessionStatus;

/// A session's place in the order: newest first, then the greater id.
type Key = (Reverse<i64>, Reverse<Arc<str>>);

/// Whose sessions a page holds.
#[derive(Debug, Clone)]
pub(crate) enum View {
    /// Every session.
    All,
    /// The sessions of these owners (`None`: sessions of no owner).
    Owners(Vec<Option<Arc<str>>>),
}

/// The ordered entries.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    entries: HashMap<Arc<str>, IndexEntry>,
    all: BTreeSet<Key>,
    by_owner: HashMap<Option<Arc<str>>, BTreeSet<Key>>,
}

fn key(id: &Arc<str>, entry: &IndexEntry) -> Key {
    (Reverse(entry.updated_at), Reverse(id.clone()))
}

impl Listing {
    /// Sets `id`'s entry, unless the listing holds a newer one (a later
    /// seq of its thread): false then.
    pub(crate) fn put(&mut self, id: Arc<str>, entry: IndexEntry) -> bool {
        if let Some(held) = self.entries.get(&id) {
            if held.last_seq > entry.last_seq || *held == entry {
                return false;
            }
            self.remove(&id);
        }
        let k = key(&id, &entry);
        self.all.insert(k.clone());
        self.by_owner
            .entry(entry.owner.clone())
            .or_default()
            .insert(k);
        self.entries.insert(id, entry);
        true
    }

    /// Takes `id` out; its entry if it was there.
    pub(crate) fn remove(&mut self, id: &str) -> Option<IndexEntry> {
        let (id, entry) = self.entries.remove_entry(id)?;
        let k = key(&id, &entry);
        self.all.remove(&k);
        if let Some(owned) = self.by_owner.get_mut(&entry.owner) {
            owned.remove(&k);
            if owned.is_empty() {
                self.by_owner.remove(&entry.owner);
            }
        }
        Some(entry)
    }

    /// `id`'s entry.
    pub(crate) fn get(&self, id: &str) -> Option<&IndexEntry> {
        self.entries.get(id)
    }

    /// Every session id, in no order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &Arc<str>> {
        self.entries.keys()
    }

    /// Up to `limit` sessions of `view` after `after`, newest first, of
    /// `status` when given; and the cursor after the last of them when more
    /// follow.
    pub(crate) fn page(
        &self,
        view: &View,
        after: Option<&SessionCursor>,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> (Vec<Arc<str>>, Option<SessionCursor>) {
        let sets: Vec<&BTreeSet<Key>> = match view {
            View::All => vec![&self.all],
            View::Owners(owners) => owners
                .iter()
                .filter_map(|owner| self.by_owner.get(owner))
                .collect(),
        };
        let start = after.map(|c| (Reverse(c.updated_at), Reverse(Arc::clone(&c.id))));
        let mut ranges: Vec<_> = sets
            .into_iter()
            .map(|set| match &start {
                Some(start) => set
                    .range((
                        std::ops::Bound::Excluded(start.clone()),
                        std::ops::Bound::Unbounded,
                    ))
                    .peekable(),
                None => set.range(..).peekable(),
            })
            .collect();
        let mut page = Vec::with_capacity(limit.min(self.entries.len()));
        let mut last: Option<&Key> = None;
        loop {
            // The smallest key of the owners' ranges: newest first across them.
            let next = ranges
                .iter_mut()
                .enumerate()
                .filter_map(|(i, r)| r.peek().map(|k| (i, *k)))
                .min_by(|a, b| a.1.cmp(b.1))
                .map(|(i, _)| i);
            let Some(i) = next else {
                return (page, None);
            };
            let Some(k) = ranges[i].next() else {
                return (page, None);
            };
            let id = &(k.1).0;
            let wanted = status.is_none_or(|s| self.entries.get(id).is_some_and(|e| e.status == s));
            if !wanted {
                continue;
            }
            if page.len() == limit {
                let cursor = last.map(|(Reverse(at), Reverse(id))| SessionCursor {
                    updated_at: *at,
                    id: id.clone(),
                });
                return (page, cursor);
            }
            page.push(id.clone());
            last = Some(k);
        }
    }

    /// The sessions last updated before `before` (Unix ms), oldest first.
    pub(crate) fn idle_before(&self, before: i64) -> Vec<Arc<str>> {
        self.all
            .iter()
            .rev()
            .take_while(|(Reverse(at), _)| *at < before)
            .map(|(_, Reverse(id))| id.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn entry(owner: Option<&str>, updated_at: i64, status: SessionStatus) -> IndexEntry {
        IndexEntry {
            owner: owner.map(Arc::from),
            status,
            created_at: 0,
            updated_at,
            title: None,
            last_seq: updated_at as u64,
        }
    }

    fn walk(
        listing: &Listing,
        view: &View,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Vec<String> {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = listing.page(view, cursor.as_ref(), status, limit);
            assert!(page.len() <= limit);
            seen.extend(page.iter().map(|id| id.to_string()));
            match next {
                Some(next) => cursor = Some(next),
                None => return seen,
            }
        }
    }

    #[test]
    fn pages_cover_each_owners_sessions_once_newest_first() {
        let mut listing = Listing::default();
        for i in 0..50i64 {
            let owner = ["alice", "bob"][i as usize % 2];
            // Ties on time are ordered by id.
            let status = if i % 5 == 0 {
                SessionStatus::Failed
            } else {
                SessionStatus::Completed
            };
            listing.put(
                Arc::from(format!("sess_{i:02}")),
                entry(Some(owner), i / 3, status),
            );
        }
        listing.put(
            Arc::from("sess_none"),
            entry(None, 100, SessionStatus::Active),
        );
        let alice = View::Owners(vec![Some(Arc::from("alice"))]);
        let mine = walk(&listing, &alice, None, 7);
        assert_eq!(mine.len(), 25);
        let mut expected: Vec<(i64, String)> = (0..50i64)
            .filter(|i| i % 2 == 0)
            .map(|i| (i / 3, format!("sess_{i:02}")))
            .collect();
        expected.sort_by(|a, b| b.cmp(a));
        let expected: Vec<String> = expected.into_iter().map(|(_, id)| id).collect();
        assert_eq!(mine, expected);
        // Alice and the sessions of no owner, merged in order.
        let shared = View::Owners(vec![Some(Arc::from("alice")), None]);
        let both = walk(&listing, &shared, None, 4);
        assert_eq!(both[0], "sess_none");
        assert_eq!(both[1..], expected[..]);
        // Everyone's, and a status filter.
        assert_eq!(walk(&listing, &View::All, None, 200).len(), 51);
        let failed = walk(&listing, &View::All, Some(SessionStatus::Failed), 3);
        assert_eq!(failed.len(), 10);
        // An exact last page says nothing follows.
        let (page, next) = listing.page(&alice, None, None, 25);
        assert_eq!((page.len(), next), (25, None));
    }

    #[test]
    fn an_update_moves_a_session_and_an_older_one_is_ignored() {
        let mut listing = Listing::default();
        listing.put(
            Arc::from("sess_a"),
            entry(Some("u"), 1, SessionStatus::Active),
        );
        listing.put(
            Arc::from("sess_b"),
            entry(Some("u"), 2, SessionStatus::Active),
        );
        assert!(listing.put(
            Arc::from("sess_a"),
            entry(Some("u"), 3, SessionStatus::Completed)
        ));
        assert!(!listing.put(
            Arc::from("sess_a"),
            entry(Some("u"), 2, SessionStatus::Active)
        ));
        let (page, _) = listing.page(&View::All, None, None, 10);
        assert_eq!(page, [Arc::from("sess_a"), Arc::from("sess_b")]);
        assert_eq!(listing.idle_before(3), [Arc::<str>::from("sess_b")]);
        listing.remove("sess_a");
        let (page, _) = listing.page(&View::All, None, None, 10);
        assert_eq!(page, [Arc::<str>::from("sess_b")]);
    }
}
