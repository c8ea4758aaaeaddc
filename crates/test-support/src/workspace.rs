//! A git workspace for the agentic-sessions tests: a repository whose
//! `make test` fails until `status.txt` says `fixed`, so a test can watch a
//! session's patch turn verification from failing to passing.

use std::io;
use std::path::Path;
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
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        init_git_workspace(&ws).unwrap();
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
