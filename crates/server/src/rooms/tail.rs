//! A room's entries as a followed stream: the room's SSE clients in this
//! process share one live tail ([`crate::live_tail`]), one store
//! subscription and one encoding of each entry however many follow.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Bytes;
use roundtable_thread_stream::{Entry, EntryBody, StoreError, ThreadId, ThreadStore};

use super::record::{LEFT, Left};
use crate::live_tail::{Followed, Frame, Items, LiveTails};

/// The live tails of the rooms followed in this process.
pub(crate) type RoomTails = LiveTails<u64>;

/// One room's entries (the caller is a member: the handler checked).
pub(crate) struct RoomStream {
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) room: ThreadId,
}

#[async_trait]
impl Followed for RoomStream {
    type Id = u64;
    type Item = Entry;
    type Error = StoreError;

    fn key(&self) -> &str {
        self.room.as_str()
    }

    async fn stored(&self, after: Option<u64>) -> Result<Items<Self>, StoreError> {
        let from = after.unwrap_or(0) + 1;
        self.store.subscribe(&self.room, from).await
    }

    /// The tail starts after the last stored entry: what is stored
    /// already, a client reads from the store.
    async fn live(&self) -> Result<(Items<Self>, u64), StoreError> {
        let tip = self.store.last_seq(&self.room).await?;
        Ok((self.store.subscribe(&self.room, tip + 1).await?, tip))
    }

    fn id(entry: &Entry) -> u64 {
        entry.seq
    }

    /// `id:` the seq, `event:` the entry's type, `data:` the entry as
    /// stored.
    fn frame(prev: u64, entry: &Entry) -> Frame<u64> {
        let data = serde_json::to_string(entry).unwrap_or_else(|_| "{}".into());
        let wire = format!(
            "id: {}\nevent: {}\ndata: {data}\n\n",
            entry.seq,
            entry.body.kind()
        );
        Frame {
            prev,
            id: entry.seq,
            wire: Bytes::from(wire),
            ends_for: removed(entry),
        }
    }
}

/// The member `entry` removes from the room, if it removes one.
fn removed(entry: &Entry) -> Option<Arc<str>> {
    match &entry.body {
        EntryBody::Signal(s) if s.name == LEFT => s.data.decode::<Left>().ok().map(|l| l.member),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use roundtable_thread_stream::{Expect, MemoryStore, NewEntry};

    use super::*;
    use crate::live_tail::{Follower, TAIL_FRAMES};

    async fn say(store: &MemoryStore, room: &ThreadId, n: usize) {
        let entry = NewEntry::new("alice", EntryBody::chat(format!("note {n}")));
        store.append(room, Expect::Any, vec![entry]).await.unwrap();
    }

    async fn read(follower: &mut Follower<RoomStream>) -> Arc<Frame<u64>> {
        tokio::time::timeout(Duration::from_secs(10), follower.next())
            .await
            .expect("an entry in time")
            .expect("the stream goes on")
            .unwrap()
    }

    async fn follower(
        store: &Arc<MemoryStore>,
        tails: &Arc<RoomTails>,
        room: &ThreadId,
    ) -> Follower<RoomStream> {
        let stream = RoomStream {
            store: store.clone(),
            room: room.clone(),
        };
        let stored = stream.stored(Some(0)).await.unwrap();
        Follower::new(stream, tails.clone(), Some(0), stored)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_share_one_tail_and_one_behind_it_reads_the_store_missing_nothing() {
        let store = Arc::new(MemoryStore::new());
        let room = ThreadId::new("room-1").unwrap();
        say(&store, &room, 0).await;
        let tails = Arc::new(RoomTails::new(TAIL_FRAMES));
        let mut fast = follower(&store, &tails, &room).await;
        let mut slow = follower(&store, &tails, &room).await;
        let (mut got_fast, mut got_slow) =
            (vec![read(&mut fast).await], vec![read(&mut slow).await]);
        // Far more than the tail holds, while the slow client reads nothing.
        let n = 3 * TAIL_FRAMES;
        for i in 1..n {
            say(&store, &room, i).await;
            got_fast.push(read(&mut fast).await);
        }
        while got_slow.len() < n {
            got_slow.push(read(&mut slow).await);
        }
        let expected: Vec<u64> = (1..=n as u64).collect();
        for got in [&got_fast, &got_slow] {
            assert_eq!(got.iter().map(|f| f.id).collect::<Vec<_>>(), expected);
        }
        // Both are on the tail again: the next entry is one frame, shared.
        say(&store, &room, n).await;
        let (a, b) = (read(&mut fast).await, read(&mut slow).await);
        assert_eq!(a.id, n as u64 + 1);
        assert!(Arc::ptr_eq(&a, &b), "the clients share the tail's frame");
        assert_eq!(tails.live(), 1);
    }
}
