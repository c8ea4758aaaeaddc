//! Plan mode: with the session in plan mode the agent gets only read tools
//! and `update_plan`, and writes a plan of ordered steps; executing the plan
//! switches to agent mode, where the model reports each step's progress
//! through the same tool. The plan's state (steps, how many are done) is
//! folded from the `plan_updated` entries.

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_thread_stream::NewEntry;
use roundtable_tools::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::bound_turn::BoundTurn;
use crate::records::{PlanStep, PlanUpdated, SessionMode, SessionRecord, StepStatus};

/// The most steps a plan may have.
const MAX_STEPS: usize = 50;

/// What the agent is told in plan mode.
pub(crate) const PLAN_MODE_PROMPT: &str = "\
You are in plan mode. Investigate with your read-only tools, then write a \
step-by-step plan with `update_plan` (every step `pending`). Do not change \
anything yet. When the plan is written, summarise it; the user will execute \
it or ask you to refine it.";

/// What the agent is told while it carries out the plan.
pub(crate) const EXECUTING_PROMPT: &str = "\
You are carrying out the plan. Work through its steps in order; when you \
start a step, and when you finish it, call `update_plan` with every step and \
its status, so the user can follow the progress.";

/// Input of `update_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdatePlanInput {
    /// Every step of the plan, in order, with its status.
    pub steps: Vec<PlanStep>,
}

/// `update_plan`: writes the plan, or updates its steps' progress.
pub(crate) struct UpdatePlan {
    pub(crate) author: Arc<str>,
    /// The running turn the plan is updated in.
    pub(crate) turn: Arc<BoundTurn>,
}

#[async_trait]
impl TypedTool for UpdatePlan {
    type Input = UpdatePlanInput;

    fn name(&self) -> &str {
        "update_plan"
    }

    fn description(&self) -> &str {
        "Write the plan, or update it: give every step, in order, with its status (`pending`, \
         `in_progress`, `completed`). The user sees the plan and its progress."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn run(
        &self,
        _ctx: ToolContext,
        input: UpdatePlanInput,
    ) -> Result<ToolResult, ToolError> {
        if input.steps.is_empty() || input.steps.len() > MAX_STEPS {
            return Ok(ToolResult::error(format!(
                "A plan has 1 to {MAX_STEPS} steps."
            )));
        }
        if input.steps.iter().any(|s| s.title.trim().is_empty()) {
            return Ok(ToolResult::error("Every step needs a title."));
        }
        let done = input
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Completed)
            .count();
        let total = input.steps.len();
        let turn = self.turn.current(|| "update_plan".into())?;
        let record = PlanUpdated {
            turn: turn.turn.clone(),
            steps: input.steps,
        };
        let failed = |message: String| ToolError::Fatal {
            tool: "update_plan".into(),
            message,
        };
        let body = record.to_body().map_err(|e| failed(e.to_string()))?;
        turn.sink
            .append(vec![NewEntry::new(self.author.clone(), body)])
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(ToolResult::text(format!(
            "Plan saved: {total} steps, {done} done."
        )))
    }
}

/// What a prompt says about the mode, if anything.
pub(crate) fn mode_prompt(mode: SessionMode, executing: bool) -> Option<&'static str> {
    match (mode, executing) {
        (SessionMode::Plan, _) => Some(PLAN_MODE_PROMPT),
        (SessionMode::Agent, true) => Some(EXECUTING_PROMPT),
        (SessionMode::Agent, false) => None,
    }
}
