//! The errors of the thread stream.

use std::path::PathBuf;

use crate::thread_id::{InvalidThreadId, ThreadId};

/// Why an entry cannot be stored: written as it is, it would not read back
/// as the same entry (see [`EntryBody::check`](crate::EntryBody::check)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidEntry {
    /// A field of an unknown body ([`EntryBody::Other`](crate::EntryBody::Other))
    /// has the name of an entry header field (`seq`, `id`, `thread`,
    /// `author`, `at`, `more`, `type`), which share the entry's one flat
    /// object with the body's fields.
    #[error("field {field:?} of a {kind:?} body has the name of an entry header field")]
    HeaderField {
        /// The body's `type`.
        kind: String,
        /// The field.
        field: String,
    },
    /// An unknown body ([`EntryBody::Other`](crate::EntryBody::Other)) has
    /// the `type` of a known body (`chat`, `signal.<name>`, ...): it would
    /// read back as that body, or not at all.
    #[error("type {kind:?} belongs to a known entry body; build that body instead")]
    KnownKind {
        /// The `type`.
        kind: String,
    },
    /// A [`Signal`](crate::Signal) without a name: its `type` would be a bare
    /// `signal.`, which reads back as an unknown body.
    #[error("a signal needs a name")]
    UnnamedSignal,
    /// A number JSON cannot hold (NaN or an infinity): it would be written as
    /// `null`, which does not read back as a number.
    #[error("{field} is not a finite number")]
    NotFinite {
        /// Where the number is, e.g. `message.usage.cost.total`.
        field: &'static str,
    },
}

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
    /// An entry of an append cannot be stored as it is (see
    /// [`InvalidEntry`]). Nothing of the batch was written.
    #[error("entry {index} of an append to thread {thread} cannot be stored: {source}")]
    InvalidEntry {
        /// The thread.
        thread: ThreadId,
        /// The entry's position in the batch, from 0.
        index: usize,
        /// What is wrong with it.
        #[source]
        source: InvalidEntry,
    },
    /// A store that drops retried appends by their first entry's id
    /// (`NatsStore`, within its duplicate window) already holds another
    /// batch whose first entry has this id. Entry ids must be unique; nothing
    /// was written.
    #[error("thread {thread} already holds another batch whose first entry has id {id:?}")]
    DuplicateId {
        /// The thread.
        thread: ThreadId,
        /// The reused entry id.
        id: String,
    },
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
    /// A JSONL store's folder holds threads in another layout than the one
    /// it was opened with (see [`JsonlLayout`](crate::JsonlLayout)), or a
    /// layout record the store cannot read. Nothing was read or changed.
    #[error("store folder {root} holds {found}, not {wanted}", root = root.display())]
    LayoutMismatch {
        /// The store's folder.
        root: PathBuf,
        /// The layout the folder holds, as its layout record says (or, in a
        /// folder written before the record existed, as its files show).
        found: String,
        /// The layout the store was opened with.
        wanted: String,
    },
    /// The store's options cannot work (a JSONL thread file name that is no
    /// plain file name, say).
    #[error("invalid store options: {0}")]
    InvalidOptions(String),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// A distributed store's backend failed (connection, server error).
    #[error("store backend error: {0}")]
    Backend(String),
    /// The store does not offer this operation (named).
    #[error("this store does not support {0}")]
    Unsupported(&'static str),
}
