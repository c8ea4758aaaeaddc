//! The rooms index: a thread of the store (`rooms-index`) where each
//! process lists the rooms it opens, and which every process follows
//! ([`discovery`](super::discovery)), so a room opened through one process
//! is served (listed, followed by its bots) by all of them without a
//! restart.

use roundtable_thread_stream::{EntryBody, Expect, NewEntry, Signal, ThreadId, ThreadStore};
use serde::{Deserialize, Serialize};

use super::record::SERVER_AUTHOR;

/// The index thread's id (not a room's: it lacks the rooms' prefix).
pub(crate) const INDEX_THREAD: &str = "rooms-index";

/// The signal that lists a room.
const LISTED: &str = "room.listed";

/// `signal.room.listed`.
#[derive(Debug, Serialize, Deserialize)]
struct Listed {
    room: String,
}

/// Lists `room` in the index. A failure is logged: the room is served
/// here, and other processes find it on first request or at start.
pub(crate) async fn list(store: &dyn ThreadStore, index: &ThreadId, room: &ThreadId) {
    let data = Listed {
        room: room.to_string(),
    };
    let Ok(signal) = Signal::encode(LISTED, &data) else {
        return;
    };
    let entry = NewEntry::new(SERVER_AUTHOR, EntryBody::Signal(signal));
    if let Err(error) = store.append(index, Expect::Any, vec![entry]).await {
        tracing::warn!(%room, %error, "room not listed in the rooms index");
    }
}

/// The room an index entry lists, if it lists one.
pub(crate) fn listed_room(body: &EntryBody) -> Option<ThreadId> {
    let EntryBody::Signal(signal) = body else {
        return None;
    };
    if signal.name != LISTED {
        return None;
    }
    let Listed { room } = signal.data.decode().ok()?;
    ThreadId::new(&room).ok()
}
