//! What a tool does to the world, which decides approvals and scheduling.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kind of effect a tool has.
///
/// Approval policies gate tools by kind (by default writes and commands need a
/// human's approval), and a turn loop may run read tools side by side while a
/// write or exec tool runs alone.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// Reads local state (files, git status) and changes nothing.
    Read,
    /// Changes files in the workspace.
    Write,
    /// Runs commands, whose effects are unbounded.
    Exec,
    /// Talks to a remote service.
    Network,
}

impl ToolKind {
    /// All kinds, in declaration order.
    pub const ALL: [ToolKind; 4] = [Self::Read, Self::Write, Self::Exec, Self::Network];

    /// The wire name: `read`, `write`, `exec` or `network`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Exec => "exec",
            Self::Network => "network",
        }
    }

    /// True when calls of this kind may run concurrently with each other
    /// (they change nothing local); write and exec tools should run alone.
    pub fn is_shareable(self) -> bool {
        matches!(self, Self::Read | Self::Network)
    }
}

impl fmt::Display for ToolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_as_lowercase_names() {
        for kind in ToolKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            let back: ToolKind = serde_json::from_str(&json).unwrap();
            assert_eq!(back, kind);
        }
        assert!(ToolKind::Read.is_shareable());
        assert!(!ToolKind::Exec.is_shareable());
    }
}
