//! One thread's file (wherever the layout puts it), one entry per line.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::RangeInclusive;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use tokio::sync::{Mutex, watch};

use super::FsyncPolicy;
use super::layout::ThreadPath;
use super::parse::{parse_until_error, read_line};
use super::recovery::{Recovery, scan};
use crate::entry::StoredLine;
use crate::storable::StorableBatch;
use crate::store::Expect;
use crate::tip::{EntrySource, Tip, advance};
use crate::{Entry, StoreError, ThreadId};

/// An open thread file. Appends are serialised by `append_lock`; readers never
/// wait for a writer: they read the bytes that `index` says are complete.
pub(crate) struct ThreadFile {
    thread: ThreadId,
    location: ThreadPath,
    /// The file, once it exists (it is created by the first append). One
    /// handle serves both sides: writes go through `O_APPEND`, reads are
    /// positioned (`pread`) and need no seek.
    file: OnceLock<Arc<File>>,
    /// Held across one append: the seq check, the write and the index update.
    append_lock: Mutex<()>,
    /// `index[i]` is where entry `i + 1`'s line starts; the last element is
    /// where the last entry's line ends. Starts as `[0]` (no entries).
    index: RwLock<Vec<u64>>,
    /// Written since the last fsync (for the batched policy).
    pub(crate) dirty: AtomicBool,
    /// The file (and the thread's folder) was created and its name is not
    /// yet known to be on disk: the next fsync makes it durable too.
    new_names_unsynced: AtomicBool,
    pub(crate) tip: watch::Sender<Tip>,
}

fn io(path: &std::path::Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl ThreadFile {
    /// Opens the thread's file if it exists, checks it and cuts off a torn
    /// tail (reported in the returned recovery). Returns with them the
    /// entries whose seqs are in `keep` (as a read of that range right after
    /// the open would), taken from the check's own parse.
    pub(crate) fn open(
        location: ThreadPath,
        thread: ThreadId,
        keep: Option<RangeInclusive<u64>>,
    ) -> Result<(Self, Option<Recovery>, Vec<Entry>), StoreError> {
        let path = &location.file;
        let file = OnceLock::new();
        let mut index = vec![0u64];
        let mut recovery = None;
        let mut entries = Vec::new();
        match std::fs::read(path) {
            Ok(data) => {
                let mut found = scan(&thread, path, &data, keep)?;
                entries = std::mem::take(&mut found.entries);
                let handle = OpenOptions::new()
                    .read(true)
                    .append(true)
                    .open(path)
                    .map_err(io(path))?;
                if found.end < data.len() as u64 {
                    handle.set_len(found.end).map_err(io(path))?;
                    handle.sync_data().map_err(io(path))?;
                    recovery = Some(Recovery {
                        thread: thread.clone(),
                        found_len: data.len() as u64,
                        kept_len: found.end,
                        dropped_entries: data[found.end as usize..]
                            .iter()
                            .filter(|b| **b == b'\n')
                            .count(),
                    });
                }
                let mut end = found.end;
                if found.missing_newline {
                    (&handle).write_all(b"\n").map_err(io(path))?;
                    end += 1;
                }
                index = found.starts;
                index.push(end);
                let _ = file.set(Arc::new(handle));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(path)(e)),
        }
        let last = index.len() as u64 - 1;
        let tf = Self {
            thread,
            location,
            file,
            append_lock: Mutex::new(()),
            index: RwLock::new(index),
            dirty: AtomicBool::new(false),
            new_names_unsynced: AtomicBool::new(false),
            tip: watch::Sender::new(Tip {
                last,
                closed: false,
            }),
        };
        Ok((tf, recovery, entries))
    }

    /// The thread's file.
    fn path(&self) -> &std::path::Path {
        &self.location.file
    }

    /// Written, or created, since the last fsync: closing the file now
    /// would leave that to nobody.
    pub(crate) fn has_unsynced_writes(&self) -> bool {
        self.dirty.load(Ordering::Acquire) || self.new_names_unsynced.load(Ordering::Acquire)
    }

    pub(crate) fn last_seq(&self) -> u64 {
        self.tip.borrow().last
    }

    /// The file, created (with the thread's folder, if it has one) on the
    /// first append. Called under the append lock, so only one caller ever
    /// creates it.
    fn handle(&self) -> Result<&Arc<File>, StoreError> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        self.location.create_folder()?;
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(self.path())
            .map_err(io(self.path()))?;
        self.new_names_unsynced.store(true, Ordering::Release);
        Ok(self.file.get_or_init(|| Arc::new(f)))
    }

    /// Forces what was written to disk, and with it the name of a newly
    /// created file (and folder): without that, a crash of the machine could
    /// lose a new thread whose entries were fsynced. Blocking.
    pub(crate) fn sync(&self) -> Result<(), StoreError> {
        let Some(file) = self.file.get() else {
            return Ok(());
        };
        file.sync_data().map_err(io(self.path()))?;
        if self.new_names_unsynced.swap(false, Ordering::AcqRel)
            && let Err(e) = self.location.sync_new_names()
        {
            self.new_names_unsynced.store(true, Ordering::Release);
            return Err(e);
        }
        Ok(())
    }

    pub(crate) async fn append(
        self: &Arc<Self>,
        expect: Expect,
        batch: StorableBatch,
        fsync: FsyncPolicy,
    ) -> Result<Vec<Entry>, StoreError> {
        let _guard = self.append_lock.lock().await;
        if self.tip.borrow().closed {
            return Err(StoreError::Closed);
        }
        let last = self.last_seq();
        expect.check(&self.thread, last)?;
        let count = batch.entries().len();
        if count == 0 {
            return Ok(Vec::new());
        }
        let written = batch.place(&self.thread, last);
        let mut buf = Vec::with_capacity(256 * count);
        let line_ends =
            StoredLine::write_batch(&written, &mut buf).map_err(|source| StoreError::Encode {
                thread: self.thread.clone(),
                source,
            })?;
        let file = self.handle()?.clone();
        let start = *self
            .index
            .read()
            .map_err(|_| poisoned())?
            .last()
            .unwrap_or(&0);
        if let Err(e) = (&*file).write_all(&buf) {
            // Take back a partial write so the file ends on a whole entry.
            let _ = file.set_len(start);
            return Err(io(self.path())(e));
        }
        match fsync {
            FsyncPolicy::Always => {
                let this = self.clone();
                let synced = tokio::task::spawn_blocking(move || this.sync())
                    .await
                    .unwrap_or_else(|e| {
                        Err(StoreError::Backend(format!("fsync task failed: {e}")))
                    });
                if let Err(e) = synced {
                    // The append fails, so it must not stay in the file: the
                    // index would not know its lines, and the next append
                    // would write its seqs again after them.
                    let _ = file.set_len(start);
                    return Err(e);
                }
            }
            FsyncPolicy::Batched(_) => self.dirty.store(true, Ordering::Release),
            FsyncPolicy::Never => {}
        }
        {
            let mut index = self.index.write().map_err(|_| poisoned())?;
            index.extend(line_ends.iter().map(|end| start + *end as u64));
        }
        let new_last = last + count as u64;
        advance(&self.tip, new_last);
        Ok(written)
    }

    /// Entries `from..=to` clamped to what exists.
    pub(crate) fn read_clamped(&self, from: u64, to: u64) -> Result<Vec<Entry>, StoreError> {
        let last = self.last_seq();
        let from = from.max(1);
        let to = to.min(last);
        if from > to {
            return Ok(Vec::new());
        }
        self.read_range(from, to)
    }

    /// Closes the thread for good once no append is under way: later
    /// appends through this handle fail, subscriptions end (the thread is
    /// being deleted).
    pub(crate) async fn retire(&self) {
        let _guard = self.append_lock.lock().await;
        self.close();
    }

    pub(crate) fn close(&self) {
        self.tip.send_modify(|tip| tip.closed = true);
    }
}

