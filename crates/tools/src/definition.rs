//! The description of a tool a model sees, plus what the host needs to gate it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ToolKind;

/// A tool's definition: what the model is told (name, description, input
/// schema) and what the host uses to gate it (kind, approval flag).
///
/// A plain struct so that a provider adapter can build its own tool entry from
/// `name`, `description` and `input_schema` without knowing this crate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition {
    /// Unique name within a registry, as the model calls it (`read_file`).
    pub name: Arc<str>,
    /// What the tool does and when to use it, for the model.
    pub description: Arc<str>,
    /// JSON Schema of the input object.
    pub input_schema: serde_json::Value,
    /// The kind of effect the tool has.
    pub kind: ToolKind,
    /// True when every call needs approval whatever the policy says.
    pub requires_approval: bool,
}

impl ToolDefinition {
    /// A definition with no forced approval.
    pub fn new(
        name: impl Into<Arc<str>>,
        description: impl Into<Arc<str>>,
        input_schema: serde_json::Value,
        kind: ToolKind,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            kind,
            requires_approval: false,
        }
    }

    /// Sets the forced-approval flag.
    pub fn with_requires_approval(mut self, requires_approval: bool) -> Self {
        self.requires_approval = requires_approval;
        self
    }
}
