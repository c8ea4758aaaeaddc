//! The rooms a server knows, each kept as the fold of its thread, and the
//! changes of a room (open, join, leave, override): each is one appended
//! room signal, applied to the fold and to the bots' runner once stored.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use roundtable_chat_runner::ThreadRunner;
use roundtable_dispatch::{Roster, ThreadContext};
use roundtable_sessions::Caller;
use roundtable_thread_stream::{
    Expect, NewEntry, StoreError, ThreadId, ThreadStore, fresh_uuid_v7,
};

use super::catalogue::Catalogue;
use super::identity::{no_room, sees};
use super::record::{self, Member, MemberKind, OverrideMode, Room};
use crate::api_error::{ApiError, ErrorCode};

/// The prefix of every room's thread id: the store may hold other threads.
pub(crate) const ROOM_PREFIX: &str = "room-";

/// One room: its fold, and the lock its changes take.
#[derive(Debug)]
pub(crate) struct RoomCell {
    room: Mutex<Room>,
    /// Held while a change is written and applied, so that changes of one
    /// room apply in the order they are stored.
    writes: tokio::sync::Mutex<()>,
}

impl RoomCell {
    fn new(room: Room) -> Self {
        Self {
            room: Mutex::new(room),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// The room as it is now.
    pub(crate) fn snapshot(&self) -> Room {
        lock(&self.room).clone()
    }

    /// Holds the room's changes back until the guard drops: what is
    /// written meanwhile is written for the room as it is.
    pub(crate) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writes.lock().await
    }
}

/// A change of a room's roster or overrides.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// A participant joins.
    Join(Member),
    /// A participant leaves (or is removed).
    Leave(Arc<str>),
    /// A bot's override is set, or cleared with `None`.
    Override(Arc<str>, Option<OverrideMode>),
}

/// Every room of the store, and the runner their bots answer through.
pub(crate) struct Directory {
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) catalogue: Catalogue,
    pub(crate) runner: ThreadRunner,
    rooms: RwLock<BTreeMap<ThreadId, Arc<RoomCell>>>,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

impl Directory {
    pub(crate) fn new(
        store: Arc<dyn ThreadStore>,
        catalogue: Catalogue,
        runner: ThreadRunner,
    ) -> Self {
        Self {
            store,
            catalogue,
            runner,
            rooms: RwLock::new(BTreeMap::new()),
        }
    }

    /// Reads every room of the store and has their bots follow them (a
    /// restart: each room resumes). Returns how many rooms there are.
    pub(crate) async fn load(&self) -> Result<usize, StoreError> {
        for thread in self.store.list_threads().await? {
            if !thread.as_str().starts_with(ROOM_PREFIX) {
                continue;
            }
            let entries = self.store.read_all(&thread).await?;
            let Some(mut room) = entries.first().and_then(Room::opened_by) else {
                tracing::warn!(thread = %thread, "a room thread without its opening entry is skipped");
                continue;
            };
            for entry in &entries[1..] {
                room.apply(entry);
            }
            if let Err(error) = self.attach(&room).await {
                tracing::error!(room = %room.id, %error, "room not served");
                continue;
            }
            write(&self.rooms).insert(room.id.clone(), Arc::new(RoomCell::new(room)));
        }
        Ok(read(&self.rooms).len())
    }

    /// Tells the runner who is in `room` and how its bots wake there, then
    /// follows it.
    async fn attach(&self, room: &Room) -> Result<(), String> {
        let roster = self.catalogue.roster_of(room).map_err(|e| e.to_string())?;
        self.runner.set_roster(&room.id, roster);
        for (bot, mode) in &room.overrides {
            self.runner
                .set_override(&room.id, bot, mode.trigger_override());
        }
        let context = ThreadContext::new(room.id.as_str()).with_title(room.title.clone());
        self.runner
            .follow_with(&room.id, context)
            .await
            .map_err(|e| e.to_string())
    }

