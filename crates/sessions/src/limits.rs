//! How far a session's turns may go: the engine's defaults for coding work,
//! and the limits a session chose when it was created.
//!
//! A coding turn reads, edits and tests for many rounds, and waits on
//! people (approvals, `ask_user`) for as long as they take; so a session's
//! turn has no wall clock. What bounds it instead: a high round cap against
//! a runaway loop, a stall timeout on every model stream (sent again a few
//! times before the turn fails), a timeout on every command, and the
//! optional budget a session sets.

use std::time::Duration;

use roundtable_chat_runner::Limits;
use roundtable_tools::workspace::CommandLimits;
use serde::{Deserialize, Serialize};

use crate::error::SessionError;

/// The default cap on model calls per session turn. Coding agents (codex,
/// pi) have none: an ordinary refactor takes dozens of rounds. 200 is far
/// above what real work needs, and only stops a model that loops.
pub const DEFAULT_SESSION_MAX_ROUNDS: u32 = 200;

/// The default stall timeout of a session's model streams: how long a
/// response may send no byte before it counts as stalled. A reasoning model
/// may think silently for a long time before its first token, so this is
/// generous; a stream that is really dead still ends within minutes.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(120);

/// How many times a session turn sends a stalled model call again (when
/// none of its output was shown yet) before the turn fails: a stall is
/// most often a dropped connection that a new request fixes.
pub const DEFAULT_STALL_RETRIES: u32 = 2;

/// The limits of a session's turns when the host sets none: the round cap
/// of [`DEFAULT_SESSION_MAX_ROUNDS`], no wall clock (a turn that waits on a
/// person must not time out), [`DEFAULT_STALL_RETRIES`], no budget.
pub fn default_turn_limits() -> Limits {
    Limits::default()
        .with_max_rounds(DEFAULT_SESSION_MAX_ROUNDS)
        .with_timeout(None)
        .with_stall_retries(DEFAULT_STALL_RETRIES)
}

/// The command limits of a session's `shell` and `verify` when the host
/// sets none: 5 minutes unless the call asks for less (a build or a test
/// suite often takes minutes), 30 at most; the command's process group is
/// killed when its time is up.
pub fn default_command_limits() -> CommandLimits {
    CommandLimits {
        default_timeout: Duration::from_secs(5 * 60),
        max_timeout: Duration::from_secs(30 * 60),
        ..CommandLimits::default()
    }
}

/// The limits a session chose for its turns, over the engine's: what is
/// unset here is the engine's. Stored with the session when it is created,
/// so that they hold on any process and after a restart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SessionLimits {
    /// Model calls per turn (at least 1). When the last allowed round still
    /// calls tools, they run and the turn ends with `max-rounds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Tokens a turn may use; past it, the turn ends with `budget` after
    /// the round that passed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// What a turn may cost in US dollars; past it, the turn ends with
    /// `budget` after the round that passed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl SessionLimits {
    /// True when the session chose nothing (the engine's limits apply).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The limits of the session's turns: `engine`'s with this session's
    /// choices over them.
    pub fn over(&self, engine: Limits) -> Limits {
        let mut limits = engine;
        if let Some(max) = self.max_rounds {
            limits = limits.with_max_rounds(max);
        }
        if self.max_tokens.is_some() || self.max_cost_usd.is_some() {
            let mut budget = engine.budget.unwrap_or_default();
            budget.max_tokens = self.max_tokens.or(budget.max_tokens);
            budget.max_cost_usd = self.max_cost_usd.or(budget.max_cost_usd);
            limits.budget = Some(budget);
        }
        limits
    }

    /// Refuses limits no turn could run under.
    pub(crate) fn check(&self) -> Result<(), SessionError> {
        if self.max_rounds == Some(0) {
            return Err(invalid("limits.max_rounds", "it must be at least 1"));
        }
        if self.max_tokens == Some(0) {
            return Err(invalid("limits.max_tokens", "it must be at least 1"));
        }
        if let Some(cost) = self.max_cost_usd
            && !(cost.is_finite() && cost > 0.0)
        {
            return Err(invalid("limits.max_cost_usd", "it must be above 0"));
        }
        Ok(())
    }
}

fn invalid(field: &'static str, reason: &str) -> SessionError {
    SessionError::InvalidField {
        field,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use roundtable_chat_runner::limits::Budget;

    use super::*;

    #[test]
    fn a_sessions_choices_go_over_the_engines_limits() {
        let engine = default_turn_limits();
        // No wall clock: a turn may wait on a person for as long as it takes.
        assert_eq!(engine.timeout, None);
        assert_eq!(engine.max_rounds, DEFAULT_SESSION_MAX_ROUNDS);
        assert_eq!(engine.stall_retries, DEFAULT_STALL_RETRIES);
        assert_eq!(engine.budget, None);
        assert_eq!(SessionLimits::default().over(engine), engine);
        let chosen = SessionLimits {
            max_rounds: Some(3),
            max_cost_usd: Some(0.5),
            ..SessionLimits::default()
        };
        let limits = chosen.over(engine.with_budget(Some(Budget {
            max_tokens: Some(1000),
            max_cost_usd: Some(2.0),
        })));
        assert_eq!(limits.max_rounds, 3);
        assert_eq!(limits.timeout, None);
        assert_eq!(
            limits.budget,
            Some(Budget {
                max_tokens: Some(1000),
                max_cost_usd: Some(0.5),
            })
        );
    }

    #[test]
    fn limits_no_turn_could_run_under_are_refused() {
        for bad in [
            SessionLimits {
                max_rounds: Some(0),
                ..SessionLimits::default()
            },
            SessionLimits {
                max_tokens: Some(0),
                ..SessionLimits::default()
            },
            SessionLimits {
                max_cost_usd: Some(f64::NAN),
                ..SessionLimits::default()
            },
            SessionLimits {
                max_cost_usd: Some(-1.0),
                ..SessionLimits::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(SessionLimits::default().check().is_ok());
    }

    #[test]
    fn old_sessions_read_without_limits() {
        let read: SessionLimits = serde_json::from_str("{}").unwrap();
        assert!(read.is_empty());
        let written = serde_json::to_value(SessionLimits {
            max_rounds: Some(5),
            ..SessionLimits::default()
        })
        .unwrap();
        assert_eq!(written, serde_json::json!({"max_rounds": 5}));
    }
}
