//! The `Tool` trait: a definition and an async invoke.

use async_trait::async_trait;
use roundtable_providers::JsonObject;

use crate::{ToolContext, ToolDefinition, ToolError, ToolResult};

/// A tool a model can call.
///
/// Implement it directly when the input schema is built at run time (an enum
/// of loaded names, say); otherwise implement [`TypedTool`](crate::TypedTool),
/// which derives the schema from a Rust type and checks arguments for you.
///
/// `invoke` returns `Ok` with an error [`ToolResult`] for anything the model
/// should read and retry (bad arguments, a missing file), and `Err` only for
/// what must end the turn (cancellation, a broken host). A panic inside
/// `invoke` is caught by the [`ToolRegistry`](crate::ToolRegistry) and turned
/// into an error result.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's definition. Called once when the tool is registered.
    fn definition(&self) -> ToolDefinition;

    /// Runs one call with the model's arguments.
    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError>;
}
