//! `session.json`: a session's info ([`SessionInfo`]) written beside its
//! thread for people and tools that read the sessions folder, as of the
//! session's creation and then of each time it settles. It is derived
//! data: lists read the session index, calls read the thread, and a
//! snapshot lost with the machine is written again at the next settle (and
//! by `recover`). So it is written without an fsync.
//!
//! A reader sees the old file or the new one, never a half-written one:
//! the new content is written to a scratch file, which then trades names
//! with `session.json` in one step (`renameat2` with `RENAME_EXCHANGE` on
//! Linux). The scratch file, now holding the old content, goes back to a
//! small pool and is overwritten by the next write of any session. So a
//! settle creates and deletes no file: on file systems where making a file
//! costs more the more files were recently deleted (ext4 without a
//! journal), a create-and-rename per turn was most of a turn's cost. Where
//! the exchange is not offered, a new scratch file is renamed over the old
//! snapshot instead.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::SessionId;
use crate::info::SessionInfo;
use crate::state::SessionState;

/// The snapshot's file name in the session's folder.
pub(crate) const SNAPSHOT_FILE: &str = "session.json";

/// The folder of the scratch files, in the snapshot dir (hidden: no
/// session).
const SCRATCH_FOLDER: &str = ".snapshot-scratch";

/// Writes the sessions' snapshots into one folder.
#[derive(Debug)]
pub(crate) struct Snapshots {
    dir: PathBuf,
    /// Scratch files free for the next write.
    free: Mutex<Vec<PathBuf>>,
    /// Numbers new scratch files.
    next: AtomicU64,
}

impl Snapshots {
    /// Snapshots written into `<dir>/<session id>/session.json`.
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            free: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        }
    }

    /// The folder the snapshots are written in.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes session `id`'s snapshot from `state` (nothing when the state
    /// holds no session). Failures are logged only: a snapshot loses
    /// nothing.
    pub(crate) fn write(&self, id: &SessionId, state: &SessionState) {
        let Some(info) = SessionInfo::from_state(id.as_str(), state) else {
            return;
        };
        let written = serde_json::to_vec_pretty(&info)
            .map_err(std::io::Error::from)
            .and_then(|json| self.replace(id, &json));
        if let Err(error) = written {
            tracing::warn!(session = %id, %error, "session.json not written");
        }
    }

    /// Makes `json` the content of session `id`'s snapshot.
    fn replace(&self, id: &SessionId, json: &[u8]) -> std::io::Result<()> {
        // A checked session id is one plain folder name.
        let folder = self.dir.join(id.as_str());
        let target = folder.join(SNAPSHOT_FILE);
        let scratch = self.scratch(json)?;
        match exchange(&scratch, &target) {
            Ok(()) => {
                // It holds the old snapshot now: free for the next write.
                lock(&self.free).push(scratch);
                Ok(())
            }
            // No snapshot yet, or no exchange here: the scratch file
            // becomes the snapshot.
            Err(_) => match std::fs::rename(&scratch, &target) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(&folder)?;
                    std::fs::rename(&scratch, &target)
                }
                renamed => renamed,
            }
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&scratch);
            }),
        }
    }

    /// A scratch file holding `json`: a free one overwritten, or a new one.
    fn scratch(&self, json: &[u8]) -> std::io::Result<PathBuf> {
        let reused = lock(&self.free).pop();
        let path = match reused {
            Some(path) => path,
            None => {
                let folder = self.dir.join(SCRATCH_FOLDER);
                std::fs::create_dir_all(&folder)?;
                let n = self.next.fetch_add(1, Ordering::Relaxed);
                folder.join(format!("{}-{n}", std::process::id()))
            }
        };
        let mut file: File = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        file.write_all(json)?;
        Ok(path)
    }
}

/// Trades the names of `a` and `b` in one step (both must exist).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(std::io::Error::from)
}

/// Not offered: the caller renames instead.
#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The pool is a list of paths: a poisoned lock still holds one.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::fs::MetadataExt;

    use roundtable_thread_stream::{NewEntry, ThreadId};

    use super::*;
    use crate::records::{SessionCreated, SessionRecord};

    fn state_of(id: &SessionId, prompt: &str) -> SessionState {
        let created = SessionCreated {
            workspace_path: "/w".into(),
            system_prompt: Some(prompt.into()),
            auto_run: true,
            approval_policy: Default::default(),
            verify_policy: Default::default(),
            patch_review: Default::default(),
            owner: None,
            limits: Default::default(),
        };
        let thread = ThreadId::new(id.as_str()).unwrap();
        let entry = NewEntry::new("u", created.to_body().unwrap()).into_entry(thread, 1);
        SessionState::fold(&[entry])
    }

    fn read(dir: &Path, id: &SessionId) -> serde_json::Value {
        let path = dir.join(id.as_str()).join(SNAPSHOT_FILE);
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn snapshots_are_replaced_whole_and_settled_writes_make_no_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let snapshots = Snapshots::new(dir.path().to_path_buf());
        let (a, b) = (SessionId::generate(), SessionId::generate());
        for round in 0..5 {
            for id in [&a, &b] {
                snapshots.write(id, &state_of(id, &format!("round {round}")));
                assert_eq!(
                    read(dir.path(), id)["system_prompt"],
                    format!("round {round}")
                );
            }
        }
        // Each session's folder holds its snapshot alone, and the scratch
        // files stay few: the later writes reused them.
        for id in [&a, &b] {
            let names: Vec<String> = std::fs::read_dir(dir.path().join(id.as_str()))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, [SNAPSHOT_FILE]);
        }
        let scratch = std::fs::read_dir(dir.path().join(SCRATCH_FOLDER))
            .unwrap()
            .count();
        assert!(scratch <= 2, "{scratch} scratch files");
        // A steady write trades names: the snapshot's inode is a scratch
        // file's, no new one.
        let before: Vec<u64> = std::fs::read_dir(dir.path().join(SCRATCH_FOLDER))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().ino())
            .collect();
        snapshots.write(&a, &state_of(&a, "again"));
        let now = std::fs::metadata(dir.path().join(a.as_str()).join(SNAPSHOT_FILE))
            .unwrap()
            .ino();
        assert!(before.contains(&now), "{now} not among {before:?}");
    }
}
