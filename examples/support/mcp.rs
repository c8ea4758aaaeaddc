//! What the chat example uses for `--mcp FILE`: the MCP
//! servers of an `{"mcpServers": {...}}` file (the one other clients read),
//! started, their states printed, as a tool source for a runner or an
//! engine. Needs the `mcp` feature:
//! `cargo run --features mcp --example chat -- --mcp mcp.json`.

use std::path::Path;
use std::sync::Arc;

use roundtable::tools::ToolSource;

/// Starts the servers of `path` and prints each one's state (a failure with
/// the end of its stderr). The servers stop when the last holder of the
/// source drops it. An error for a file that cannot be read or makes no
/// sense; a server that does not start is only reported.
#[cfg(feature = "mcp")]
pub(crate) async fn load(path: &Path) -> Result<Arc<dyn ToolSource>, String> {
    use roundtable::tools::mcp::{McpServerState, McpToolset};

    let toolset = McpToolset::load(path).await.map_err(|e| e.to_string())?;
    for server in toolset.servers() {
        match &server.state {
            McpServerState::Running => println!(
                "mcp: {} running, {} tools (~{} tokens of definitions)",
                server.name,
                server.tools,
                server.schema_bytes / 4
            ),
            McpServerState::Failed(failure) => println!("mcp: {} failed: {failure}", server.name),
            McpServerState::Disabled => println!("mcp: {} disabled", server.name),
        }
    }
    Ok(Arc::new(toolset))
}

/// Without the `mcp` feature there are no MCP servers to start.
#[cfg(not(feature = "mcp"))]
pub(crate) async fn load(path: &Path) -> Result<Arc<dyn ToolSource>, String> {
    Err(format!(
        "--mcp {}: this example was built without the mcp feature \
         (run it with `--features mcp`)",
        path.display()
    ))
}
