//! `apply_patch`: applies a unified diff to the workspace, all or nothing.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::PathBuf;

use async_trait::async_trait;
use diffy::patch_set::{FileOperation, ParseOptions, PatchSet};
use schemars::JsonSchema;
use serde::Deserialize;

use super::read::describe;
use super::{Workspace, blocking};
use crate::artifacts::Kept;
use crate::{ArtifactName, ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Input of `apply_patch`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ApplyPatchInput {
    /// A unified diff as `git diff` prints it: `--- a/path` and `+++ b/path`
    /// headers, then `@@` hunks with a few lines of context. Several files may
    /// be patched at once; `--- /dev/null` creates a file, `+++ /dev/null`
    /// deletes one.
    pub patch: String,
}

/// Applies a unified diff. Every hunk of every file is checked before
/// anything is written: a patch that does not apply changes nothing. When
/// the host keeps artifacts, an applied patch is stored as
/// `apply_patch-<call id>.patch` and the result names it last.
#[derive(Debug, Clone)]
pub(crate) struct ApplyPatch {
    ws: Workspace,
}

impl ApplyPatch {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

#[async_trait]
impl TypedTool for ApplyPatch {
    type Input = ApplyPatchInput;

    fn name(&self) -> &str {
        "apply_patch"
    }

    fn description(&self) -> &str {
        "Change files by applying a unified diff (the format `git diff` prints, with `--- a/path` \
         / `+++ b/path` headers and `@@` hunks with context lines). Several files may change in \
         one patch; `--- /dev/null` creates a file and `+++ /dev/null` deletes one. Either the \
         whole patch applies or nothing changes."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Write
    }

    async fn run(&self, ctx: ToolContext, input: ApplyPatchInput) -> Result<ToolResult, ToolError> {
        let ws = self.ws.clone();
        let patch = ctx.artifacts().map(|_| input.patch.clone());
        let applied = blocking(move || apply(&ws, &input.patch)).await;
        let changes = match applied {
            Ok(changes) => changes,
            Err(err) => {
                return Ok(ToolResult::error(format!(
                    "Patch not applied, nothing changed: {err}"
                )));
            }
        };
        let mut text = String::from("Patch applied:\n");
        let mut result = ToolResult::default();
        for change in &changes {
            let _ = writeln!(text, "{change}");
            result.artifacts.push(change.path.clone());
        }
        if let Some(patch) = patch {
            let name = ArtifactName::for_call("apply_patch", &ctx.call_id, None, "patch");
            if let Some(kept) = Kept::store(&ctx, "patch", name, patch.into_bytes()).await {
                let _ = writeln!(text, "{kept}");
                kept.record(&mut result);
                result.details = Some(serde_json::json!({ "patch": kept.reference() }));
            }
        }
        result.ok = true;
        result.parts = vec![roundtable_providers::UserBlock::text(text)];
        Ok(result)
    }
}

/// One file the patch changed.
#[derive(Debug)]
struct Change {
    letter: char,
    path: String,
    from: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.from {
            Some(from) => write!(f, "{} {} -> {}", self.letter, from, self.path),
            None => write!(f, "{} {}", self.letter, self.path),
        }
    }
}

/// Strips git's `a/` / `b/` prefix.
fn strip<'a>(path: &'a str, prefix: &str) -> &'a str {
    path.strip_prefix(prefix).unwrap_or(path)
}

/// The staged state of the files a patch touches, so that later file
/// patches see the result of earlier ones and nothing is written until all
/// apply.
struct Stage<'w> {
    ws: &'w Workspace,
    /// Resolved path of each relative path touched.
    paths: HashMap<String, PathBuf>,
    /// Content on disk before the patch (None: absent).
    original: HashMap<String, Option<String>>,
    /// Content after the patch (None: deleted).
    staged: HashMap<String, Option<String>>,
    order: Vec<String>,
}

impl<'w> Stage<'w> {
    fn resolve(&mut self, rel: &str) -> Result<PathBuf, String> {
        if let Some(p) = self.paths.get(rel) {
            return Ok(p.clone());
        }
        let path = self.ws.root().resolve(rel)?;
        if path == self.ws.root().path() {
            return Err(format!("{rel:?} is not a file path"));
        }
        self.paths.insert(rel.to_string(), path.clone());
        Ok(path)
    }

    /// The current (staged or on-disk) content of `rel`.
    fn current(&mut self, rel: &str) -> Result<Option<String>, String> {
        if let Some(content) = self.staged.get(rel) {
            return Ok(content.clone());
        }
        let path = self.resolve(rel)?;
        let content = match std::fs::read(&path) {
            Ok(bytes) => {
                Some(String::from_utf8(bytes).map_err(|_| format!("{rel:?} is not UTF-8 text"))?)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) if path.is_dir() => {
                return Err(format!("{rel:?} is a directory ({})", describe(&e)));
            }
            Err(e) => return Err(format!("cannot read {rel:?}: {}", describe(&e))),
        };
        self.original.insert(rel.to_string(), content.clone());
        Ok(content)
    }

