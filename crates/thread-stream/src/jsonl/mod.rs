//! `JsonlStore`: the embedded default store, one JSONL file per thread under
//! a root folder (`<thread>.jsonl`, or `<thread>/<file>` in a folder per
//! thread: see `layout`).

mod layout;
mod lock;
mod parse;
mod recovery;
mod thread_file;

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;

pub use self::layout::JsonlLayout;
use self::lock::FolderLock;
pub use self::recovery::Recovery;
use self::thread_file::ThreadFile;
use crate::storable::StorableBatch;
use crate::store::{EntryStream, Expect, ThreadStore};
use crate::thread_table::ThreadTable;
use crate::tip::subscribe;
use crate::{Entry, NewEntry, StoreError, ThreadId};

/// When appended entries are forced to disk.
///
/// Every append is written to the file before it returns, so a crash of the
/// process never loses an acknowledged entry; fsync decides what survives a
/// crash of the machine (power loss, kernel panic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// fsync before every append returns: nothing acknowledged is ever lost.
    Always,
    /// fsync written threads in the background at this interval: at most one
    /// interval of entries is lost with the machine. The default (100 ms).
    Batched(Duration),
    /// Leave it to the OS.
    Never,
}

impl Default for FsyncPolicy {
    fn default() -> Self {
        FsyncPolicy::Batched(Duration::from_millis(100))
    }
}

/// Options of a [`JsonlStore`].
#[derive(Debug, Clone)]
pub struct JsonlOptions {
    /// When entries are forced to disk.
    pub fsync: FsyncPolicy,
    /// Where each thread's file lives in the folder.
    pub layout: JsonlLayout,
    /// How many thread files the store keeps open (with their line index)
    /// once nothing uses them. A file in use (an append or read under way, a
    /// subscription following it, writes not yet fsynced) is never closed;
    /// beyond this many, the least recently used of the others are closed,
    /// and reopened (checked again, as after a restart) on their next use.
    /// Without a bound, a long-running server would hold a descriptor for
    /// every thread it ever touched and fail with "too many open files".
    /// Default: 256, well under the common limit of 1024 descriptors a
    /// process, leaving room for sockets.
    pub max_idle_files: usize,
}

/// The default of [`JsonlOptions::max_idle_files`].
const DEFAULT_MAX_IDLE_FILES: usize = 256;

impl Default for JsonlOptions {
    fn default() -> Self {
        Self {
            fsync: FsyncPolicy::default(),
            layout: JsonlLayout::default(),
            max_idle_files: DEFAULT_MAX_IDLE_FILES,
        }
    }
}

/// A [`ThreadStore`] over JSONL files, one entry per line, readable by any
/// JSON tool: `<root>/<thread>.jsonl`, or `<root>/<thread>/<file_name>` with
/// [`JsonlLayout::FolderPerThread`].
///
/// - Opening takes an advisory lock on the folder: a second process (or a
///   second store in this one) gets [`StoreError::Locked`] naming the holder.
/// - The folder records its layout when a store first opens it; opening it
///   with another layout is [`StoreError::LayoutMismatch`].
/// - A thread file is checked the first time the thread is used: a torn last
///   line (a crash mid-write), or a batch whose last lines are missing, is cut
///   off and reported by [`JsonlStore::recoveries`]; every complete entry
///   before it is kept. A damaged line anywhere else is
///   [`StoreError::Corrupt`] and the file is left as it is.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use roundtable_thread_stream::{EntryBody, Expect, JsonlStore, NewEntry, ThreadId, ThreadStore};
///
/// let dir = tempfile::tempdir().unwrap();
/// let store = JsonlStore::open(dir.path()).await.unwrap();
/// let thread = ThreadId::new("general").unwrap();
/// store.append(&thread, Expect::Any, vec![NewEntry::new("alice", EntryBody::chat("hi"))]).await.unwrap();
/// assert!(dir.path().join("general.jsonl").exists());
/// # });
/// ```
#[derive(Clone)]
pub struct JsonlStore {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    /// `root` as the file system resolves it (absolute, links followed):
    /// what [`ThreadStore::thread_file`] gives paths under, and what a path
    /// is compared with in [`ThreadStore::thread_of_file`].
    canonical_root: PathBuf,
    options: JsonlOptions,
    /// Each thread's file, opened on first use and closed again when it
    /// has been idle longest and too many are open. The cell is taken under
    /// the table's lock but filled outside it, so checking a long file on
    /// open never holds up the other threads.
    threads: Mutex<ThreadTable<OnceCell<Arc<ThreadFile>>>>,
    recoveries: Mutex<Vec<Recovery>>,
    lock: Mutex<Option<FolderLock>>,
}

fn poisoned() -> StoreError {
    StoreError::Backend("the store's thread table was poisoned by a panic".into())
}

