//! Where a thread's entries live in the store's folder, and the record of
//! that choice in the folder itself.
//!
//! [`JsonlLayout::locate`] is the one mapping from a thread to its file;
//! everything that touches a thread file (open, append, recovery, fsync,
//! listing) goes through it. Thread ids are safe file and folder names (see
//! [`ThreadId`]), so every path it gives stays inside the root.
//!
//! Opened with the wrong layout, a store would find no threads where they
//! are and start new ones beside them. The folder therefore records its
//! layout in `<root>/.layout` the first time a store opens it, and every
//! later open checks it (see [`JsonlLayout::record_or_check`]).

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{StoreError, ThreadId};

/// File name of the layout record inside the store's folder.
const LAYOUT_FILE: &str = ".layout";

/// Where the layout record is written before it is renamed into place, so a
/// crash never leaves a half-written record.
const LAYOUT_FILE_PART: &str = ".layout.part";

/// Name suffix of a thread's file in [`JsonlLayout::FilePerThread`].
const THREAD_FILE_SUFFIX: &str = ".jsonl";

/// How a [`JsonlStore`](crate::JsonlStore) lays out threads in its folder.
///
/// The first store to open a folder records its layout there (in
/// `<root>/.layout`); opening the folder later with another layout fails with
/// [`StoreError::LayoutMismatch`] and changes nothing, rather than missing
/// the threads that are there. A folder written before the record existed,
/// and holding `<thread>.jsonl` files, is taken as
/// [`FilePerThread`](JsonlLayout::FilePerThread).
///
/// Recorded as JSON: `{"layout":"file-per-thread"}` or
/// `{"layout":"folder-per-thread","file_name":"events.ndjson"}`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use roundtable_thread_stream::{
///     EntryBody, Expect, JsonlLayout, JsonlOptions, JsonlStore, NewEntry, ThreadId, ThreadStore,
/// };
///
/// let dir = tempfile::tempdir().unwrap();
/// let options = JsonlOptions {
///     layout: JsonlLayout::folder_per_thread("events.ndjson"),
///     ..JsonlOptions::default()
/// };
/// let store = JsonlStore::open_with(dir.path(), options).await.unwrap();
/// let thread = ThreadId::new("sess_1").unwrap();
/// // The host keeps its own files in the thread's folder.
/// std::fs::create_dir(dir.path().join("sess_1")).unwrap();
/// std::fs::write(dir.path().join("sess_1/session.json"), "{}").unwrap();
/// store.append(&thread, Expect::Any, vec![NewEntry::new("alice", EntryBody::chat("hi"))]).await.unwrap();
/// assert!(dir.path().join("sess_1/events.ndjson").exists());
/// assert_eq!(store.list_threads().await.unwrap(), vec![thread]);
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "layout", rename_all = "kebab-case")]
pub enum JsonlLayout {
    /// `<root>/<thread>.jsonl`: the folder holds the threads and nothing
    /// else. The default.
    #[default]
    FilePerThread,
    /// `<root>/<thread>/<file_name>`: each thread has a folder of its own,
    /// which the host may also use for files that belong with the thread
    /// (metadata, attachments, artifacts). The store creates the folder on
    /// the thread's first append if it is not there yet, and never touches
    /// anything in it but the thread file.
    FolderPerThread {
        /// The thread file's name inside the thread's folder, e.g.
        /// `events.ndjson`: a plain file name (no `/`, not `.` or `..`).
        file_name: String,
    },
}

impl JsonlLayout {
    /// A folder per thread holding its entries in `file_name`.
    pub fn folder_per_thread(file_name: impl Into<String>) -> Self {
        Self::FolderPerThread {
            file_name: file_name.into(),
        }
    }

