//! Policies a host applies around tool calls: approvals, verification, patch review.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{ToolDefinition, ToolKind};

/// Which tool calls need a human's approval before they run.
///
/// A call needs approval when its tool's kind is in `require_for_kinds`, its
/// name is in `require_for_tools`, or its definition sets
/// `requires_approval`. The [`ToolRegistry`](crate::ToolRegistry) refuses to
/// run such a call through [`invoke`](crate::ToolRegistry::invoke); the turn
/// loop waits for the approval and then calls
/// [`invoke_approved`](crate::ToolRegistry::invoke_approved).
///
/// The default gates writes and commands (`write`, `exec`).
///
/// ```
/// use roundtable_tools::{ApprovalPolicy, ToolDefinition, ToolKind};
///
/// let policy = ApprovalPolicy::default();
/// let shell = ToolDefinition::new("shell", "Runs a command.", serde_json::json!({"type": "object"}), ToolKind::Exec);
/// let read = ToolDefinition::new("read_file", "Reads a file.", serde_json::json!({"type": "object"}), ToolKind::Read);
/// assert!(policy.requires_approval(&shell));
/// assert!(!policy.requires_approval(&read));
/// assert!(ApprovalPolicy::none().with_tool("read_file").requires_approval(&read));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ApprovalPolicy {
    /// Kinds whose every call needs approval.
    pub require_for_kinds: Vec<ToolKind>,
    /// Tool names whose every call needs approval.
    pub require_for_tools: Vec<Arc<str>>,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        Self {
            require_for_kinds: vec![ToolKind::Write, ToolKind::Exec],
            require_for_tools: Vec::new(),
        }
    }
}

impl ApprovalPolicy {
    /// A policy that gates nothing (tools that force approval still need it).
    pub fn none() -> Self {
        Self {
            require_for_kinds: Vec::new(),
            require_for_tools: Vec::new(),
        }
    }

    /// Also gates every tool of `kind`.
    pub fn with_kind(mut self, kind: ToolKind) -> Self {
        if !self.require_for_kinds.contains(&kind) {
            self.require_for_kinds.push(kind);
        }
        self
    }

    /// Also gates the tool named `name`.
    pub fn with_tool(mut self, name: impl Into<Arc<str>>) -> Self {
        let name = name.into();
        if !self.require_for_tools.contains(&name) {
            self.require_for_tools.push(name);
        }
        self
    }

    /// Does a call of this tool need approval before it runs?
    pub fn requires_approval(&self, definition: &ToolDefinition) -> bool {
        definition.requires_approval
            || self.require_for_kinds.contains(&definition.kind)
            || self
                .require_for_tools
                .iter()
                .any(|t| **t == *definition.name())
    }
}

/// What to run to check the workspace after it changed.
///
/// The default runs `make test` automatically after a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct VerifyPolicy {
    /// Run the commands automatically when the workspace changed.
    pub auto_verify: bool,
    /// Shell commands, run in order from the workspace root.
    pub commands: Vec<String>,
    /// Also fail verification when the commands change the git working tree
    /// (a formatter rewriting files, generated files out of date).
    pub require_clean: bool,
}

impl Default for VerifyPolicy {
    fn default() -> Self {
        Self {
            auto_verify: true,
            commands: vec![String::from("make test")],
            require_clean: false,
        }
    }
}

/// Whether a patch is shown for review before it is applied.
///
/// Off by default.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PatchReviewPolicy {
    /// Patches apply without review.
    #[default]
    Off,
    /// A patch preview is requested from a human before it applies.
    Request,
    /// A patch preview is reviewed automatically (by a reviewer model or hook).
    Auto,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, kind: ToolKind) -> ToolDefinition {
        ToolDefinition::new(name, "", serde_json::json!({"type": "object"}), kind)
    }

    #[test]
    fn approval_decisions() {
        let default = ApprovalPolicy::default();
        assert!(default.requires_approval(&def("apply_patch", ToolKind::Write)));
        assert!(default.requires_approval(&def("shell", ToolKind::Exec)));
        assert!(!default.requires_approval(&def("read_file", ToolKind::Read)));
        assert!(!default.requires_approval(&def("github_get_issue", ToolKind::Network)));

        let none = ApprovalPolicy::none();
        assert!(!none.requires_approval(&def("shell", ToolKind::Exec)));
        assert!(none.requires_approval(&def("x", ToolKind::Read).with_requires_approval(true)));

        let by_name = ApprovalPolicy::none()
            .with_tool("search")
            .with_kind(ToolKind::Network);
        assert!(by_name.requires_approval(&def("search", ToolKind::Read)));
        assert!(!by_name.requires_approval(&def("repo_tree", ToolKind::Read)));
        assert!(by_name.requires_approval(&def("github_get_issue", ToolKind::Network)));
    }

    #[test]
    fn defaults_and_wire_shape() {
        let verify = VerifyPolicy::default();
        assert!(verify.auto_verify);
        assert_eq!(verify.commands, vec!["make test".to_string()]);
        assert!(!verify.require_clean);
        assert_eq!(PatchReviewPolicy::default(), PatchReviewPolicy::Off);
        assert_eq!(
            serde_json::to_string(&PatchReviewPolicy::Request).unwrap(),
            "\"request\""
        );

        let policy: ApprovalPolicy =
            serde_json::from_str(r#"{"require_for_kinds":["network"]}"#).unwrap();
        assert_eq!(policy.require_for_kinds, vec![ToolKind::Network]);
        assert!(policy.require_for_tools.is_empty());
    }
}
