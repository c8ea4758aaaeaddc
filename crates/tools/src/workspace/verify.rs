//! `verify`: runs the verify policy's commands and reports each one.

use std::fmt::Write;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::Workspace;
use super::git::porcelain;
use super::process::{self, Exit, Run};
use crate::artifacts::Kept;
use crate::{ArtifactName, ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Input of `verify` (none: the commands come from the verify policy).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct VerifyInput {}

/// Runs the [`VerifyPolicy`](crate::VerifyPolicy) commands in order from
/// the workspace root and reports each command's exit status and output.
/// With `require_clean`, verification also fails when the commands changed
/// the git working tree. The result's details list every command's outcome.
/// When the host keeps artifacts, each command's whole output is stored as
/// `verify-<call id>-<n>.log` and named under its status line.
#[derive(Debug, Clone)]
pub struct Verify {
    ws: Workspace,
}

impl Verify {
    /// The tool over `ws`.
    pub fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

#[async_trait]
impl TypedTool for Verify {
    type Input = VerifyInput;

    fn name(&self) -> &str {
        "verify"
    }

    fn description(&self) -> &str {
        "Run the project's verification commands (tests, checks) from the workspace root and \
         report each command's exit status and output. Call it after changing files."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Exec
    }

    async fn run(&self, ctx: ToolContext, _input: VerifyInput) -> Result<ToolResult, ToolError> {
        let policy = self.ws.verify_policy().clone();
        if policy.commands.is_empty() {
            return Ok(ToolResult::text("No verification commands are configured."));
        }
        let before = if policy.require_clean {
            Some(porcelain(&self.ws, &ctx.cancel).await)
        } else {
            None
        };
        let mut text = String::new();
        let mut reports = Vec::new();
        let mut failed = 0usize;
        let mut artifacts = Vec::new();
        for (index, command) in policy.commands.iter().enumerate() {
            let outcome = self.run_command(&ctx, index, command).await?;
            if !outcome.ok {
                failed += 1;
            }
            outcome.write_to(command, &mut text);
            reports.push(outcome.report(command));
            artifacts.extend(outcome.kept);
        }
        let dirty = match before {
            Some(before) => Some(self.tree_changed(before, &ctx, &mut text).await),
            None => None,
        };
        let all_ok = failed == 0 && dirty != Some(true);
        let details = serde_json::json!({
            "ok": all_ok,
            "commands": reports,
            "working_tree_changed": dirty,
        });
        let mut result = ToolResult::text(text).with_details(details);
        for kept in &artifacts {
            kept.record(&mut result);
        }
        Ok(if all_ok {
            result
        } else if failed > 0 {
            result.with_error(format!(
                "Verification failed: {failed} of {} commands failed.",
                policy.commands.len()
            ))
        } else {
            result.with_error("Verification failed: the working tree is not clean.")
        })
    }
}

/// How one verify command ended.
struct Outcome {
    ok: bool,
    status: String,
    exit_code: Option<i32>,
    output: String,
    /// Its whole output, when the host keeps artifacts.
    kept: Option<Kept>,
}

impl Verify {
    /// Runs the `index`th command (from 0) of the policy.
    async fn run_command(
        &self,
        ctx: &ToolContext,
        index: usize,
        command: &str,
    ) -> Result<Outcome, ToolError> {
        let limits = self.ws.command_limits();
        ctx.progress_text(format!("$ {command}\n"));
        let out = process::run(Run {
            program: "sh".as_ref(),
            args: &["-c", command],
            cwd: self.ws.root().path(),
            env: self.ws.command_env(),
            timeout: limits.max_timeout,
            output_cap: limits.output_cap,
            keep_full: ctx.artifacts().map(|_| self.ws.full_output_cap()),
            cancel: &ctx.cancel,
            progress: Some((&ctx.progress, ctx.call_id.clone())),
        })
        .await;
        let (ok, status, exit_code, output, full) = match out {
            Ok(out) if out.exit == Exit::Cancelled => {
                return Err(ToolError::Cancelled {
                    tool: "verify".into(),
                    call_id: ctx.call_id.clone(),
                });
            }
            Ok(mut out) => (
                out.success(),
                out.status_line(limits.max_timeout),
                match out.exit {
                    Exit::Code(c) => Some(c),
                    _ => None,
                },
                out.output_with_note(),
                out.full.take(),
            ),
            Err(e) => (
                false,
                format!("cannot start: {e}"),
                None,
                String::new(),
                None,
            ),
        };
        let name = ArtifactName::for_call("verify", &ctx.call_id, Some(index + 1), "log");
        let kept = Kept::full_output(ctx, name, full).await;
        Ok(Outcome {
            ok,
            status,
            exit_code,
            output,
            kept,
        })
    }

    /// Whether the commands changed the working tree since `before`, said
    /// in `text` when they did (or when it cannot be told).
    async fn tree_changed(
        &self,
        before: Result<String, String>,
        ctx: &ToolContext,
        text: &mut String,
    ) -> bool {
        let after = porcelain(&self.ws, &ctx.cancel).await;
        match (before, after) {
            (Ok(b), Ok(a)) if a != b => {
                let _ = writeln!(text, "[FAILED: the commands changed the working tree]\n{a}");
                true
            }
            (Ok(_), Ok(_)) => false,
            (Err(e), _) | (_, Err(e)) => {
                let _ = writeln!(text, "[FAILED: cannot check the working tree: {e}]");
                true
            }
        }
    }
}

impl Outcome {
    /// Adds the command, its status and its output to the result's text.
    fn write_to(&self, command: &str, text: &mut String) {
        let mark = if self.ok { "passed" } else { "FAILED" };
        let _ = writeln!(text, "$ {command}\n[{mark}: {}]", self.status);
        if let Some(kept) = &self.kept {
            let _ = writeln!(text, "{kept}");
        }
        if !self.output.is_empty() {
            text.push_str(&self.output);
            if !self.output.ends_with('\n') {
                text.push('\n');
            }
        }
    }

    /// The command's entry in the result's details.
    fn report(&self, command: &str) -> serde_json::Value {
        let mut report = serde_json::json!({
            "command": command,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "status": self.status,
            "output": self.output,
        });
        if let Some(kept) = &self.kept {
            report["full_output"] = kept.reference().into();
        }
        report
    }
}