    /// The room `id` if the caller sees it; 404 otherwise, whether it does
    /// not exist or the caller is not in it.
    pub(crate) fn find(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<(Arc<RoomCell>, Room), ApiError> {
        let thread = ThreadId::new(id).map_err(|_| no_room(id))?;
        let cell = read(&self.rooms)
            .get(&thread)
            .cloned()
            .ok_or_else(|| no_room(id))?;
        let room = cell.snapshot();
        if !sees(caller, &room) {
            return Err(no_room(id));
        }
        Ok((cell, room))
    }

    /// Opens a room titled `title` with `members` (the first is its
    /// creator, `author`).
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
        self.attach(&room).await.map_err(ApiError::internal)?;
        write(&self.rooms).insert(room.id.clone(), Arc::new(RoomCell::new(room.clone())));
        Ok(room)
    }

    /// Applies `change` to the room `id` on behalf of `author`: checked
    /// against the room as it is, stored, then applied.
    pub(crate) async fn change(
        &self,
        caller: &Caller,
        author: &str,
        id: &str,
        change: Change,
    ) -> Result<Room, ApiError> {
        let (cell, _) = self.find(caller, id)?;
        let _writing = cell.hold().await;
        let room = cell.snapshot();
        let entry = self.entry_of(&room, author, &change)?;
        let stored = self
            .store
            .append(&room.id, Expect::Any, vec![entry])
            .await
            .map_err(ApiError::internal)?;
        let mut next = room;
        for entry in &stored {
            next.apply(entry);
        }
        self.apply_to_runner(&next, &change)?;
        *lock(&cell.room) = next.clone();
        Ok(next)
    }

    /// The entry that makes `change`, or why it cannot be made.
    fn entry_of(&self, room: &Room, author: &str, change: &Change) -> Result<NewEntry, ApiError> {
        match change {
            Change::Join(member) => {
                if room.is_member(&member.id) {
                    return Err(ApiError::new(
                        ErrorCode::Conflict,
                        format!("{} is already in the room", member.id),
                    ));
                }
                let mut next = room.clone();
                next.members.push(member.clone());
                self.roster(&next)?;
                Ok(record::joined(author, member.clone()))
            }
            Change::Leave(member) => {
                if !room.is_member(member) {
                    return Err(not_in_room(member));
                }
                Ok(record::left(author, member))
            }
            Change::Override(bot, mode) => {
                match room.member(bot) {
                    Some(m) if m.kind == MemberKind::Bot => {}
                    _ => {
                        return Err(ApiError::new(
                            ErrorCode::NotFound,
                            format!("no bot {bot} in the room"),
                        ));
                    }
                }
                Ok(record::override_set(author, bot, *mode))
            }
        }
    }

    /// Tells the runner what `change` changed in `room` (already applied).
    fn apply_to_runner(&self, room: &Room, change: &Change) -> Result<(), ApiError> {
        match change {
            Change::Join(_) | Change::Leave(_) => {
                let roster = self.roster(room)?;
                self.runner.set_roster(&room.id, roster);
                if let Change::Leave(member) = change {
                    self.runner.clear_override(&room.id, member);
                }
            }
            Change::Override(bot, Some(mode)) => {
                self.runner
                    .set_override(&room.id, bot, mode.trigger_override());
            }
            Change::Override(bot, None) => self.runner.clear_override(&room.id, bot),
        }
        Ok(())
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
        let rooms = read(&self.rooms);
        let mut page = Vec::with_capacity(limit);
        let mut more = false;
        // Room ids hold a UUID v7: their order is their opening order.
        for (id, cell) in rooms.iter().rev() {
            if after.is_some_and(|after| id.as_str() >= after) {
                continue;
            }
            let room = cell.snapshot();
            if !sees(caller, &room) {
                continue;
            }
            if page.len() == limit {
                more = true;
                break;
            }
            page.push(room);
        }
        (page, more)
    }

    /// True when `thread` is one of the rooms.
    pub(crate) fn knows(&self, thread: &ThreadId) -> bool {
        read(&self.rooms).contains_key(thread)
    }
}

/// The answer for a participant the room does not hold.
pub(crate) fn not_in_room(id: &str) -> ApiError {
    let shown: String = id.chars().take(80).collect();
    ApiError::new(ErrorCode::NotFound, format!("{shown} is not in the room"))
}

/// A lock whose holder cannot leave it half-changed: each change is one
/// assignment, so a poisoned lock still holds a consistent value.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
