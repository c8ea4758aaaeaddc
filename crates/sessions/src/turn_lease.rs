//! A session's turn lease key: the process running a session's open turn
//! holds `turn.<session>` ([`TurnLeases`](roundtable_chat_runner::lifecycle::TurnLeases));
//! when it dies another process carries the turn on
//! ([`takeover`](crate::takeover)).

use crate::ids::SessionId;

/// The prefix of a session's lease key.
const KEY_PREFIX: &str = "turn.";

/// The lease key of `session`'s turns.
pub(crate) fn key_of(session: &SessionId) -> String {
    format!("{KEY_PREFIX}{session}")
}

/// The session a lease key names, if it names one.
pub(crate) fn session_of(key: &str) -> Option<SessionId> {
    SessionId::parse(key.strip_prefix(KEY_PREFIX)?).ok()
}
