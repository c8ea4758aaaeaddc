//! The ignore files honoured while searching a directory for skills.
//!
//! pi-coding-agent reads `.gitignore`, `.ignore` and `.fdignore` in the root
//! and in every directory it descends into, and skips what they exclude:
//! a whole folder, or a `SKILL.md` (a skill folder's own `.gitignore` can
//! hide its `SKILL.md`). Only files inside the searched root count: nothing
//! above it, no global excludes, no `.git/info/exclude`, and no git
//! repository is needed.
//!
//! Each line is rewritten the way pi rewrites it before matching against
//! paths relative to the root: comments and blank lines are dropped, one
//! leading `/` is removed, and the directory's path relative to the root is
//! put in front. So a pattern in a nested ignore file only reaches that
//! directory's own entries unless it says `**/` (`deep` in `cat/.ignore`
//! skips `cat/deep`, not `cat/x/deep`), and a root pattern matches at any
//! depth even with a leading `/`. Later lines win over earlier ones, and a
//! deeper directory's lines over its parents', as in git.

use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::diagnostic::SkillDiagnostic;

/// The ignore files read in every searched directory, in this order.
pub(crate) const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".fdignore"];

/// The rules in force while walking one root: one matcher per directory on
/// the current path that holds ignore files.
pub(crate) struct IgnoreRules {
    root: PathBuf,
    stack: Vec<Gitignore>,
}

impl IgnoreRules {
    /// No rules yet, for a walk of `root`.
    pub(crate) fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            stack: Vec::new(),
        }
    }

    /// Reads the ignore files of `dir` (the root or a directory below it).
    ///
    /// Returns whether a matcher was pushed, i.e. whether the caller must
    /// [`leave`](Self::leave) once done with `dir`. An ignore file that
    /// cannot be read, or a line that is not a valid pattern, is a warning;
    /// the other lines still apply.
    pub(crate) fn enter(&mut self, dir: &Path, diagnostics: &mut Vec<SkillDiagnostic>) -> bool {
        let prefix = match self.relative(dir) {
            Some(rel) if !rel.is_empty() => format!("{rel}/"),
            _ => String::new(),
        };
        let mut builder = GitignoreBuilder::new(&self.root);
        let mut patterns = 0usize;
        for file in IGNORE_FILES {
            let path = dir.join(file);
            let bytes = match fs::read(&path) {
                Ok(bytes) => bytes,
                Err(err) if err.kind() == ErrorKind::NotFound => continue,
                Err(err) => {
                    diagnostics.push(SkillDiagnostic::warning(
                        &path,
                        format!("cannot read ignore file: {err}"),
                    ));
                    continue;
                }
            };
            for line in String::from_utf8_lossy(&bytes).lines() {
                let Some(pattern) = prefixed_pattern(line, &prefix) else {
                    continue;
                };
                match builder.add_line(Some(path.clone()), &pattern) {
                    Ok(_) => patterns += 1,
                    Err(err) => diagnostics.push(SkillDiagnostic::warning(
                        &path,
                        format!("ignore pattern {line:?} skipped: {err}"),
                    )),
                }
            }
        }
        if patterns == 0 {
            return false;
        }
        match builder.build() {
            Ok(matcher) => {
                self.stack.push(matcher);
                true
            }
            Err(err) => {
                diagnostics.push(SkillDiagnostic::warning(
                    dir,
                    format!("ignore files skipped: {err}"),
                ));
                false
            }
        }
    }

    /// Drops the matcher the last successful [`enter`](Self::enter) pushed.
    pub(crate) fn leave(&mut self) {
        self.stack.pop();
    }

    /// Whether `path` (the root joined with a relative path) is excluded.
    pub(crate) fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        let Some(rel) = self.relative(path) else {
            return false;
        };
        if rel.is_empty() {
            return false;
        }
        for matcher in self.stack.iter().rev() {
            let matched = matcher.matched(&rel, is_dir);
            if !matched.is_none() {
                return matched.is_ignore();
            }
        }
        false
    }

    /// `path` relative to the root, with `/` separators.
    fn relative(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let parts: Vec<_> = rel
            .components()
            .filter_map(|part| match part {
                Component::Normal(name) => Some(name.to_string_lossy()),
                _ => None,
            })
            .collect();
        Some(parts.join("/"))
    }
}

/// One ignore-file line as pi rewrites it: `None` for blank lines and
/// comments; otherwise the pattern with one leading `/` removed and the
/// directory prefix put in front (after any `!`). `\!` is unescaped to `!`.
fn prefixed_pattern(line: &str, prefix: &str) -> Option<String> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return None;
    }
    let (negated, pattern) = match line.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (
            false,
            line.strip_prefix('\\')
                .filter(|rest| rest.starts_with('!'))
                .unwrap_or(line),
        ),
    };
    let pattern = pattern.strip_prefix('/').unwrap_or(pattern);
    let bang = if negated { "!" } else { "" };
    Some(format!("{bang}{prefix}{pattern}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_rewritten_like_pi() {
        let cases = [
            ("", "a/", None),
            ("   ", "a/", None),
            ("# comment", "a/", None),
            ("  # indented comment", "", None),
            ("deep", "cat/", Some("cat/deep")),
            ("/anchored", "cat/", Some("cat/anchored")),
            ("/anchored", "", Some("anchored")),
            ("!keep", "cat/", Some("!cat/keep")),
            ("!/keep", "", Some("!keep")),
            ("\\!bang", "cat/", Some("cat/!bang")),
            ("\\#hash", "cat/", Some("cat/\\#hash")),
            ("build/", "", Some("build/")),
        ];
        for (line, prefix, expected) in cases {
            assert_eq!(
                prefixed_pattern(line, prefix).as_deref(),
                expected,
                "{line:?} in {prefix:?}"
            );
        }
    }
}
