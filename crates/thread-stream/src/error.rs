//! The errors of the thread stream.

use std::path::PathBuf;

use crate::thread_id::{InvalidThreadId, ThreadId};

/// What can go wrong in a [`ThreadStore`](crate::ThreadStore).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An append expected the thread to end at `expected` but it ends at
    /// `actual`: another writer got there first. Nothing was written.
    #[error("append to thread {thread} expected last seq {expected}, found {actual}")]
    Conflict {
        /// The thread.
        thread: ThreadId,
        /// The last seq the append expected.
        expected: u64,
        /// The thread's real last seq.
        actual: u64,
    },
    /// The thread id is not valid.
    #[error(transparent)]
    InvalidThread(#[from] InvalidThreadId),
    /// An entry could not be encoded.
    #[error("cannot encode entry for thread {thread}: {source}")]
    Encode {
        /// The thread.
        thread: ThreadId,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A stored thread holds something that is not a valid entry where a
    /// valid one must be (a torn last line is not this: it is cut off on open).
    #[error("thread {thread} is corrupt at {location}: {message}")]
    Corrupt {
        /// The thread.
        thread: ThreadId,
        /// Where: a file and line, or a backend position.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("I/O error on {path}: {source}", path = path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the store's folder.
    #[error("store folder {root} is locked by another process ({holder})", root = root.display())]
    Locked {
        /// The store's folder.
        root: PathBuf,
        /// What the holder wrote into the lock file (pid and host), if readable.
        holder: String,
    },
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// A distributed store's backend failed (connection, server error).
    #[error("store backend error: {0}")]
    Backend(String),
}
