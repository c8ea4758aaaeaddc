//! Blobs: the files a session keeps beside its thread (see [`BlobStore`]).

mod artifacts;
mod error;
mod folder;
#[cfg(feature = "nats")]
mod nats;
mod path;
#[cfg(feature = "postgres")]
mod postgres;

use std::fmt::Debug;

use async_trait::async_trait;
use bytes::Bytes;

pub use artifacts::TurnArtifacts;
pub use error::BlobError;
pub use folder::FolderBlobStore;
#[cfg(feature = "nats")]
pub use nats::{NatsBlobOptions, NatsBlobStore};
pub(crate) use path::ATTACHMENTS;
pub use path::{BlobPath, InvalidBlobPath};
#[cfg(feature = "postgres")]
pub use postgres::PostgresBlobStore;

use crate::ids::SessionId;

/// Where a session's blobs are kept. Shared as `Arc<dyn BlobStore>`.
///
/// A session's thread holds what was said and done; the files involved
/// (uploaded attachments, the artifacts a turn's tools leave behind: a
/// command's whole output, an applied patch, a rendered diagram) are too
/// large and too binary for it, so entries refer to them by a [`BlobPath`]
/// (`attachments/img_01.png`, `artifacts/turn_…/shell-call_1.log`) and a
/// blob store keeps them:
///
/// - [`FolderBlobStore`], the embedded default, writes
///   `<root>/<session>/<path>` beside the session's other files;
/// - `NatsBlobStore` (feature `nats`) keeps them in a NATS JetStream object
///   store, so that every server process on the same NATS serves every
///   session, as the NATS thread store lets them share threads;
/// - `PostgresBlobStore` (feature `postgres`) keeps them in a table of the
///   PostgreSQL database that holds the threads, for the same reason.
///
/// Every call names the session and a checked [`BlobPath`], so no call can
/// reach another session's blobs or anything outside the blob folders.
///
/// Blobs are write-once: [`put_new`](Self::put_new) never replaces a blob,
/// it answers [`BlobError::AlreadyExists`] and the caller picks another
/// name. A reference shown to a model or stored in an entry therefore
/// always means the same bytes, and two writers racing for one name cannot
/// lose either's data: exactly one wins, the other learns it lost.
/// [`TurnArtifacts`] is the [`Artifacts`](roundtable_tools::Artifacts) sink
/// of one turn over any store.
///
/// ```
/// use bytes::Bytes;
/// use roundtable_sessions::{BlobStore, FolderBlobStore, SessionId};
/// use roundtable_sessions::blob::{BlobError, BlobPath};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = FolderBlobStore::new(dir.path());
/// let session = SessionId::generate();
/// let path = BlobPath::parse("attachments/file_01.txt").unwrap();
/// store.put_new(&session, &path, Bytes::from_static(b"hello")).await.unwrap();
/// assert_eq!(store.get(&session, &path).await.unwrap(), b"hello");
/// // Write-once: a second put under the same path is refused.
/// let again = store.put_new(&session, &path, Bytes::from_static(b"other")).await;
/// assert!(matches!(again, Err(BlobError::AlreadyExists { .. })));
/// let listed = store.list(&session, &BlobPath::attachments()).await.unwrap();
/// assert_eq!(listed[0].path, path);
/// assert_eq!(listed[0].size, 5);
/// # });
/// ```
#[async_trait]
pub trait BlobStore: Debug + Send + Sync {
    /// Stores `bytes` under `path`, whole or not at all. A blob already
    /// there is [`BlobError::AlreadyExists`] and stays as it was.
    async fn put_new(
        &self,
        session: &SessionId,
        path: &BlobPath,
        bytes: Bytes,
    ) -> Result<(), BlobError>;

    /// The bytes stored under `path`, or [`BlobError::NotFound`].
    async fn get(&self, session: &SessionId, path: &BlobPath) -> Result<Vec<u8>, BlobError>;

    /// The blobs at or below `prefix` (whole segments: `artifacts/turn_1`
    /// does not list `artifacts/turn_10`), sorted by path. A prefix with
    /// nothing below it gives an empty list.
    async fn list(
        &self,
        session: &SessionId,
        prefix: &BlobPath,
    ) -> Result<Vec<BlobInfo>, BlobError>;

    /// Removes every blob of the session (its attachments and artifacts;
    /// the session's other files are not the store's). A session with no
    /// blobs is not an error.
    async fn delete_session(&self, session: &SessionId) -> Result<(), BlobError>;
}

/// A stored blob, as [`BlobStore::list`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobInfo {
    /// Its path.
    pub path: BlobPath,
    /// Its size in bytes.
    pub size: u64,
}
