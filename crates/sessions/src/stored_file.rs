//! [`StoredFile`]: a session's file read back for a client (an uploaded
//! attachment, a turn's artifact), with the type to serve it as.

use crate::attachments::content_type_of;
use crate::blob::{BlobError, BlobPath, BlobStore};
use crate::error::SessionError;
use crate::ids::SessionId;

/// A file of a session, as a client gets it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Where it is in the session (`attachments/img_01.png`).
    pub path: BlobPath,
    /// The type to serve it as: the one its bytes are recognised as, else
    /// the one its extension names (`text/plain; charset=utf-8` for text
    /// that a browser would otherwise run, such as HTML).
    pub content_type: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Reads `path` (a client's text) of `session` from `blobs`. A path that
/// no session can hold (`../x`, a folder, a hidden name) names no file, so
/// it is not found like a missing one, and neither error names more than
/// the path asked for (never a folder of the server).
pub(crate) async fn read(
    blobs: &dyn BlobStore,
    session: &SessionId,
    path: &str,
) -> Result<StoredFile, SessionError> {
    let missing = || SessionError::NotFound(format!("no file {} in this session", shown(path)));
    let path = BlobPath::parse(path).map_err(|_| missing())?;
    path.check_names_a_blob().map_err(|_| missing())?;
    let bytes = match blobs.get(session, &path).await {
        Ok(bytes) => bytes,
        Err(BlobError::NotFound { .. } | BlobError::NotAFile { .. }) => return Err(missing()),
        Err(BlobError::InvalidPath(_)) => return Err(missing()),
        Err(other) => return Err(other.into()),
    };
    Ok(StoredFile {
        content_type: content_type_of(&path, &bytes),
        path,
        bytes,
    })
}

/// `path` quoted for a message, cut after 80 characters.
fn shown(path: &str) -> String {
    format!("{:?}", path.chars().take(80).collect::<String>())
}
