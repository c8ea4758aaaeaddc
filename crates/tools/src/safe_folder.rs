//! [`SafeFolder`]: a folder held open, and file operations inside it that
//! never follow a symlink.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

/// Bytes of the target's name kept in a temporary file's name, so that the
/// temporary name stays within the file system's limit.
const TEMP_NAME_PART: usize = 64;

/// Tries at a free temporary name before giving up.
const TEMP_ATTEMPTS: usize = 16;

/// How deep [`SafeFolder::remove_all`] goes before it gives up.
const MAX_REMOVE_DEPTH: usize = 64;

/// A folder opened once and used through its descriptor: whatever happens
/// to the path afterwards, operations stay in this folder, and none of them
/// follows a symlink inside it.
///
/// Checking a path and then using it leaves a window: a folder on the way
/// may become a symlink in between (a command left running, another
/// writer), and a symlink may wait where a writer puts its temporary file
/// (a repository can commit one under any name, a shell command can plant
/// one). So every operation works on open folder descriptors: a subfolder
/// is opened relative to its parent with `O_NOFOLLOW` (a missing one made
/// with `mkdirat`), a file is read with `O_NOFOLLOW`, and a write goes to a
/// new temporary file that `O_CREAT | O_EXCL` creates (never through a
/// link), is flushed to disk, and is then either linked under its name
/// ([`create_new`](Self::create_new): `linkat` fails on any existing entry,
/// so the file lands whole or not at all and never replaces anything) or
/// renamed over it ([`replace`](Self::replace): a link at the target is
/// replaced, never written through). A reader never sees half a file, and a
/// crash leaves at most a hidden temporary file
/// (`.<name>.<pid>.<n>.<nanos>.tmp`).
///
/// The workspace writer, [`FolderArtifacts`](crate::FolderArtifacts) and
/// hosts that keep files of their own (a session's attachments) share it.
///
/// ```
/// use roundtable_tools::SafeFolder;
///
/// let dir = tempfile::tempdir().unwrap();
/// let outside = tempfile::tempdir().unwrap();
/// std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
///
/// let root = SafeFolder::open(dir.path()).unwrap();
/// let notes = root.folder("notes".as_ref(), true).unwrap();
/// notes.create_new("a.txt".as_ref(), b"one").unwrap();
/// // A new file never replaces one.
/// let taken = notes.create_new("a.txt".as_ref(), b"two").unwrap_err();
/// assert_eq!(taken.kind(), std::io::ErrorKind::AlreadyExists);
/// assert_eq!(notes.read("a.txt".as_ref(), None).unwrap(), b"one");
/// // A folder that is a symlink is never entered.
/// assert!(root.folder("out".as_ref(), true).is_err());
/// assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
/// ```
#[derive(Debug)]
pub struct SafeFolder {
    fd: OwnedFd,
    path: PathBuf,
}

/// An entry of a [`SafeFolder`], as [`SafeFolder::entries`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderEntry {
    /// Its name in the folder.
    pub name: OsString,
    /// What it is (a symlink is never followed to find out).
    pub kind: EntryKind,
}

/// What a [`FolderEntry`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file of this many bytes.
    File {
        /// Its size in bytes.
        size: u64,
    },
    /// A folder.
    Folder,
    /// Anything else: a symlink, a FIFO, a socket, a device.
    Other,
}

