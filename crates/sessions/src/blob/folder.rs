//! [`FolderBlobStore`]: blobs as files of the session's folder.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use roundtable_tools::SafeFolder;
use roundtable_tools::safe_folder::EntryKind;

use super::path::ARTIFACTS;
use super::{ATTACHMENTS, BlobError, BlobInfo, BlobPath, BlobStore};
use crate::ids::SessionId;

/// A [`BlobStore`] writing `<root>/<session>/<path>`: with `root` the
/// sessions folder, a session's attachments and artifacts sit beside its
/// other files (`sessions/<session>/attachments/img_01.png`).
///
/// The root is the host's choice and is followed if it is a symlink. Below
/// it nothing is: every folder is opened without following a link and a
/// missing one is made (the session's folder may already exist), a blob is
/// written to a flushed temporary file and linked under its name, so it
/// lands whole or not at all and never replaces anything, and a read
/// refuses a symlink or anything but a regular file (see
/// [`SafeFolder`]). A link planted in a session's folder, by a command
/// whose workspace holds the sessions folder say, cannot make the store
/// read or write outside it. Listings skip links and hidden names (the
/// temporary files of writes in progress or cut short by a crash).
///
/// The file system calls run on tokio's blocking pool.
#[derive(Debug, Clone)]
pub struct FolderBlobStore {
    root: Arc<Path>,
}

impl FolderBlobStore {
    /// A store under `root` (created with its parents on the first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: Arc::from(root.into()),
        }
    }

    /// The sessions folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `op` on the blocking pool; a failure to run it is an I/O error
    /// about `path`.
    async fn blocking<T: Send + 'static>(
        &self,
        session: &SessionId,
        path: &str,
        op: impl FnOnce(Sessions) -> Result<T, BlobError> + Send + 'static,
    ) -> Result<T, BlobError> {
        let sessions = Sessions {
            root: self.root.clone(),
        };
        match tokio::task::spawn_blocking(move || op(sessions)).await {
            Ok(result) => result,
            Err(join) => Err(BlobError::Io {
                session: session.clone(),
                path: path.to_string(),
                source: io::Error::other(join),
            }),
        }
    }
}

#[async_trait]
impl BlobStore for FolderBlobStore {
    async fn put_new(
        &self,
        session: &SessionId,
        path: &BlobPath,
        bytes: Bytes,
    ) -> Result<(), BlobError> {
        path.check_names_a_blob()?;
        let (s, p) = (session.clone(), path.clone());
        self.blocking(session, path.as_str(), move |sessions| {
            let folder = sessions
                .session(&s, true)
                .and_then(|folder| folder.descend(parents(&p), true))
                .map_err(|err| io_error(&s, &p, err))?;
            folder
                .create_new(OsStr::new(p.file_name()), &bytes)
                .map_err(|err| io_error(&s, &p, err))
        })
        .await
    }

    async fn get(&self, session: &SessionId, path: &BlobPath) -> Result<Vec<u8>, BlobError> {
        path.check_names_a_blob()?;
        let (s, p) = (session.clone(), path.clone());
        self.blocking(session, path.as_str(), move |sessions| {
            sessions
                .session(&s, false)
                .and_then(|folder| folder.descend(parents(&p), false))
                .and_then(|folder| folder.read(OsStr::new(p.file_name()), None))
                .map_err(|err| io_error(&s, &p, err))
        })
        .await
    }

    async fn list(
        &self,
        session: &SessionId,
        prefix: &BlobPath,
    ) -> Result<Vec<BlobInfo>, BlobError> {
        let (s, p) = (session.clone(), prefix.clone());
        self.blocking(session, prefix.as_str(), move |sessions| {
            let folder = match sessions.session(&s, false) {
                Ok(folder) => folder,
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(err) => return Err(io_error(&s, &p, err)),
            };
            let wanted: Vec<&str> = p.segments().collect();
            let mut found = Vec::new();
            walk(&folder, "", &wanted, &mut found).map_err(|err| BlobError::Io {
                session: s.clone(),
                path: p.to_string(),
                source: err,
            })?;
            found.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(found)
        })
        .await
    }

