//! `session.json`: a session's info ([`SessionInfo`]) written beside its
//! thread for people and tools that read the sessions folder, as of the
//! session's creation and then of each time it settles. It is derived
//! data: lists read the session index, calls read the thread, and a
//! snapshot lost with the machine is written again at the next settle (and
//! by `recover`). So it is written without an fsync, straight to a
//! temporary name and renamed over the old one: a reader sees the old or
//! the new file, never a half-written one.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::SessionId;
use crate::info::SessionInfo;
use crate::state::SessionState;

/// The snapshot's file name in the session's folder.
pub(crate) const SNAPSHOT_FILE: &str = "session.json";

/// Writes `<dir>/<id>/session.json` from `state` (nothing when the state
/// holds no session). Failures are logged only: a snapshot loses nothing.
pub(crate) fn write(dir: &Path, id: &SessionId, state: &SessionState) {
    let Some(info) = SessionInfo::from_state(id.as_str(), state) else {
        return;
    };
    // A checked session id is one plain folder name.
    let folder = dir.join(id.as_str());
    let written = serde_json::to_vec_pretty(&info)
        .map_err(std::io::Error::from)
        .and_then(|json| replace(&folder, &json));
    if let Err(error) = written {
        tracing::warn!(session = %id, %error, "session.json not written");
    }
}

/// Replaces `folder/session.json` with `json` (making the folder when the
/// thread store keeps none there).
fn replace(folder: &Path, json: &[u8]) -> std::io::Result<()> {
    // Unique in the process: two writers of one session never share a
    // temporary file.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let part = folder.join(format!(
        ".{SNAPSHOT_FILE}.{}.part",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    match std::fs::write(&part, json) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(folder)?;
            std::fs::write(&part, json)?;
        }
        written => written?,
    }
    std::fs::rename(&part, folder.join(SNAPSHOT_FILE)).inspect_err(|_| {
        let _ = std::fs::remove_file(&part);
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roundtable_thread_stream::{NewEntry, ThreadId};

    use super::*;
    use crate::records::{SessionCreated, SessionRecord};

    #[test]
    fn the_snapshot_is_replaced_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let id = SessionId::generate();
        let created = SessionCreated {
            workspace_path: "/w".into(),
            system_prompt: None,
            auto_run: true,
            approval_policy: Default::default(),
            verify_policy: Default::default(),
            patch_review: Default::default(),
            owner: None,
            limits: Default::default(),
        };
        let thread = ThreadId::new(id.as_str()).unwrap();
        let entry = NewEntry::new("u", created.to_body().unwrap()).into_entry(thread, 1);
        let state = SessionState::fold(&[entry]);
        write(dir.path(), &id, &state);
        write(dir.path(), &id, &state);
        let folder = dir.path().join(id.as_str());
        let names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [SNAPSHOT_FILE]);
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(folder.join(SNAPSHOT_FILE)).unwrap()).unwrap();
        assert_eq!(json["id"], id.as_str());
    }
}
