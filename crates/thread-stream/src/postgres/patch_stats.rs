//! The files a unified diff changes, with the lines it adds and removes in
//! each: what a patch tool call does to a workspace, read from its stored
//! arguments.
//!
//! Hunks are consumed by the line counts of their `@@ -a,b +c,d @@` headers,
//! so a removed line that itself starts with `--` is never taken for the
//! next file's header. Both plain unified diffs (`---`/`+++` headers) and
//! git's (`diff --git`, `new file mode`, `rename from`...) are read.

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileChange {
    /// Created.
    Added,
    /// Edited in place.
    Modified,
    /// Removed.
    Deleted,
    /// Moved (and maybe edited).
    Renamed,
    /// Copied (and maybe edited).
    Copied,
}

impl FileChange {
    /// The name stored in `file_mutations.change`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileChange::Added => "added",
            FileChange::Modified => "modified",
            FileChange::Deleted => "deleted",
            FileChange::Renamed => "renamed",
            FileChange::Copied => "copied",
        }
    }
}

/// One file of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchedFile {
    pub(crate) change: FileChange,
    /// The file's path after the patch (before it, for a deletion).
    pub(crate) path: String,
    /// The source of a rename or copy.
    pub(crate) from: Option<String>,
    pub(crate) added: u32,
    pub(crate) removed: u32,
}

/// A file section being read.
#[derive(Default)]
struct Section {
    old: Option<String>,
    new: Option<String>,
    git_change: Option<FileChange>,
    saw_minus_header: bool,
    added: u32,
    removed: u32,
}

impl Section {
    /// Reads one of git's extended header lines (mode, rename, copy).
    fn git_header(&mut self, line: &str) {
        if line.starts_with("new file mode") {
            self.git_change = Some(FileChange::Added);
            self.old = None;
        } else if line.starts_with("deleted file mode") {
            self.git_change = Some(FileChange::Deleted);
            self.new = None;
        } else if let Some(from) = line.strip_prefix("rename from ") {
            self.git_change = Some(FileChange::Renamed);
            self.old = Some(from.to_string());
        } else if let Some(to) = line.strip_prefix("rename to ") {
            self.new = Some(to.to_string());
        } else if let Some(from) = line.strip_prefix("copy from ") {
            self.git_change = Some(FileChange::Copied);
            self.old = Some(from.to_string());
        } else if let Some(to) = line.strip_prefix("copy to ") {
            self.new = Some(to.to_string());
        }
    }

    fn finish(self) -> Option<PatchedFile> {
        let change = match (&self.old, &self.new, self.git_change) {
            (_, _, Some(change)) => change,
            (None, Some(_), None) => FileChange::Added,
            (Some(_), None, None) => FileChange::Deleted,
            (Some(old), Some(new), None) if old != new => FileChange::Renamed,
            (Some(_), Some(_), None) => FileChange::Modified,
            (None, None, None) => return None,
        };
        let from = match change {
            FileChange::Renamed | FileChange::Copied => self.old.clone(),
            _ => None,
        };
        let path = match change {
            FileChange::Deleted => self.old.or(self.new)?,
            _ => self.new.or(self.old)?,
        };
        Some(PatchedFile {
            change,
            path,
            from,
            added: self.added,
            removed: self.removed,
        })
    }
}

/// A path of a `---`/`+++` header: None for `/dev/null`; git's `a/`/`b/`
/// prefix and any timestamp after a tab removed.
fn header_path(rest: &str, prefix: &str) -> Option<String> {
    let path = rest.split('\t').next().unwrap_or(rest).trim_end();
    if path == "/dev/null" {
        return None;
    }
    Some(path.strip_prefix(prefix).unwrap_or(path).to_string())
}

/// The old and new line counts of a hunk header `@@ -a[,b] +c[,d] @@`.
fn hunk_counts(line: &str) -> Option<(u32, u32)> {
    let mut parts = line.strip_prefix("@@ ")?.split_whitespace();
    let count = |range: &str| -> Option<u32> {
        match range.split_once(',') {
            Some((_, n)) => n.parse().ok(),
            None => Some(1),
        }
    };
    let old = count(parts.next()?.strip_prefix('-')?)?;
    let new = count(parts.next()?.strip_prefix('+')?)?;
    Some((old, new))
}

/// The files `patch` changes, in order.
pub(crate) fn patch_stats(patch: &str) -> Vec<PatchedFile> {
    let mut reader = PatchReader::default();
    for line in patch.lines() {
        if !reader.hunk_line(line) {
            reader.header_line(line);
        }
    }
    reader.close_section();
    reader.files
}

/// A patch being read line by line.
#[derive(Default)]
struct PatchReader {
    files: Vec<PatchedFile>,
    section: Option<Section>,
    /// The old and new lines the open hunk still holds.
    hunk: Option<(u32, u32)>,
}

