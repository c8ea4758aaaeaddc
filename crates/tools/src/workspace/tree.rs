//! `repo_tree`: the files and directories of the workspace, as an indented tree.

use std::fmt::Write;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Workspace, blocking};
use crate::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Input of `repo_tree`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RepoTreeInput {
    /// Directory to list, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// How many directory levels to descend (default 4).
    #[serde(default)]
    pub max_depth: Option<usize>,
    /// The most entries to list (default 500).
    #[serde(default)]
    pub max_entries: Option<usize>,
}

/// Lists the tree of the workspace (or a directory of it), honouring
/// `.gitignore`; directories end with `/`.
#[derive(Debug, Clone)]
pub(crate) struct RepoTree {
    ws: Workspace,
}

impl RepoTree {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

#[async_trait]
impl TypedTool for RepoTree {
    type Input = RepoTreeInput;

    fn name(&self) -> &str {
        "repo_tree"
    }

    fn description(&self) -> &str {
        "List the files and directories of the workspace as an indented tree (directories end \
         with '/'). Files ignored by .gitignore are left out. Use `path` to list a subdirectory \
         and `max_depth` to go deeper."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn run(&self, ctx: ToolContext, input: RepoTreeInput) -> Result<ToolResult, ToolError> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel.clone();
        let listing = blocking(move || {
            let rel = input.path.as_deref().unwrap_or(".");
            let base = ws.root().resolve(rel)?;
            if !base.is_dir() {
                return Err(format!("{rel:?} is not a directory"));
            }
            let max_depth = input.max_depth.unwrap_or(4).max(1);
            let max_entries = input.max_entries.unwrap_or(500).max(1);
            let mut out = String::new();
            let mut count = 0usize;
            let mut truncated = false;
            for entry in ws.walker(&base).max_depth(Some(max_depth)).build() {
                if cancel.is_cancelled() {
                    return Err(String::from("cancelled"));
                }
                let Ok(entry) = entry else { continue };
                if entry.depth() == 0 {
                    continue;
                }
                if count == max_entries {
                    truncated = true;
                    break;
                }
                count += 1;
                let name = entry.file_name().to_string_lossy();
                let indent = "  ".repeat(entry.depth() - 1);
                let suffix = match entry.file_type() {
                    Some(t) if t.is_dir() => "/",
                    Some(t) if t.is_symlink() => "@",
                    _ => "",
                };
                let _ = writeln!(out, "{indent}{name}{suffix}");
            }
            if count == 0 {
                out.push_str("(empty)\n");
            }
            if truncated {
                let _ = writeln!(
                    out,
                    "[listing stopped at {max_entries} entries; list a subdirectory to see more]"
                );
            }
            Ok(out)
        })
        .await;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled {
                tool: "repo_tree".into(),
                call_id: ctx.call_id,
            });
        }
        Ok(match listing {
            Ok(text) => ToolResult::text(text),
            Err(err) => ToolResult::error(err),
        })
    }
}
