//! `shell`: runs a command from the workspace root.

use std::time::Duration;

use async_trait::async_trait;
use roundtable_providers::UserBlock;
use schemars::JsonSchema;
use serde::Deserialize;

use super::Workspace;
use super::process::{self, Exit, Run};
use crate::artifacts::Kept;
use crate::{ArtifactName, ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Input of `shell`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ShellInput {
    /// The command line, run by `sh -c` from the workspace root.
    pub command: String,
    /// Seconds before the command is killed (default 120, at most 600; 0
    /// means the default).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Runs a shell command from the workspace root, in its own process group:
/// on timeout or cancellation the command and all its children are killed.
/// Output (stdout and stderr together) is capped, keeping the end. When the
/// host keeps artifacts, the whole output is stored as
/// `shell-<call id>.log` and the result names it first
/// (`[full output: <reference>]`).
#[derive(Debug, Clone)]
pub(crate) struct Shell {
    ws: Workspace,
}

impl Shell {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

#[async_trait]
impl TypedTool for Shell {
    type Input = ShellInput;

    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> &str {
        "Run a shell command (sh -c) from the workspace root and return its exit status and \
         output (stdout and stderr together; long output keeps the end). The command is killed \
         with its children after `timeout_secs` (default 120)."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Exec
    }

    async fn run(&self, ctx: ToolContext, input: ShellInput) -> Result<ToolResult, ToolError> {
        let limits = self.ws.command_limits();
        let timeout = input
            .timeout_secs
            .filter(|&secs| secs > 0)
            .map(Duration::from_secs)
            .unwrap_or(limits.default_timeout)
            .min(limits.max_timeout);
        let out = process::run(Run {
            program: "sh".as_ref(),
            args: &["-c", &input.command],
            cwd: self.ws.root().path(),
            env: self.ws.command_env(),
            timeout,
            output_cap: limits.output_cap,
            keep_full: ctx.artifacts().map(|_| self.ws.full_output_cap()),
            cancel: &ctx.cancel,
            progress: Some((&ctx.progress, ctx.call_id.clone())),
        })
        .await;
        let mut out = match out {
            Ok(out) => out,
            Err(e) => return Ok(ToolResult::error(format!("cannot start the command: {e}"))),
        };
        if out.exit == Exit::Cancelled {
            return Err(ToolError::Cancelled {
                tool: "shell".into(),
                call_id: ctx.call_id,
            });
        }
        let name = ArtifactName::for_call("shell", &ctx.call_id, None, "log");
        let kept = Kept::full_output(&ctx, name, out.full.take()).await;
        let status = out.status_line(timeout);
        let mut details = serde_json::json!({
            "command": input.command,
            "exit_code": match out.exit { Exit::Code(c) => Some(c), _ => None },
            "timed_out": out.exit == Exit::TimedOut,
            "output_bytes": out.total_bytes,
        });
        let text = out.output_with_note();
        let text = if text.is_empty() {
            String::from("(no output)")
        } else {
            text
        };
        let mut result = ToolResult::text(text);
        if let Some(kept) = &kept {
            // First, so that no cut of the output hides it.
            result.parts.insert(0, UserBlock::text(kept.to_string()));
            kept.record(&mut result);
            details["full_output"] = kept.reference().into();
        }
        let result = result.with_details(details);
        Ok(if out.success() {
            result
        } else {
            result.with_error(format!("Command {status}"))
        })
    }
}
