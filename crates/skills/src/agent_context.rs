//! The agent-context layer: persona and operating rules every agent reads.
//!
//! `agent-context/*.md` (rules, security, soul, ...) are joined in
//! alphabetical order into one text. A sandboxed agent gets it as
//! `AGENTS.md` in its workspace; a chat agent gets it in its system prompt.
//! Both use the same join, so both read the same text.

use std::fs;
use std::path::{Path, PathBuf};

use roundtable_tools::workspace::WorkspaceRoot;

use crate::error::SkillsError;

/// What goes between two agent-context files.
pub const AGENT_CONTEXT_SEPARATOR: &str = "\n\n---\n\n";

/// The file name a workspace's agent context is written to.
pub const AGENTS_FILE: &str = "AGENTS.md";

/// Joins the `*.md` files directly in `dir`, in alphabetical (byte) order of
/// their names, with [`AGENT_CONTEXT_SEPARATOR`].
///
/// Each file is trimmed and empty files are skipped. A missing directory
/// gives an empty string (no context layer is configured); an unreadable
/// file is an error, since silently dropping a rules file would change the
/// agent's behaviour.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("soul.md"), "Be kind.\n").unwrap();
/// std::fs::write(dir.path().join("rules.md"), "Ask first.\n").unwrap();
/// let text = roundtable_skills::load_agent_context(dir.path()).unwrap();
/// assert_eq!(text, "Ask first.\n\n---\n\nBe kind.");
/// ```
pub fn load_agent_context(dir: impl AsRef<Path>) -> Result<String, SkillsError> {
    let dir = dir.as_ref();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(err) => return Err(SkillsError::io("read directory", dir, err)),
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|err| SkillsError::io("read directory", dir, err))?;
        let path = entry.path();
        if path.extension().is_some_and(|ext| ext == "md") && path.is_file() {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    let mut parts = Vec::with_capacity(files.len());
    for path in files {
        let text = fs::read_to_string(&path).map_err(|err| SkillsError::io("read", &path, err))?;
        let text = text.trim();
        if !text.is_empty() {
            parts.push(text.to_owned());
        }
    }
    Ok(parts.join(AGENT_CONTEXT_SEPARATOR))
}

/// Writes the agent context of `context_dir` to `<workspace>/AGENTS.md`.
///
/// Returns the written path, or `None` when there is no context to write
/// (then no file is created). Write it once, before the agent starts: an
/// agent reads it at session start and never again.
///
/// The file is replaced, never written through: an `AGENTS.md` that is a
/// symbolic link (a repository can commit one, pointing anywhere) becomes
/// a plain file, and what it pointed to is left alone. An existing
/// `AGENTS.md` keeps its permissions.
pub fn write_agents_md(
    context_dir: impl AsRef<Path>,
    workspace: impl AsRef<Path>,
) -> Result<Option<PathBuf>, SkillsError> {
    let text = load_agent_context(context_dir)?;
    if text.is_empty() {
        return Ok(None);
    }
    let workspace = workspace.as_ref();
    let path = workspace.join(AGENTS_FILE);
    WorkspaceRoot::new(workspace)
        .map_err(|err| SkillsError::io("open", workspace, err))?
        .replace_file(AGENTS_FILE, text.as_bytes())
        .map_err(|err| SkillsError::io("write", &path, err))?;
    Ok(Some(path))
}
