//! A git workspace for the agentic-sessions tests: a repository whose
//! `make test` fails until `status.txt` says `fixed`, so a test can watch a
//! session's patch turn verification from failing to passing, and the temp
//! folder the sessions' and the server's tests keep it in beside their data.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `status.txt` holds at the start.
pub const STATUS_BEFORE: &str = "broken";

/// What `status.txt` must hold for `make test` to pass.
pub const STATUS_FIXED: &str = "fixed";

/// Creates, at `path` (made if missing), a committed git repository with
/// `README.md` (`# Demo`), `status.txt` (`broken`) and a `Makefile` whose
/// `test` target passes once `status.txt` says `fixed`.
pub fn init_git_workspace(path: &Path) -> io::Result<()> {
    std::fs::create_dir_all(path)?;
    std::fs::write(path.join("status.txt"), format!("{STATUS_BEFORE}\n"))?;
    std::fs::write(path.join("README.md"), "# Demo\n")?;
    std::fs::write(
        path.join("Makefile"),
        format!(
            "test:\n\t@grep -q '^{STATUS_FIXED}$$' status.txt || (echo 'status.txt is not {STATUS_FIXED}' && false)\n"
        ),
    )?;
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "start",
        ],
    ] {
        let status = Command::new("git").args(args).current_dir(path).status()?;
        if !status.success() {
            return Err(io::Error::other(format!("git {args:?} failed: {status}")));
        }
    }
    Ok(())
}

/// A temp folder holding a git workspace (`ws/`, made by
/// [`init_git_workspace`]) and an empty data folder (`data/`) for a store,
/// snapshots and blobs. Removed when dropped.
pub struct SessionFolders {
    /// The temp folder.
    pub dir: tempfile::TempDir,
}

impl SessionFolders {
    /// Makes the temp folder, its workspace and its data folder.
    pub fn new() -> io::Result<Self> {
        let dir = tempfile::tempdir()?;
        init_git_workspace(&dir.path().join("ws"))?;
        std::fs::create_dir_all(dir.path().join("data"))?;
        Ok(Self { dir })
    }

    /// The git workspace.
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    /// The data folder.
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

/// A unified diff that changes `status.txt` from `from` to `to`: the
/// `patch` argument of an `apply_patch` call.
pub fn status_patch(from: &str, to: &str) -> String {
    format!("--- a/status.txt\n+++ b/status.txt\n@@ -1 +1 @@\n-{from}\n+{to}\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn make_test_passes_only_once_fixed() {
        let folders = SessionFolders::new().unwrap();
        let ws = folders.workspace();
        assert!(folders.data().is_dir());
        let make = || {
            Command::new("make")
                .args(["-s", "test"])
                .current_dir(&ws)
                .output()
                .unwrap()
                .status
                .success()
        };
        assert!(!make());
        std::fs::write(ws.join("status.txt"), format!("{STATUS_FIXED}\n")).unwrap();
        assert!(make());
    }
}
