//! How far a turn may go.

use std::time::Duration;

use roundtable_providers::Usage;
use serde::{Deserialize, Serialize};

/// The default cap on model calls per turn.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

/// The default per-turn timeout.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// Limits of one turn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Model calls ("rounds") per turn, at least 1. When the last allowed
    /// round still calls tools, those tools run (so every call has its
    /// result) and the turn ends with `max-rounds`. Default 8.
    pub max_rounds: u32,
    /// Wall time for the whole turn; `None` for no limit. When it fires the
    /// turn is cancelled the same way as a host cancellation and ends with
    /// `timeout`. Default 120 s.
    pub timeout: Option<Duration>,
    /// How many times a round's model call is sent again when its stream
    /// stalled (no data for the stream options' idle timeout) before any of
    /// its output was reported; a stall after output ends the turn at once.
    /// Default 0.
    pub stall_retries: u32,
    /// What the turn may spend; `None` for no budget. Default none.
    pub budget: Option<Budget>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_rounds: DEFAULT_MAX_ROUNDS,
            timeout: Some(DEFAULT_TURN_TIMEOUT),
            stall_retries: 0,
            budget: None,
        }
    }
}

impl Limits {
    /// Sets the round cap (at least 1).
    pub fn with_max_rounds(mut self, max_rounds: u32) -> Self {
        self.max_rounds = max_rounds.max(1);
        self
    }

    /// Sets the per-turn timeout.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how many times a stalled model call is sent again.
    pub fn with_stall_retries(mut self, retries: u32) -> Self {
        self.stall_retries = retries;
        self
    }

    /// Sets the turn's budget.
    pub fn with_budget(mut self, budget: Option<Budget>) -> Self {
        self.budget = budget;
        self
    }
}

/// What one turn may spend, summed over its rounds. Checked after each
/// round: when the usage so far passes either bound, the round's tools
/// still run (every call gets its result) and the turn ends with `budget`
/// instead of calling the model again. A round is never cut short, so a
/// turn may overrun its budget by one round's spending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Tokens (input, output and cache, as the provider counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Cost in US dollars, as the model's prices give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl Budget {
    /// Whether `usage` reached either bound.
    pub fn is_spent(&self, usage: &Usage) -> bool {
        let tokens = self.max_tokens.is_some_and(|max| usage.total_tokens >= max);
        let cost = self.max_cost_usd.is_some_and(|max| usage.cost.total >= max);
        tokens || cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_spent_when_either_bound_is_reached() {
        let mut usage = Usage {
            total_tokens: 100,
            ..Usage::default()
        };
        usage.cost.total = 0.5;
        assert!(!Budget::default().is_spent(&usage));
        let tokens = |max| Budget {
            max_tokens: Some(max),
            ..Budget::default()
        };
        assert!(tokens(100).is_spent(&usage));
        assert!(!tokens(101).is_spent(&usage));
        let cost = |max| Budget {
            max_cost_usd: Some(max),
            ..Budget::default()
        };
        assert!(cost(0.5).is_spent(&usage));
        assert!(!cost(0.75).is_spent(&usage));
    }
}
