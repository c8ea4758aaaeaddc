//! One tool of an MCP server, as a [`Tool`] in a registry.

use std::sync::Weak;

use async_trait::async_trait;
use roundtable_providers::JsonObject;

use super::connection::Connection;
use super::naming::McpToolRef;
use crate::{OutputLimit, Tool, ToolContext, ToolDefinition, ToolError, ToolResult};

/// A server's tool under its registry name. It holds its connection weakly:
/// the toolset owns the servers, and a tool left in a registry after the
/// toolset is dropped answers that its server is gone instead of keeping
/// the process alive.
#[derive(Debug)]
pub(crate) struct McpTool {
    pub connection: Weak<Connection>,
    pub remote: McpToolRef,
    pub definition: ToolDefinition,
    pub output_limit: Option<OutputLimit>,
}

#[async_trait]
impl Tool for McpTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        let Some(connection) = self.connection.upgrade() else {
            return Ok(ToolResult::error(format!(
                "MCP server '{}' was shut down; its tools are no longer available",
                self.remote.server
            )));
        };
        let mut result = connection
            .call(self.definition.name(), &self.remote, args, ctx)
            .await?;
        if let Some(limit) = &self.output_limit {
            limit.apply(&mut result);
        }
        Ok(result)
    }
}
