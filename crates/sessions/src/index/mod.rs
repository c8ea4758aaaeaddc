//! The session index: what listing sessions reads, so that a page costs
//! the page and not every session's history.
//!
//! Each session has an entry (owner, status, times, title: see
//! `IndexEntry`) kept in memory in the list's order and written through to
//! a [`RecordTable`] where the threads live: a [`FileTable`] in the
//! sessions folder for the JSONL store, a `NatsKvTable` (feature `nats`)
//! for the NATS store, a `PostgresTable` (feature `postgres`) for the
//! PostgreSQL store, a [`MemoryTable`] for the memory store. The engine
//! updates an entry whenever it writes to the session (created, a message,
//! a turn's start and end, a decision) and removes it when the session is
//! deleted. A table with no usable copy is rebuilt from the threads on
//! first use, and [`SessionEngine::recover`](crate::SessionEngine::recover)
//! brings every entry up to date after a restart.

mod cursor;
mod entry;
mod listing;
mod page;

use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use roundtable_thread_stream::{StoreError, ThreadStore};

pub use cursor::{InvalidCursor, SessionCursor};
pub(crate) use entry::IndexEntry;
pub(crate) use listing::View;
pub use page::{DEFAULT_PAGE_SIZE, ListSessions, MAX_PAGE_SIZE, SessionPage};
// The record tables, where the index keeps its entries (see `crate::table`).
#[cfg(feature = "nats")]
pub use crate::table::NatsKvTable;
#[cfg(feature = "postgres")]
pub use crate::table::PostgresTable;
pub use crate::table::{FileTable, MemoryTable, RecordTable, TableChange, TableError};

use crate::cache::RuntimeCache;
use crate::error::SessionError;
use crate::ids::SessionId;
use crate::state::{SessionState, SessionStatus};
use listing::Listing;

/// The file name of the index in the sessions folder (hidden: no thread).
pub const INDEX_FILE: &str = ".sessions-index";

/// The index of one engine.
pub(crate) struct SessionIndex {
    table: Arc<dyn RecordTable>,
    /// The engine's runtimes: a session another process deletes is
    /// dropped from them too.
    runtimes: Arc<RuntimeCache>,
    listing: Arc<Mutex<Listing>>,
    loaded: tokio::sync::OnceCell<()>,
    /// Held while a change goes to the table, so the table gets the changes
    /// in the order the listing took them.
    writes: tokio::sync::Mutex<()>,
}