    async fn delete_session(&self, session: &SessionId) -> Result<(), BlobError> {
        let s = session.clone();
        self.blocking(session, "", move |sessions| {
            let folder = match sessions.session(&s, false) {
                Ok(folder) => folder,
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(err) => {
                    return Err(BlobError::Io {
                        session: s.clone(),
                        path: String::new(),
                        source: err,
                    });
                }
            };
            for area in [ATTACHMENTS, ARTIFACTS] {
                folder
                    .remove_all(OsStr::new(area))
                    .map_err(|err| BlobError::Io {
                        session: s.clone(),
                        path: area.to_string(),
                        source: err,
                    })?;
            }
            Ok(())
        })
        .await
    }
}

/// The sessions folder, as the blocking calls see it.
struct Sessions {
    root: Arc<Path>,
}

impl Sessions {
    /// The session's folder, never through a link; `create` makes it and
    /// the root when missing.
    fn session(&self, session: &SessionId, create: bool) -> io::Result<SafeFolder> {
        if create {
            std::fs::create_dir_all(&self.root)?;
        }
        SafeFolder::open(&self.root)?.folder(OsStr::new(session.as_str()), create)
    }
}

/// The folders above a blob, as names.
fn parents(path: &BlobPath) -> impl Iterator<Item = &OsStr> {
    let mut segments = path.segments();
    segments.next_back();
    segments.map(OsStr::new)
}

/// Collects the blobs below `folder` (at `above`, a path or `""` for the
/// session's folder) whose path starts with the segments `wanted`.
fn walk(
    folder: &SafeFolder,
    above: &str,
    wanted: &[&str],
    found: &mut Vec<BlobInfo>,
) -> io::Result<()> {
    for entry in folder.entries()? {
        let Some(name) = entry.name.to_str() else {
            continue;
        };
        if let Some(first) = wanted.first()
            && name != *first
        {
            continue;
        }
        let path = if above.is_empty() {
            name.to_string()
        } else {
            format!("{above}/{name}")
        };
        // Hidden names (temporary files), other names no blob can have,
        // and the session's own files at the top are not blobs.
        let Ok(blob) = BlobPath::parse(&path) else {
            continue;
        };
        let rest = wanted.get(1..).unwrap_or_default();
        match entry.kind {
            EntryKind::File { size } if rest.is_empty() && !above.is_empty() => {
                found.push(BlobInfo { path: blob, size });
            }
            EntryKind::Folder if blob.segments().count() < BlobPath::MAX_SEGMENTS => {
                match folder.folder(&entry.name, false) {
                    Ok(inner) => walk(&inner, &path, rest, found)?,
                    // Removed since it was listed.
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A file system error about a blob, as a [`BlobError`]: a missing file or
/// folder is [`NotFound`](BlobError::NotFound), a name taken is
/// [`AlreadyExists`](BlobError::AlreadyExists), a symlink or anything but a
/// regular file where a blob is read is [`NotAFile`](BlobError::NotAFile).
fn io_error(session: &SessionId, path: &BlobPath, err: io::Error) -> BlobError {
    match err.kind() {
        io::ErrorKind::InvalidInput => {
            tracing::warn!(%session, %path, error = %err, "a blob path holds no regular file");
            BlobError::NotAFile {
                session: session.clone(),
                path: path.clone(),
            }
        }
        io::ErrorKind::NotFound => BlobError::NotFound {
            session: session.clone(),
            path: path.clone(),
        },
        io::ErrorKind::AlreadyExists => BlobError::AlreadyExists {
            session: session.clone(),
            path: path.clone(),
        },
        _ => BlobError::Io {
            session: session.clone(),
            path: path.to_string(),
            source: err,
        },
    }
}
