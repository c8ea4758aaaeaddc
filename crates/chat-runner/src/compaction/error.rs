//! Why a compaction did not happen.

use roundtable_thread_stream::StoreError;

/// Why a compaction wrote no summary. Inside a turn it is reported in a
/// `compaction_ended` event and the turn goes on (or, after an overflow,
/// ends with the model's error); a host's manual compaction returns it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// The view holds nothing that may be summarised: too few messages, or
    /// every older one still waits for a tool result.
    #[error(
        "nothing to compact: the conversation after the last summary is too short or still waiting for tool results"
    )]
    NothingToCompact,
    /// What must stay in full is already above the threshold: summarising
    /// the rest would not make the request fit.
    #[error(
        "compaction cannot help: the system prompt and tools ({overhead_tokens} tokens) and the messages that must stay in full ({kept_tokens} tokens) pass the threshold of {threshold} tokens"
    )]
    CannotHelp {
        /// The system prompt and tools.
        overhead_tokens: u64,
        /// The newest messages kept in full.
        kept_tokens: u64,
        /// The request size that triggers compaction.
        threshold: u64,
    },
    /// The summary model failed or answered with no text.
    #[error("the summarizer failed: {0}")]
    Summarizer(String),
    /// The thread could not be read or the summary not written.
    #[error("thread store: {0}")]
    Store(#[from] StoreError),
    /// The turn (or the host's call) was cancelled.
    #[error("the compaction was cancelled")]
    Aborted,
}
