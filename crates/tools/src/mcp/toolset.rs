//! [`McpToolset`]: the servers of a configuration, started together, and
//! their tools under registry names.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::Tool as McpToolInfo;
use tokio::sync::Notify;

use super::client::{ListChange, McpClient, ProgressRoutes};
use super::config::{McpConfig, McpServerConfig};
use super::connection::Connection;
use super::kinds::tool_kind;
use super::naming::{McpToolRef, registry_names};
use super::remote_tool::McpTool;
use super::schema::{definition_bytes, normalise_input_schema};
use super::status::{McpServerFailure, McpServerState, McpServerStatus, McpToolListChange};
use crate::{SetupError, Tool, ToolDefinition, ToolSource};

/// The MCP servers of a configuration and their tools.
///
/// [`start`](Self::start) starts every enabled server at once; one that
/// fails or hangs (past its startup timeout) is reported in
/// [`servers`](Self::servers), with the end of its stderr, while the others
/// work. [`tools`](Self::tools) are ready for a
/// [`ToolRegistry`](crate::ToolRegistry), named `server__tool` (see
/// [`naming`](super::naming)), with input schemas both wire APIs accept and
/// kinds from the trust setting. Dropping the toolset ends every session and
/// kills every server process with whatever it started.
///
/// When a server says its tool list changed, the list is marked stale; a
/// host calls [`refresh_if_stale`](Self::refresh_if_stale) at a turn
/// boundary, and rebuilds its registry when something changed. The toolset
/// is a [`ToolSource`]: a runner given it (through
/// [`LiveTools`](crate::LiveTools)) does both at each turn's start.
///
/// ```no_run
/// # async fn demo() -> Result<(), roundtable_tools::SetupError> {
/// use roundtable_tools::ToolRegistry;
/// use roundtable_tools::mcp::{McpServerState, McpToolset};
///
/// let toolset = McpToolset::load("mcp.json").await?;
/// for server in toolset.servers() {
///     if let McpServerState::Failed(failure) = &server.state {
///         eprintln!("{}: {failure}", server.name);
///     }
/// }
/// let mut registry = ToolRegistry::new();
/// registry.register_all(toolset.tools())?;
///
/// // At a turn boundary:
/// if let Some(change) = toolset.refresh_if_stale().await
///     && !change.is_empty()
/// {
///     let mut rebuilt = ToolRegistry::new();
///     rebuilt.register_all(toolset.tools())?;
///     registry = rebuilt;
/// }
/// # let _ = registry;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct McpToolset {
    servers: Vec<Server>,
    listing: RwLock<Listing>,
    any_list_changed: Arc<Notify>,
    /// Moves each time a refresh changes the tools on offer.
    generation: AtomicU64,
}

#[derive(Debug)]
struct Server {
    config: Arc<McpServerConfig>,
    connection: Option<Arc<Connection>>,
    start_failure: Option<McpServerFailure>,
    list_change: Arc<ListChange>,
    /// The server's tools as last listed, before the enabled/disabled lists.
    listed: Mutex<Vec<McpToolInfo>>,
}

/// The tools on offer now.
#[derive(Debug, Default)]
struct Listing {
    tools: Vec<Arc<McpTool>>,
    by_name: HashMap<Arc<str>, usize>,
}

impl McpToolset {
    /// Reads a configuration file and starts its servers: the one call a
    /// host needs. Only an unreadable or invalid file is an error; servers
    /// that do not start are reported in [`servers`](Self::servers).
    pub async fn load(path: impl AsRef<std::path::Path>) -> Result<Self, SetupError> {
        Ok(Self::start(McpConfig::load(path)?).await)
    }

