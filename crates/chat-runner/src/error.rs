//! The crate's error type.

use roundtable_skills::SkillsError;
use roundtable_thread_stream::{InvalidThreadId, StoreError};
use roundtable_tools::SetupError;

use crate::compaction::CompactionError;

/// What can fail around a turn (the turn itself never fails: its failures
/// are finish reasons).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// The thread store failed.
    #[error("thread store: {0}")]
    Store(#[from] StoreError),
    /// A thread id (index thread, session thread) is invalid.
    #[error(transparent)]
    ThreadId(#[from] InvalidThreadId),
    /// The agent context could not be loaded.
    #[error("agent context: {0}")]
    AgentContext(#[from] SkillsError),
    /// The tools could not be set up (a duplicate name, a bad config).
    #[error("tools: {0}")]
    Tools(#[from] SetupError),
    /// A record could not be written as JSON.
    #[error("encoding a record: {0}")]
    Encode(#[from] serde_json::Error),
    /// No model was given and the `chat` role resolves to none.
    #[error("no model is configured for the chat role")]
    NoModel,
    /// A compaction wrote no summary.
    #[error("compaction: {0}")]
    Compaction(#[from] CompactionError),
    /// The runner was built without compaction
    /// (`ChatRunnerBuilder::compaction`, `ThreadRunnerBuilder::compaction`).
    #[error("compaction is not enabled on this runner")]
    CompactionOff,
    /// The runner does not run this bot.
    #[error("this runner does not run the bot {0}")]
    UnknownBot(String),
}
