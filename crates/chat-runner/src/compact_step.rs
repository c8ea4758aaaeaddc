//! The step the turn loop asks before every model request: whether the
//! conversation should be replaced by a compacted one. The loop knows
//! nothing of summaries or threads; it shows the step what it is about to
//! send and takes back what to send instead.

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_providers::{Context, Message};
use tokio_util::sync::CancellationToken;

use crate::event::{CompactionReason, EventSink};

/// What the loop shows its compaction step.
pub struct ContextCheck<'a> {
    /// The turn's id.
    pub turn: &'a Arc<str>,
    /// The round whose model request comes next, from 1.
    pub round: u32,
    /// [`Threshold`](CompactionReason::Threshold) before every request;
    /// [`Overflow`](CompactionReason::Overflow) after the model refused the
    /// request as too large (the refused reply is not in `context`).
    pub reason: CompactionReason,
    /// The request about to be sent: system prompt, messages, tools. Its
    /// last assistant message's usage is the provider's count of the
    /// previous request.
    pub context: &'a Context,
    /// Where the turn's events go (the step reports its compactions there).
    pub sink: &'a dyn EventSink,
    /// The turn's cancellation.
    pub cancel: &'a CancellationToken,
}

/// Replaces a turn's conversation before a model request when it no longer
/// fits. The runners' compaction ([`Compactor::turn_step`](crate::compaction::Compactor::turn_step))
/// implements it; a host may bring its own.
#[async_trait]
pub trait CompactStep: Send + Sync {
    /// The messages to send instead of `check.context.messages`, or `None`
    /// to send them as they are. After an overflow, `None` ends the turn
    /// with the model's error; `Some` sends the request again.
    async fn check(&self, check: ContextCheck<'_>) -> Option<Vec<Message>>;
}
