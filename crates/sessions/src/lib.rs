//! Agentic sessions on the thread stream.
//!
//! A session is a thread: everything that happens in it (the session's
//! creation, messages, turns, tool calls, approvals, verification) is an
//! entry of the session's thread, and every event a client sees is derived
//! from one stored entry, with the entry's seq as its id. A client that
//! reconnects, a server that restarts, or another server process reading
//! the same store replays exactly what was missed.

pub mod attachments;
mod blob;
mod error;
mod ids;

pub use attachments::{AttachmentError, AttachmentLimits, AttachmentRef};
pub use blob::{BlobError, BlobInfo, BlobPath, BlobStore, FolderBlobStore, TurnArtifacts};
#[cfg(feature = "nats")]
pub use blob::{NatsBlobOptions, NatsBlobStore};
pub use error::{ErrorKind, SessionError};
pub use ids::{MessageId, SessionId, TurnId};
