//! Addressing skills by name: search bases, resolution, raw reads, staging.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::diagnostic::SkillDiagnostic;
use crate::error::SkillsError;
use crate::load::{LoadedSkills, load_skill_file};
use crate::skill::SKILL_FILE;
use crate::stage::{StageMode, stage_dirs};

/// The search bases under a repository root, in order: `skills/`, then the
/// legacy `.claude/skills/`.
const DEFAULT_SKILL_BASES: [&str; 2] = ["skills", ".claude/skills"];

/// Whether `name` is a flat skill reference: `[a-zA-Z0-9_-]+`.
///
/// This is what keeps a declared name from ever naming a path outside the
/// search bases: no separators, no dots, not empty.
pub fn is_valid_skill_ref(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The skills a host can address by name: an ordered list of search bases,
/// each holding `<name>/SKILL.md` directories.
///
/// Names are flat. `skills/software-development/architect` is not
/// addressable as `software-development/architect`: nested directories are
/// for people browsing the repository, not for the loader.
///
/// ```
/// use roundtable_skills::{SkillLibrary, SkillsError};
///
/// let library = SkillLibrary::new("/srv/bot");
/// assert!(matches!(
///     library.resolve_skill_paths(["../etc"]),
///     Err(SkillsError::InvalidName { .. })
/// ));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillLibrary {
    bases: Vec<PathBuf>,
}

impl SkillLibrary {
    /// The library of a repository: `<root>/skills/`, then
    /// `<root>/.claude/skills/`.
    pub fn new(root: impl AsRef<Path>) -> Self {
        let root = root.as_ref();
        Self::with_bases(DEFAULT_SKILL_BASES.iter().map(|base| root.join(base)))
    }

    /// A library over explicit search bases, searched in the given order.
    /// Relative bases are made absolute against the current directory.
    pub fn with_bases<I>(bases: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<PathBuf>,
    {
        let bases = bases
            .into_iter()
            .map(|base| {
                let base = base.into();
                std::path::absolute(&base).unwrap_or(base)
            })
            .collect();
        Self { bases }
    }

    /// The search bases, in order.
    pub fn bases(&self) -> &[PathBuf] {
        &self.bases
    }

    /// The absolute directory of the skill called `name`: the first
    /// `<base>/<name>/` holding a `SKILL.md` file.
    pub fn resolve_skill_path(&self, name: &str) -> Result<PathBuf, SkillsError> {
        if !is_valid_skill_ref(name) {
            return Err(SkillsError::InvalidName {
                name: name.to_owned(),
            });
        }
        let candidates: Vec<PathBuf> = self.bases.iter().map(|base| base.join(name)).collect();
        candidates
            .iter()
            .find(|dir| dir.join(SKILL_FILE).is_file())
            .cloned()
            .ok_or_else(|| SkillsError::NotFound {
                name: name.to_owned(),
                searched: candidates,
            })
    }

    /// One directory per name, in order; fails on the first invalid or
    /// missing name.
    pub fn resolve_skill_paths<I>(&self, names: I) -> Result<Vec<PathBuf>, SkillsError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        names
            .into_iter()
            .map(|name| self.resolve_skill_path(name.as_ref()))
            .collect()
    }

    /// The raw text of `<name>/SKILL.md`, frontmatter and all (for a skill
    /// viewer). Works for skills hidden from the catalogue too.
    pub fn load_skill_raw(&self, name: &str) -> Result<String, SkillsError> {
        let path = self.resolve_skill_path(name)?.join(SKILL_FILE);
        fs::read_to_string(&path).map_err(|err| SkillsError::io("read", path, err))
    }

    /// Parses the named skills (a curated list, as the chat path uses).
    ///
    /// Never fails: a name that is invalid or not found becomes a dropped
    /// diagnostic, like a SKILL.md with bad frontmatter.
    pub fn load_named<I>(&self, names: I) -> LoadedSkills
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut loaded = LoadedSkills::default();
        let mut index = HashMap::new();
        let mut requested = HashSet::new();
        for name in names {
            let name = name.as_ref();
            if !requested.insert(name.to_owned()) {
                continue;
            }
            match self.resolve_skill_path(name) {
                Ok(dir) => {
                    let (skill, diagnostics) = load_skill_file(&dir.join(SKILL_FILE));
                    loaded.diagnostics.extend(diagnostics);
                    if let Some(skill) = skill {
                        loaded.add(skill, &mut index);
                    }
                }
                Err(err) => {
                    let path = match self.bases.first() {
                        Some(base) if is_valid_skill_ref(name) => base.join(name).join(SKILL_FILE),
                        _ => PathBuf::from(name),
                    };
                    loaded
                        .diagnostics
                        .push(SkillDiagnostic::dropped(path, err.to_string()));
                }
            }
        }
        loaded
    }

    /// Resolves `names` and stages them at `<cwd>/.agents/skills/<name>/`,
    /// after clearing whatever an earlier phase staged there.
    ///
    /// All names are resolved before anything is touched, so a bad name
    /// leaves the workspace as it was. An empty list only clears. Returns
    /// the staged directories.
    pub fn stage<I>(
        &self,
        cwd: &Path,
        names: I,
        mode: StageMode,
    ) -> Result<Vec<PathBuf>, SkillsError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let dirs = self.resolve_skill_paths(names)?;
        stage_dirs(cwd, &dirs, mode)
    }
}
