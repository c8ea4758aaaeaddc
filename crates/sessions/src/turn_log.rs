//! A turn's start and end in the logs and the metrics: session, turn,
//! model, rounds, tokens, cost and outcome, so an operator sees what every
//! turn did and what it cost.

use roundtable_chat_runner::TurnOutcome;
use roundtable_providers::Model;

use crate::ids::SessionId;
use crate::models::model_key;

/// Turn `turn` of `session` starts on `model`.
pub(crate) fn started(session: &SessionId, turn: &str, model: &Model) {
    let model = model_key(model);
    tracing::info!(session = %session, turn, model = %model, "turn started");
    metrics::counter!("roundtable_turns_started_total", "model" => model).increment(1);
}

/// A turn of `session` on `model` ended as `outcome` says.
pub(crate) fn ended(session: &SessionId, model: &Model, outcome: &TurnOutcome) {
    let model = model_key(model);
    let reason = outcome.finish_reason.to_string();
    let usage = &outcome.usage;
    tracing::info!(
        session = %session,
        turn = %outcome.turn_id,
        model = %model,
        rounds = outcome.rounds,
        input_tokens = usage.input,
        output_tokens = usage.output,
        cost_usd = usage.cost.total,
        outcome = %reason,
        error = outcome.error.as_deref(),
        duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        "turn ended"
    );
    metrics::counter!("roundtable_turns_ended_total", "model" => model.clone(), "outcome" => reason)
        .increment(1);
    let tokens = |kind: &'static str, n: u64| {
        metrics::counter!("roundtable_tokens_total", "model" => model.clone(), "kind" => kind)
            .increment(n);
    };
    tokens("input", usage.input);
    tokens("output", usage.output);
    tokens("cache_read", usage.cache_read);
    tokens("cache_write", usage.cache_write);
    metrics::counter!("roundtable_cost_microusd_total", "model" => model.clone())
        .increment((usage.cost.total * 1e6).round() as u64);
}

/// Counts an approval a turn waits for while `waiting` lives.
pub(crate) struct ApprovalWait;

impl ApprovalWait {
    /// One more approval waits.
    pub(crate) fn start() -> Self {
        metrics::gauge!("roundtable_approvals_waiting").increment(1.0);
        ApprovalWait
    }
}

impl Drop for ApprovalWait {
    fn drop(&mut self) {
        metrics::gauge!("roundtable_approvals_waiting").decrement(1.0);
    }
}