    /// Starts every enabled server of `config` concurrently and lists their
    /// tools. Returns when each has started, failed or run out of its
    /// startup timeout.
    pub async fn start(config: McpConfig) -> Self {
        let any_list_changed = Arc::new(Notify::new());
        let starts = config.servers.into_iter().map(|server| {
            let base_env = config.base_env.clone();
            let list_change = Arc::new(ListChange::new(any_list_changed.clone()));
            async move {
                let config = Arc::new(server);
                let mut entry = Server {
                    config: config.clone(),
                    connection: None,
                    start_failure: None,
                    list_change: list_change.clone(),
                    listed: Mutex::new(Vec::new()),
                };
                if !config.enabled {
                    return entry;
                }
                let client = McpClient {
                    list_change,
                    progress: Arc::new(ProgressRoutes::default()),
                };
                match Connection::start(config, base_env, client).await {
                    Ok((connection, tools)) => {
                        entry.connection = Some(Arc::new(connection));
                        entry.listed = Mutex::new(tools);
                    }
                    Err(failure) => entry.start_failure = Some(failure),
                }
                entry
            }
        });
        let servers = futures::future::join_all(starts).await;
        let toolset = Self {
            servers,
            listing: RwLock::new(Listing::default()),
            any_list_changed,
            generation: AtomicU64::new(0),
        };
        let listing = toolset.build_listing();
        *toolset.write_listing() = listing;
        toolset
    }

