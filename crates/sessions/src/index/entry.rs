//! What the index keeps of a session: what a list orders, filters and
//! shows it by, and nothing of its history.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::state::{SessionState, SessionStatus};

/// A session's index entry (a small JSON object in the index's table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexEntry {
    /// The user it belongs to.
    pub(crate) owner: Option<Arc<str>>,
    /// Where it stands.
    pub(crate) status: SessionStatus,
    /// When it was created (Unix ms).
    pub(crate) created_at: i64,
    /// When its last entry was written (Unix ms): the list's order.
    pub(crate) updated_at: i64,
    /// What it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<Arc<str>>,
    /// The last seq of its thread this entry was made from: an entry from
    /// an older state never replaces one from a newer.
    pub(crate) last_seq: u64,
}

impl IndexEntry {
    /// The entry of a session in `state` (`None` when it holds none).
    pub(crate) fn of(state: &SessionState) -> Option<Self> {
        let created = state.created.as_ref()?;
        Some(Self {
            owner: created.owner.clone(),
            status: state.status(),
            created_at: state.created_at,
            updated_at: state.updated_at,
            title: state.title.clone(),
            last_seq: state.upto,
        })
    }

    /// The entry of a session whose thread cannot be read: listed so, for
    /// the callers who may see sessions of no owner.
    pub(crate) fn unreadable() -> Self {
        Self {
            owner: None,
            status: SessionStatus::Unreadable,
            created_at: 0,
            updated_at: 0,
            title: None,
            last_seq: 0,
        }
    }
}
