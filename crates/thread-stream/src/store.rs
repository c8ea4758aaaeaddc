//! The `ThreadStore` trait: what every store (memory, JSONL, NATS JetStream)
//! promises.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::{Entry, NewEntry, StoreError, ThreadId};

/// What an append expects of the thread it appends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Append whatever the thread holds.
    Any,
    /// Append only if the thread's last seq is exactly this (0: the thread is
    /// empty). This is how a writer that read the thread up to `n` makes sure
    /// nobody wrote in between.
    LastSeq(u64),
}

impl Expect {
    /// Checks the expectation against a thread whose last seq is `last`: a
    /// [`StoreError::Conflict`] when it does not hold.
    pub fn check(self, thread: &ThreadId, last: u64) -> Result<(), StoreError> {
        match self {
            Expect::LastSeq(expected) if expected != last => Err(StoreError::Conflict {
                thread: thread.clone(),
                expected,
                actual: last,
            }),
            _ => Ok(()),
        }
    }
}

/// A live subscription: entries in seq order, history first, then live ones.
/// It ends when the store closes; an item is an error only when the store can
/// no longer deliver (the subscriber then resubscribes from its last seq + 1).
pub type EntryStream = BoxStream<'static, Result<Entry, StoreError>>;

/// A durable, append-only store of threads.
///
/// Promises every implementation keeps (the conformance suite in the crate's
/// tests checks them):
///
/// - an acknowledged entry reads back equal to what was appended: a batch
///   holding an entry that could not ([`EntryBody::check`](crate::EntryBody::check))
///   is refused whole with [`StoreError::InvalidEntry`], by every store alike;
/// - seqs start at 1 per thread and have no gaps;
/// - an append is all or nothing: a batch appears whole or not at all, and
///   an append whose [`Expect`] fails returns [`StoreError::Conflict`] and
///   writes nothing;
/// - concurrent appends to one thread are serialised: none is lost;
/// - a subscription delivers each entry from its start seq exactly once, in
///   order, with no gap between history and live entries, and ends cleanly
///   when the store closes.
#[async_trait]
pub trait ThreadStore: Send + Sync {
    /// Appends `entries` (in order) to `thread`, creating it if needed, and
    /// returns them with their seqs. An empty batch checks `expect` and
    /// returns nothing.
    async fn append(
        &self,
        thread: &ThreadId,
        expect: Expect,
        entries: Vec<NewEntry>,
    ) -> Result<Vec<Entry>, StoreError>;

    /// The entries whose seq falls in `range` (fewer if the thread is shorter;
    /// none for an unknown thread).
    async fn read(
        &self,
        thread: &ThreadId,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<Entry>, StoreError>;

    /// The thread's last seq; 0 for an empty or unknown thread.
    async fn last_seq(&self, thread: &ThreadId) -> Result<u64, StoreError>;

    /// Entries from seq `from` on: the stored ones, then live ones as they are
    /// appended.
    async fn subscribe(&self, thread: &ThreadId, from: u64) -> Result<EntryStream, StoreError>;

    /// Every thread that holds at least one entry, sorted by id.
    async fn list_threads(&self) -> Result<Vec<ThreadId>, StoreError>;

    /// Closes the store: subscriptions end after what they already hold, and
    /// later calls fail with [`StoreError::Closed`]. Data already appended stays.
    async fn close(&self) -> Result<(), StoreError>;

    /// Deletes `thread` and every entry of it, for good: subscriptions to it
    /// end, and the thread reads as empty (an unknown thread) afterwards.
    /// Deleting an unknown thread is no error. Stores that cannot delete
    /// (the default) answer [`StoreError::Unsupported`].
    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), StoreError> {
        let _ = thread;
        Err(StoreError::Unsupported("deleting threads"))
    }

    /// Every entry of the thread.
    async fn read_all(&self, thread: &ThreadId) -> Result<Vec<Entry>, StoreError> {
        self.read(thread, 1..=u64::MAX).await
    }

    /// The absolute path of the file that holds `thread`'s entries, for a
    /// store that keeps threads in files (the JSONL store); `None` for the
    /// others (the default). The file need not exist yet: it is where the
    /// thread's first append writes.
    fn thread_file(&self, _thread: &ThreadId) -> Option<PathBuf> {
        None
    }

    /// The thread whose file `path` is: the inverse of
    /// [`thread_file`](Self::thread_file), on the path as the file system
    /// resolves it (symbolic links followed, `..` removed). `None` when it is
    /// no thread file of this store: it does not exist, it lies outside the
    /// store's folder, it is another file of the folder, or the store keeps
    /// no files (the default). It never reads the file, only looks it up
    /// (a few system calls).
    fn thread_of_file(&self, _path: &Path) -> Option<ThreadId> {
        None
    }
}
