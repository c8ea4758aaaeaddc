//! The rooms index: a thread of the store (`rooms-index`) where each
//! process lists the rooms it opens, and which every process follows, so
//! a room opened through one process is served (listed, followed by its
//! bots) by all of them without a restart.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use roundtable_thread_stream::{
    EntryBody, Expect, NewEntry, Signal, StoreError, ThreadId, ThreadStore,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::directory::Directory;
use super::record::SERVER_AUTHOR;

/// The index thread's id (not a room's: it lacks the rooms' prefix).
pub(crate) const INDEX_THREAD: &str = "rooms-index";

/// The signal that lists a room.
const LISTED: &str = "room.listed";

/// How long the follower waits before subscribing again after an error.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

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

/// Follows the index after seq `after` until `stop`, serving each room it
/// lists (rooms this process knows already are skipped).
pub(crate) fn follow(directory: &Arc<Directory>, after: u64, stop: CancellationToken) {
    let directory: Weak<Directory> = Arc::downgrade(directory);
    tokio::spawn(async move {
        let mut from = after + 1;
        loop {
            let Some((store, index)) = directory
                .upgrade()
                .map(|d| (d.store.clone(), d.index.clone()))
            else {
                return;
            };
            let subscribed = tokio::select! {
                s = store.subscribe(&index, from) => s,
                () = stop.cancelled() => return,
            };
            drop(store);
            match subscribed {
                Ok(mut entries) => loop {
                    let next = tokio::select! {
                        next = entries.next() => next,
                        () = stop.cancelled() => return,
                    };
                    match next {
                        Some(Ok(entry)) => {
                            from = entry.seq + 1;
                            serve(&directory, &entry.body).await;
                        }
                        Some(Err(error)) => {
                            tracing::warn!(%error, "the rooms index stream failed");
                            break;
                        }
                        None => return,
                    }
                },
                Err(StoreError::Closed) => return,
                Err(error) => tracing::warn!(%error, "the rooms index cannot be followed"),
            }
            tokio::select! {
                () = tokio::time::sleep(RESUBSCRIBE_AFTER) => {}
                () = stop.cancelled() => return,
            }
        }
    });
}

/// Serves the room an index entry lists.
async fn serve(directory: &Weak<Directory>, body: &EntryBody) {
    let EntryBody::Signal(signal) = body else {
        return;
    };
    if signal.name != LISTED {
        return;
    }
    let Ok(Listed { room }) = signal.data.decode() else {
        return;
    };
    let (Some(directory), Ok(room)) = (directory.upgrade(), ThreadId::new(&room)) else {
        return;
    };
    if let Err(error) = directory.discover(&room).await {
        tracing::warn!(%room, %error, "a listed room is not served");
    }
}
