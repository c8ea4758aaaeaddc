//! A runner's turn loop whose tools may change between turns: the one
//! place both runners ask, at a turn's start, for the loop that turn runs
//! with.

use std::sync::{Arc, Mutex};

use roundtable_tools::{LiveTools, SetupError, ToolsChange};

use crate::sync::lock;
use crate::turn::TurnLoop;

/// A [`TurnLoop`] and, when the host gave tool sources, the [`LiveTools`]
/// its registry comes from.
pub(crate) struct LiveTurnLoop {
    current: Mutex<Arc<TurnLoop>>,
    tools: Option<LiveTools>,
}

impl LiveTurnLoop {
    /// `turns` as it is, or with its registry taken from `tools` (whose
    /// fixed part is `turns`' registry).
    pub(crate) fn new(turns: TurnLoop, tools: Option<LiveTools>) -> Self {
        let tools = tools.filter(LiveTools::is_dynamic);
        let turns = match &tools {
            Some(tools) => turns.with_tools(tools.registry()),
            None => turns,
        };
        Self {
            current: Mutex::new(Arc::new(turns)),
            tools,
        }
    }

    /// The loop the last turn started with (its tools included).
    pub(crate) fn current(&self) -> Arc<TurnLoop> {
        lock(&self.current).clone()
    }

    /// The loop of a turn starting now, and what changed in its tools
    /// since the last turn, when something did. An error when a source's
    /// new list names a tool the others already have.
    pub(crate) async fn for_turn(
        &self,
    ) -> Result<(Arc<TurnLoop>, Option<ToolsChange>), SetupError> {
        let Some(tools) = &self.tools else {
            return Ok((self.current(), None));
        };
        let turn = tools.for_turn().await?;
        let mut current = lock(&self.current);
        if !Arc::ptr_eq(current.tools(), &turn.registry) {
            *current = Arc::new((**current).clone().with_tools(turn.registry));
        }
        Ok((current.clone(), turn.change))
    }
}
