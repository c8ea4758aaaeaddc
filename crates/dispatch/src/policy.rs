//! The dispatcher's limits.

use std::time::Duration;

/// The limits the dispatcher enforces across bots. The defaults suit a chat
/// room: six bot messages a minute without a human stop the bots, chains of
/// bots answering bots end after eight hops, at most three bots answer one
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Loop guard: how many bot-authored events in a row (with no human chat
    /// between them) within [`loop_window`](Self::loop_window) stop every wake.
    /// `0` turns the guard off.
    pub loop_events: usize,
    /// Loop guard: how far back, from `now`, bot-authored events count.
    pub loop_window: Duration,
    /// Hop limit: the deepest wake allowed. A human's entry wakes at depth 1;
    /// a bot's entry at the depth of the turn that wrote it, plus one.
    pub max_depth: u32,
    /// Fanout cap: at most this many bots wake for one event.
    pub max_fanout: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            loop_events: 6,
            loop_window: Duration::from_secs(60),
            max_depth: 8,
            max_fanout: 3,
        }
    }
}