    fn set(&mut self, rel: &str, content: Option<String>) -> Result<(), String> {
        self.resolve(rel)?;
        if !self.original.contains_key(rel) {
            self.current(rel)?;
        }
        if !self.order.iter().any(|r| r == rel) {
            self.order.push(rel.to_string());
        }
        self.staged.insert(rel.to_string(), content);
        Ok(())
    }

    /// Writes the staged files; on a failure, restores what was written.
    /// Writes follow no link ([`WorkspaceRoot::replace_file`]): a file is
    /// replaced by a new one renamed over it, so a hard link to a file
    /// outside the workspace is replaced rather than written through.
    ///
    /// [`WorkspaceRoot::replace_file`]: super::WorkspaceRoot::replace_file
    fn commit(self) -> Result<(), String> {
        let root = self.ws.root();
        let mut done: Vec<&str> = Vec::new();
        let mut failure = None;
        for rel in &self.order {
            let path = &self.paths[rel];
            let result = match &self.staged[rel] {
                Some(content) => root.replace_file(path, content.as_bytes()),
                None => root.remove_file(path),
            };
            match result {
                Ok(()) => done.push(rel),
                Err(e) => {
                    failure = Some(format!("cannot write {rel:?}: {}", describe(&e)));
                    break;
                }
            }
        }
        let Some(failure) = failure else {
            return Ok(());
        };
        for rel in done {
            let path = &self.paths[rel];
            let _ = match &self.original[rel] {
                Some(content) => root.replace_file(path, content.as_bytes()),
                None => root.remove_file(path),
            };
        }
        Err(failure)
    }
}

/// One file a unified diff changes, with the lines its hunks add and
/// remove (what a host records of an applied patch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchedFile {
    /// The file's path after the patch (before it, for a deletion),
    /// without git's `a/` or `b/`.
    pub path: String,
    /// The path it came from, for a rename or copy.
    pub from: Option<String>,
    /// Lines added.
    pub added: u32,
    /// Lines removed.
    pub removed: u32,
}

/// The files `patch` (as `apply_patch` takes it) changes, with line counts;
/// an error when it does not parse as `apply_patch` would parse it.
pub fn patched_files(patch: &str) -> Result<Vec<PatchedFile>, String> {
    let chunks = split_files(patch);
    let mut out = Vec::new();
    for chunk in &chunks {
        for file in parse_chunk(chunk)? {
            let (from, path) = match file.operation() {
                FileOperation::Create(p) => (None, strip(p, "b/")),
                FileOperation::Delete(p) => (None, strip(p, "a/")),
                FileOperation::Modify { modified, .. } => (None, strip(modified, "b/")),
                FileOperation::Rename { from, to } | FileOperation::Copy { from, to } => {
                    (Some(strip(from, "a/").to_string()), strip(to, "b/"))
                }
            };
            let (mut added, mut removed) = (0u32, 0u32);
            if let Some(text) = file.patch().as_text() {
                for hunk in text.hunks() {
                    for line in hunk.lines() {
                        match line {
                            diffy::Line::Insert(_) => added = added.saturating_add(1),
                            diffy::Line::Delete(_) => removed = removed.saturating_add(1),
                            diffy::Line::Context(_) => {}
                        }
                    }
                }
            }
            out.push(PatchedFile {
                path: path.to_string(),
                from,
                added,
                removed,
            });
        }
    }
    Ok(out)
}

/// The file patches of one chunk of a multi-file diff.
fn parse_chunk(chunk: &str) -> Result<Vec<diffy::patch_set::FilePatch<'_, str>>, String> {
    let options = if chunk.starts_with("diff --git ") {
        ParseOptions::gitdiff()
    } else {
        ParseOptions::unidiff()
    };
    PatchSet::parse(chunk, options)
        .map(|file| file.map_err(|e| format!("cannot parse the patch: {e}")))
        .collect()
}

fn apply(ws: &Workspace, patch: &str) -> Result<Vec<Change>, String> {
    let chunks = split_files(patch);
    let mut files = Vec::new();
    for chunk in &chunks {
        files.extend(parse_chunk(chunk)?);
    }
    if files.is_empty() {
        return Err(String::from("the patch holds no file changes"));
    }
    let mut stage = Stage {
        ws,
        paths: HashMap::new(),
        original: HashMap::new(),
        staged: HashMap::new(),
        order: Vec::new(),
    };
    let changes = files
        .iter()
        .map(|file| stage.apply_file(file))
        .collect::<Result<Vec<_>, _>>()?;
    stage.commit()?;
    Ok(changes)
}

/// What a file patch reads and writes: its source, its target, and
/// whether the source stays (a copy).
type Endpoints<'a> = (Option<&'a str>, Option<&'a str>, bool);

fn endpoints<'a>(operation: &'a FileOperation<'_, str>) -> Endpoints<'a> {
    match operation {
        FileOperation::Create(p) => (None, Some(strip(p, "b/")), false),
        FileOperation::Delete(p) => (Some(strip(p, "a/")), None, false),
        FileOperation::Modify { original, modified } => (
            Some(strip(original, "a/")),
            Some(strip(modified, "b/")),
            false,
        ),
        FileOperation::Rename { from, to } => {
            (Some(strip(from, "a/")), Some(strip(to, "b/")), false)
        }
        FileOperation::Copy { from, to } => (Some(strip(from, "a/")), Some(strip(to, "b/")), true),
    }
}

