//! The crate's one error type.
//!
//! Loading skills never fails as a whole: per-file problems become
//! [`SkillDiagnostic`](crate::SkillDiagnostic)s. The errors here are for the
//! operations that must succeed or stop: resolving a declared name, staging,
//! reading agent context, building a phase prompt.

use std::path::PathBuf;

/// Everything that can go wrong in this crate outside of loading.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillsError {
    /// A skill reference is not flat and alphanumeric (`[a-zA-Z0-9_-]+`).
    ///
    /// This is the path-safety gate: no `/`, no `..`, no empty name can reach
    /// the file system.
    #[error("invalid skill name: {name:?} (only letters, digits, '_' and '-' are allowed)")]
    InvalidName {
        /// The rejected name, as given.
        name: String,
    },
    /// No search base holds `<base>/<name>/SKILL.md`.
    #[error("skill not found: skills/{name}/SKILL.md")]
    NotFound {
        /// The name that was looked up.
        name: String,
        /// The skill directories that were tried, in search order.
        searched: Vec<PathBuf>,
    },
    /// A file-system operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done, e.g. `"read"` or `"create symlink"`.
        action: &'static str,
        /// The path the operation was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Copying a skill directory met a symbolic link that leads back into
    /// one of its own ancestors.
    #[error("symlink loop while copying {path}")]
    SymlinkLoop {
        /// The link that closes the loop.
        path: PathBuf,
    },
    /// A folder on the way to the staging directory (`.agents`) is a
    /// symbolic link or not a folder. Staging deletes what it finds there,
    /// so it never follows one: the workspace may come from a repository or
    /// an earlier agent that planted a link to a folder elsewhere.
    #[error(
        "cannot stage skills through {path}: it is a symbolic link or not a folder \
         (remove it; staging never follows a link out of the workspace)"
    )]
    UnsafeStagingPath {
        /// The offending path.
        path: PathBuf,
    },
    /// A phase has neither `prompt:` nor `skill:`/`skills:`.
    #[error("phase {phase:?} has neither prompt: nor skills: - cannot build prompt")]
    NothingToPrompt {
        /// The phase's name.
        phase: String,
    },
}

impl SkillsError {
    /// Builds an [`SkillsError::Io`] for `path`.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
