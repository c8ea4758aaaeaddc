//! The rooms a server serves: found in the store (at start, from the
//! rooms index as other processes open them, or on first request), opened
//! here, and read for a caller. Every process over the store serves every
//! room: a room is its thread, and its fold is made from that thread.

use std::collections::BTreeMap;
use std::sync::Arc;

use roundtable_chat_runner::ThreadRunner;
use roundtable_dispatch::{Roster, ThreadContext};
use roundtable_sessions::Caller;
use roundtable_thread_stream::{Expect, StoreError, ThreadId, ThreadStore, fresh_uuid_v7};

use super::catalogue::Catalogue;
use super::fold::{RoomCell, RoomFold};
use super::identity::{no_room, sees};
use super::index;
use super::record::{self, Member, Room};
use crate::api_error::{ApiError, ErrorCode};

/// The prefix of every room's thread id: the store holds other threads
/// (sessions) beside them.
pub(crate) const ROOM_PREFIX: &str = "room-";

/// Every room of the store, and the runner their bots answer through.
pub(crate) struct Directory {
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) catalogue: Catalogue,
    pub(crate) runner: ThreadRunner,
    pub(crate) fold: Arc<RoomFold>,
    /// The rooms index's thread.
    pub(crate) index: ThreadId,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

impl Directory {
    /// Serves every room of the store and has their bots follow them (a
    /// restart: each room resumes). Returns how many rooms there are and
    /// the rooms index's seq they cover (its later entries name rooms
    /// opened since).
    pub(crate) async fn load(&self) -> Result<(usize, u64), StoreError> {
        let listed_upto = self.store.last_seq(&self.index).await?;
        let mut rooms = 0;
        for thread in self.store.list_threads().await? {
            if thread.as_str().starts_with(ROOM_PREFIX) && self.discover(&thread).await?.is_some() {
                rooms += 1;
            }
        }
        Ok((rooms, listed_upto))
    }

    /// The room `thread`, served from now on if it was not yet: its
    /// opening entry read, its bots following it (which folds the rest).
    /// `None` when the thread opens no room.
    pub(crate) async fn discover(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<Arc<RoomCell>>, StoreError> {
        if let Some(cell) = self.fold.get(thread) {
            return Ok(Some(cell));
        }
        if !thread.as_str().starts_with(ROOM_PREFIX) {
            return Ok(None);
        }
        let first = self.store.read(thread, 1..=1).await?;
        let Some(room) = first.first().and_then(Room::opened_by) else {
            return Ok(None);
        };
        let cell = self.fold.insert(room.clone());
        self.attach(&room).await;
        Ok(Some(cell))
    }

    /// Has the bots follow `room`: the runner's resume folds its thread
    /// into the room's cell before it dispatches anything.
    async fn attach(&self, room: &Room) {
        self.fold.tell(&self.runner, room);
        let context = ThreadContext::new(room.id.as_str()).with_title(room.title.clone());
        if let Err(error) = self.runner.follow_with(&room.id, context).await {
            tracing::error!(room = %room.id, %error, "the bots do not follow the room");
        }
    }

    /// The room `id` if the caller sees it; 404 otherwise, whether it does
    /// not exist or the caller is not in it. A caller the fold does not
    /// show in the room yet is looked for in the thread's newest entries
    /// (another process may have added them a moment ago).
    pub(crate) async fn find(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<(Arc<RoomCell>, Room), ApiError> {
        let thread = ThreadId::new(id).map_err(|_| no_room(id))?;
        let cell = self
            .discover(&thread)
            .await
            .map_err(ApiError::internal)?
            .ok_or_else(|| no_room(id))?;
        let (room, _) = cell.snapshot();
        if sees(caller, &room) {
            return Ok((cell, room));
        }
        let (room, _) = self.current(&cell).await?;
        if !sees(caller, &room) {
            return Err(no_room(id));
        }
        Ok((cell, room))
    }

    /// The room as its thread holds it now: the fold, with the entries the
    /// follower has not reached yet folded into a copy; and the seq that
    /// reaches.
    pub(crate) async fn current(&self, cell: &RoomCell) -> Result<(Room, u64), ApiError> {
        let (mut room, applied) = cell.snapshot();
        let tip = self
            .store
            .last_seq(&room.id)
            .await
            .map_err(ApiError::internal)?;
        if tip > applied {
            let newer = self
                .store
                .read(&room.id, applied + 1..=tip)
                .await
                .map_err(ApiError::internal)?;
            for entry in &newer {
                room.apply(entry);
            }
        }
        Ok((room, tip.max(applied)))
    }

    /// Opens a room titled `title` with `members` (the first is its
    /// creator, `author`), and lists it for the other processes.
    pub(crate) async fn open(
        &self,
        author: &str,
        title: &str,
        members: Vec<Member>,
    ) -> Result<Room, ApiError> {
        let id = ThreadId::new(format!("{ROOM_PREFIX}{:032x}", fresh_uuid_v7()))
            .map_err(ApiError::internal)?;
        let draft = Room {
            id: id.clone(),
            title: title.to_string(),
            created_by: Arc::from(author),
            created_at: 0,
            members: members.clone(),
            overrides: BTreeMap::new(),
            pending: Vec::new(),
            decided: Default::default(),
        };
        self.roster(&draft)?;
        let opening = record::opened(author, title, &members);
        let stored = self
            .store
            .append(&id, Expect::LastSeq(0), vec![opening])
            .await
            .map_err(ApiError::internal)?;
        let room = stored
            .first()
            .and_then(Room::opened_by)
            .ok_or_else(|| ApiError::internal("the opening entry did not read back"))?;
        index::list(&*self.store, &self.index, &room.id).await;
        self.fold.insert(room.clone());
        self.attach(&room).await;
        Ok(room)
    }

    /// The roster of `room`; 422 when its names clash (two handles alike).
    pub(crate) fn roster(&self, room: &Room) -> Result<Roster, ApiError> {
        self.catalogue
            .roster_of(room)
            .map_err(|e| ApiError::new(ErrorCode::InvalidField, e.to_string()))
    }

    /// The rooms the caller sees, newest first: at most `limit` of them,
    /// starting after room `after` (a previous page's last), and whether
    /// more follow.
    pub(crate) fn list(
        &self,
        caller: &Caller,
        limit: usize,
        after: Option<&str>,
    ) -> (Vec<Room>, bool) {
        let mut page = Vec::with_capacity(limit);
        for cell in self.fold.newest_first(after) {
            let (room, _) = cell.snapshot();
            if !sees(caller, &room) {
                continue;
            }
            if page.len() == limit {
                return (page, true);
            }
            page.push(room);
        }
        (page, false)
    }

    /// True when `thread` is one of the rooms served here.
    pub(crate) fn knows(&self, thread: &ThreadId) -> bool {
        self.fold.get(thread).is_some()
    }
}

/// The answer for a participant the room does not hold.
pub(crate) fn not_in_room(id: &str) -> ApiError {
    let shown: String = id.chars().take(80).collect();
    ApiError::new(ErrorCode::NotFound, format!("{shown} is not in the room"))
}
