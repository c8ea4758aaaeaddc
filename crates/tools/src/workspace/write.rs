//! Writing below the root without following links.
//!
//! [`WorkspaceRoot::resolve`] checks a path when a tool starts. A write
//! must not trust that check to still hold, nor any name it picks itself: a
//! folder on the way may have become a symlink since (a command left
//! running, another writer), and a symlink may wait where the writer puts
//! its temporary file (a repository can commit one under any name). So a
//! write opens every folder from the root down relative to the one above
//! (`openat` with `O_NOFOLLOW`), creates a missing folder with `mkdirat`,
//! writes the content to a new temporary file that `O_CREAT | O_EXCL`
//! creates (never through a link), and renames it over the target: a link
//! at the target is replaced, never written through, and a reader never
//! sees half a file.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use super::root::{WorkspaceRoot, is_git_path};

/// Bytes of the target's name kept in a temporary file's name, so that the
/// temporary name stays within the file system's limit.
const TEMP_NAME_PART: usize = 64;

/// Tries at a free temporary name before giving up.
const TEMP_ATTEMPTS: usize = 16;

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
        self.entry(path.as_ref(), true)?.replace(content)
    }

    /// Removes the file at `path` (as for [`replace_file`](Self::replace_file));
    /// a link there is removed, not its target. A file already gone is not
    /// an error.
    pub fn remove_file(&self, path: impl AsRef<Path>) -> io::Result<()> {
        match self.entry(path.as_ref(), false) {
            Ok(entry) => entry.remove(),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Opens the folder holding `path` by walking down from the root without
    /// following links; `create` makes the missing folders.
    fn entry(&self, path: &Path, create: bool) -> io::Result<Entry> {
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
        let mut dir = open(
            self.path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        for folder in folders {
            dir = match open_folder(&dir, folder) {
                Err(Errno::ENOENT) if create => {
                    match mkdirat(&dir, *folder, Mode::from_bits_truncate(0o777)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(err) => return Err(err.into()),
                    }
                    open_folder(&dir, folder)
                }
                other => other,
            }
            .map_err(|err| match err {
                // O_NOFOLLOW on a link: ELOOP (Linux, macOS) or EMLINK (FreeBSD).
                Errno::ELOOP | Errno::EMLINK | Errno::ENOTDIR => io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!(
                        "{:?} on the way to {} is a symlink or a file, not a folder; \
                         nothing is written through it",
                        folder,
                        path.display()
                    ),
                ),
                other => other.into(),
            })?;
        }
        Ok(Entry {
            dir,
            name: (*name).to_os_string(),
        })
    }
}

/// Opens the folder `name` in `dir`, failing when it is a symlink.
fn open_folder(dir: &OwnedFd, name: &OsStr) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// An entry of a folder opened without following links.
struct Entry {
    dir: OwnedFd,
    name: OsString,
}

impl Entry {
    /// The permission bits of the entry when it is a regular file.
    fn file_mode(&self) -> io::Result<Option<Mode>> {
        match fstatat(
            &self.dir,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => {
                let kind = SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits());
                Ok((kind == SFlag::S_IFREG).then(|| Mode::from_bits_truncate(stat.st_mode)))
            }
            Err(Errno::ENOENT) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    fn replace(&self, content: &[u8]) -> io::Result<()> {
        let mode = self.file_mode()?;
        let (temp, mut file) = self.create_temp()?;
        let written = file
            .write_all(content)
            .and_then(|()| match mode {
                Some(mode) => fchmod(&file, mode).map_err(io::Error::from),
                None => Ok(()),
            })
            .and_then(|()| {
                renameat(
                    &self.dir,
                    temp.as_os_str(),
                    &self.dir,
                    self.name.as_os_str(),
                )
                .map_err(io::Error::from)
            });
        if written.is_err() {
            let _ = unlinkat(&self.dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        written
    }

    fn remove(&self) -> io::Result<()> {
        match unlinkat(&self.dir, self.name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// A new, empty file next to the entry, under a name nobody else holds:
    /// `O_EXCL` fails on any existing name, a link included.
    fn create_temp(&self) -> io::Result<(OsString, File)> {
        for _ in 0..TEMP_ATTEMPTS {
            let name = temp_name(&self.name);
            match openat(
                &self.dir,
                name.as_os_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o666),
            ) {
                Ok(fd) => return Ok((name, File::from(fd))),
                Err(Errno::EEXIST) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free name for a temporary file",
        ))
    }
}

/// `.<name>.<pid>.<counter>.<nanoseconds>.tmp`: hidden, next to its target,
/// different on every call.
fn temp_name(target: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let part = &target.as_bytes()[..target.len().min(TEMP_NAME_PART)];
    let mut name = b".".to_vec();
    name.extend_from_slice(part);
    name.extend_from_slice(
        format!(
            ".{}.{}.{nanos}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        )
        .as_bytes(),
    );
    OsString::from_vec(name)
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

    #[test]
    fn temp_names_stay_short_and_differ() {
        let long = OsString::from("x".repeat(250));
        let a = temp_name(&long);
        assert!(a.len() < 120, "{a:?}");
        assert_ne!(a, temp_name(&long));
    }
}
