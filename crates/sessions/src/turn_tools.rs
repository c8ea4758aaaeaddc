//! A session's turn tools, kept between turns: its workspace tools (only
//! the read tools in plan mode; those that may change the workspace look
//! at the working tree first), `ask_user` and `update_plan`, and the turn
//! loop that offers them to the model. Registering tools copies their
//! definitions (JSON schemas), and so does the loop's list for the model:
//! both are made once and kept while the setup, the mode and the model
//! stay the same. What belongs to one turn (its id, its writer, its inbox,
//! its working tree) is bound to the kept tools at the turn's start: a
//! session runs one turn at a time in a process, so one slot serves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use roundtable_chat_runner::TurnLoop;
use roundtable_providers::JsonObject;
use roundtable_tools::{
    Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolRegistry, ToolResult,
};

use crate::bound_turn::{BoundTurn, TurnBinding};
use crate::context::AgentSetup;
use crate::error::SessionError;
use crate::models::ServedModel;
use crate::plan::UpdatePlan;
use crate::questions::AskUser;
use crate::records::SessionMode;
use crate::working_tree::may_change_workspace;

/// Each tool's kind by its name: made with the kept tools and shared by
/// their turns (looked up at each call's end, hashed with `foldhash`: the
/// names are the session's own tools').
pub(crate) type ToolKinds = HashMap<Arc<str>, ToolKind, foldhash::fast::RandomState>;

/// The tools of one turn: the kept loop (its approver still to set), the
/// tools' kinds, and the binding that lasts as long as this value.
pub(crate) struct TurnTools {
    pub(crate) turns: TurnLoop,
    pub(crate) kinds: Arc<ToolKinds>,
    slot: Arc<BoundTurn>,
}

impl Drop for TurnTools {
    fn drop(&mut self) {
        self.slot.set(None);
    }
}

/// The kept tools of one session (none until its first turn).
#[derive(Default)]
pub(crate) struct KeptTools {
    /// Boxed: a runtime that runs no turn keeps only the pointer.
    kept: Mutex<Option<Box<Kept>>>,
}

/// A kept toolset and what it was made for.
struct Kept {
    setup: Arc<AgentSetup>,
    mode: SessionMode,
    provider: Arc<dyn roundtable_providers::Provider>,
    model: Arc<roundtable_providers::Model>,
    turns: TurnLoop,
    kinds: Arc<ToolKinds>,
    slot: Arc<BoundTurn>,
}

impl KeptTools {
    /// The tools of a turn over `setup` in `mode` on `served`, bound to
    /// `binding` until the returned value is dropped: the kept ones when
    /// they were made for the same setup, mode and model, else made anew
    /// (and kept). `configure` sets what the engine adds to every loop
    /// (limits, stream options).
    pub(crate) fn for_turn(
        &self,
        setup: &Arc<AgentSetup>,
        mode: SessionMode,
        served: &ServedModel,
        author: &Arc<str>,
        binding: TurnBinding,
        configure: impl FnOnce(TurnLoop) -> TurnLoop,
    ) -> Result<TurnTools, SessionError> {
        let mut kept = lock(&self.kept);
        let toolset = match kept.take() {
            Some(toolset)
                if Arc::ptr_eq(&toolset.setup, setup)
                    && toolset.mode == mode
                    && Arc::ptr_eq(&toolset.provider, &served.provider)
                    && (Arc::ptr_eq(&toolset.model, &served.model)
                        || toolset.model == served.model) =>
            {
                toolset
            }
            _ => {
                let slot = Arc::new(BoundTurn::default());
                let tools = session_tools(&setup.tools, mode, author, &slot)?;
                let kinds = Arc::new(
                    tools
                        .definitions()
                        .map(|d| (Arc::from(d.name()), d.kind))
                        .collect(),
                );
                let turns = configure(
                    TurnLoop::new(served.provider.clone(), served.model.clone())
                        .with_tools(Arc::new(tools)),
                );
                Box::new(Kept {
                    setup: setup.clone(),
                    mode,
                    provider: served.provider.clone(),
                    model: served.model.clone(),
                    turns,
                    kinds,
                    slot,
                })
            }
        };
        toolset.slot.set(Some(Arc::new(binding)));
        let tools = TurnTools {
            turns: toolset.turns.clone(),
            kinds: toolset.kinds.clone(),
            slot: toolset.slot.clone(),
        };
        *kept = Some(toolset);
        Ok(tools)
    }
}

/// The tools of a session's turns: the workspace's (only its read tools in
/// plan mode; those that may change the workspace look at the bound
/// turn's tree first), `ask_user` and `update_plan`.
fn session_tools(
    workspace_tools: &ToolRegistry,
    mode: SessionMode,
    author: &Arc<str>,
    slot: &Arc<BoundTurn>,
) -> Result<ToolRegistry, SessionError> {
    let mut tools = ToolRegistry::new()
        .with_output_limit(workspace_tools.output_limit())
        .with_approval_policy(workspace_tools.approval_policy().clone());
    for definition in workspace_tools.definitions() {
        if mode == SessionMode::Plan && definition.kind != ToolKind::Read {
            continue;
        }
        if let Some(tool) = workspace_tools.get(definition.name()) {
            tools.register_arc(LooksFirst::wrap(tool.clone(), definition.kind, slot))?;
        }
    }
    tools.register(AskUser {
        author: author.clone(),
        turn: slot.clone(),
    })?;
    tools.register(UpdatePlan {
        author: author.clone(),
        turn: slot.clone(),
    })?;
    Ok(tools)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one replace: a poisoned lock holds a whole value.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A tool that may change the workspace, wrapped so the turn's "before"
/// state is taken before its first call runs.
pub(crate) struct LooksFirst {
    tool: Arc<dyn Tool>,
    /// The running turn, whose tree is looked at.
    turn: Arc<BoundTurn>,
}

impl LooksFirst {
    /// Wraps `tool` when its kind may change the workspace; any other tool
    /// is returned as it is.
    pub(crate) fn wrap(
        tool: Arc<dyn Tool>,
        kind: ToolKind,
        turn: &Arc<BoundTurn>,
    ) -> Arc<dyn Tool> {
        if may_change_workspace(kind) {
            Arc::new(Self {
                tool,
                turn: turn.clone(),
            })
        } else {
            tool
        }
    }
}

#[async_trait]
impl Tool for LooksFirst {
    fn definition(&self) -> ToolDefinition {
        self.tool.definition()
    }

    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        let turn = self.turn.current(|| self.tool.definition().name().into())?;
        turn.tree.before_change().await;
        self.tool.invoke(ctx, args).await
    }
}
