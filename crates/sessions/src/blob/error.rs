//! [`BlobError`]: what a blob store call fails with.

use super::{BlobPath, InvalidBlobPath};
use crate::ids::SessionId;

/// Why a blob was not stored, read or listed.
///
/// [`AlreadyExists`](Self::AlreadyExists) and [`NotFound`](Self::NotFound)
/// are answers a caller acts on (pick another name; report a missing file);
/// [`InvalidPath`](Self::InvalidPath) is bad input; the others are the
/// storage failing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// The path is not one a session may hold (see [`BlobPath`]). Nothing
    /// was stored or read.
    #[error(transparent)]
    InvalidPath(#[from] InvalidBlobPath),
    /// A blob is already stored under the path; it was left as it was.
    #[error("{path} already exists in session {session}")]
    AlreadyExists {
        /// The session.
        session: SessionId,
        /// The path.
        path: BlobPath,
    },
    /// No blob is stored under the path.
    #[error("{path} does not exist in session {session}")]
    NotFound {
        /// The session.
        session: SessionId,
        /// The path.
        path: BlobPath,
    },
    /// The file system failed, or refused a path that a symlink or a file
    /// stands in the way of.
    #[error("session {session}, {path}: {source}")]
    Io {
        /// The session.
        session: SessionId,
        /// The path involved (a blob's, or the folder listed).
        path: String,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// The object store failed (NATS unreachable, a request timed out).
    #[error("blob store: {operation}: {message}")]
    Backend {
        /// What was being done (`storing`, `reading`, ...).
        operation: &'static str,
        /// What went wrong.
        message: String,
    },
}
