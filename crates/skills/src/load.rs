//! Finding and loading skills from directories.
//!
//! Discovery follows pi-coding-agent's loader:
//!
//! - a directory holding a `SKILL.md` is a skill root and is not searched
//!   further; any other directory is searched recursively, skipping hidden
//!   entries and `node_modules`;
//! - the Markdown files directly inside a searched root (not in deeper
//!   folders, and not when the root is itself a skill folder) are skills too,
//!   each in the same SKILL.md format; their parent directory is the root, so
//!   pi's "does not match parent directory" warning applies to their names;
//! - `.gitignore`, `.ignore` and `.fdignore` files in the root and in every
//!   folder searched exclude folders and files, silently (a skill folder's
//!   own `.gitignore` can hide its `SKILL.md`). Patterns are read as pi reads
//!   them: each line gets its folder's path (relative to the root) put in
//!   front and one leading `/` removed, so a nested file's plain pattern only
//!   reaches its own folder's entries (`deep` in `cat/.gitignore` skips
//!   `cat/deep`, not `cat/x/deep`; write `**/deep` for that), and a root
//!   pattern matches at any depth even with a leading `/`. Later lines and
//!   deeper files win. Ignore files above the root, global excludes and
//!   `.git/info/exclude` do not count, and no git repository is needed;
//! - symbolic links are followed (each real directory is visited once, so
//!   link cycles end, where pi would recurse until the OS refuses).
//!
//! Entries are visited in name order, so "first wins" on a name collision is
//! deterministic. Loading never fails as a whole: every problem with a file
//! becomes a [`SkillDiagnostic`] and the other files still load. Which
//! problems drop a skill and which only warn is described on
//! [`Skill::from_markdown`].

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Collision, SkillDiagnostic};
use crate::ignore_rules::IgnoreRules;
use crate::skill::{SKILL_FILE, Skill};

/// Skills that loaded, plus everything worth reporting about the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadedSkills {
    /// The skills, in discovery order, names unique.
    pub skills: Vec<Skill>,
    /// Findings: warnings about loaded skills and the reasons others were
    /// dropped.
    pub diagnostics: Vec<SkillDiagnostic>,
}

impl LoadedSkills {
    /// The skill called `name`, listed or not.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|skill| skill.name == name)
    }

    /// The skills that belong in the catalogue (not
    /// `disable-model-invocation`).
    pub fn listed(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|skill| skill.is_listed())
    }

    /// Adds one skill, or a collision diagnostic when its name is taken.
    pub(crate) fn add(&mut self, skill: Skill, index: &mut HashMap<String, usize>) {
        if let Some(&kept) = index.get(&skill.name) {
            let kept = self.skills[kept].file_path.clone();
            self.diagnostics.push(SkillDiagnostic {
                collision: Some(Collision {
                    name: skill.name.clone(),
                    kept: kept.clone(),
                }),
                ..SkillDiagnostic::dropped(
                    &skill.file_path,
                    format!(
                        "name \"{}\" collision: already loaded from {}",
                        skill.name,
                        kept.display()
                    ),
                )
            });
            return;
        }
        index.insert(skill.name.clone(), self.skills.len());
        self.skills.push(skill);
    }
}

/// Loads one SKILL.md (or any Markdown file in that format).
///
/// An unreadable file or one that is not UTF-8 is dropped with a diagnostic,
/// like any other invalid skill.
pub fn load_skill_file(path: &Path) -> (Option<Skill>, Vec<SkillDiagnostic>) {
    let path = absolute(path);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) => {
            return (
                None,
                vec![SkillDiagnostic::dropped(
                    &path,
                    format!("cannot read: {err}"),
                )],
            );
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Skill::from_markdown(&path, &text),
        Err(err) => (
            None,
            vec![SkillDiagnostic::dropped(
                &path,
                format!("not valid UTF-8: {err}"),
            )],
        ),
    }
}