    /// The tools on offer, for [`ToolRegistry::register_all`](crate::ToolRegistry::register_all).
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.read_listing()
            .tools
            .iter()
            .map(|t| t.clone() as Arc<dyn Tool>)
            .collect()
    }

    /// The definitions of the tools on offer.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.read_listing()
            .tools
            .iter()
            .map(|t| t.definition.clone())
            .collect()
    }

    /// The server and the server's own name of the tool a registry knows as
    /// `name`.
    pub fn resolve(&self, name: &str) -> Option<McpToolRef> {
        let listing = self.read_listing();
        listing
            .by_name
            .get(name)
            .map(|&i| listing.tools[i].remote.clone())
    }

    /// Every server of the configuration, in its order: state, tools and
    /// what they cost in context.
    pub fn servers(&self) -> Vec<McpServerStatus> {
        let listing = self.read_listing();
        self.servers
            .iter()
            .map(|server| {
                let name = server.config.name.clone();
                let mine = listing.tools.iter().filter(|t| t.remote.server == name);
                let (tools, schema_bytes) = mine.fold((0, 0), |(n, bytes), t| {
                    (n + 1, bytes + definition_bytes(&t.definition))
                });
                let state = if !server.config.enabled {
                    McpServerState::Disabled
                } else if let Some(failure) = &server.start_failure {
                    McpServerState::Failed(failure.clone())
                } else if let Some(failure) = server.connection.as_ref().and_then(|c| c.failure()) {
                    McpServerState::Failed(failure)
                } else {
                    McpServerState::Running
                };
                McpServerStatus {
                    name,
                    state,
                    tools,
                    schema_bytes,
                    pid: server.connection.as_ref().and_then(|c| c.pid()),
                }
            })
            .collect()
    }

    /// Bytes all tool definitions add to every model request (about four
    /// make a token).
    pub fn schema_bytes(&self) -> usize {
        self.read_listing()
            .tools
            .iter()
            .map(|t| definition_bytes(&t.definition))
            .sum()
    }

    /// True when a server said its tool list changed (or was restarted)
    /// since the lists were last read.
    pub fn is_stale(&self) -> bool {
        self.servers.iter().any(|s| s.list_change.is_stale())
    }

    /// Waits until a server says its tool list changed (returns at once
    /// when one already has).
    pub async fn list_changed(&self) {
        loop {
            let notified = self.any_list_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_stale() {
                return;
            }
            notified.await;
        }
    }

    /// Lists the tools of every server whose list is stale and returns what
    /// changed, or `None` when no list was stale. Meant for turn
    /// boundaries: a turn keeps the tools it started with.
    pub async fn refresh_if_stale(&self) -> Option<McpToolListChange> {
        let stale: Vec<(&Server, &Arc<Connection>)> = self
            .servers
            .iter()
            .filter_map(|s| Some((s, s.connection.as_ref()?)))
            .filter(|(s, _)| s.list_change.take())
            .collect();
        if stale.is_empty() {
            return None;
        }
        let listed =
            futures::future::join_all(stale.iter().map(|(server, connection)| async move {
                (*server, connection.list_tools().await)
            }))
            .await;
        let mut change = McpToolListChange::default();
        for (server, result) in listed {
            change.servers.push(server.config.name.clone());
            match result {
                Ok(tools) => *server.listed.lock().unwrap_or_else(|e| e.into_inner()) = tools,
                Err(why) => change.failures.push((server.config.name.clone(), why)),
            }
        }
        let new = self.build_listing();
        let mut listing = self.write_listing();
        for tool in &new.tools {
            match listing.by_name.get(tool.definition.name()) {
                None => change.added.push(tool.definition.name().into()),
                Some(&i) if listing.tools[i].definition != tool.definition => {
                    change.changed.push(tool.definition.name().into());
                }
                Some(_) => {}
            }
        }
        for tool in &listing.tools {
            if !new.by_name.contains_key(tool.definition.name()) {
                change.removed.push(tool.definition.name().into());
            }
        }
        *listing = new;
        if !change.is_empty() {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        Some(change)
    }

    /// Ends every session and kills and reaps every server process before
    /// returning (dropping the toolset does the same without waiting).
    pub async fn shutdown(self) {
        let closing = self
            .servers
            .iter()
            .filter_map(|s| s.connection.as_ref())
            .map(|c| c.shutdown());
        futures::future::join_all(closing).await;
    }

    /// The tools of every running server, named and defined.
    fn build_listing(&self) -> Listing {
        let mut offered: Vec<(&Server, &Arc<Connection>, McpToolInfo)> = Vec::new();
        for server in &self.servers {
            let Some(connection) = &server.connection else {
                continue;
            };
            let listed = server.listed.lock().unwrap_or_else(|e| e.into_inner());
            offered.extend(
                listed
                    .iter()
                    .filter(|t| server.config.offers(&t.name))
                    .map(|t| (server, connection, t.clone())),
            );
        }
        let refs: Vec<McpToolRef> = offered
            .iter()
            .map(|(server, _, tool)| McpToolRef {
                server: server.config.name.clone(),
                tool: Arc::from(&*tool.name),
            })
            .collect();
        let names = registry_names(&refs);
        let mut listing = Listing::default();
        for (((server, connection, info), remote), name) in offered.into_iter().zip(refs).zip(names)
        {
            let config = &server.config;
            let override_ = config.tool_overrides.get(&*remote.tool);
            let description = info
                .description
                .as_deref()
                .filter(|d| !d.trim().is_empty())
                .map(String::from)
                .or_else(|| info.title.clone())
                .or_else(|| info.annotations.as_ref().and_then(|a| a.title.clone()))
                .unwrap_or_else(|| {
                    format!(
                        "The `{}` tool of the {} MCP server.",
                        remote.tool, config.name
                    )
                });
            let schema =
                normalise_input_schema(&serde_json::Value::Object((*info.input_schema).clone()));
            let kind = tool_kind(config.trust, info.annotations.as_ref(), override_);
            let definition = ToolDefinition::new(&*name, description, schema, kind)
                .with_requires_approval(override_.and_then(|o| o.require_approval) == Some(true));
            listing.by_name.insert(name, listing.tools.len());
            listing.tools.push(Arc::new(McpTool {
                connection: Arc::downgrade(connection),
                remote,
                definition,
                output_limit: config.output_limit,
            }));
        }
        listing
    }

    fn read_listing(&self) -> std::sync::RwLockReadGuard<'_, Listing> {
        self.listing.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_listing(&self) -> std::sync::RwLockWriteGuard<'_, Listing> {
        self.listing.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The servers' tools as a runner's [`ToolSource`]: refreshed at turn
/// starts, their generation moving with each change.
#[async_trait::async_trait]
impl ToolSource for McpToolset {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        McpToolset::tools(self)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    async fn refresh(&self) {
        self.refresh_if_stale().await;
    }
}