impl SafeFolder {
    /// Opens the folder at `path`. Symlinks on the way to it, and at `path`
    /// itself, are followed: where the folder is, is the caller's choice.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let fd = open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Opens the folder at `path`, refusing it when `path` itself is a
    /// symlink (the folders above it are followed).
    pub fn open_refusing_link(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let fd = open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| not_a_folder(err, path))?;
        Ok(Self {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path the folder was opened at (for messages: the folder may have
    /// moved since).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the subfolder `name`, making it first when it is missing and
    /// `create` is set. A subfolder that is a symlink or a file is an error
    /// of kind [`NotADirectory`](io::ErrorKind::NotADirectory).
    pub fn folder(&self, name: &OsStr, create: bool) -> io::Result<SafeFolder> {
        check_name(name)?;
        let path = self.path.join(name);
        let fd = match self.open_folder(name) {
            Err(Errno::ENOENT) if create => {
                match mkdirat(&self.fd, name, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(err) => return Err(err.into()),
                }
                self.open_folder(name)
            }
            other => other,
        }
        .map_err(|err| not_a_folder(err, &path))?;
        Ok(SafeFolder { fd, path })
    }

    /// Opens the folders `names` one below the other, as
    /// [`folder`](Self::folder) does for each.
    pub fn descend<'a>(
        &self,
        names: impl IntoIterator<Item = &'a OsStr>,
        create: bool,
    ) -> io::Result<SafeFolder> {
        let mut names = names.into_iter();
        let Some(first) = names.next() else {
            return self.try_clone();
        };
        let mut folder = self.folder(first, create)?;
        for name in names {
            folder = folder.folder(name, create)?;
        }
        Ok(folder)
    }

    /// Another handle on the same folder.
    pub fn try_clone(&self) -> io::Result<SafeFolder> {
        Ok(SafeFolder {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// Writes `content` as the new file `name`: it lands whole or not at
    /// all, and an existing entry of that name (a file, a folder, a symlink,
    /// dangling or not) is an error of kind
    /// [`AlreadyExists`](io::ErrorKind::AlreadyExists), left as it was.
    pub fn create_new(&self, name: &OsStr, content: &[u8]) -> io::Result<()> {
        match self.create_new_as([name], content)? {
            Some(_) => Ok(()),
            None => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists", self.path.join(name).display()),
            )),
        }
    }

    /// Writes `content` as a new file under the first of `names` that is
    /// free, as [`create_new`](Self::create_new) does, and returns that
    /// name; `None` when every name is taken. The content is written once,
    /// whatever the number of names tried.
    pub fn create_new_as<N: AsRef<OsStr>>(
        &self,
        names: impl IntoIterator<Item = N>,
        content: &[u8],
    ) -> io::Result<Option<N>> {
        let mut staged: Option<Staged<'_>> = None;
        for name in names {
            check_name(name.as_ref())?;
            let temp = match &staged {
                Some(temp) => temp,
                None => staged.insert(self.stage(name.as_ref(), content)?),
            };
            match linkat(
                &self.fd,
                temp.name.as_os_str(),
                &self.fd,
                name.as_ref(),
                AtFlags::empty(),
            ) {
                Ok(()) => return Ok(Some(name)),
                Err(Errno::EEXIST) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Ok(None)
    }

    /// Replaces the file `name` with `content` (or creates it): a symlink
    /// there is replaced, never written through, and a regular file keeps
    /// its permission bits; a new file gets the process's default (`0o666`
    /// less the umask).
    pub fn replace(&self, name: &OsStr, content: &[u8]) -> io::Result<()> {
        check_name(name)?;
        let mode = match self.stat(name) {
            Ok(stat) if file_kind(&stat) == SFlag::S_IFREG => {
                Some(Mode::from_bits_truncate(stat.st_mode))
            }
            Ok(_) | Err(Errno::ENOENT) => None,
            Err(err) => return Err(err.into()),
        };
        let temp = self.stage(name, content)?;
        if let Some(mode) = mode {
            fchmod(&temp.file, mode)?;
        }
        renameat(&self.fd, temp.name.as_os_str(), &self.fd, name)?;
        temp.landed();
        Ok(())
    }

    /// Reads the regular file `name`; with `limit`, a file larger than that
    /// many bytes is an error of kind
    /// [`FileTooLarge`](io::ErrorKind::FileTooLarge) and is not read. A
    /// symlink is never followed, and anything but a regular file (a FIFO
    /// that would block, a device) is refused: both are errors of kind
    /// [`InvalidInput`](io::ErrorKind::InvalidInput).
    pub fn read(&self, name: &OsStr, limit: Option<u64>) -> io::Result<Vec<u8>> {
        check_name(name)?;
        let path = self.path.join(name);
        let fd = openat(
            &self.fd,
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| match err {
            Errno::ELOOP | Errno::EMLINK => io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is a symlink; it is never followed", path.display()),
            ),
            other => other.into(),
        })?;
        let stat = fstat(&fd)?;
        if file_kind(&stat) != SFlag::S_IFREG {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a regular file", path.display()),
            ));
        }
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        if let Some(limit) = limit
            && size > limit
        {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "{} holds {size} bytes, more than the {limit} allowed",
                    path.display()
                ),
            ));
        }
        let mut file = File::from(fd);
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        match limit {
            // Read one byte past the limit to see a file that grew.
            Some(limit) => (&mut file)
                .take(limit.saturating_add(1))
                .read_to_end(&mut bytes)?,
            None => file.read_to_end(&mut bytes)?,
        };
        if let Some(limit) = limit
            && bytes.len() as u64 > limit
        {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("{} grew past the {limit} bytes allowed", path.display()),
            ));
        }
        Ok(bytes)
    }

    /// Removes the entry `name` when it is not a folder (a symlink is
    /// removed, not its target). A missing entry is an error of kind
    /// [`NotFound`](io::ErrorKind::NotFound).
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        check_name(name)?;
        unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir)?;
        Ok(())
    }

    /// Removes the entry `name` and, when it is a folder, everything in it,
    /// without following any symlink (a link is removed, not what it
    /// points to). A missing entry is not an error.
    pub fn remove_all(&self, name: &OsStr) -> io::Result<()> {
        self.remove_all_at(name, 0)
    }

    fn remove_all_at(&self, name: &OsStr, depth: usize) -> io::Result<()> {
        check_name(name)?;
        let stat = match self.stat(name) {
            Ok(stat) => stat,
            Err(Errno::ENOENT) => return Ok(()),
            Err(err) => return Err(err.into()),
        };
        if file_kind(&stat) == SFlag::S_IFDIR {
            if depth >= MAX_REMOVE_DEPTH {
                return Err(io::Error::other(format!(
                    "{} is nested more than {MAX_REMOVE_DEPTH} folders deep",
                    self.path.join(name).display()
                )));
            }
            let inner = self.folder(name, false)?;
            for entry in inner.entries()? {
                inner.remove_all_at(&entry.name, depth + 1)?;
            }
            match unlinkat(&self.fd, name, UnlinkatFlags::RemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => Ok(()),
                Err(err) => Err(err.into()),
            }
        } else {
            match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => Ok(()),
                Err(err) => Err(err.into()),
            }
        }
    }

    /// The folder's entries (without `.` and `..`), in no particular order,
    /// each with what it is; symlinks are reported as
    /// [`EntryKind::Other`], never followed.
    pub fn entries(&self) -> io::Result<Vec<FolderEntry>> {
        // The directory stream gets its own descriptor: reading it moves an
        // offset that must not be shared with this handle's other uses.
        let fd = openat(
            &self.fd,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut entries = Vec::new();
        for entry in Dir::from_fd(fd)? {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match self.stat(name) {
                Ok(stat) => match file_kind(&stat) {
                    SFlag::S_IFREG => EntryKind::File {
                        size: u64::try_from(stat.st_size).unwrap_or(0),
                    },
                    SFlag::S_IFDIR => EntryKind::Folder,
                    _ => EntryKind::Other,
                },
                // Removed since the listing began.
                Err(Errno::ENOENT) => continue,
                Err(err) => return Err(err.into()),
            };
            entries.push(FolderEntry {
                name: name.to_os_string(),
                kind,
            });
        }
        Ok(entries)
    }

    fn open_folder(&self, name: &OsStr) -> nix::Result<OwnedFd> {
        openat(
            &self.fd,
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
    }

    fn stat(&self, name: &OsStr) -> nix::Result<FileStat> {
        fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW)
    }

    /// `content` in a new, flushed temporary file of this folder, under a
    /// name nobody else holds (`O_EXCL` fails on any existing name, a link
    /// included); removed when dropped unless it [`landed`](Staged::landed).
    fn stage(&self, target: &OsStr, content: &[u8]) -> io::Result<Staged<'_>> {
        for _ in 0..TEMP_ATTEMPTS {
            let name = temp_name(target);
            let fd = match openat(
                &self.fd,
                name.as_os_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o666),
            ) {
                Ok(fd) => fd,
                Err(Errno::EEXIST) => continue,
                Err(err) => return Err(err.into()),
            };
            let mut staged = Staged {
                folder: self,
                name,
                file: File::from(fd),
                landed: false,
            };
            staged.file.write_all(content)?;
            staged.file.sync_data()?;
            return Ok(staged);
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free name for a temporary file",
        ))
    }
}