impl Stage<'_> {
    /// Applies one file patch to the staged files.
    fn apply_file(
        &mut self,
        file: &diffy::patch_set::FilePatch<'_, str>,
    ) -> Result<Change, String> {
        let (source, target, keep_source) = endpoints(file.operation());
        let Some(text) = file.patch().as_text() else {
            return Err(String::from("binary patches are not supported"));
        };
        let shown = target.or(source).unwrap_or("?");
        let base = match source {
            Some(src) => self
                .current(src)?
                .ok_or_else(|| format!("{src:?} does not exist"))?,
            None => String::new(),
        };
        if let Some(dst) = target
            && source != Some(dst)
            && self.current(dst)?.is_some()
        {
            return Err(format!("{dst:?} already exists"));
        }
        let new = diffy::apply(&base, text)
            .map_err(|e| format!("{shown}: {e} (its context lines do not match the file)"))?;
        self.stage_change((source, target, keep_source), new)
    }

    /// Stages the patched content `new` at the file patch's endpoints.
    fn stage_change(&mut self, endpoints: Endpoints<'_>, new: String) -> Result<Change, String> {
        let change = |letter, path: &str, from: Option<&str>| Change {
            letter,
            path: path.to_string(),
            from: from.map(str::to_string),
        };
        match endpoints {
            (Some(src), None, _) => {
                if !new.is_empty() {
                    return Err(format!(
                        "{src:?}: the deletion does not remove the whole file as it is"
                    ));
                }
                self.set(src, None)?;
                Ok(change('D', src, None))
            }
            (None, Some(dst), _) => {
                self.set(dst, Some(new))?;
                Ok(change('A', dst, None))
            }
            (Some(src), Some(dst), _) if src == dst => {
                self.set(dst, Some(new))?;
                Ok(change('M', dst, None))
            }
            (Some(src), Some(dst), keep_source) => {
                if !keep_source {
                    self.set(src, None)?;
                }
                self.set(dst, Some(new))?;
                Ok(change(if keep_source { 'C' } else { 'R' }, dst, Some(src)))
            }
            (None, None, _) => Err(String::from("a file patch names no file")),
        }
    }
}

/// The counts of an `@@ -a,b +c,d @@` header: (old lines, new lines).
fn hunk_counts(header: &str) -> Option<(usize, usize)> {
    let rest = header.strip_prefix("@@ -")?;
    let (old, rest) = rest.split_once(" +")?;
    let (new, _) = rest.split_once(" @@")?;
    let count = |range: &str| -> Option<usize> {
        match range.split_once(',') {
            Some((_, n)) => n.parse().ok(),
            None => range.parse::<usize>().ok().map(|_| 1),
        }
    };
    Some((count(old)?, count(new)?))
}

/// Splits a multi-file diff into one text per file, so that plain unified
/// diffs and `git diff` output (even mixed) parse alike. Hunk bodies are
/// followed by their line counts, so a removed line starting with `--` is
/// never taken for a header; blank lines inside a hunk (a context line whose
/// space was lost) become context lines.
fn split_files(patch: &str) -> Vec<String> {
    let mut chunks: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut has_header = false;
    let mut remaining: Option<(usize, usize)> = None;
    for line in patch.split_inclusive('\n') {
        if let Some((old, new)) = remaining.as_mut() {
            let body = line.trim_end_matches(['\n', '\r']);
            match body.chars().next() {
                None | Some(' ') => {
                    *old = old.saturating_sub(1);
                    *new = new.saturating_sub(1);
                    if body.is_empty() {
                        current.push(' ');
                    }
                }
                Some('-') => *old = old.saturating_sub(1),
                Some('+') => *new = new.saturating_sub(1),
                _ => {}
            }
            current.push_str(line);
            if *old == 0 && *new == 0 {
                remaining = None;
            }
            continue;
        }
        let starts_file =
            line.starts_with("diff --git ") || (line.starts_with("--- ") && has_header);
        if starts_file && !current.trim().is_empty() {
            chunks.push(std::mem::take(&mut current));
            has_header = false;
        }
        if line.starts_with("--- ") {
            has_header = true;
        }
        if line.starts_with("@@ ") {
            remaining = hunk_counts(line).filter(|&(o, n)| o > 0 || n > 0);
        }
        current.push_str(line);
    }
    if !current.trim().is_empty() {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_plain_and_git_diffs_by_file() {
        let patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- not a header\n+++ nor this\n\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n";
        let chunks = split_files(patch);
        assert_eq!(chunks.len(), 2, "{chunks:?}");
        assert!(chunks[0].ends_with("+++ nor this\n \n"), "{:?}", chunks[0]);
        assert!(chunks[1].starts_with("--- a/y\n"));
        assert_eq!(hunk_counts("@@ -3 +3,0 @@ fn x"), Some((1, 0)));
        assert_eq!(hunk_counts("@@ -0,0 +1,5 @@"), Some((0, 5)));
    }
}
