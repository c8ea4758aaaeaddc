//! A session's conversation as chat messages (`GET /api/chat/session`):
//! its stored events, read through the same [`ChatView`] the stream uses,
//! so a reloaded page shows exactly what the stream showed.

use std::collections::HashMap;
use std::sync::Arc;

use roundtable_sessions::{SessionEvent, SessionInfo};
use serde::Serialize;

use super::protocol::{ChatMessage, ChatStreamEvent, StreamSession};
use super::summary::SessionSummary;
use super::view::{ChatView, user_message};

/// A session and its messages.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Transcript {
    /// The session's listing (`sessionId`, `sessionFile`, ...).
    #[serde(flatten)]
    summary: SessionSummary,
    /// The whole session.
    session: SessionInfo,
    messages: Vec<ChatMessage>,
}

impl Transcript {
    /// The transcript of `session`, from all its `events`. An assistant
    /// message sits where its turn started; a turn still running shows
    /// what it wrote so far.
    pub(crate) fn of(
        summary: SessionSummary,
        session: SessionInfo,
        events: &[SessionEvent],
    ) -> Self {
        // The view starts before the first event: agent mode, no plan.
        let named = StreamSession {
            session_id: session.id.clone(),
            session_file: summary.session_file().cloned(),
            session_reset: false,
        };
        let mut view = ChatView::new(named, Default::default(), None);
        let mut messages: Vec<Option<ChatMessage>> = Vec::new();
        let mut slots: HashMap<Arc<str>, usize> = HashMap::new();
        for event in events {
            if let Some(message) = user_message(event) {
                messages.push(Some(message));
            }
            for chat in view.apply(event) {
                match chat {
                    ChatStreamEvent::Start { id, .. } => {
                        slots.insert(id, messages.len());
                        messages.push(None);
                    }
                    ChatStreamEvent::Done {
                        run_id, message, ..
                    } => {
                        if let Some(slot) = slots.remove(&run_id)
                            && let Some(place) = messages.get_mut(slot)
                        {
                            *place = Some(message);
                        }
                    }
                    _ => {}
                }
            }
        }
        for (turn, slot) in slots {
            if let Some(place) = messages.get_mut(slot) {
                *place = view.open_message(&turn);
            }
        }
        Self {
            summary,
            session,
            messages: messages.into_iter().flatten().collect(),
        }
    }
}
