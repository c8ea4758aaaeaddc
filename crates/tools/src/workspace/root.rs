//! Confinement: every path a workspace tool touches resolves inside the root
//! and outside `.git`.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

/// A workspace root directory, canonicalised once.
///
/// [`resolve`](Self::resolve) turns a path the model gave into a path inside
/// the root, or refuses it: absolute paths, `..` components, and paths that
/// pass through a symlink leading out of the root are all rejected, and so
/// is every path in a `.git` folder, named or reached through a symlink
/// (`is_git_path`). Paths that do not exist yet (a file a patch creates)
/// are checked through their deepest existing ancestor.
///
/// [`replace_file`](Self::replace_file) and
/// [`remove_file`](Self::remove_file) write without following any link, so
/// a symlink swapped in after the check, or planted where a temporary file
/// would go, is never written through.
///
/// What confinement cannot see: a hard link inside the root to a file
/// outside it reads like any file (only a command run through `shell`, which
/// is unconfined by nature, can create one; writes replace such a file
/// rather than writing through it), a symlink swapped in between the check
/// and a read, and a git directory reachable under another name than `.git`
/// (git finds it only through `.git`, which no tool creates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRoot {
    root: PathBuf,
}

impl WorkspaceRoot {
    /// Opens a root; it must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref().canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "workspace root is not a directory",
            ));
        }
        Ok(Self { root })
    }

    /// The canonical root path.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Resolves a relative path given by the model to a path inside the root
    /// and outside `.git`, with every symlink of its existing part followed.
    ///
    /// The error text is written for the model.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::create_dir(dir.path().join(".git")).unwrap();
    /// std::os::unix::fs::symlink(".git", dir.path().join("g")).unwrap();
    /// let root = roundtable_tools::workspace::WorkspaceRoot::new(dir.path()).unwrap();
    /// assert!(root.resolve("src/new_file.rs").is_ok());
    /// assert!(root.resolve("../etc/passwd").is_err());
    /// assert!(root.resolve("/etc/passwd").is_err());
    /// assert!(root.resolve(".git/config").is_err());
    /// assert!(root.resolve("g/config").is_err());
    /// ```
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, String> {
        if relative.contains('\0') {
            return Err(format!("path {relative:?} contains a NUL byte"));
        }
        let mut clean = PathBuf::new();
        for component in Path::new(relative).components() {
            match component {
                Component::Normal(part) => clean.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(format!(
                        "path {relative:?} uses `..`; paths must stay inside the workspace"
                    ));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(format!(
                        "path {relative:?} is absolute; give a path relative to the workspace root"
                    ));
                }
            }
        }
        let resolved = self.confine(&self.root.join(&clean), relative)?;
        // Both the name given and the real path: `g/config` with `g -> .git`
        // is as much in .git as `.git/config`.
        let real = resolved.strip_prefix(&self.root).unwrap_or(&resolved);
        if is_git_path(&clean) || is_git_path(real) {
            return Err(format!(
                "path {relative:?} is in .git (or leads there through a symlink); the workspace \
                 tools never read, list, search or change .git (git_status shows the branch)"
            ));
        }
        Ok(resolved)
    }

    /// The path of `path` (inside the root) relative to the root, with `/`
    /// separators, for display.
    pub fn display(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let s = rel.to_string_lossy().replace('\\', "/");
        if s.is_empty() { String::from(".") } else { s }
    }

    /// True when `path` (absolute, found by walking the root) really lies
    /// inside the root once symlinks are followed.
    pub fn contains(&self, path: &Path) -> bool {
        path.canonicalize()
            .is_ok_and(|real| real.starts_with(&self.root))
    }

    fn confine(&self, full: &Path, relative: &str) -> Result<PathBuf, String> {
        // Find the deepest ancestor that exists (as a file, directory or link).
        let mut existing = full.to_path_buf();
        let mut missing: Vec<std::ffi::OsString> = Vec::new();
        loop {
            if existing.symlink_metadata().is_ok() {
                break;
            }
            match (
                existing.file_name().map(|n| n.to_os_string()),
                existing.parent(),
            ) {
                (Some(name), Some(parent)) => {
                    missing.push(name);
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
        }
        let real = existing.canonicalize().map_err(|_| {
            format!("path {relative:?} goes through a broken symlink; refusing to follow it")
        })?;
        if !real.starts_with(&self.root) {
            return Err(format!(
                "path {relative:?} leads outside the workspace (through a symlink)"
            ));
        }
        let mut resolved = real;
        for name in missing.into_iter().rev() {
            resolved.push(name);
        }
        Ok(resolved)
    }
}

/// True for the name of a git folder, `.git`. The comparison ignores ASCII
/// case: on a case-insensitive file system `.GIT` is the same folder.
pub(crate) fn is_git_name(name: &OsStr) -> bool {
    name.eq_ignore_ascii_case(".git")
}

/// True when `relative` (a path relative to the root) is a `.git` folder or
/// lies inside one, at any depth: nested repositories and submodules keep
/// their hooks and configuration there too. The one test every workspace
/// tool applies, through [`WorkspaceRoot::resolve`], the directory walker
/// and the writer.
pub(crate) fn is_git_path(relative: &Path) -> bool {
    relative.components().any(|c| is_git_name(c.as_os_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_paths() {
        for git in [
            ".git",
            ".git/config",
            "a/.git",
            "a/.git/hooks/x",
            ".GIT/config",
            "./.git",
        ] {
            assert!(is_git_path(Path::new(git)), "{git}");
        }
        for plain in [
            "",
            ".",
            "git",
            ".gitignore",
            "a/.github/x",
            "x.git",
            ".git2",
        ] {
            assert!(!is_git_path(Path::new(plain)), "{plain}");
        }
    }
}