impl JsonlStore {
    /// Opens (creating it if needed) the folder `root` with default options.
    pub async fn open(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(root, JsonlOptions::default()).await
    }

    /// Opens the folder `root` with `options`.
    pub async fn open_with(
        root: impl AsRef<Path>,
        options: JsonlOptions,
    ) -> Result<Self, StoreError> {
        options.layout.validate()?;
        let root = root.as_ref().to_path_buf();
        std::fs::create_dir_all(&root).map_err(|source| StoreError::Io {
            path: root.clone(),
            source,
        })?;
        // Taking the lock may wait briefly (see `lock`), and checking the
        // layout may list the folder: keep both off the runtime. The layout
        // is checked under the lock, so no other store records another one
        // meanwhile; on a mismatch, dropping the lock releases the folder.
        let (lock, canonical_root) = {
            let root = root.clone();
            let layout = options.layout.clone();
            tokio::task::spawn_blocking(move || {
                let lock = FolderLock::acquire(&root)?;
                layout.record_or_check(&root)?;
                let canonical = std::fs::canonicalize(&root).map_err(|source| StoreError::Io {
                    path: root.clone(),
                    source,
                })?;
                Ok::<_, StoreError>((lock, canonical))
            })
            .await
            .map_err(|e| StoreError::Backend(format!("opening the folder failed: {e}")))??
        };
        let fsync = options.fsync;
        let inner = Arc::new(Inner {
            root,
            canonical_root,
            options,
            threads: Mutex::new(ThreadTable::default()),
            recoveries: Mutex::new(Vec::new()),
            lock: Mutex::new(Some(lock)),
        });
        if let FsyncPolicy::Batched(every) = fsync {
            tokio::spawn(flush_loop(Arc::downgrade(&inner), every));
        }
        Ok(Self { inner })
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Torn tails cut off thread files since the store opened.
    pub fn recoveries(&self) -> Vec<Recovery> {
        self.inner
            .recoveries
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Forces every written thread to disk now.
    pub async fn sync(&self) -> Result<(), StoreError> {
        sync_dirty(&self.inner, true).await
    }

    async fn thread(&self, id: &ThreadId) -> Result<Arc<ThreadFile>, StoreError> {
        Ok(self.thread_opened_by(id, None).await?.0)
    }

    /// The thread's file, opened if this is its first use. When this call
    /// opens it, the entries of `read` come back too, kept from the check of
    /// the file on open (a read that opens a thread parses its lines once);
    /// otherwise `None`, and the caller reads them from the open file.
    async fn thread_opened_by(
        &self,
        id: &ThreadId,
        read: Option<RangeInclusive<u64>>,
    ) -> Result<(Arc<ThreadFile>, Option<Vec<Entry>>), StoreError> {
        let mut opened_with = None;
        let (cell, closed) = {
            let mut threads = self.inner.threads.lock().map_err(|_| poisoned())?;
            if self.inner.lock.lock().map_err(|_| poisoned())?.is_none() {
                return Err(StoreError::Closed);
            }
            let cell = threads.get(id);
            let never_syncs = self.inner.options.fsync == FsyncPolicy::Never;
            let closed = threads.trim(self.inner.options.max_idle_files, |cell| {
                // A file closes when nothing else holds it and no write
                // waits for the background fsync (closing would leave that
                // to nobody).
                cell.get().is_none_or(|file| {
                    Arc::strong_count(file) == 1 && (never_syncs || !file.has_unsynced_writes())
                })
            });
            (cell, closed)
        };
        // Closing files is a syscall each: not under the table's lock.
        drop(closed);
        let file = cell
            .get_or_try_init(|| async {
                // Reading and checking the file is blocking work.
                let path = self.inner.options.layout.locate(&self.inner.root, id);
                let thread = id.clone();
                let (file, recovery, entries) =
                    tokio::task::spawn_blocking(move || ThreadFile::open(path, thread, read))
                        .await
                        .map_err(|e| {
                            StoreError::Backend(format!("opening a thread failed: {e}"))
                        })??;
                opened_with = Some(entries);
                if let Some(r) = recovery {
                    self.inner
                        .recoveries
                        .lock()
                        .map_err(|_| poisoned())?
                        .push(r);
                }
                Ok::<_, StoreError>(Arc::new(file))
            })
            .await?;
        Ok((file.clone(), opened_with))
    }

    /// The threads opened so far.
    fn open_threads(&self) -> Result<Vec<Arc<ThreadFile>>, StoreError> {
        open_threads(&self.inner)
    }
}

fn open_threads(inner: &Inner) -> Result<Vec<Arc<ThreadFile>>, StoreError> {
    let threads = inner.threads.lock().map_err(|_| poisoned())?;
    Ok(threads
        .states()
        .filter_map(|cell| cell.get().cloned())
        .collect())
}

async fn flush_loop(inner: Weak<Inner>, every: Duration) {
    // The first tick is one interval after the open: nothing is written
    // before, and a tick at once would sync at an arbitrary moment.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.lock.lock().map(|l| l.is_none()).unwrap_or(true) {
            return;
        }
        // A failed background fsync is retried at the next tick (the thread
        // stays dirty); appends already returned, so there is no caller to tell.
        let _ = sync_dirty(&inner, false).await;
    }
}

