//! What a caller gives to create a session, and the defaults of the spec:
//! approvals for `write` and `exec` tools, auto-verify with `make test`
//! unless the workspace's AGENTS.md names other commands, patch review off.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roundtable_tools::{ApprovalPolicy, PatchReviewPolicy, VerifyPolicy};
use serde::{Deserialize, Serialize};

use crate::error::SessionError;
use crate::limits::SessionLimits;
use crate::records::SessionCreated;

/// A request to create a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateSession {
    /// The workspace (an existing directory; it is canonicalised).
    pub workspace_path: PathBuf,
    /// The session's own instructions, placed first in the system prompt.
    pub system_prompt: Option<String>,
    /// Whether a message starts a turn unless it says otherwise (default
    /// true).
    pub auto_run: Option<bool>,
    /// Which tool calls wait for a human (default: `write` and `exec`).
    pub approval_policy: Option<ApprovalPolicy>,
    /// What runs after the workspace changed (default: auto-verify with the
    /// AGENTS.md commands, or `make test`).
    pub verify_policy: Option<VerifyPolicy>,
    /// Whether patches are reviewed before they apply (default off).
    pub patch_review: Option<PatchReviewPolicy>,
    /// The user the session belongs to.
    pub owner: Option<Arc<str>>,
    /// The mode the session starts in (default: agent).
    pub mode: Option<crate::records::SessionMode>,
    /// Limits of the session's turns over the engine's (round cap, budget);
    /// stored with the session.
    pub limits: Option<SessionLimits>,
}

impl CreateSession {
    /// A request for a session over `workspace` with every default.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace_path: workspace.into(),
            ..Self::default()
        }
    }

    /// The record the session starts with: the workspace canonicalised and
    /// every default filled in.
    pub(crate) fn resolve(&self) -> Result<SessionCreated, SessionError> {
        let shown = self.workspace_path.display().to_string();
        if self.workspace_path.as_os_str().is_empty() {
            return Err(SessionError::InvalidWorkspace {
                path: shown,
                reason: "no workspace path was given".into(),
            });
        }
        if !self.workspace_path.is_absolute() {
            return Err(SessionError::InvalidWorkspace {
                path: shown,
                reason: "the workspace path must be absolute".into(),
            });
        }
        let workspace =
            self.workspace_path
                .canonicalize()
                .map_err(|e| SessionError::InvalidWorkspace {
                    path: shown.clone(),
                    reason: format!("it cannot be opened: {e}"),
                })?;
        if !workspace.is_dir() {
            return Err(SessionError::InvalidWorkspace {
                path: shown,
                reason: "it is not a directory".into(),
            });
        }
        let limits = self.limits.unwrap_or_default();
        limits.check()?;
        let verify_policy = match &self.verify_policy {
            Some(policy) => policy.clone(),
            None => {
                let mut policy = VerifyPolicy::default();
                if let Some(commands) = agents_md_verify_commands(&workspace) {
                    policy.commands = commands;
                }
                policy
            }
        };
        Ok(SessionCreated {
            workspace_path: workspace,
            system_prompt: self.system_prompt.clone().filter(|p| !p.trim().is_empty()),
            auto_run: self.auto_run.unwrap_or(true),
            approval_policy: self.approval_policy.clone().unwrap_or_default(),
            verify_policy,
            patch_review: self.patch_review.unwrap_or_default(),
            owner: self.owner.clone(),
            limits,
        })
    }
}

/// The verification commands the workspace's `AGENTS.md` names, if it
/// names any: the lines of the first fenced code block under a heading
/// called `Verify`, `Verification`, `Tests` or `Testing` (any level, any
/// case), blank lines and `#` comments left out.
///
/// ````markdown
/// ## Verify
///
/// ```sh
/// cargo test
/// cargo clippy -- -D warnings
/// ```
/// ````
pub fn agents_md_verify_commands(workspace: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(workspace.join("AGENTS.md")).ok()?;
    verify_commands_in(&text)
}

fn verify_commands_in(markdown: &str) -> Option<Vec<String>> {
    let mut in_section = false;
    let mut in_block = false;
    let mut commands = Vec::new();
    for line in markdown.lines() {
        let trimmed = line.trim();
        if in_block {
            if trimmed.starts_with("```") {
                return (!commands.is_empty()).then_some(commands);
            }
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                commands.push(trimmed.to_string());
            }
            continue;
        }
        if let Some(heading) = trimmed.strip_prefix('#') {
            let title = heading.trim_start_matches('#').trim().to_ascii_lowercase();
            in_section = matches!(
                title.as_str(),
                "verify" | "verification" | "tests" | "testing"
            );
        } else if in_section && trimmed.starts_with("```") {
            in_block = true;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_commands_come_from_the_first_block_of_a_verify_section() {
        let md = "# Project\n\n```sh\nnot this\n```\n\n## Testing\n\nRun:\n\n```sh\n# the unit tests\ncargo test\n\ncargo clippy -- -D warnings\n```\n\n```\nnot this either\n```\n";
        assert_eq!(
            verify_commands_in(md),
            Some(vec![
                "cargo test".to_string(),
                "cargo clippy -- -D warnings".to_string()
            ])
        );
        assert_eq!(verify_commands_in("## Verify\n\nnothing to run\n"), None);
        assert_eq!(verify_commands_in("## Verify\n\n```\n```\n"), None);
        assert_eq!(verify_commands_in("## Setup\n\n```\nmake\n```\n"), None);
        // An unterminated block names nothing.
        assert_eq!(verify_commands_in("## Verify\n```\nmake test\n"), None);
    }

    #[test]
    fn a_workspace_must_exist_and_be_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        for bad in [
            PathBuf::new(),
            PathBuf::from("relative/path"),
            dir.path().join("missing"),
            file,
        ] {
            let err = CreateSession::new(&bad).resolve().unwrap_err();
            assert!(
                matches!(err, SessionError::InvalidWorkspace { .. }),
                "{bad:?}: {err}"
            );
        }
        let created = CreateSession::new(dir.path()).resolve().unwrap();
        assert_eq!(created.workspace_path, dir.path().canonicalize().unwrap());
        assert!(created.auto_run);
        assert_eq!(created.verify_policy.commands, ["make test"]);
        assert_eq!(created.patch_review, PatchReviewPolicy::Off);
        std::fs::write(
            dir.path().join("AGENTS.md"),
            "## Verify\n```\ncargo test\n```\n",
        )
        .unwrap();
        let created = CreateSession::new(dir.path()).resolve().unwrap();
        assert_eq!(created.verify_policy.commands, ["cargo test"]);
    }
}
