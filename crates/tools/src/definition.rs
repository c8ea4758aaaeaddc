//! The description of a tool a model sees, plus what the host needs to gate it.

use serde::{Deserialize, Serialize};

use crate::ToolKind;

/// A tool's definition: what the model is told (name, description, input
/// schema: the providers' [`ModelTool`](roundtable_providers::ModelTool),
/// held whole) and what the host uses to gate it (kind, approval flag).
///
/// A turn loop hands [`for_model`](Self::for_model) to the provider as it
/// is; nothing is copied field by field.
///
/// ```
/// use roundtable_tools::{ToolDefinition, ToolKind};
///
/// let definition = ToolDefinition::new(
///     "read_file",
///     "Reads a file.",
///     serde_json::json!({"type": "object"}),
///     ToolKind::Read,
/// );
/// assert_eq!(definition.name(), "read_file");
/// assert_eq!(definition.for_model().parameters, serde_json::json!({"type": "object"}));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition {
    /// Name, description and input schema, as a provider sends them.
    #[serde(flatten)]
    model: roundtable_providers::ModelTool,
    /// The kind of effect the tool has.
    pub kind: ToolKind,
    /// True when every call needs approval whatever the policy says.
    pub requires_approval: bool,
}

impl ToolDefinition {
    /// A definition with no forced approval.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: serde_json::Value,
        kind: ToolKind,
    ) -> Self {
        Self {
            model: roundtable_providers::ModelTool {
                name: name.into(),
                description: description.into(),
                parameters: input_schema,
            },
            kind,
            requires_approval: false,
        }
    }

    /// Sets the forced-approval flag.
    pub fn with_requires_approval(mut self, requires_approval: bool) -> Self {
        self.requires_approval = requires_approval;
        self
    }

    /// Unique name within a registry, as the model calls it (`read_file`).
    pub fn name(&self) -> &str {
        &self.model.name
    }

    /// What the tool does and when to use it, for the model.
    pub fn description(&self) -> &str {
        &self.model.description
    }

    /// JSON Schema of the input object (the model's `parameters`).
    pub fn input_schema(&self) -> &serde_json::Value {
        &self.model.parameters
    }

    /// What the model is told: the definition a provider sends.
    pub fn for_model(&self) -> &roundtable_providers::ModelTool {
        &self.model
    }
}
