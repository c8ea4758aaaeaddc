//! The result record that closes a chat turn (`signal.turn_result`).

use std::sync::Arc;

use roundtable_providers::Usage;
use roundtable_thread_stream::FinishReason;
pub use roundtable_thread_stream::TURN_RESULT_SIGNAL;
use serde::{Deserialize, Serialize};

use crate::turn::TurnOutcome;

/// The final record of a turn, stored as the `data` of `signal.turn_result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnResultRecord {
    /// The turn's id.
    pub turn: Arc<str>,
    /// Why it ended.
    pub finish_reason: FinishReason,
    /// The final assistant text.
    pub text: String,
    /// What went wrong, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Model calls made.
    pub rounds: u32,
    /// Tokens and cost summed over the rounds (pi-ai's usage shape).
    pub usage: Usage,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// The model, as `provider/id`.
    pub model: String,
}

impl TurnResultRecord {
    /// The record of `outcome`.
    pub fn new(outcome: &TurnOutcome, model: String) -> Self {
        Self {
            turn: outcome.turn_id.clone(),
            finish_reason: outcome.finish_reason,
            text: outcome.text.clone(),
            error: outcome.error.clone(),
            rounds: outcome.rounds,
            usage: outcome.usage,
            duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            model,
        }
    }

    /// True when the turn's prompt and answer join the replayed history.
    pub fn replayable(&self) -> bool {
        self.finish_reason.is_success() && !self.text.trim().is_empty()
    }
}
