//! [`TurnArtifacts`]: a turn's artifacts in a blob store.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use roundtable_tools::{ArtifactError, ArtifactName, Artifacts};

use super::{BlobError, BlobPath, BlobStore};
use crate::ids::{SessionId, TurnId};

/// Numbered variants tried when a name is taken (`x-2.log` ... `x-100.log`).
const MAX_VARIANT: u32 = 100;

/// The [`Artifacts`] sink of one turn: each artifact becomes the blob
/// `artifacts/<turn>/<name>` of the session, and the reference returned,
/// the one the model and the host see, is that blob path
/// (`artifacts/turn_…/shell-call_1.log`), which reads back with
/// [`BlobStore::get`] on whichever store and server.
///
/// Like [`FolderArtifacts`](roundtable_tools::FolderArtifacts), it never
/// overwrites: a name already taken gets the first free numbered variant
/// (`shell.log`, `shell-2.log`, ...).
///
/// ```
/// use std::sync::Arc;
/// use roundtable_sessions::{BlobStore, FolderBlobStore, SessionId, TurnId};
/// use roundtable_sessions::blob::TurnArtifacts;
/// use roundtable_tools::{ArtifactName, Artifacts};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let blobs: Arc<dyn BlobStore> = Arc::new(FolderBlobStore::new(dir.path()));
/// let (session, turn) = (SessionId::generate(), TurnId::parse("turn_1").unwrap());
/// let sink = TurnArtifacts::new(blobs, session, turn);
/// let name = ArtifactName::new("shell-call_1.log").unwrap();
/// assert_eq!(sink.store(&name, b"ok\n".to_vec()).await.unwrap(), "artifacts/turn_1/shell-call_1.log");
/// assert_eq!(sink.store(&name, b"ok\n".to_vec()).await.unwrap(), "artifacts/turn_1/shell-call_1-2.log");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct TurnArtifacts {
    blobs: Arc<dyn BlobStore>,
    session: SessionId,
    turn: TurnId,
}

impl TurnArtifacts {
    /// The sink of `turn` of `session`, storing in `blobs`.
    pub fn new(blobs: Arc<dyn BlobStore>, session: SessionId, turn: TurnId) -> Self {
        Self {
            blobs,
            session,
            turn,
        }
    }
}

#[async_trait]
impl Artifacts for TurnArtifacts {
    async fn store(&self, name: &ArtifactName, bytes: Vec<u8>) -> Result<String, ArtifactError> {
        let failed = |err: BlobError| ArtifactError::Store {
            name: name.clone(),
            source: Box::new(err),
        };
        let folder = BlobPath::artifacts_of(&self.turn).map_err(|err| failed(err.into()))?;
        let bytes = Bytes::from(bytes);
        for n in 1..=MAX_VARIANT {
            let candidate = if n == 1 {
                name.clone()
            } else {
                name.numbered(n)
            };
            let path = folder
                .join(candidate.as_str())
                .map_err(|err| failed(err.into()))?;
            match self
                .blobs
                .put_new(&self.session, &path, bytes.clone())
                .await
            {
                Ok(()) => return Ok(path.to_string()),
                Err(BlobError::AlreadyExists { .. }) => continue,
                Err(err) => return Err(failed(err)),
            }
        }
        Err(ArtifactError::NoFreeName { name: name.clone() })
    }
}