fn poisoned() -> StoreError {
    StoreError::Backend("a thread index lock was poisoned by a panic".into())
}

impl EntrySource for ThreadFile {
    fn read_range(&self, from: u64, to: u64) -> Result<Vec<Entry>, StoreError> {
        let (start, end) = {
            let index = self.index.read().map_err(|_| poisoned())?;
            let (Some(start), Some(end)) = (index.get(from as usize - 1), index.get(to as usize))
            else {
                return Err(StoreError::Backend(format!(
                    "entries {from}..={to} are past the end"
                )));
            };
            (*start, *end)
        };
        let Some(file) = self.file.get() else {
            return Ok(Vec::new());
        };
        let mut buf = vec![0u8; (end - start) as usize];
        file.read_exact_at(&mut buf, start)
            .map_err(io(self.path()))?;
        let mut lines: Vec<&[u8]> = Vec::with_capacity((to - from + 1) as usize);
        let mut line_start = 0;
        for line_end in memchr::memchr_iter(b'\n', &buf).chain([buf.len()]) {
            let line = &buf[line_start..line_end];
            if !line.iter().all(u8::is_ascii_whitespace) {
                lines.push(line);
            }
            line_start = line_end + 1;
        }
        let (out, error) = parse_until_error(&lines, || {
            |line: &[u8]| read_line(line).map(|stored| stored.entry)
        });
        if let Some(e) = error {
            return Err(StoreError::Corrupt {
                thread: self.thread.clone(),
                location: format!(
                    "{}:entry {}",
                    self.path().display(),
                    from + out.len() as u64
                ),
                message: format!("changed on disk since it was opened: {e}"),
            });
        }
        Ok(out)
    }
}