/// Loads every skill under the given roots, in order.
///
/// A root may be a directory (searched as described in the module docs) or
/// a Markdown file (loaded as one skill). A missing root is a warning. When
/// two skills share a name, the first one found keeps it and the other is
/// dropped with a collision diagnostic; the same file reached twice (through
/// a symbolic link) is loaded once.
///
/// ```no_run
/// let loaded = roundtable_skills::load_skills(["skills", ".claude/skills"]);
/// for diagnostic in &loaded.diagnostics {
///     eprintln!("{}: {}", diagnostic.path.display(), diagnostic.message);
/// }
/// println!("{}", roundtable_skills::available_skills_xml(loaded.listed()));
/// ```
pub fn load_skills<I>(roots: I) -> LoadedSkills
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    let mut loader = Loader::default();
    for root in roots {
        loader.load_root(&absolute(root.as_ref()));
    }
    loader.loaded
}

/// Loads the skills under one directory; same rules as [`load_skills`].
pub fn load_skills_from_dir(dir: impl AsRef<Path>) -> LoadedSkills {
    load_skills([dir])
}

/// State of one loading run.
#[derive(Default)]
struct Loader {
    loaded: LoadedSkills,
    by_name: HashMap<String, usize>,
    /// Canonical SKILL.md paths already taken, to skip the same file reached twice.
    files: HashSet<PathBuf>,
    /// Canonical directories already searched, to end symlink cycles.
    dirs: HashSet<PathBuf>,
}

impl Loader {
    fn load_root(&mut self, root: &Path) {
        match fs::metadata(root) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                self.loaded
                    .diagnostics
                    .push(SkillDiagnostic::warning(root, "skill path does not exist"));
            }
            Err(err) => self.loaded.diagnostics.push(SkillDiagnostic::warning(
                root,
                format!("cannot read: {err}"),
            )),
            Ok(meta) if meta.is_dir() => self.walk(root, &mut IgnoreRules::new(root), true),
            Ok(meta) if meta.is_file() && root.extension().is_some_and(|e| e == "md") => {
                self.load_file(root);
            }
            Ok(_) => self.loaded.diagnostics.push(SkillDiagnostic::warning(
                root,
                "skill path is not a directory or a markdown file",
            )),
        }
    }

    fn walk(&mut self, dir: &Path, ignores: &mut IgnoreRules, is_root: bool) {
        if let Ok(real) = fs::canonicalize(dir)
            && !self.dirs.insert(real)
        {
            return;
        }
        let pushed = ignores.enter(dir, &mut self.loaded.diagnostics);
        self.scan(dir, ignores, is_root);
        if pushed {
            ignores.leave();
        }
    }

    /// One directory: its `SKILL.md` if it has one (and it is not ignored),
    /// else its subdirectories and, in a root, its Markdown files.
    fn scan(&mut self, dir: &Path, ignores: &mut IgnoreRules, is_root: bool) {
        let skill_file = dir.join(SKILL_FILE);
        if skill_file.is_file() && !ignores.is_ignored(&skill_file, false) {
            self.load_file(&skill_file);
            return;
        }
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) => {
                self.loaded.diagnostics.push(SkillDiagnostic::warning(
                    dir,
                    format!("cannot read directory: {err}"),
                ));
                return;
            }
        };
        let mut names: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .filter(|name| {
                let name = name.to_string_lossy();
                !name.starts_with('.') && name != "node_modules"
            })
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            // `is_dir` and `is_file` follow symbolic links; broken links are
            // neither.
            let is_dir = path.is_dir();
            if ignores.is_ignored(&path, is_dir) {
                continue;
            }
            if is_dir {
                self.walk(&path, ignores, false);
            } else if is_root && path.is_file() && name.to_string_lossy().ends_with(".md") {
                self.load_file(&path);
            }
        }
    }

    fn load_file(&mut self, path: &Path) {
        if let Ok(real) = fs::canonicalize(path)
            && !self.files.insert(real)
        {
            return;
        }
        let (skill, diagnostics) = load_skill_file(path);
        self.loaded.diagnostics.extend(diagnostics);
        if let Some(skill) = skill {
            self.loaded.add(skill, &mut self.by_name);
        }
    }
}

/// `path` made absolute against the current directory, without touching
/// the file system (symbolic links are kept as given).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
