//! How far a turn may go.

use std::time::Duration;

/// The default cap on model calls per turn.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

/// The default per-turn timeout.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// Limits of one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Model calls ("rounds") per turn, at least 1. When the last allowed
    /// round still calls tools, those tools run (so every call has its
    /// result) and the turn ends with `max-rounds`. Default 8.
    pub max_rounds: u32,
    /// Wall time for the whole turn; `None` for no limit. When it fires the
    /// turn is cancelled the same way as a host cancellation and ends with
    /// `timeout`. Default 120 s.
    pub timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_rounds: DEFAULT_MAX_ROUNDS,
            timeout: Some(DEFAULT_TURN_TIMEOUT),
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
}
