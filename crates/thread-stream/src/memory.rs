//! `MemoryStore`: threads in memory, for tests and short-lived hosts.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::storable::StorableBatch;
use crate::store::{EntryStream, Expect, ThreadStore};
use crate::tip::{EntrySource, Tip, advance, subscribe};
use crate::{Entry, NewEntry, StoreError, ThreadId};

/// A [`ThreadStore`] that keeps every thread in memory. Cloning it gives
/// another handle on the same threads.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use roundtable_thread_stream::{EntryBody, Expect, MemoryStore, NewEntry, ThreadId, ThreadStore};
///
/// let store = MemoryStore::new();
/// let thread = ThreadId::new("general").unwrap();
/// let hi = NewEntry::new("alice", EntryBody::chat("hi"));
/// let written = store.append(&thread, Expect::LastSeq(0), vec![hi]).await.unwrap();
/// assert_eq!(written[0].seq, 1);
/// assert_eq!(store.read_all(&thread).await.unwrap(), written);
/// # });
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Looked up at every call: hashed with `foldhash` (the thread ids are
    /// the store's own keys, not a flooding risk worth SipHash's cost).
    threads: Mutex<HashMap<ThreadId, Arc<MemoryThread>, foldhash::fast::RandomState>>,
    closed: std::sync::atomic::AtomicBool,
}

struct MemoryThread {
    entries: RwLock<Vec<Entry>>,
    /// The last seq, for subscribers. Moved forward by an append only
    /// while someone subscribes (a wake-up of its eight `Notify`s costs as
    /// much as an entry's placing), and brought up to date by a new
    /// subscription: both under the entries' lock, so no append slips
    /// between a subscription's catching up and its being counted.
    tip: watch::Sender<Tip>,
}

impl EntrySource for MemoryThread {
    fn read_range(&self, from: u64, to: u64) -> Result<Vec<Entry>, StoreError> {
        let entries = self.entries.read().map_err(|_| poisoned())?;
        Ok(slice(&entries, from..=to).to_vec())
    }
}

fn slice(entries: &[Entry], range: RangeInclusive<u64>) -> &[Entry] {
    let len = entries.len() as u64;
    let start = range.start().saturating_sub(1).min(len);
    let end = (*range.end()).min(len).max(start);
    &entries[start as usize..end as usize]
}

fn poisoned() -> StoreError {
    StoreError::Backend("a thread lock was poisoned by a panic".into())
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    fn thread(&self, id: &ThreadId) -> Result<Arc<MemoryThread>, StoreError> {
        self.check_open()?;
        let mut threads = self.inner.threads.lock().map_err(|_| poisoned())?;
        // Found without cloning the id (a count's increment and decrement)
        // but for a thread's first call.
        if let Some(thread) = threads.get(id) {
            return Ok(thread.clone());
        }
        Ok(threads
            .entry(id.clone())
            .or_insert_with(|| {
                Arc::new(MemoryThread {
                    entries: RwLock::new(Vec::new()),
                    tip: watch::Sender::new(Tip::default()),
                })
            })
            .clone())
    }
}

#[async_trait]
impl ThreadStore for MemoryStore {
    async fn append(
        &self,
        thread: &ThreadId,
        expect: Expect,
        entries: Vec<NewEntry>,
    ) -> Result<Vec<Entry>, StoreError> {
        let batch = StorableBatch::check(thread, entries)?;
        let t = self.thread(thread)?;
        let mut stored = t.entries.write().map_err(|_| poisoned())?;
        let last = stored.len() as u64;
        expect.check(thread, last)?;
        let written = batch.place(thread, last);
        stored.extend(written.iter().cloned());
        // Published while the entries are still locked, so tips go out in
        // the order the entries were written (and `advance` never steps
        // back); with no subscriber, the next one catches up instead.
        if t.tip.receiver_count() > 0 {
            advance(&t.tip, stored.len() as u64);
        }
        drop(stored);
        Ok(written)
    }

    async fn read(
        &self,
        thread: &ThreadId,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<Entry>, StoreError> {
        let t = self.thread(thread)?;
        let entries = t.entries.read().map_err(|_| poisoned())?;
        Ok(slice(&entries, range).to_vec())
    }

    async fn last_seq(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        let t = self.thread(thread)?;
        let last = t.entries.read().map_err(|_| poisoned())?.len() as u64;
        Ok(last)
    }

    async fn subscribe(&self, thread: &ThreadId, from: u64) -> Result<EntryStream, StoreError> {
        let t = self.thread(thread)?;
        let tip = {
            // Appends wait while the tip catches up and the subscription is
            // counted (see `MemoryThread::tip`).
            let entries = t.entries.read().map_err(|_| poisoned())?;
            advance(&t.tip, entries.len() as u64);
            t.tip.subscribe()
        };
        Ok(subscribe(t, tip, from))
    }

    async fn list_threads(&self) -> Result<Vec<ThreadId>, StoreError> {
        self.check_open()?;
        let threads = self.inner.threads.lock().map_err(|_| poisoned())?;
        let mut ids: Vec<ThreadId> = threads
            .iter()
            .filter(|(_, t)| {
                let entries = t
                    .entries
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                !entries.is_empty()
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        Ok(ids)
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), StoreError> {
        self.check_open()?;
        let removed = self
            .inner
            .threads
            .lock()
            .map_err(|_| poisoned())?
            .remove(thread);
        if let Some(t) = removed {
            t.tip.send_modify(|tip| tip.closed = true);
        }
        Ok(())
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::Release);
        let threads = self.inner.threads.lock().map_err(|_| poisoned())?;
        for t in threads.values() {
            t.tip.send_modify(|tip| tip.closed = true);
        }
        Ok(())
    }
}
