//! The folder lock: a JSONL folder belongs to one process at a time.
//!
//! Two processes appending to one file would each hold their own idea of the
//! last seq, so the second would write duplicate seqs. The store therefore
//! takes an advisory lock on `<root>/.lock` when it opens and writes its pid
//! and host into the file, so the error a second process gets names the holder.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::StoreError;

/// File name of the lock inside the store's folder.
pub(crate) const LOCK_FILE: &str = ".lock";

/// The held lock; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct FolderLock {
    _file: File,
}

impl FolderLock {
    /// Takes the lock on `root`, or says who holds it.
    pub(crate) fn acquire(root: &Path) -> Result<Self, StoreError> {
        let path = root.join(LOCK_FILE);
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(StoreError::Locked {
                    root: root.to_path_buf(),
                    holder: if holder.is_empty() {
                        "unknown holder".into()
                    } else {
                        holder.into()
                    },
                });
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        let me = format!("pid {} on {}\n", std::process::id(), host_name());
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(me.as_bytes()).map_err(io)?;
        Ok(Self { _file: file })
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
