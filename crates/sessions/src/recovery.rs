//! What a start-up recovery found ([`SessionEngine::recover`]), and the
//! error of a session whose thread cannot be read.
//!
//! [`SessionEngine::recover`]: crate::SessionEngine::recover

use roundtable_thread_stream::StoreError;

use crate::caller::{Caller, UnownedSessions};
use crate::error::SessionError;
use crate::ids::SessionId;

/// What [`SessionEngine::recover`](crate::SessionEngine::recover) did: the
/// sessions it closed dead turns of or resumed, and those it could not
/// read. One session that cannot be read stops no other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The sessions whose dead turns were closed or whose queue resumed.
    pub touched: Vec<SessionId>,
    /// The sessions left as they are, each with why.
    pub unreadable: Vec<UnreadableSession>,
}

/// A session recovery could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableSession {
    /// The session's id (its thread's name).
    pub id: String,
    /// Why, in words that name no path of the server's disk.
    pub reason: String,
}

/// The error of session `session` whose thread the store finds damaged, as
/// `caller` sees it: the owner is written in the thread that cannot be
/// read, so only a caller who may use sessions of no owner learns that the
/// session exists; to others it is unknown.
pub(crate) fn unreadable(
    caller: &Caller,
    unowned: UnownedSessions,
    session: &str,
    error: &StoreError,
) -> SessionError {
    let may_see = matches!(caller, Caller::Host) || unowned == UnownedSessions::Anyone;
    if !may_see {
        return SessionError::UnknownSession(session.to_string());
    }
    let reason = match error {
        StoreError::Corrupt { message, .. } => format!("its stored thread is damaged: {message}"),
        _ => "its stored thread is damaged".to_string(),
    };
    SessionError::Unreadable {
        session: session.to_string(),
        reason,
    }
}
