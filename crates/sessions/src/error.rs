//! The crate's error type, and the kind of each error (what an HTTP layer
//! maps to a status).

use roundtable_chat_runner::compaction::CompactionError;
use roundtable_thread_stream::{InvalidThreadId, StoreError};

use crate::blob::{BlobError, InvalidBlobPath};
use crate::ids::InvalidId;

/// What a session call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// An id that is not one of ours (`sess_…`, `msg_…`, `turn_…`).
    #[error(transparent)]
    InvalidId(#[from] InvalidId),
    /// No such session (or it belongs to another user).
    #[error("session {0} not found")]
    UnknownSession(String),
    /// The engine is stopping: no new turn starts.
    #[error("the server is stopping; try again on another server or after its restart")]
    ShuttingDown,
    /// The session's thread cannot be read (the store finds it damaged):
    /// the session is listed with status
    /// [`Unreadable`](crate::SessionStatus::Unreadable) and every call
    /// naming it fails so; other sessions are served.
    #[error("session {session} cannot be read: {reason}")]
    Unreadable {
        /// The session's id.
        session: String,
        /// Why, naming no path of the server's disk.
        reason: String,
    },
    /// The workspace path is unusable. The message says why without
    /// repeating the path (a path of the server's disk).
    #[error("workspace_path: {reason}")]
    InvalidWorkspace {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A request field is invalid.
    #[error("{field}: {reason}")]
    InvalidField {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The request conflicts with the session's state (cancel with nothing
    /// running, a decision for a call already decided, a retry of a turn
    /// that did not fail).
    #[error("{0}")]
    Conflict(String),
    /// A turn is running in the session, and the message asked to be
    /// refused then ([`Submit::if_idle`](crate::Submit::if_idle)) rather
    /// than queued. Holds the session's id.
    #[error("a turn is running in session {0}")]
    Busy(String),
    /// An idempotency key was sent again with another message: a retry
    /// sends the same request, another message needs another key.
    #[error(
        "idempotency key {key:?} was sent before with another message: a retry sends the same message, another message needs another key"
    )]
    KeyReused {
        /// The key.
        key: String,
    },
    /// No such turn, approval or question in the session.
    #[error("{0}")]
    NotFound(String),
    /// The thread store failed.
    #[error("thread store: {0}")]
    Store(#[from] StoreError),
    /// A thread id derived from a session id is invalid.
    #[error(transparent)]
    ThreadId(#[from] InvalidThreadId),
    /// A record could not be written as JSON.
    #[error("encoding a record: {0}")]
    Encode(#[from] serde_json::Error),
    /// The session's tools could not be set up.
    #[error("tools: {0}")]
    Tools(#[from] roundtable_tools::SetupError),
    /// Setting up the session failed otherwise.
    #[error("{0}")]
    Setup(String),
    /// The blob store refused or failed (a path that is not a blob's, a
    /// missing blob, storage down).
    #[error(transparent)]
    Blob(#[from] crate::blob::BlobError),
    /// An upload was refused (too large, a type that does not match its
    /// content).
    #[error(transparent)]
    Attachment(#[from] crate::attachments::AttachmentError),
    /// The session index could not be read or written.
    #[error(transparent)]
    Index(#[from] crate::table::TableError),
    /// A compaction asked for wrote no summary (nothing to compact, the
    /// summary model failed).
    #[error("compaction: {0}")]
    Compaction(#[from] CompactionError),
}

/// The kind of a [`SessionError`]: what a caller did wrong, or that the
/// engine failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionErrorKind {
    /// The request is malformed or a field is invalid.
    Invalid,
    /// What the request names does not exist (or is not the caller's).
    NotFound,
    /// The request conflicts with the current state.
    Conflict,
    /// An idempotency key was reused for another request.
    KeyReused,
    /// Something is larger than allowed.
    TooLarge,
    /// The session named cannot be read (its stored thread is damaged).
    Unreadable,
    /// The engine is stopping and starts nothing new.
    Unavailable,
    /// The engine or its storage failed.
    Internal,
}

impl SessionError {
    /// The error's kind.
    pub fn kind(&self) -> SessionErrorKind {
        match self {
            Self::InvalidId(_) | Self::InvalidWorkspace { .. } | Self::InvalidField { .. } => {
                SessionErrorKind::Invalid
            }
            Self::UnknownSession(_) | Self::NotFound(_) => SessionErrorKind::NotFound,
            Self::Conflict(_) | Self::Busy(_) => SessionErrorKind::Conflict,
            Self::KeyReused { .. } => SessionErrorKind::KeyReused,
            Self::Unreadable { .. } => SessionErrorKind::Unreadable,
            Self::ShuttingDown => SessionErrorKind::Unavailable,
            Self::Store(StoreError::Conflict { .. }) => SessionErrorKind::Conflict,
            Self::Store(_)
            | Self::ThreadId(_)
            | Self::Encode(_)
            | Self::Tools(_)
            | Self::Setup(_)
            | Self::Index(_) => SessionErrorKind::Internal,
            // What a client named: a bad path, a missing file. A name
            // taken is the store's normal answer to a writer, which picks
            // another; reaching here, it is a conflict.
            Self::Blob(BlobError::InvalidPath(_) | BlobError::NotAFile { .. }) => {
                SessionErrorKind::Invalid
            }
            Self::Blob(BlobError::NotFound { .. }) => SessionErrorKind::NotFound,
            Self::Blob(BlobError::AlreadyExists { .. }) => SessionErrorKind::Conflict,
            Self::Blob(_) => SessionErrorKind::Internal,
            Self::Attachment(err) if err.is_too_large() => SessionErrorKind::TooLarge,
            Self::Attachment(_) => SessionErrorKind::Invalid,
            Self::Compaction(CompactionError::NothingToCompact) => SessionErrorKind::Conflict,
            Self::Compaction(CompactionError::Store(StoreError::Conflict { .. })) => {
                SessionErrorKind::Conflict
            }
            Self::Compaction(_) => SessionErrorKind::Internal,
        }
    }
}

impl From<crate::attachments::UploadError> for SessionError {
    fn from(error: crate::attachments::UploadError) -> Self {
        use crate::attachments::UploadError;
        match error {
            UploadError::Refused(refused) => Self::Attachment(refused),
            UploadError::Store(failed) => Self::Blob(failed),
            busy @ UploadError::NoFreeName(_) => Self::Conflict(busy.to_string()),
        }
    }
}

impl From<InvalidBlobPath> for SessionError {
    fn from(error: InvalidBlobPath) -> Self {
        Self::Blob(error.into())
    }
}
