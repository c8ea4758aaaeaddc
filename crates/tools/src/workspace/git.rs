//! `git_status`: the branch and the changed files of the workspace.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::Workspace;
use super::process::{self, Run};
use crate::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Input of `git_status` (none).
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct GitStatusInput {}

/// Shows `git status` of the workspace: the branch and the changed,
/// staged and untracked files.
#[derive(Debug, Clone)]
pub(crate) struct GitStatus {
    ws: Workspace,
}

impl GitStatus {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

/// Options for every git this toolset runs. The repository's own
/// configuration can name commands git runs on a plain `status`: a
/// file-system monitor (`core.fsmonitor`) and hooks. A read-only tool must
/// not run them, whoever wrote that configuration (a cloned repository,
/// a command run earlier), so both are switched off; `-c` options reach the
/// git of every submodule too. `--no-optional-locks` keeps `status` from
/// writing the index, as git advises for background readers.
///
/// The system configuration (`GIT_CONFIG_NOSYSTEM`) stays: the host's
/// administrator writes it, and it may hold the `safe.directory` entries
/// without which git refuses the workspace. A clean filter that the
/// repository's configuration names can still run when git re-reads a
/// changed file; no tool can write that configuration.
const SAFE_GIT: [&str; 5] = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "--no-optional-locks",
];

/// `git status --porcelain` of the workspace, or why it failed.
pub(crate) async fn porcelain(
    ws: &Workspace,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<String, String> {
    let mut args = SAFE_GIT.to_vec();
    args.extend([
        "status",
        "--porcelain=v1",
        "--branch",
        "--untracked-files=all",
    ]);
    let out = process::run(Run {
        program: "git".as_ref(),
        args: &args,
        cwd: ws.root().path(),
        env: ws.command_env(),
        timeout: Duration::from_secs(30),
        output_cap: ws.command_limits().output_cap,
        keep_full: None,
        cancel,
        progress: None,
    })
    .await
    .map_err(|e| format!("cannot run git: {e}"))?;
    if out.success() {
        Ok(out.output)
    } else {
        Err(format!(
            "git status failed ({}): {}",
            out.status_line(Duration::from_secs(30)),
            out.output.trim()
        ))
    }
}

#[async_trait]
impl TypedTool for GitStatus {
    type Input = GitStatusInput;

    fn name(&self) -> &str {
        "git_status"
    }

    fn description(&self) -> &str {
        "Show the git status of the workspace: the current branch (`## branch...upstream`) and \
         one line per changed file (`XY path`: M modified, A added, D deleted, ?? untracked)."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn run(&self, ctx: ToolContext, _input: GitStatusInput) -> Result<ToolResult, ToolError> {
        let status = porcelain(&self.ws, &ctx.cancel).await;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled {
                tool: "git_status".into(),
                call_id: ctx.call_id,
            });
        }
        Ok(match status {
            Ok(text) => {
                let clean = text.lines().all(|l| l.starts_with("##"));
                if clean {
                    ToolResult::text(format!("{text}(working tree clean)"))
                } else {
                    ToolResult::text(text)
                }
            }
            Err(err) => ToolResult::error(err),
        })
    }
}