/// fsyncs the threads written since their last fsync (all when `all`), and
/// the names of thread files (and folders) created since: all of them in
/// one blocking task, so a tick costs one hand-off however many threads
/// were written.
async fn sync_dirty(inner: &Inner, all: bool) -> Result<(), StoreError> {
    let threads: Vec<Arc<ThreadFile>> = open_threads(inner)?
        .into_iter()
        .filter(|t| all || t.dirty.load(std::sync::atomic::Ordering::Acquire))
        .collect();
    if threads.is_empty() {
        return Ok(());
    }
    tokio::task::spawn_blocking(move || {
        let mut first_error = None;
        for thread in threads {
            thread
                .dirty
                .store(false, std::sync::atomic::Ordering::Release);
            if let Err(e) = thread.sync() {
                // Still dirty: the next tick tries again.
                thread
                    .dirty
                    .store(true, std::sync::atomic::Ordering::Release);
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    })
    .await
    .map_err(|e| StoreError::Backend(format!("fsync task failed: {e}")))?
}

#[async_trait]
impl ThreadStore for JsonlStore {
    async fn append(
        &self,
        thread: &ThreadId,
        expect: Expect,
        entries: Vec<NewEntry>,
    ) -> Result<Vec<Entry>, StoreError> {
        let batch = StorableBatch::check(thread, entries)?;
        let t = self.thread(thread).await?;
        t.append(expect, batch, self.inner.options.fsync).await
    }

    async fn read(
        &self,
        thread: &ThreadId,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<Entry>, StoreError> {
        match self.thread_opened_by(thread, Some(range.clone())).await? {
            (_, Some(entries)) => Ok(entries),
            (file, None) => file.read_clamped(*range.start(), *range.end()),
        }
    }

    async fn last_seq(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        Ok(self.thread(thread).await?.last_seq())
    }

    async fn subscribe(&self, thread: &ThreadId, from: u64) -> Result<EntryStream, StoreError> {
        let t = self.thread(thread).await?;
        let tip = t.tip.subscribe();
        Ok(subscribe(t, tip, from))
    }

    fn thread_file(&self, thread: &ThreadId) -> Option<PathBuf> {
        let layout = &self.inner.options.layout;
        Some(layout.locate(&self.inner.canonical_root, thread).file)
    }

    fn thread_of_file(&self, path: &Path) -> Option<ThreadId> {
        // Resolved first: `..`, and links anywhere on the way (a thread's
        // folder or file linked to somewhere else), give the real place,
        // which must be the thread's file under the root.
        let file = std::fs::canonicalize(path).ok()?;
        if !std::fs::metadata(&file).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let layout = &self.inner.options.layout;
        layout.thread_of(&self.inner.canonical_root, &file)
    }

    async fn list_threads(&self) -> Result<Vec<ThreadId>, StoreError> {
        if self.inner.lock.lock().map_err(|_| poisoned())?.is_none() {
            return Err(StoreError::Closed);
        }
        self.inner.options.layout.list_threads(&self.inner.root)
    }

    /// Deletes the thread's file (and its folder, with a folder per thread,
    /// when nothing else is in it). The thread must not be used meanwhile:
    /// an append through a handle taken before the delete fails, but a call
    /// that opens the thread again while its file is being removed would
    /// find it half gone.
    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), StoreError> {
        let cell = {
            let mut threads = self.inner.threads.lock().map_err(|_| poisoned())?;
            if self.inner.lock.lock().map_err(|_| poisoned())?.is_none() {
                return Err(StoreError::Closed);
            }
            threads.remove(thread)
        };
        if let Some(file) = cell.as_ref().and_then(|cell| cell.get()) {
            file.retire().await;
        }
        let location = self.inner.options.layout.locate(&self.inner.root, thread);
        tokio::task::spawn_blocking(move || location.delete())
            .await
            .map_err(|e| StoreError::Backend(format!("deleting a thread failed: {e}")))?
    }

    async fn close(&self) -> Result<(), StoreError> {
        let threads = self.open_threads()?;
        for t in &threads {
            t.close();
        }
        let synced = sync_dirty(&self.inner, true).await;
        // Releasing the folder lock lets another store open the folder.
        self.inner.lock.lock().map_err(|_| poisoned())?.take();
        synced
    }
}
