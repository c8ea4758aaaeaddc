//! The folder lock: a JSONL folder belongs to one store at a time.
//!
//! Two stores appending to one file would each hold their own idea of the
//! last seq, so the second would write duplicate seqs. The store therefore
//! takes an advisory lock on `<root>/.lock` when it opens and writes its pid
//! and host into the file, so the error a second process gets names the holder.
//!
//! Two details make the lock exact rather than merely advisory:
//!
//! - `flock` does not conflict within one open file description, and a
//!   process can open the same folder twice, so the folders this process holds
//!   are also kept in a process-wide table: a second store in the same process
//!   is refused without asking the kernel.
//! - A `flock` belongs to the open file description, which a child process
//!   shares from the moment it is spawned until it `exec`s and its close-on-exec
//!   descriptors go away. A store closed while another thread of the process
//!   spawns a child can therefore stay "locked" for that instant. When the
//!   kernel says the folder is held but the lock file names this very process
//!   and no store of this process holds it, the holder can only be such a
//!   child, so opening waits briefly for it instead of failing.

use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::StoreError;

/// File name of the lock inside the store's folder.
pub(crate) const LOCK_FILE: &str = ".lock";

/// How long opening waits for a spawned child to drop a lock this process
/// released (see the module docs); `exec` takes microseconds to milliseconds.
const CHILD_RELEASE_WAIT: Duration = Duration::from_secs(2);

/// The folders (canonical paths) held by stores of this process.
static HELD: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<HashSet<PathBuf>>> {
    // The table holds plain paths: a panic elsewhere cannot leave it torn.
    HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The held lock; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct FolderLock {
    key: PathBuf,
    _file: File,
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        if let Some(set) = held().as_mut() {
            set.remove(&self.key);
        }
    }
}

impl FolderLock {
    /// Takes the lock on `root`, or says who holds it. Blocking: it may wait
    /// up to [`CHILD_RELEASE_WAIT`], so call it off the async runtime.
    pub(crate) fn acquire(root: &Path) -> Result<Self, StoreError> {
        let path = root.join(LOCK_FILE);
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let key = std::fs::canonicalize(root).map_err(|source| StoreError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let me = format!("pid {} on {}", std::process::id(), host_name());
        let deadline = Instant::now() + CHILD_RELEASE_WAIT;
        loop {
            {
                let mut table = held();
                let set = table.get_or_insert_with(HashSet::new);
                if set.contains(&key) {
                    return Err(locked(root, &mut file));
                }
                match file.try_lock() {
                    Ok(()) => {
                        set.insert(key.clone());
                        break;
                    }
                    Err(TryLockError::WouldBlock) => {}
                    Err(TryLockError::Error(source)) => return Err(io(source)),
                }
            }
            let refused = locked(root, &mut file);
            let ours = matches!(&refused, StoreError::Locked { holder, .. } if *holder == me);
            if !ours || Instant::now() >= deadline {
                return Err(refused);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // From here the lock is ours; dropping `lock` on an error releases it.
        let mut lock = Self { key, _file: file };
        let file = &mut lock._file;
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(format!("{me}\n").as_bytes()).map_err(io)?;
        Ok(lock)
    }
}

/// The error for a held folder, naming the holder the lock file records.
fn locked(root: &Path, file: &mut File) -> StoreError {
    let mut holder = String::new();
    let _ = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut holder));
    let holder = holder.trim();
    StoreError::Locked {
        root: root.to_path_buf(),
        holder: if holder.is_empty() {
            "unknown holder".into()
        } else {
            holder.into()
        },
    }
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_held_once_per_process_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = FolderLock::acquire(dir.path()).unwrap();
        // The same folder by another spelling is the same folder.
        let other_spelling = dir.path().join(".");
        assert!(matches!(
            FolderLock::acquire(&other_spelling),
            Err(StoreError::Locked { .. })
        ));
        drop(first);
        FolderLock::acquire(&other_spelling).unwrap();
    }

    #[test]
    fn a_released_lock_still_held_by_a_spawned_child_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let first = FolderLock::acquire(dir.path()).unwrap();
        // Stand-in for a child between spawn and exec: a second open file
        // description can't be shared, so hold the lock through a duplicate
        // of the same description, as fork does.
        let shared = first._file.try_clone().unwrap();
        drop(first);
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(shared);
        });
        FolderLock::acquire(dir.path()).unwrap();
        release.join().unwrap();
    }
}
