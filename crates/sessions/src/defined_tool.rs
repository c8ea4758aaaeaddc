//! Tools registered with a definition made once.
//!
//! A registry asks a tool for its definition when the tool is registered,
//! and a typed tool makes its definition anew each time: it generates its
//! input schema (schemars). A session's turn registers its tools again for
//! every turn (they are bound to the turn: its id, its writer, its working
//! tree), so the definitions are made once (the workspace's with the kept
//! setup, `ask_user`'s and `update_plan`'s once per process) and the tools
//! are registered wrapped with them.

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_providers::JsonObject;
use roundtable_tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolResult};

/// A tool and its definition, made beforehand.
pub(crate) struct DefinedTool {
    tool: Arc<dyn Tool>,
    definition: ToolDefinition,
}

impl DefinedTool {
    /// `tool`, whose definition is `definition` (the one the tool gives).
    pub(crate) fn wrap(tool: Arc<dyn Tool>, definition: ToolDefinition) -> Arc<dyn Tool> {
        Arc::new(Self { tool, definition })
    }
}

#[async_trait]
impl Tool for DefinedTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        self.tool.invoke(ctx, args).await
    }
}
