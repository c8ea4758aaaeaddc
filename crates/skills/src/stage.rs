//! Staging skill directories into an agent's workspace.
//!
//! A coding agent discovers skills under `<cwd>/.agents/skills/`. Before each
//! phase the host clears that directory and puts there exactly the skills the
//! phase declared, each as a whole directory (SKILL.md plus `scripts/`,
//! `references/`, `assets/`), so what is in context is what was declared.
//!
//! The workspace is not the host's: a cloned repository or an earlier
//! phase's agent may have put a symbolic link at `.agents` or
//! `.agents/skills`. Staging deletes and writes there, so it never follows
//! such a link: `.agents` must be a real folder (or absent), and a link at
//! `.agents/skills` is removed as a link.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::SkillsError;

/// Where staged skills live, relative to the agent's working directory.
pub const STAGING_DIR: &str = ".agents/skills";

/// How a skill directory is put into the workspace.
///
/// The layout the agent sees is the same either way; the choice depends on
/// where the agent's tools run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StageMode {
    /// One directory symlink per skill, pointing at the host directory.
    /// Zero-copy; for agents whose tools run on the host and can follow
    /// host paths.
    #[default]
    Symlink,
    /// A recursive copy that dereferences symbolic links, for agents in a
    /// container where host paths would not resolve.
    Copy,
}

/// `<cwd>/.agents/skills`.
pub(crate) fn staging_dir(cwd: &Path) -> PathBuf {
    cwd.join(STAGING_DIR)
}

/// The folders between `cwd` and the staging directory, outermost first
/// (`<cwd>/.agents`).
fn staging_parents(cwd: &Path) -> Vec<PathBuf> {
    let mut parents: Vec<PathBuf> = Path::new(STAGING_DIR)
        .ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .map(|a| cwd.join(a))
        .collect();
    parents.reverse();
    parents
}

/// Checks that `path` is a real folder (not a link to one) or absent;
/// returns whether it exists.
fn check_real_folder(path: &Path) -> Result<bool, SkillsError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(true),
        Ok(_) => Err(SkillsError::UnsafeStagingPath {
            path: path.to_path_buf(),
        }),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(SkillsError::io("inspect", path, err)),
    }
}

/// Removes `<cwd>/.agents/skills` and everything staged in it.
///
/// Staged symlinks are removed as links: the host skill directories they
/// point at are never touched, and neither is a folder elsewhere that a link
/// at `.agents/skills` points to. A link (or a file) at `.agents` is an
/// [`SkillsError::UnsafeStagingPath`]. Nothing to remove is not an error.
pub fn clear_staging(cwd: &Path) -> Result<(), SkillsError> {
    for parent in staging_parents(cwd) {
        if !check_real_folder(&parent)? {
            return Ok(());
        }
    }
    let dir = staging_dir(cwd);
    let meta = match fs::symlink_metadata(&dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(SkillsError::io("inspect", dir, err)),
    };
    let result = if meta.is_dir() {
        fs::remove_dir_all(&dir)
    } else {
        fs::remove_file(&dir)
    };
    result.map_err(|err| SkillsError::io("remove", dir, err))
}