impl SessionIndex {
    pub(crate) fn new(table: Arc<dyn RecordTable>, runtimes: Arc<RuntimeCache>) -> Self {
        Self {
            table,
            runtimes,
            listing: Arc::default(),
            loaded: tokio::sync::OnceCell::new(),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    fn listing(&self) -> std::sync::MutexGuard<'_, Listing> {
        lock(&self.listing)
    }

    /// Loads the table on first use (following other processes' changes
    /// from then on, for a shared one), or rebuilds it from `store`'s
    /// threads when it has no usable copy.
    async fn ready(&self, store: &dyn ThreadStore) -> Result<(), SessionError> {
        self.loaded
            .get_or_try_init(|| async {
                // Followed before the load, so no change falls in between.
                if let Some(changes) = self.table.changes().await? {
                    let listing = Arc::downgrade(&self.listing);
                    let runtimes = Arc::downgrade(&self.runtimes);
                    tokio::spawn(follow(changes, listing, runtimes));
                }
                let records = match self.table.load().await? {
                    Some(records) => records,
                    None => {
                        let records = rebuild(store).await?;
                        self.table.replace_all(records.clone()).await?;
                        records
                    }
                };
                let mut listing = self.listing();
                for (id, value) in records {
                    if let Ok(entry) = serde_json::from_str::<IndexEntry>(&value) {
                        listing.put(Arc::from(id), entry);
                    }
                }
                Ok::<_, SessionError>(())
            })
            .await
            .map(drop)
    }

    /// Sets session `id`'s entry from its `state` (nothing is written when
    /// the entry did not change, or the index holds a newer one).
    pub(crate) async fn update(
        &self,
        store: &dyn ThreadStore,
        id: &SessionId,
        state: &SessionState,
    ) -> Result<(), SessionError> {
        let Some(entry) = IndexEntry::of(state) else {
            return Ok(());
        };
        self.put(store, id.as_arc().clone(), entry).await
    }

    async fn put(
        &self,
        store: &dyn ThreadStore,
        id: Arc<str>,
        entry: IndexEntry,
    ) -> Result<(), SessionError> {
        self.ready(store).await?;
        let value = serde_json::to_string(&entry)?;
        let _writing = self.writes.lock().await;
        if self.listing().put(id.clone(), entry) {
            self.table.put(&id, value).await?;
        }
        Ok(())
    }

    /// Takes session `id` out of the index.
    pub(crate) async fn remove(
        &self,
        store: &dyn ThreadStore,
        id: &str,
    ) -> Result<(), SessionError> {
        self.ready(store).await?;
        let _writing = self.writes.lock().await;
        self.listing().remove(id);
        self.table.remove(id).await?;
        Ok(())
    }

    /// The ids of a page (see [`Listing::page`]).
    pub(crate) async fn page(
        &self,
        store: &dyn ThreadStore,
        view: &View,
        after: Option<&SessionCursor>,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<(Vec<Arc<str>>, Option<SessionCursor>), SessionError> {
        self.ready(store).await?;
        Ok(self.listing().page(view, after, status, limit))
    }

    /// The sessions last updated before `before` (Unix ms), oldest first.
    pub(crate) async fn idle_before(
        &self,
        store: &dyn ThreadStore,
        before: i64,
    ) -> Result<Vec<Arc<str>>, SessionError> {
        self.ready(store).await?;
        Ok(self.listing().idle_before(before))
    }

    /// Drops the entries of sessions not in `live` (threads gone while this
    /// process was away).
    pub(crate) async fn retain(
        &self,
        store: &dyn ThreadStore,
        live: &std::collections::HashSet<&str>,
    ) -> Result<(), SessionError> {
        self.ready(store).await?;
        let gone: Vec<Arc<str>> = self
            .listing()
            .ids()
            .filter(|id| !live.contains(&***id))
            .cloned()
            .collect();
        for id in gone {
            self.remove(store, &id).await?;
        }
        Ok(())
    }

    /// Marks session `id` unreadable (its thread is damaged).
    pub(crate) async fn put_unreadable(
        &self,
        store: &dyn ThreadStore,
        id: &str,
    ) -> Result<(), SessionError> {
        let known = self.listing().get(id).is_some();
        if known {
            return Ok(());
        }
        self.put(store, Arc::from(id), IndexEntry::unreadable())
            .await
    }
}

/// Every session's entry, from the threads of `store` (each read whole:
/// this runs when the index is missing or unreadable).
async fn rebuild(store: &dyn ThreadStore) -> Result<Vec<(String, String)>, SessionError> {
    let mut records = Vec::new();
    for thread in store.list_threads().await? {
        if SessionId::parse(thread.as_str()).is_err() {
            continue;
        }
        let entry = match store.read_all(&thread).await {
            Ok(entries) => IndexEntry::of(&SessionState::fold(&entries)),
            Err(StoreError::Corrupt { .. }) => Some(IndexEntry::unreadable()),
            Err(error) => return Err(error.into()),
        };
        if let Some(entry) = entry {
            records.push((thread.as_str().to_string(), serde_json::to_string(&entry)?));
        }
    }
    tracing::info!(
        sessions = records.len(),
        "session index rebuilt from the threads"
    );
    Ok(records)
}

/// Applies another process's changes to the listing as long as it lives,
/// and drops the runtimes of sessions deleted.
async fn follow(
    mut changes: futures::stream::BoxStream<'static, TableChange>,
    listing: Weak<Mutex<Listing>>,
    runtimes: Weak<RuntimeCache>,
) {
    while let Some(change) = changes.next().await {
        let Some(listing) = listing.upgrade() else {
            return;
        };
        match change {
            TableChange::Put(id, value) => {
                if let Ok(entry) = serde_json::from_str::<IndexEntry>(&value) {
                    lock(&listing).put(Arc::from(id), entry);
                }
            }
            TableChange::Removed(id) => {
                lock(&listing).remove(&id);
                if let (Some(runtimes), Ok(id)) = (runtimes.upgrade(), SessionId::parse(&id)) {
                    runtimes.forget(&id).await;
                }
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every change is one insert or remove: a poisoned lock holds
    // consistent data.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
