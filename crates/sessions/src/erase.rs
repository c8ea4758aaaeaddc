//! Erasing a deleted session's stored parts: its files, thread, folder,
//! index entry and runtime.

use roundtable_thread_stream::StoreError;

use crate::core::EngineCore;
use crate::error::SessionError;
use crate::ids::SessionId;
use crate::state::SessionState;

/// Removes what a session marked deleted keeps: its blobs, its thread, its
/// folder in the snapshot dir, its index entry and its runtime.
pub(crate) async fn erase(core: &EngineCore, id: &SessionId) -> Result<(), SessionError> {
    if let Some(blobs) = &core.files.blobs {
        blobs.delete_session(id).await?;
    }
    core.store.delete_thread(&id.thread()?).await?;
    if let Some(snapshots) = &core.snapshots {
        // A checked session id is one plain folder name.
        let dir = snapshots.dir();
        let folder = dir.join(id.as_str());
        // Blocking file work, off the async threads.
        tokio::task::spawn_blocking(move || match std::fs::remove_dir_all(&folder) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
        .await
        .map_err(|e| StoreError::Backend(format!("deleting a session's folder failed: {e}")))?
        .map_err(|source| StoreError::Io {
            path: dir.join(id.as_str()),
            source,
        })?;
    }
    core.index.remove(&*core.store, id.as_str()).await?;
    core.runtimes.forget(id).await;
    Ok(())
}

/// Erases session `session` if its thread says it is being deleted (a
/// deletion a crash cut short).
pub(crate) async fn finish_deletion(core: &EngineCore, session: &str) -> Result<(), SessionError> {
    let id = SessionId::parse(session)?;
    let entries = core.store.read_all(&id.thread()?).await?;
    if SessionState::fold(&entries).deleted {
        erase(core, &id).await?;
    }
    Ok(())
}
