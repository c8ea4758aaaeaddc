//! A page of sessions: what is asked ([`ListSessions`]) and answered
//! ([`SessionPage`]).

use crate::info::SessionInfo;
use crate::state::SessionStatus;

use super::cursor::SessionCursor;

/// How many sessions a page holds unless asked otherwise.
pub const DEFAULT_PAGE_SIZE: usize = 50;

/// The most sessions a page holds.
pub const MAX_PAGE_SIZE: usize = 200;

/// Which page of sessions to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListSessions {
    /// At most this many (1 to [`MAX_PAGE_SIZE`]; more is cut to it).
    pub limit: usize,
    /// After this place (the previous page's
    /// [`next_cursor`](SessionPage::next_cursor)); from the newest when
    /// none.
    pub cursor: Option<SessionCursor>,
    /// Only sessions that stand so.
    pub status: Option<SessionStatus>,
}

impl Default for ListSessions {
    fn default() -> Self {
        Self {
            limit: DEFAULT_PAGE_SIZE,
            cursor: None,
            status: None,
        }
    }
}

/// A page of sessions, newest first (by `updated_at`, then id).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPage {
    /// The sessions.
    pub sessions: Vec<SessionInfo>,
    /// Where the next page starts; none when this is the last.
    pub next_cursor: Option<SessionCursor>,
}
