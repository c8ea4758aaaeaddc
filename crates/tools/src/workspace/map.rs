//! `repo_map`: the workspace's source files with their top-level definitions,
//! a cheap outline that tells the model where things live.

use std::fmt::Write;

use async_trait::async_trait;
use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Workspace, blocking};
use crate::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Longest definition line shown, in bytes.
const MAX_DEF: usize = 120;
/// Source files larger than this are listed without definitions.
const MAX_SOURCE_BYTES: u64 = 1024 * 1024;

/// Input of `repo_map`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RepoMapInput {
    /// Directory to map, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// The most files to list (default 200).
    #[serde(default)]
    pub max_files: Option<usize>,
}

/// Lists files with the top-level definitions (functions, types, classes,
/// modules) of the languages it knows: Rust, Python, JavaScript/TypeScript,
/// Go and Ruby.
#[derive(Debug, Clone)]
pub(crate) struct RepoMap {
    ws: Workspace,
}

impl RepoMap {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

/// The definition pattern for a file extension. Only unindented lines are
/// tried, which is what makes a definition top-level.
fn pattern(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "rs" => {
            r#"^(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|extern(?:\s+"[^"]*")?)\s+)*(?:fn|struct|enum|trait|type|mod|static|const|union|impl|macro_rules!)\b"#
        }
        "py" | "pyi" => r"^(?:async\s+)?(?:def|class)\s+\w+",
        "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts" => {
            r"^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|interface|type|enum|const|let|var|namespace)\s+[\w$]+"
        }
        "go" => r"^(?:func|type)\b",
        "rb" => r"^(?:class|module|def)\s+",
        _ => return None,
    })
}

/// The top-level definitions of `text` for `re`, each cut to one short line.
fn definitions(text: &str, re: &Regex) -> Vec<String> {
    text.lines()
        .filter(|line| !line.starts_with([' ', '\t']) && re.is_match(line))
        .map(|line| {
            let line = line.trim_end();
            let line = line.strip_suffix('{').unwrap_or(line).trim_end();
            let cut = crate::output::cut_text(line, MAX_DEF, 1);
            if cut.len() < line.len() {
                format!("{cut}…")
            } else {
                cut.to_string()
            }
        })
        .collect()
}

#[async_trait]
impl TypedTool for RepoMap {
    type Input = RepoMapInput;

    fn name(&self) -> &str {
        "repo_map"
    }

    fn description(&self) -> &str {
        "Outline the workspace: every file (honouring .gitignore) with the top-level \
         definitions of Rust, Python, JavaScript/TypeScript, Go and Ruby sources (functions, \
         types, classes, modules), indented under the file. Use it to find where things live \
         before reading files."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn run(&self, ctx: ToolContext, input: RepoMapInput) -> Result<ToolResult, ToolError> {
        let ws = self.ws.clone();
        let cancel = ctx.cancel.clone();
        let map = blocking(move || {
            let rel = input.path.as_deref().unwrap_or(".");
            let base = ws.root().resolve(rel)?;
            if !base.is_dir() {
                return Err(format!("{rel:?} is not a directory"));
            }
            let max_files = input.max_files.unwrap_or(200).max(1);
            let mut compiled: Vec<(&'static str, Regex)> = Vec::new();
            let mut out = String::new();
            let mut files = 0usize;
            let mut truncated = false;
            for entry in ws.walker(&base).build() {
                if cancel.is_cancelled() {
                    return Err(String::from("cancelled"));
                }
                let Ok(entry) = entry else { continue };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    continue;
                }
                if files == max_files {
                    truncated = true;
                    break;
                }
                files += 1;
                let _ = writeln!(out, "{}", ws.root().display(entry.path()));
                let ext = entry
                    .path()
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("");
                let Some(source) = pattern(ext) else { continue };
                if entry.metadata().map(|m| m.len()).unwrap_or(u64::MAX) > MAX_SOURCE_BYTES {
                    continue;
                }
                let re = match compiled.iter().find(|(p, _)| *p == source) {
                    Some((_, re)) => re.clone(),
                    None => match Regex::new(source) {
                        Ok(re) => {
                            compiled.push((source, re.clone()));
                            re
                        }
                        Err(_) => continue,
                    },
                };
                let Ok(bytes) = std::fs::read(entry.path()) else {
                    continue;
                };
                for def in definitions(&String::from_utf8_lossy(&bytes), &re) {
                    let _ = writeln!(out, "  {def}");
                }
            }
            if files == 0 {
                out.push_str("(no files)\n");
            }
            if truncated {
                let _ = writeln!(
                    out,
                    "[stopped at {max_files} files; map a subdirectory to see more]"
                );
            }
            Ok(out)
        })
        .await;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled {
                tool: "repo_map".into(),
                call_id: ctx.call_id,
            });
        }
        Ok(match map {
            Ok(text) => ToolResult::text(text),
            Err(err) => ToolResult::error(err),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_definitions_are_top_level_only() {
        let re = Regex::new(pattern("rs").unwrap()).unwrap();
        let src = "use std::fmt;\n\npub struct A {\n    x: u8,\n}\n\nimpl A {\n    pub fn inner(&self) {}\n}\n\npub(crate) async fn run() -> u8 {\n    1\n}\nconst N: usize = 3;\n";
        assert_eq!(
            definitions(src, &re),
            [
                "pub struct A",
                "impl A",
                "pub(crate) async fn run() -> u8",
                "const N: usize = 3;"
            ]
        );
    }

    #[test]
    fn python_and_typescript() {
        let py = Regex::new(pattern("py").unwrap()).unwrap();
        assert_eq!(
            definitions(
                "import os\nclass A:\n    def m(self): pass\ndef f(x):\n    pass\n",
                &py
            ),
            ["class A:", "def f(x):"]
        );
        let ts = Regex::new(pattern("ts").unwrap()).unwrap();
        assert_eq!(
            definitions(
                "import x from 'y';\nexport async function go(a: number) {\n}\nexport interface Thing {\n}\nconst k = 1;\n",
                &ts
            ),
            [
                "export async function go(a: number)",
                "export interface Thing",
                "const k = 1;"
            ]
        );
    }
}
