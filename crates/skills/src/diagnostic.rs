//! What loading reports instead of failing.

use std::path::PathBuf;

use serde::Serialize;

/// What happened to the file a diagnostic is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiagnosticKind {
    /// The skill was loaded, but something about it is off (a name that
    /// breaks the format rules or differs from its directory, an over-long
    /// description, a badly typed informational field), or a search-level
    /// finding (a missing root, an unreadable ignore file or pattern).
    Warning,
    /// The skill was not loaded: a missing name or description, a name
    /// refused as unsafe, unparseable frontmatter, an unreadable file, or a
    /// name already taken.
    Dropped,
}

/// Two skills claimed the same name; the first one loaded wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Collision {
    /// The contested name.
    pub name: String,
    /// The SKILL.md that kept the name.
    pub kept: PathBuf,
}

/// One finding about one file, produced while loading skills.
///
/// Serialises as one flat JSON object, e.g.
/// `{"path":"skills/x/SKILL.md","kind":"dropped","message":"description is required"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SkillDiagnostic {
    /// The file (usually a SKILL.md) or directory the finding is about.
    pub path: PathBuf,
    /// Whether the skill was still loaded.
    pub kind: DiagnosticKind,
    /// A human-readable explanation.
    pub message: String,
    /// Set when the skill was dropped because its name was already taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision: Option<Collision>,
}

impl SkillDiagnostic {
    /// A finding that did not stop the skill from loading.
    pub fn warning(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: DiagnosticKind::Warning,
            message: message.into(),
            collision: None,
        }
    }

    /// A finding that kept the skill out.
    pub fn dropped(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: DiagnosticKind::Dropped,
            message: message.into(),
            collision: None,
        }
    }

    /// Whether the file's skill was loaded despite this finding.
    pub fn is_dropped(&self) -> bool {
        self.kind == DiagnosticKind::Dropped
    }
}