impl PatchReader {
    fn close_section(&mut self) {
        if let Some(file) = self.section.take().and_then(Section::finish) {
            self.files.push(file);
        }
    }

    /// Counts `line` into the open hunk; false when no hunk is open or the
    /// line is not part of it (which closes it).
    fn hunk_line(&mut self, line: &str) -> bool {
        let Some((old, new)) = self.hunk.as_mut() else {
            return false;
        };
        let counted = match line.as_bytes().first() {
            None | Some(b' ') => {
                *old = old.saturating_sub(1);
                *new = new.saturating_sub(1);
                true
            }
            Some(b'-') => {
                *old = old.saturating_sub(1);
                if let Some(s) = self.section.as_mut() {
                    s.removed += 1;
                }
                true
            }
            Some(b'+') => {
                *new = new.saturating_sub(1);
                if let Some(s) = self.section.as_mut() {
                    s.added += 1;
                }
                true
            }
            // "\ No newline at end of file"
            Some(b'\\') => true,
            _ => false,
        };
        if (*old == 0 && *new == 0) || !counted {
            self.hunk = None;
        }
        counted
    }

    /// Reads a line outside hunks: a file's headers, or a hunk's start.
    fn header_line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            self.close_section();
            let (old, new) = match rest.split_once(" b/") {
                Some((old, new)) => (
                    old.strip_prefix("a/").unwrap_or(old).to_string(),
                    new.to_string(),
                ),
                None => (rest.to_string(), rest.to_string()),
            };
            self.section = Some(Section {
                old: Some(old),
                new: Some(new),
                ..Section::default()
            });
        } else if let Some(rest) = line.strip_prefix("--- ") {
            let starts_new = self
                .section
                .as_ref()
                .is_none_or(|s| s.saw_minus_header || s.added + s.removed > 0);
            if starts_new {
                self.close_section();
                self.section = Some(Section::default());
            }
            if let Some(s) = self.section.as_mut() {
                s.saw_minus_header = true;
                s.old = header_path(rest, "a/");
            }
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            if let Some(s) = self.section.as_mut() {
                s.new = header_path(rest, "b/");
            }
        } else if let Some(s) = self.section.as_mut() {
            if line.starts_with("@@ ") {
                self.hunk = hunk_counts(line).filter(|&(o, n)| o > 0 || n > 0);
            } else {
                s.git_header(line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(change: FileChange, path: &str, added: u32, removed: u32) -> PatchedFile {
        PatchedFile {
            change,
            path: path.into(),
            from: None,
            added,
            removed,
        }
    }

    #[test]
    fn a_plain_multi_file_patch() {
        let patch = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n fn a() {}\n-fn b() {}\n+fn b() { 1 }\n fn c() {}\n\
                     --- /dev/null\n+++ b/NEW.md\n@@ -0,0 +1,2 @@\n+# New\n+text\n\
                     --- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n";
        assert_eq!(
            patch_stats(patch),
            vec![
                file(FileChange::Modified, "src/lib.rs", 1, 1),
                file(FileChange::Added, "NEW.md", 2, 0),
                file(FileChange::Deleted, "old.txt", 0, 1),
            ]
        );
    }

    #[test]
    fn removed_lines_that_look_like_headers_stay_in_their_hunk() {
        // A removed SQL comment "-- x" shows as "--- x"; an added "++ y" as "+++ y".
        let patch = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- x\n+++ y\n select 1;\n";
        assert_eq!(
            patch_stats(patch),
            vec![file(FileChange::Modified, "q.sql", 1, 1)]
        );
    }

    #[test]
    fn git_headers_name_renames_copies_and_modes() {
        let patch = "diff --git a/a.txt b/b.txt\nsimilarity index 90%\nrename from a.txt\nrename to b.txt\n--- a/a.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n\
                     diff --git a/c.txt b/d.txt\ncopy from c.txt\ncopy to d.txt\n\
                     diff --git a/e.sh b/e.sh\nnew file mode 100755\n--- /dev/null\n+++ b/e.sh\n@@ -0,0 +1 @@\n+echo\n";
        let got = patch_stats(patch);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            (got[0].change, got[0].path.as_str(), got[0].from.as_deref()),
            (FileChange::Renamed, "b.txt", Some("a.txt"))
        );
        assert_eq!((got[0].added, got[0].removed), (1, 1));
        assert_eq!(
            (got[1].change, got[1].path.as_str(), got[1].from.as_deref()),
            (FileChange::Copied, "d.txt", Some("c.txt"))
        );
        assert_eq!(got[2], file(FileChange::Added, "e.sh", 1, 0));
    }

    #[test]
    fn text_that_is_no_patch_changes_no_file() {
        assert!(patch_stats("").is_empty());
        assert!(patch_stats("just some words\n@@ nonsense").is_empty());
    }
}