    /// Refuses a thread file name that is not a plain file name: it could
    /// name a path outside the thread's folder, or no file at all.
    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        let Self::FolderPerThread { file_name } = self else {
            return Ok(());
        };
        let reason = if file_name.is_empty() {
            Some("is empty")
        } else if file_name == "." || file_name == ".." {
            Some("names a folder")
        } else if file_name.contains(['/', '\0']) {
            Some("holds '/' or a NUL byte")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(StoreError::InvalidOptions(format!(
                "the thread file name {file_name:?} {reason}: it must be a plain file name"
            ))),
            None => Ok(()),
        }
    }

    /// Where `thread` lives under `root`.
    pub(crate) fn locate(&self, root: &Path, thread: &ThreadId) -> ThreadPath {
        match self {
            Self::FilePerThread => ThreadPath {
                file: root.join(format!("{thread}{THREAD_FILE_SUFFIX}")),
                folder: None,
            },
            Self::FolderPerThread { file_name } => {
                let folder = root.join(thread.as_str());
                ThreadPath {
                    file: folder.join(file_name),
                    folder: Some(folder),
                }
            }
        }
    }

    /// The thread whose file is `file` under `root`, both as the file
    /// system resolves them (canonical paths): the inverse of
    /// [`locate`](Self::locate), checked by going through `locate` again, so
    /// that the two directions are one mapping. A hidden name, a name that
    /// is no thread id, a file one folder too deep or too shallow: `None`.
    pub(crate) fn thread_of(&self, root: &Path, file: &Path) -> Option<ThreadId> {
        let name = match self {
            Self::FilePerThread => file
                .file_name()?
                .to_str()?
                .strip_suffix(THREAD_FILE_SUFFIX)?,
            Self::FolderPerThread { .. } => file.parent()?.file_name()?.to_str()?,
        };
        let thread = ThreadId::new(name).ok()?;
        (self.locate(root, &thread).file == file).then_some(thread)
    }

    /// The threads under `root` that hold entries (a non-empty thread file:
    /// a file created by an append that never wrote is no thread), sorted.
    /// Everything else is ignored: names that are no thread id (hidden
    /// entries such as the lock file among them), other files, and in
    /// [`FolderPerThread`](Self::FolderPerThread) folders without the
    /// thread file.
    pub(crate) fn list_threads(&self, root: &Path) -> Result<Vec<ThreadId>, StoreError> {
        let io = |source| StoreError::Io {
            path: root.to_path_buf(),
            source,
        };
        let mut ids = Vec::new();
        for item in std::fs::read_dir(root).map_err(io)? {
            let name = item.map_err(io)?.file_name();
            let Some(name) = name.to_str() else { continue };
            let id = match self {
                Self::FilePerThread => name.strip_suffix(THREAD_FILE_SUFFIX),
                Self::FolderPerThread { .. } => Some(name),
            };
            let Some(Ok(id)) = id.map(ThreadId::new) else {
                continue;
            };
            let file = self.locate(root, &id).file;
            let holds_entries = std::fs::metadata(&file)
                .map(|m| m.is_file() && m.len() > 0)
                .unwrap_or(false);
            if holds_entries {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Checks that the folder `root` holds threads in this layout, and
    /// records the layout there if the folder has no record yet. Call it with
    /// the folder lock held, before anything else reads or writes the folder.
    ///
    /// A folder without a record is either new or written before the record
    /// existed, when every store used [`FilePerThread`](Self::FilePerThread):
    /// it holds threads in that layout if it holds any `<thread>.jsonl`.
    pub(crate) fn record_or_check(&self, root: &Path) -> Result<(), StoreError> {
        let path = root.join(LAYOUT_FILE);
        let recorded = match std::fs::read(&path) {
            Ok(bytes) => Some(serde_json::from_slice::<JsonlLayout>(&bytes).map_err(|e| {
                StoreError::LayoutMismatch {
                    root: root.to_path_buf(),
                    found: format!("an unreadable layout record in {LAYOUT_FILE} ({e})"),
                    wanted: self.to_string(),
                }
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let found = match &recorded {
            Some(layout) => Some(layout.clone()),
            None => {
                let threads = JsonlLayout::FilePerThread.list_threads(root)?;
                (!threads.is_empty()).then_some(JsonlLayout::FilePerThread)
            }
        };
        match found {
            Some(found) if found != *self => Err(StoreError::LayoutMismatch {
                root: root.to_path_buf(),
                found: found.to_string(),
                wanted: self.to_string(),
            }),
            _ if recorded.is_some() => Ok(()),
            _ => self.record(root),
        }
    }

    /// Writes the layout record durably: a part file, fsynced, renamed into
    /// place, and the rename made durable by fsyncing the folder.
    fn record(&self, root: &Path) -> Result<(), StoreError> {
        let part = root.join(LAYOUT_FILE_PART);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        let json = serde_json::to_vec(self).map_err(|e| {
            StoreError::InvalidOptions(format!("the layout cannot be recorded: {e}"))
        })?;
        let mut file = File::create(&part).map_err(io(&part))?;
        file.write_all(&json)
            .and_then(|()| file.write_all(b"\n"))
            .and_then(|()| file.sync_all())
            .map_err(io(&part))?;
        let path = root.join(LAYOUT_FILE);
        std::fs::rename(&part, &path).map_err(io(&path))?;
        sync_folder(root)
    }
}

impl fmt::Display for JsonlLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FilePerThread => write!(f, "a file per thread (<thread>{THREAD_FILE_SUFFIX})"),
            Self::FolderPerThread { file_name } => {
                write!(f, "a folder per thread (<thread>/{file_name})")
            }
        }
    }
}

/// Where one thread lives.
#[derive(Debug, Clone)]
pub(crate) struct ThreadPath {
    /// The thread's file.
    pub(crate) file: PathBuf,
    /// The folder of the thread's own, in
    /// [`JsonlLayout::FolderPerThread`]; it may exist before the thread does.
    pub(crate) folder: Option<PathBuf>,
}

impl ThreadPath {
    /// Creates what the thread file needs around it (its folder, if the
    /// thread has one and it is missing). Whatever else is there is left
    /// alone.
    pub(crate) fn create_folder(&self) -> Result<(), StoreError> {
        let Some(folder) = &self.folder else {
            return Ok(());
        };
        match std::fs::create_dir(folder) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(StoreError::Io {
                path: folder.clone(),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Deletes the thread file, and the thread's own folder when that is
    /// left empty (a host's files in it keep it), and makes the deletion
    /// durable. A thread with no file is no error.
    pub(crate) fn delete(&self) -> Result<(), StoreError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        match std::fs::remove_file(&self.file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            removed => removed.map_err(io(&self.file))?,
        }
        if let Some(folder) = &self.folder {
            // Only an empty folder goes: anything else in it is the host's.
            let _ = std::fs::remove_dir(folder);
        }
        let holder = self.folder.as_deref().unwrap_or(&self.file);
        match holder.parent() {
            Some(parent) => sync_folder(parent),
            None => Ok(()),
        }
    }

    /// Makes the names of a newly created thread file (and of its folder)
    /// durable: fsyncs the folder holding the file, then the folder holding
    /// that one when the thread has a folder of its own.
    pub(crate) fn sync_new_names(&self) -> Result<(), StoreError> {
        let holder = self.file.parent();
        let holder_of_folder = self.folder.as_deref().and_then(Path::parent);
        for folder in [holder, holder_of_folder].into_iter().flatten() {
            sync_folder(folder)?;
        }
        Ok(())
    }
}

/// fsyncs a folder, which makes the names created in it durable.
fn sync_folder(folder: &Path) -> Result<(), StoreError> {
    File::open(folder)
        .and_then(|f| f.sync_all())
        .map_err(|source| StoreError::Io {
            path: folder.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(s: &str) -> ThreadId {
        ThreadId::new(s).unwrap()
    }

    #[test]
    fn each_layout_maps_a_thread_inside_the_root() {
        let root = Path::new("/data/sessions");
        let file = JsonlLayout::FilePerThread.locate(root, &tid("team.general"));
        assert_eq!(file.file, root.join("team.general.jsonl"));
        assert_eq!(file.folder, None);
        let folder = JsonlLayout::folder_per_thread("events.ndjson").locate(root, &tid("s-1"));
        assert_eq!(folder.file, root.join("s-1/events.ndjson"));
        assert_eq!(folder.folder, Some(root.join("s-1")));
    }

    #[test]
    fn a_thread_file_name_must_be_a_plain_file_name() {
        for bad in ["", ".", "..", "a/b", "../x", "/abs", "a\0b"] {
            let err = JsonlLayout::folder_per_thread(bad).validate().unwrap_err();
            assert!(matches!(err, StoreError::InvalidOptions(_)), "{bad:?}");
        }
        for good in ["events.ndjson", "thread.jsonl", ".events", "a..b"] {
            JsonlLayout::folder_per_thread(good).validate().unwrap();
        }
        JsonlLayout::FilePerThread.validate().unwrap();
    }

    #[test]
    fn the_record_reads_back_as_the_layout() {
        for layout in [
            JsonlLayout::FilePerThread,
            JsonlLayout::folder_per_thread("events.ndjson"),
        ] {
            let json = serde_json::to_string(&layout).unwrap();
            assert_eq!(serde_json::from_str::<JsonlLayout>(&json).unwrap(), layout);
        }
        assert_eq!(
            serde_json::to_string(&JsonlLayout::folder_per_thread("events.ndjson")).unwrap(),
            r#"{"layout":"folder-per-thread","file_name":"events.ndjson"}"#
        );
    }

    #[test]
    fn a_damaged_record_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LAYOUT_FILE), b"{\"layout\":").unwrap();
        let err = JsonlLayout::FilePerThread
            .record_or_check(dir.path())
            .unwrap_err();
        assert!(matches!(err, StoreError::LayoutMismatch { .. }), "{err}");
        assert_eq!(
            std::fs::read(dir.path().join(LAYOUT_FILE)).unwrap(),
            b"{\"layout\":"
        );
    }
}
