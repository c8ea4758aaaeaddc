//! Test tools: a tool whose body is a closure, a tool that waits for its
//! cancellation, and the read-only `lookup`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use roundtable_providers::JsonObject;
use roundtable_tools::{
    Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolRegistry, ToolResult,
};

type Body = Arc<
    dyn Fn(
            ToolContext,
            JsonObject,
        ) -> Pin<Box<dyn Future<Output = Result<ToolResult, ToolError>> + Send>>
        + Send
        + Sync,
>;

/// A tool whose body is a closure (see [`tool`]).
pub struct FnTool {
    /// Its definition (an empty object schema).
    pub def: ToolDefinition,
    body: Body,
}

#[async_trait::async_trait]
impl Tool for FnTool {
    fn definition(&self) -> ToolDefinition {
        self.def.clone()
    }

    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        (self.body)(ctx, args).await
    }
}

/// A tool called `name` of `kind` that runs `body` on each call.
pub fn tool<F, Fut>(name: &str, kind: ToolKind, body: F) -> FnTool
where
    F: Fn(ToolContext, JsonObject) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    FnTool {
        def: ToolDefinition::new(
            name,
            format!("test tool {name}"),
            serde_json::json!({"type": "object", "properties": {}}),
            kind,
        ),
        body: Arc::new(move |ctx, args| Box::pin(body(ctx, args))),
    }
}

/// A tool that waits until its call is cancelled, then says so.
pub fn blocker(name: &str, kind: ToolKind) -> FnTool {
    let tool_name: Arc<str> = Arc::from(name);
    tool(name, kind, move |ctx: ToolContext, _| {
        let tool_name = tool_name.clone();
        async move {
            ctx.cancel.cancelled().await;
            Err(ToolError::Cancelled {
                tool: tool_name,
                call_id: ctx.call_id.clone(),
            })
        }
    })
}

/// The read-only `lookup` tool: answers `"<key> is on shelf 7"`.
pub struct Lookup;

#[async_trait::async_trait]
impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup",
            "Looks a key up in the archive.",
            serde_json::json!({
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            }),
            ToolKind::Read,
        )
    }

    async fn invoke(&self, _ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        let key = args.get("key").and_then(|v| v.as_str()).unwrap_or("?");
        Ok(ToolResult::text(format!("{key} is on shelf 7")))
    }
}

/// A registry holding [`Lookup`] alone.
pub fn lookup_tools() -> Arc<ToolRegistry> {
    let mut tools = ToolRegistry::new();
    // One tool cannot clash with another.
    #[allow(clippy::panic)]
    tools
        .register(Lookup)
        .unwrap_or_else(|e| panic!("registering lookup: {e}"));
    Arc::new(tools)
}
