//! The host's tools: tools every session's turns get beside the session's
//! own (its workspace tools, `read_skill`, `ask_user`, `update_plan`),
//! fixed or from sources whose lists change (MCP servers), and what a
//! session's turn stores when they changed since its previous turn.

use std::sync::Arc;

use roundtable_skills::ReadSkill;
use roundtable_tools::workspace::Workspace;
use roundtable_tools::{
    LiveTools, SetupError, ToolDefinition, ToolRegistry, ToolSource, ToolsChange,
};
use sha2::{Digest, Sha256};

use crate::error::SessionError;
use crate::records::{HostTool, ToolsChanged};

/// The names a session's own tools take; a host tool may not take one.
fn session_tool_names() -> impl Iterator<Item = &'static str> {
    Workspace::TOOL_NAMES
        .into_iter()
        .chain([ReadSkill::NAME, "ask_user", "update_plan"])
}

/// The host's tool sources, as the engine's builder collects them.
#[derive(Default)]
pub(crate) struct HostToolSources {
    sources: Vec<Arc<dyn ToolSource>>,
    live: Option<LiveTools>,
}

impl HostToolSources {
    /// Adds `source` when none of its tools takes the name of a session's
    /// own tool or of another host tool.
    pub(crate) fn add(&mut self, source: Arc<dyn ToolSource>) -> Result<(), SessionError> {
        let mut sources = self.sources.clone();
        sources.push(source);
        let live = LiveTools::new(ToolRegistry::new(), sources.clone())?;
        check_names(&live.registry())?;
        self.sources = sources;
        self.live = Some(live);
        Ok(())
    }

    /// The tools the engine's turns take them from, if there are any.
    pub(crate) fn into_live(self) -> Option<HostTools> {
        self.live.map(|live| HostTools { live })
    }
}

/// A [`SetupError::DuplicateTool`] when a host tool takes the name of a
/// session's own tool.
fn check_names(host: &ToolRegistry) -> Result<(), SetupError> {
    match host
        .definitions()
        .map(|d| d.name())
        .find(|name| session_tool_names().any(|own| own == *name))
    {
        Some(name) => Err(SetupError::DuplicateTool { name: name.into() }),
        None => Ok(()),
    }
}

/// The host's tools as the engine's turns take them: refreshed at each
/// turn's start, rebuilt only when a source changed.
pub(crate) struct HostTools {
    live: LiveTools,
}

impl HostTools {
    /// The host's tools for a turn starting now. An error when two of them,
    /// or one of them and a session's own tool, share a name.
    pub(crate) async fn for_turn(&self) -> Result<Arc<ToolRegistry>, SetupError> {
        let registry = self.live.for_turn().await?.registry;
        check_names(&registry)?;
        Ok(registry)
    }
}

/// The host's tools of an engine without any: one registry for every turn,
/// so a session's kept setup (see `context::SetupCache`) knows it is the
/// same.
pub(crate) fn no_host_tools() -> Arc<ToolRegistry> {
    static NONE: std::sync::LazyLock<Arc<ToolRegistry>> =
        std::sync::LazyLock::new(|| Arc::new(ToolRegistry::new()));
    NONE.clone()
}

/// The record a session's turn stores when `tools` (the host's tools it
/// gets) differ from `before` (the host's tools of its previous turn, as
/// stored): `None` when nothing changed.
pub(crate) fn tools_changed(
    turn: &Arc<str>,
    before: &[HostTool],
    tools: &ToolRegistry,
) -> Option<ToolsChanged> {
    let now: Vec<HostTool> = tools
        .definitions()
        .map(|d| HostTool {
            name: d.name().into(),
            digest: digest(d),
        })
        .collect();
    let change = ToolsChange::between(
        before.iter().map(|t| (&*t.name, &t.digest)),
        now.iter().map(|t| (&*t.name, &t.digest)),
    );
    (!change.is_empty()).then(|| ToolsChanged {
        turn: turn.clone(),
        change,
        tools: now,
    })
}

/// A short digest of a definition (name, description, schema, kind,
/// approval flag): equal digests, same tool.
fn digest(definition: &ToolDefinition) -> Arc<str> {
    let bytes = serde_json::to_vec(definition).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    hash.iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .into()
}
