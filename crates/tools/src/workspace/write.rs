//! Writing below the root without following links.
//!
//! [`WorkspaceRoot::resolve`] checks a path when a tool starts. A write
//! must not trust that check to still hold, nor any name it picks itself: a
//! folder on the way may have become a symlink since (a command left
//! running, another writer), and a symlink may wait where the writer puts
//! its temporary file (a repository can commit one under any name). So a
//! write opens every folder from the root down relative to the one above
//! and replaces the file there, through [`SafeFolder`]: no link is followed
//! on the way, a link at the target is replaced, never written through, and
//! a reader never sees half a file.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path};

use super::root::{WorkspaceRoot, is_git_path};
use crate::SafeFolder;

impl WorkspaceRoot {
    /// Replaces the file at `path` (inside the root: absolute, or relative
    /// to the root, without `..`) with `content`, creating missing folders.
    ///
    /// No link is followed: not on the way (a folder that is a symlink is
    /// an error), not at the target (a symlink there is replaced by the
    /// file). A file that is replaced keeps its permissions; a new one gets
    /// the process's default (`0o666` less the umask). Paths in `.git` are
    /// refused.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let outside = tempfile::tempdir().unwrap();
    /// std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    /// let root = roundtable_tools::workspace::WorkspaceRoot::new(dir.path()).unwrap();
    /// root.replace_file("notes/today.md", b"hello\n").unwrap();
    /// assert!(root.replace_file("out/x.md", b"escape").is_err());
    /// assert!(root.replace_file(".git/config", b"").is_err());
    /// assert!(!outside.path().join("x.md").exists());
    /// ```
    pub fn replace_file(&self, path: impl AsRef<Path>, content: &[u8]) -> io::Result<()> {
        let (folder, name) = self.entry(path.as_ref(), true)?;
        folder.replace(name, content)
    }

    /// Removes the file at `path` (as for [`replace_file`](Self::replace_file));
    /// a link there is removed, not its target. A file already gone is not
    /// an error.
    pub fn remove_file(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let removed = self
            .entry(path.as_ref(), false)
            .and_then(|(folder, name)| folder.remove_file(name));
        match removed {
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Opens the folder holding `path` by walking down from the root without
    /// following links (`create` makes the missing folders), and returns it
    /// with the file's name.
    fn entry<'p>(&self, path: &'p Path, create: bool) -> io::Result<(SafeFolder, &'p OsStr)> {
        let relative = path.strip_prefix(self.path()).unwrap_or(path);
        let mut names: Vec<&OsStr> = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(name) => names.push(name),
                Component::CurDir => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} is not a path inside the workspace", path.display()),
                    ));
                }
            }
        }
        if is_git_path(relative) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is in .git, which is never written", path.display()),
            ));
        }
        let Some((name, folders)) = names.split_last() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the workspace root is not a file",
            ));
        };
        let folder = SafeFolder::open(self.path())?.descend(folders.iter().copied(), create)?;
        Ok((folder, name))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: WorkspaceRoot,
        outside: std::path::PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/sub")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        Fixture {
            root: WorkspaceRoot::new(dir.path().join("ws")).unwrap(),
            outside: dir.path().join("outside").canonicalize().unwrap(),
            _dir: dir,
        }
    }

    #[test]
    fn a_folder_swapped_for_a_link_after_resolve_is_not_written_through() {
        let f = fixture();
        for target in ["sub/file.txt", "sub/new/deeper/file.txt"] {
            let resolved = f.root.resolve(target).unwrap();
            // Between the check and the write, `sub` becomes a link out.
            let sub = f.root.path().join("sub");
            std::fs::remove_dir_all(&sub).unwrap();
            symlink(&f.outside, &sub).unwrap();
            let err = f.root.replace_file(&resolved, b"escaped").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotADirectory, "{err}");
            assert_eq!(std::fs::read_dir(&f.outside).unwrap().count(), 0);
            let err = f.root.remove_file(&resolved).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotADirectory, "{err}");
            std::fs::remove_file(&sub).unwrap();
            std::fs::create_dir(&sub).unwrap();
        }
    }

    #[test]
    fn a_link_at_the_target_is_replaced_and_removed_not_followed() {
        let f = fixture();
        let secret = f.outside.join("secret.txt");
        std::fs::write(&secret, "secret").unwrap();
        let link = f.root.path().join("link.txt");
        symlink(&secret, &link).unwrap();
        f.root.replace_file("link.txt", b"mine").unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
        // A new file gets the default mode, not the mode of a link.
        let mode = std::fs::metadata(&link).unwrap().permissions().mode();
        assert_ne!(mode & 0o777, 0o777);

        symlink(&secret, f.root.path().join("link2.txt")).unwrap();
        f.root.remove_file("link2.txt").unwrap();
        assert!(secret.is_file());
        assert!(f.root.remove_file("never-there.txt").is_ok());
    }

    #[test]
    fn replacing_keeps_permissions_and_leaves_no_temporary_file() {
        let f = fixture();
        let script = f.root.path().join("run.sh");
        std::fs::write(&script, "one").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        f.root.replace_file(&script, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "two");
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o750);
        let names: Vec<_> = std::fs::read_dir(f.root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn paths_out_of_the_root_or_in_git_are_refused() {
        let f = fixture();
        for bad in ["", ".", "../x", "sub/../../x", ".git/config", "a/.Git/HEAD"] {
            assert!(f.root.replace_file(bad, b"x").is_err(), "{bad:?}");
        }
        assert!(f.root.replace_file(f.outside.join("x"), b"x").is_err());
        assert!(!f.outside.join("x").exists());
        assert!(!f.root.path().join(".git").exists());
    }
}
