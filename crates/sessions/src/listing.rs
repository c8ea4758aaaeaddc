//! The engine calls over the session index: listing sessions a page at a
//! time, deleting one with its files, and deleting those idle past the
//! engine's retention.

use roundtable_providers::now_millis;
use roundtable_thread_stream::{Expect, NewEntry, StoreError};

use crate::caller::{Caller, UnownedSessions};
use crate::core::{EngineCore, MAX_ATTEMPTS};
use crate::engine::SessionEngine;
use crate::error::SessionError;
use crate::ids::SessionId;
use crate::index::{ListSessions, MAX_PAGE_SIZE, SessionPage, View};
use crate::info::SessionInfo;
use crate::records::{SessionDeleted, SessionRecord};
use crate::runtime::SessionRuntime;

impl SessionEngine {
    /// A page of the sessions `caller` may use, newest first (by
    /// `updated_at`, then id), read from the session index: it costs the
    /// sessions of the page, not every session's history.
    pub async fn list_page(
        &self,
        caller: &Caller,
        query: &ListSessions,
    ) -> Result<SessionPage, SessionError> {
        let core = self.core();
        let view = view_of(caller, core.unowned);
        let limit = query.limit.clamp(1, MAX_PAGE_SIZE);
        let (ids, next_cursor) = core
            .index
            .page(
                &*core.store,
                &view,
                query.cursor.as_ref(),
                query.status,
                limit,
            )
            .await?;
        let mut sessions = Vec::with_capacity(ids.len());
        for id in ids {
            match self.get(caller, &id).await {
                Ok(info) => sessions.push(info),
                // Deleted since the index was read.
                Err(SessionError::UnknownSession(_) | SessionError::InvalidId(_)) => {}
                // Listed so, for a caller who may know of it.
                Err(SessionError::Unreadable { .. }) => sessions.push(SessionInfo::unreadable(&id)),
                Err(e) => return Err(e),
            }
        }
        Ok(SessionPage {
            sessions,
            next_cursor,
        })
    }

    /// Every session `caller` may use, most recently active first (page
    /// after page of [`list_page`](Self::list_page)).
    pub async fn list(&self, caller: &Caller) -> Result<Vec<SessionInfo>, SessionError> {
        let mut query = ListSessions {
            limit: MAX_PAGE_SIZE,
            ..ListSessions::default()
        };
        let mut sessions = Vec::new();
        loop {
            let page = self.list_page(caller, &query).await?;
            sessions.extend(page.sessions);
            match page.next_cursor {
                Some(next) => query.cursor = Some(next),
                None => return Ok(sessions),
            }
        }
    }

    /// Deletes `session` with everything it keeps: its thread, its
    /// `session.json` and folder, its attachments and artifacts, and its
    /// index entry. Refused with [`SessionError::Busy`] while this or
    /// another process runs a turn in it or its queue holds messages; an
    /// unknown session, or another user's, is
    /// [`SessionError::UnknownSession`].
    pub async fn delete(&self, caller: &Caller, session: &str) -> Result<(), SessionError> {
        let core = self.core();
        let runtime = core.runtime(caller, session).await?;
        mark_deleted(core, &runtime).await?;
        crate::erase::erase(core, &runtime.id).await
    }

    /// Deletes the sessions idle (nothing written) for longer than the
    /// engine's [`retention`](crate::SessionEngineBuilder::retention); none
    /// without one. A daemon calls it at start and then every hour or so.
    /// A session busy meanwhile is kept. Returns the sessions deleted.
    pub async fn delete_idle_sessions(&self) -> Result<Vec<SessionId>, SessionError> {
        let core = self.core();
        let Some(retention) = core.retention else {
            return Ok(Vec::new());
        };
        let idle_ms = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        let before = now_millis().saturating_sub(idle_ms);
        let mut deleted = Vec::new();
        for id in core.index.idle_before(&*core.store, before).await? {
            match self.delete(&Caller::Host, &id).await {
                Ok(()) => deleted.push(SessionId::parse(&id)?),
                Err(SessionError::Busy(_) | SessionError::UnknownSession(_)) => {}
                Err(SessionError::Unreadable { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(deleted)
    }
}

/// Whose sessions `caller` sees in a list.
fn view_of(caller: &Caller, unowned: UnownedSessions) -> View {
    let shared = unowned == UnownedSessions::Anyone;
    match caller {
        Caller::Host => View::All,
        Caller::User(user) => {
            let mut owners = vec![Some(user.clone())];
            if shared {
                owners.push(None);
            }
            View::Owners(owners)
        }
        Caller::Anonymous if shared => View::Owners(vec![None]),
        Caller::Anonymous => View::Owners(Vec::new()),
    }
}

/// Writes the session's last entry, [`SessionDeleted`], when nothing runs
/// or waits in it: from then on every call finds no session.
async fn mark_deleted(core: &EngineCore, runtime: &SessionRuntime) -> Result<(), SessionError> {
    let session = runtime.id.as_str();
    for _ in 0..MAX_ATTEMPTS {
        let state = runtime.refresh(&*core.store).await?;
        if state.created.is_none() {
            return Err(SessionError::UnknownSession(session.to_string()));
        }
        let busy = state.running_turn().is_some()
            || !state.queue.is_empty()
            || runtime.local().is_some()
            || runtime.is_busy();
        if busy {
            return Err(SessionError::Busy(session.to_string()));
        }
        let expect = Expect::LastSeq(state.upto);
        drop(state);
        let entry = NewEntry::new(core.agent.clone(), SessionDeleted {}.to_body()?);
        match core
            .store
            .append(&runtime.thread, expect, vec![entry])
            .await
        {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(SessionError::Conflict(format!(
        "session {session} changed {MAX_ATTEMPTS} times while it was being deleted; try again"
    )))
}
