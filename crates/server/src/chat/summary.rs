//! A session as the chat API lists it (`GET /api/chat/sessions`) and
//! names it beside a transcript or a new session: the spec's camelCase
//! fields, by which a client continues it (`sessionId`, `sessionFile`)
//! and orders it (`modifiedAt`).

use std::sync::Arc;

use roundtable_sessions::{SessionInfo, SessionMode, SessionStatus};
use serde::Serialize;

use super::ChatState;

/// A session's listing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionSummary {
    /// Its id.
    session_id: Arc<str>,
    /// Its thread file, when the store keeps files.
    #[serde(skip_serializing_if = "Option::is_none")]
    session_file: Option<Arc<str>>,
    /// What it is about: the first line of its first message (absent
    /// before one).
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<Arc<str>>,
    /// When it was created (RFC 3339).
    created_at: String,
    /// When it last changed (RFC 3339): lists are ordered by it, newest
    /// first.
    modified_at: String,
    /// Where it stands.
    status: SessionStatus,
    /// Agent or plan mode.
    mode: SessionMode,
    /// True while a turn runs: a prompt then needs `streamingBehavior`.
    running: bool,
}

impl SessionSummary {
    /// The listing of `session`, served by `api`.
    pub(crate) fn of(api: &ChatState, session: &SessionInfo) -> Self {
        Self {
            session_id: session.id.clone(),
            session_file: api.session_file(&session.id),
            title: session.title.clone(),
            created_at: session.created_at.clone(),
            modified_at: session.updated_at.clone(),
            status: session.status,
            mode: session.mode,
            running: session.running_turn_id.is_some(),
        }
    }

    /// Its thread file, when the store keeps files.
    pub(crate) fn session_file(&self) -> Option<&Arc<str>> {
        self.session_file.as_ref()
    }
}
