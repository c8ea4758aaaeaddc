//! Confinement: every path a workspace tool touches resolves inside the root.

use std::io;
use std::path::{Component, Path, PathBuf};

/// A workspace root directory, canonicalised once.
///
/// [`resolve`](Self::resolve) turns a path the model gave into a path inside
/// the root, or refuses it: absolute paths, `..` components, and paths that
/// pass through a symlink leading out of the root are all rejected. Paths
/// that do not exist yet (a file a patch creates) are checked through their
/// deepest existing ancestor.
///
/// What confinement cannot see: a hard link inside the root to a file
/// outside it reads like any file (only a command run through `shell`, which
/// is unconfined by nature, can create one; `apply_patch` replaces such a
/// file rather than writing through it), and a symlink swapped in between
/// the check and the use.
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

    /// Resolves a relative path given by the model to a path inside the root.
    ///
    /// The error text is written for the model.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let root = roundtable_tools::workspace::WorkspaceRoot::new(dir.path()).unwrap();
    /// assert!(root.resolve("src/new_file.rs").is_ok());
    /// assert!(root.resolve("../etc/passwd").is_err());
    /// assert!(root.resolve("/etc/passwd").is_err());
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
        let full = self.root.join(&clean);
        self.confine(&full, relative)
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