/// Clears the staging directory, then stages each skill directory at
/// `<cwd>/.agents/skills/<directory name>/`. Returns the staged paths.
///
/// With no directories the staging directory is left absent, so a phase
/// without skills sees no `.agents/skills/` at all. When two directories
/// share a name, the first is staged. Relative sources are made absolute
/// against the current directory first, so symlinks always resolve. A link
/// or a file at `<cwd>/.agents` is an [`SkillsError::UnsafeStagingPath`],
/// and nothing is touched.
///
/// ```
/// use roundtable_skills::StageMode;
/// use roundtable_skills::stage::stage_dirs;
///
/// let host = tempfile::tempdir().unwrap();
/// let skill = host.path().join("pr-review");
/// std::fs::create_dir_all(skill.join("scripts")).unwrap();
/// std::fs::write(skill.join("SKILL.md"), "---\nname: pr-review\ndescription: d\n---\n").unwrap();
/// std::fs::write(skill.join("scripts/run.sh"), "echo hi\n").unwrap();
///
/// let cwd = tempfile::tempdir().unwrap();
/// stage_dirs(cwd.path(), &[skill], StageMode::Copy).unwrap();
/// assert!(cwd.path().join(".agents/skills/pr-review/scripts/run.sh").is_file());
///
/// // The next phase declares nothing: nothing is staged.
/// stage_dirs(cwd.path(), &[], StageMode::Copy).unwrap();
/// assert!(!cwd.path().join(".agents/skills").exists());
/// ```
pub fn stage_dirs(
    cwd: &Path,
    dirs: &[PathBuf],
    mode: StageMode,
) -> Result<Vec<PathBuf>, SkillsError> {
    clear_staging(cwd)?;
    if dirs.is_empty() {
        return Ok(Vec::new());
    }
    // One folder at a time: `create_dir` never follows a link at the name
    // it creates, and each folder is checked once it exists.
    for folder in staging_parents(cwd).into_iter().chain([staging_dir(cwd)]) {
        match fs::create_dir(&folder) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(SkillsError::io("create", &folder, err)),
        }
        check_real_folder(&folder)?;
    }
    let staging = staging_dir(cwd);
    let mut staged = Vec::with_capacity(dirs.len());
    for source in dirs {
        let Some(name) = source.file_name() else {
            return Err(SkillsError::io(
                "stage",
                source,
                io::Error::new(io::ErrorKind::InvalidInput, "path has no directory name"),
            ));
        };
        let dest = staging.join(name);
        if staged.contains(&dest) {
            continue;
        }
        let source =
            std::path::absolute(source).map_err(|err| SkillsError::io("resolve", source, err))?;
        match mode {
            StageMode::Symlink => symlink_dir(&source, &dest)?,
            StageMode::Copy => copy_tree(&source, &dest, &mut Vec::new())?,
        }
        staged.push(dest);
    }
    Ok(staged)
}

#[cfg(unix)]
fn symlink_dir(source: &Path, dest: &Path) -> Result<(), SkillsError> {
    std::os::unix::fs::symlink(source, dest)
        .map_err(|err| SkillsError::io("create symlink", dest, err))
}

#[cfg(windows)]
fn symlink_dir(source: &Path, dest: &Path) -> Result<(), SkillsError> {
    std::os::windows::fs::symlink_dir(source, dest)
        .map_err(|err| SkillsError::io("create symlink", dest, err))
}

/// Copies `source` to `dest` recursively, following symbolic links.
///
/// `ancestors` holds the canonical directories being copied above this one;
/// a link back into one of them is a loop and an error. Entries that are
/// neither files nor directories (sockets, FIFOs) are skipped.
fn copy_tree(source: &Path, dest: &Path, ancestors: &mut Vec<PathBuf>) -> Result<(), SkillsError> {
    let real = fs::canonicalize(source).map_err(|err| SkillsError::io("resolve", source, err))?;
    if ancestors.contains(&real) {
        return Err(SkillsError::SymlinkLoop {
            path: source.to_path_buf(),
        });
    }
    ancestors.push(real);
    fs::create_dir(dest).map_err(|err| SkillsError::io("create", dest, err))?;
    let entries =
        fs::read_dir(source).map_err(|err| SkillsError::io("read directory", source, err))?;
    for entry in entries {
        let entry = entry.map_err(|err| SkillsError::io("read directory", source, err))?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let meta = fs::metadata(&from).map_err(|err| SkillsError::io("inspect", &from, err))?;
        if meta.is_dir() {
            copy_tree(&from, &to, ancestors)?;
        } else if meta.is_file() {
            copy_file(&from, &to, meta.permissions())?;
        }
    }
    ancestors.pop();
    Ok(())
}

/// Copies the file `from` to the new file `to` with `permissions`.
///
/// `to` is created with `create_new`, which fails on any existing name, a
/// link included: its folder was just made, so nothing can be there but
/// something planted meanwhile, and that is never written through.
fn copy_file(from: &Path, to: &Path, permissions: fs::Permissions) -> Result<(), SkillsError> {
    let mut source = fs::File::open(from).map_err(|err| SkillsError::io("read", from, err))?;
    let mut dest = fs::File::options()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(|err| SkillsError::io("create", to, err))?;
    io::copy(&mut source, &mut dest).map_err(|err| SkillsError::io("copy", from, err))?;
    dest.set_permissions(permissions)
        .map_err(|err| SkillsError::io("set permissions of", to, err))
}
