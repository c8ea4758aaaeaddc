//! The rooms this process knows, each kept as the fold of its thread.
//!
//! The fold is made by the bots' runner: its follower shows every entry of
//! a room to [`RoomFold`] (an [`EntryObserver`]) in seq order before
//! dispatching it, so the roster and overrides a bot wakes by are the ones
//! the thread held at that entry, on every process over the store, whoever
//! wrote the change. Nothing else writes a room's fold.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use roundtable_chat_runner::{EntryObserver, ThreadRunner};
use roundtable_thread_stream::{Entry, EntryBody, ThreadId};
use tokio::sync::watch;

use roundtable_chat_runner::lifecycle::records::ApprovalDecidedRecord;

use super::approvals::RoomApprovals;
use super::catalogue::Catalogue;
use super::record::{JOINED, LEFT, OVERRIDE, Room};

/// One room: its fold, the seq the fold reaches, and the lock local
/// writers take.
#[derive(Debug)]
pub(crate) struct RoomCell {
    room: Mutex<Room>,
    /// The last seq folded in.
    applied: watch::Sender<u64>,
    /// Held while this process checks and writes a change or a post, so
    /// that its own writes are checked one after another.
    writes: tokio::sync::Mutex<()>,
}

impl RoomCell {
    /// The cell of `room`, folded up to seq `applied`.
    fn new(room: Room, applied: u64) -> Self {
        Self {
            room: Mutex::new(room),
            applied: watch::Sender::new(applied),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// The room as folded so far, and the seq it reaches.
    pub(crate) fn snapshot(&self) -> (Room, u64) {
        let room = lock(&self.room);
        (room.clone(), *self.applied.borrow())
    }

    /// Holds this process's writes to the room until the guard drops.
    pub(crate) async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writes.lock().await
    }

    /// Waits (at most `limit`) until the fold reaches `seq`: a change
    /// answered after it shows in the next read of the room.
    pub(crate) async fn reached(&self, seq: u64, limit: Duration) -> bool {
        let mut applied = self.applied.subscribe();
        tokio::time::timeout(limit, applied.wait_for(|at| *at >= seq))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Folds `entry` in when it is the next one; true when it changed who
    /// is in the room or how its bots wake.
    fn fold(&self, entry: &Entry) -> bool {
        let mut room = lock(&self.room);
        let applied = *self.applied.borrow();
        if entry.seq <= applied {
            return false;
        }
        room.apply(entry);
        self.applied.send_replace(entry.seq);
        is_room_signal(entry)
    }
}

/// True when `entry` may change a room's members or overrides.
fn is_room_signal(entry: &Entry) -> bool {
    matches!(&entry.body, EntryBody::Signal(s) if [JOINED, LEFT, OVERRIDE].contains(&s.name.as_str()))
}

/// Every room this process knows, by thread, and the catalogue their
/// rosters take bots from.
#[derive(Debug)]
pub(crate) struct RoomFold {
    catalogue: Catalogue,
    approvals: RoomApprovals,
    rooms: RwLock<BTreeMap<ThreadId, Arc<RoomCell>>>,
}

impl RoomFold {
    pub(crate) fn new(catalogue: Catalogue, approvals: RoomApprovals) -> Self {
        Self {
            catalogue,
            approvals,
            rooms: RwLock::new(BTreeMap::new()),
        }
    }

    /// The cell of room `thread`, if known.
    pub(crate) fn get(&self, thread: &ThreadId) -> Option<Arc<RoomCell>> {
        read(&self.rooms).get(thread).cloned()
    }

    /// Knows `room` (opened by the entry at seq 1) from now on; the cell
    /// already there when another task got to it first.
    pub(crate) fn insert(&self, room: Room) -> Arc<RoomCell> {
        write(&self.rooms)
            .entry(room.id.clone())
            .or_insert_with(|| Arc::new(RoomCell::new(room, 1)))
            .clone()
    }

    /// Every room, newest first (room ids hold a UUID v7: their order is
    /// their opening order), from before `after` on when given.
    pub(crate) fn newest_first(&self, after: Option<&str>) -> Vec<Arc<RoomCell>> {
        read(&self.rooms)
            .iter()
            .rev()
            .filter(|(id, _)| after.is_none_or(|after| id.as_str() < after))
            .map(|(_, cell)| cell.clone())
            .collect()
    }

    /// Tells `runner` who is in `room` and how each catalogue bot wakes
    /// there.
    pub(crate) fn tell(&self, runner: &ThreadRunner, room: &Room) {
        match self.catalogue.roster_of(room) {
            Ok(roster) => runner.set_roster(&room.id, roster),
            Err(error) => tracing::warn!(room = %room.id, %error, "room roster not changed"),
        }
        for bot in self.catalogue.bots() {
            match room.overrides.get(&bot.id) {
                Some(mode) => runner.set_override(&room.id, &bot.id, mode.trigger_override()),
                None => runner.clear_override(&room.id, &bot.id),
            }
        }
    }
}

impl EntryObserver for RoomFold {
    fn observe(&self, runner: &ThreadRunner, entry: &Entry) {
        let Some(cell) = self.get(&entry.thread) else {
            return;
        };
        if cell.fold(entry) {
            let (room, _) = cell.snapshot();
            self.tell(runner, &room);
        } else if let Some(decided) = ApprovalDecidedRecord::from_body(&entry.body) {
            self.approvals.resolve(&decided);
        }
    }
}

/// A lock whose holder cannot leave it half-changed: each change is one
/// assignment, so a poisoned lock still holds a consistent value.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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
