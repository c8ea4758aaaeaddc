//! The slot a session's kept tools find the running turn in. The tools
//! are made once and kept between turns (see `turn_tools`); what belongs
//! to one turn (its id, its writer, its inbox, its working tree) is bound
//! here at the turn's start and cleared at its end. A session runs one
//! turn at a time in a process, so one slot serves.

use std::sync::{Arc, Mutex};

use roundtable_chat_runner::lifecycle::WriterSink;
use roundtable_tools::ToolError;

use crate::watch::TurnInbox;
use crate::working_tree::TurnTree;

/// What the kept tools act for: the running turn's parts.
pub(crate) struct TurnBinding {
    pub(crate) turn: Arc<str>,
    pub(crate) sink: WriterSink,
    pub(crate) inbox: Arc<TurnInbox>,
    pub(crate) tree: Arc<TurnTree>,
    /// The `ask_user` calls whose question a process that stopped already
    /// stored: they wait for the answers without asking again.
    pub(crate) asked: std::collections::HashSet<Arc<str>>,
}

/// The slot the running turn is bound in.
#[derive(Default)]
pub(crate) struct BoundTurn {
    current: Mutex<Option<Arc<TurnBinding>>>,
}

impl BoundTurn {
    /// The running turn's parts; an error for the tool `tool` names when
    /// no turn runs (a call outlived its turn).
    pub(crate) fn current(
        &self,
        tool: impl FnOnce() -> Arc<str>,
    ) -> Result<Arc<TurnBinding>, ToolError> {
        lock(&self.current).clone().ok_or_else(|| ToolError::Fatal {
            tool: tool(),
            message: "the turn this call belongs to has ended".into(),
        })
    }

    pub(crate) fn set(&self, binding: Option<Arc<TurnBinding>>) {
        *lock(&self.current) = binding;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one replace: a poisoned lock holds a whole value.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
