//! Discovering the rooms other processes open: following the rooms
//! [`index`](super::index) and serving each room it lists.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use roundtable_thread_stream::{EntryBody, StoreError};
use tokio_util::sync::CancellationToken;

use super::directory::Directory;
use super::index::listed_room;

/// How long the follower waits before subscribing again after an error.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

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
    let (Some(directory), Some(room)) = (directory.upgrade(), listed_room(body)) else {
        return;
    };
    if let Err(error) = directory.discover(&room).await {
        tracing::warn!(%room, %error, "a listed room is not served");
    }
}