/// A temporary file of a [`SafeFolder`], holding content about to land.
struct Staged<'a> {
    folder: &'a SafeFolder,
    name: OsString,
    file: File,
    landed: bool,
}

impl Staged<'_> {
    /// The file was renamed to its target: there is nothing left to remove.
    fn landed(mut self) {
        self.landed = true;
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if !self.landed {
            let _ = unlinkat(
                &self.folder.fd,
                self.name.as_os_str(),
                UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// A name must be one path component: not empty, no `/`, not `.` or `..`.
fn check_name(name: &OsStr) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a name inside a folder"),
        ));
    }
    Ok(())
}

fn file_kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

/// Turns the failure to open a folder without following a link into an
/// error that says why.
fn not_a_folder(err: Errno, path: &Path) -> io::Error {
    match err {
        // O_NOFOLLOW on a link: ELOOP (Linux, macOS) or EMLINK (FreeBSD).
        Errno::ELOOP | Errno::EMLINK | Errno::ENOTDIR => io::Error::new(
            io::ErrorKind::NotADirectory,
            format!(
                "{} is a symlink or a file, not a folder; nothing is read or written through it",
                path.display()
            ),
        ),
        other => other.into(),
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

    fn os(name: &str) -> &OsStr {
        OsStr::new(name)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_file_never_replaces_an_entry_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "secret").unwrap();
        symlink(&secret, dir.path().join("link.txt")).unwrap();
        symlink(
            outside.path().join("made.txt"),
            dir.path().join("dangling.txt"),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();

        let folder = SafeFolder::open(dir.path()).unwrap();
        for taken in ["link.txt", "dangling.txt", "sub"] {
            let err = folder.create_new(os(taken), b"x").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{taken}: {err}");
        }
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
        assert!(!outside.path().join("made.txt").exists());

        let used = folder
            .create_new_as(["link.txt", "dangling.txt", "new.txt"], b"fresh")
            .unwrap();
        assert_eq!(used, Some("new.txt"));
        assert_eq!(std::fs::read(dir.path().join("new.txt")).unwrap(), b"fresh");
        assert_eq!(folder.create_new_as(["new.txt"], b"y").unwrap(), None);
        assert_eq!(
            names(dir.path()),
            ["dangling.txt", "link.txt", "new.txt", "sub"]
        );
    }

    #[test]
    fn folders_that_are_links_are_never_entered() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let root = SafeFolder::open(dir.path()).unwrap();
        for bad in ["out", "file"] {
            let err = root.folder(os(bad), true).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotADirectory, "{bad}: {err}");
            assert!(err.to_string().contains("symlink"), "{err}");
        }
        let err = root
            .descend([os("out"), os("b")], true)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory, "{err}");
        let deep = root.descend([os("a"), os("b")], true).unwrap();
        deep.create_new(os("x"), b"x").unwrap();
        assert!(dir.path().join("a/b/x").is_file());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        let err = SafeFolder::open_refusing_link(dir.path().join("out")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory, "{err}");
        assert!(SafeFolder::open(dir.path().join("out")).is_ok());

        for bad in ["", ".", "..", "a/b"] {
            let err = root.create_new(os(bad), b"x").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
            assert!(root.folder(os(bad), true).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reads_refuse_links_fifos_and_files_over_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
        std::fs::write(dir.path().join("file"), "0123456789").unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let folder = SafeFolder::open(dir.path()).unwrap();

        let err = folder.read(os("link"), None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("symlink"), "{err}");
        let err = folder.read(os("fifo"), None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        let err = folder.read(os("missing"), None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert_eq!(folder.read(os("file"), Some(10)).unwrap(), b"0123456789");
        let err = folder.read(os("file"), Some(9)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge, "{err}");
    }

    #[test]
    fn entries_and_remove_all_never_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "keep").unwrap();
        std::fs::create_dir_all(dir.path().join("tree/a/b")).unwrap();
        std::fs::write(dir.path().join("tree/a/b/f"), "four").unwrap();
        std::fs::write(dir.path().join("tree/top"), "").unwrap();
        symlink(outside.path(), dir.path().join("tree/a/out")).unwrap();
        let root = SafeFolder::open(dir.path()).unwrap();

        let tree = root.folder(os("tree"), false).unwrap();
        let mut listed = tree.entries().unwrap();
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            listed,
            [
                FolderEntry {
                    name: "a".into(),
                    kind: EntryKind::Folder
                },
                FolderEntry {
                    name: "top".into(),
                    kind: EntryKind::File { size: 0 }
                },
            ]
        );
        let a = tree.folder(os("a"), false).unwrap();
        let out = a.entries().unwrap().into_iter().find(|e| e.name == "out");
        assert_eq!(out.map(|e| e.kind), Some(EntryKind::Other));

        root.remove_all(os("tree")).unwrap();
        assert!(!dir.path().join("tree").exists());
        assert_eq!(names(outside.path()), ["keep"]);
        root.remove_all(os("tree")).unwrap();
    }

    #[test]
    fn replacing_keeps_permissions_and_replaces_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "secret").unwrap();
        symlink(&secret, dir.path().join("link")).unwrap();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "one").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        let folder = SafeFolder::open(dir.path()).unwrap();

        folder.replace(os("run.sh"), b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "two");
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o750);
        folder.replace(os("link"), b"mine").unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
        assert!(
            std::fs::symlink_metadata(dir.path().join("link"))
                .unwrap()
                .is_file()
        );
        assert_eq!(names(dir.path()), ["link", "run.sh"]);
    }

    #[test]
    fn temp_names_stay_short_and_differ() {
        let long = OsString::from("x".repeat(250));
        let a = temp_name(&long);
        assert!(a.len() < 120, "{a:?}");
        assert_ne!(a, temp_name(&long));
    }
}
