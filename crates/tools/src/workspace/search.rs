//! `search`: a regex over the workspace's files, honouring `.gitignore`
//! (ripgrep's own crates do the walking and matching).

use std::fmt::Write;

use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{Workspace, blocking};
use crate::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Longest line shown in a match, in bytes.
const MAX_LINE: usize = 300;

/// Input of `search`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct WorkspaceSearchInput {
    /// Regular expression (Rust regex syntax) to look for.
    pub pattern: String,
    /// File or directory to search, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files whose path matches this glob, e.g. `*.rs` or `src/**/*.ts`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match without regard to case (default false).
    #[serde(default)]
    pub ignore_case: Option<bool>,
    /// The most matching lines to return (default 100).
    #[serde(default)]
    pub max_results: Option<usize>,
}

/// Searches file contents with a regex; prints `path:line:text` per match.
#[derive(Debug, Clone)]
pub(crate) struct Search {
    ws: Workspace,
}

impl Search {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

#[async_trait]
impl TypedTool for Search {
    type Input = WorkspaceSearchInput;

    fn name(&self) -> &str {
        "search"
    }

    fn description(&self) -> &str {
        "Search the workspace's files for a regular expression (like ripgrep). Files ignored by \
         .gitignore and binary files are skipped. Returns `path:line:text` for each matching \
         line. Narrow with `path` and `glob`."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn run(
        &self,
        ctx: ToolContext,
        input: WorkspaceSearchInput,
    ) -> Result<ToolResult, ToolError> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel.clone();
        let found = blocking(move || search(&ws, &input, &cancel)).await;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled {
                tool: "search".into(),
                call_id: ctx.call_id,
            });
        }
        Ok(match found {
            Ok(text) => ToolResult::text(text),
            Err(err) => ToolResult::error(err),
        })
    }
}

/// Searches the workspace as `input` asks: the matching lines as
/// `path:line:text`, or what is wrong with the input.
fn search(
    ws: &Workspace,
    input: &WorkspaceSearchInput,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let rel = input.path.as_deref().unwrap_or(".");
    let base = ws.root().resolve(rel)?;
    if !base.exists() {
        return Err(format!("{rel:?} does not exist"));
    }
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(input.ignore_case.unwrap_or(false))
        .build(&input.pattern)
        .map_err(|e| format!("invalid pattern: {e}"))?;
    let mut walker = ws.walker(&base);
    if let Some(glob) = &input.glob {
        let overrides = ignore::overrides::OverrideBuilder::new(ws.root().path())
            .add(glob)
            .and_then(|b| b.build())
            .map_err(|e| format!("invalid glob {glob:?}: {e}"))?;
        walker.overrides(overrides);
    }
    let max = input.max_results.unwrap_or(100).max(1);
    let (mut out, count, more) = matching_lines(ws, walker, &matcher, max, cancel)?;
    if count == 0 {
        return Ok(String::from("No matches."));
    }
    if more {
        let _ = writeln!(
            out,
            "[stopped at {max} matches; narrow the search with path or glob]"
        );
    }
    Ok(out)
}

/// Up to `max` lines `matcher` matches in the files `walker` finds: the
/// lines, how many, and whether there were more.
fn matching_lines(
    ws: &Workspace,
    walker: ignore::WalkBuilder,
    matcher: &RegexMatcher,
    max: usize,
    cancel: &CancellationToken,
) -> Result<(String, usize, bool), String> {
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut out = String::new();
    let mut count = 0usize;
    let mut more = false;
    for entry in walker.build() {
        if cancel.is_cancelled() {
            return Err(String::from("cancelled"));
        }
        let Ok(entry) = entry else { continue };
        // Symlinks are not followed: their targets may lie outside.
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let shown = ws.root().display(entry.path());
        // A file that cannot be read is skipped, as ripgrep does.
        let _unreadable = searcher.search_path(
            matcher,
            entry.path(),
            UTF8(|line_number, line| {
                if count == max {
                    more = true;
                    return Ok(false);
                }
                count += 1;
                let line = line.trim_end_matches(['\n', '\r']);
                let line = crate::output::cut_text(line, MAX_LINE, 1);
                let _ = writeln!(out, "{shown}:{line_number}:{line}");
                Ok(true)
            }),
        );
        if more {
            break;
        }
    }
    Ok((out, count, more))
}
