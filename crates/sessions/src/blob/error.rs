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
    /// What stands at the path is not a blob: a symlink (never followed),
    /// a folder or a special file where a regular file belongs.
    #[error("{path} in session {session} is not a regular file (a symlink is never followed)")]
    NotAFile {
        /// The session.
        session: SessionId,
        /// The path.
        path: BlobPath,
    },
    /// The file system failed. The message names the kind of failure only:
    /// the file system's own words, which name the server's paths, are the
    /// error's source, for logs.
    #[error("session {session}, {path}: {}", io_reason(source))]
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

/// What went wrong with the file system, in words that name no path of
/// the server's disk (the file system's own message, which does, stays the
/// error's source, for logs).
fn io_reason(source: &std::io::Error) -> String {
    match source.kind() {
        std::io::ErrorKind::NotADirectory => "a symlink or a file stands where a folder belongs; \
                                              nothing is read or written through it"
            .to_string(),
        kind => kind.to_string(),
    }
}
