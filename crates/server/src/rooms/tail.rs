//! One live tail per room, shared by the room's event streams in this
//! process: one store subscription and one encoding of each entry, however
//! many people follow the room.
//!
//! A client never depends on the tail for completeness: it reads the store
//! from where it resumes, and moves onto the tail when the tail's next
//! frame is the entry right after the last it sent (a room's seqs have no
//! gaps). A client that falls behind the broadcast (the channel drops the
//! oldest frames it has not read) reads the store again at its own pace
//! from its last entry, then joins the tail again: a slow client costs no
//! buffer beyond the channel's bound, and every entry is sent once, in
//! order. The sessions' event streams share their tails the same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use axum::body::Bytes;
use futures::StreamExt;
use roundtable_thread_stream::{Entry, EntryBody, EntryStream, StoreError, ThreadId, ThreadStore};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use super::record::{LEFT, Left};

/// How many frames a room's tail holds for clients that read behind it: a
/// client further behind reads the store instead.
pub(crate) const TAIL_FRAMES: usize = 256;

/// One entry of a room, encoded once as its SSE message.
#[derive(Debug)]
pub(crate) struct Frame {
    seq: u64,
    /// The member the entry removes from the room, if it removes one.
    removes: Option<Arc<str>>,
    wire: Bytes,
}

impl Frame {
    /// The frame of `entry`: `id:` its seq, `event:` its type, `data:` the
    /// entry as stored.
    pub(crate) fn of(entry: &Entry) -> Self {
        let data = serde_json::to_string(entry).unwrap_or_else(|_| "{}".into());
        let wire = format!(
            "id: {}\nevent: {}\ndata: {data}\n\n",
            entry.seq,
            entry.body.kind()
        );
        Self {
            seq: entry.seq,
            removes: removed(entry),
            wire: Bytes::from(wire),
        }
    }

    /// The SSE message, shared with the tail's other clients.
    pub(crate) fn wire(&self) -> Bytes {
        self.wire.clone()
    }

    /// True when the entry removes `member` from the room.
    pub(crate) fn removes(&self, member: &str) -> bool {
        self.removes.as_deref() == Some(member)
    }
}

/// The member `entry` removes from the room, if it removes one.
fn removed(entry: &Entry) -> Option<Arc<str>> {
    match &entry.body {
        EntryBody::Signal(s) if s.name == LEFT => s.data.decode::<Left>().ok().map(|l| l.member),
        _ => None,
    }
}

/// A room's live tail: the task following the room and the channel its
/// frames go out on. It lives while a client holds it.
struct Tail {
    frames: broadcast::WeakSender<Arc<Frame>>,
    task: JoinHandle<()>,
}

impl Drop for Tail {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Joined = (Arc<Tail>, broadcast::Receiver<Arc<Frame>>);

/// The live tails of the rooms followed in this process.
#[derive(Debug, Default)]
pub(crate) struct RoomTails {
    tails: Mutex<HashMap<ThreadId, Weak<Tail>>>,
}

impl RoomTails {
    /// The live tail of `room` (started now when none runs) and a receiver
    /// of its frames from now on.
    async fn join(&self, store: &dyn ThreadStore, room: &ThreadId) -> Result<Joined, StoreError> {
        if let Some(tail) = self.lock().get(room).and_then(Weak::upgrade)
            && let Some(sender) = tail.frames.upgrade()
        {
            let receiver = sender.subscribe();
            return Ok((tail, receiver));
        }
        // What is stored already, a client reads from the store.
        let tip = store.last_seq(room).await?;
        let entries = store.subscribe(room, tip + 1).await?;
        let (sender, receiver) = broadcast::channel(TAIL_FRAMES);
        let frames = sender.downgrade();
        let task = tokio::spawn(follow(entries, sender));
        let tail = Arc::new(Tail { frames, task });
        let mut tails = self.lock();
        // Another client may have started one meanwhile: the newer wins
        // the map, both are correct.
        tails.retain(|_, tail| tail.strong_count() > 0);
        tails.insert(room.clone(), Arc::downgrade(&tail));
        Ok((tail, receiver))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ThreadId, Weak<Tail>>> {
        // Every update is one insert or a retain: a poisoned lock still
        // holds a consistent map.
        self.tails
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The tail's task: each entry encoded once and sent to every receiver,
/// until the store stream fails or ends (the clients go back to the store,
/// which tells them why).
async fn follow(mut entries: EntryStream, sender: broadcast::Sender<Arc<Frame>>) {
    while let Some(Ok(entry)) = entries.next().await {
        // No receiver now is no reason to stop: one may join.
        let _ = sender.send(Arc::new(Frame::of(&entry)));
    }
}

/// One client's entries of a room after a seq: from the store until the
/// room's tail can take over, then from the tail (and from the store again
/// whenever the client falls behind it).
pub(crate) struct Follower {
    store: Arc<dyn ThreadStore>,
    tails: Arc<RoomTails>,
    room: ThreadId,
    /// The last seq sent (or where the client resumes).
    last: u64,
    /// The client's own store stream, while it reads the store.
    stored: Option<EntryStream>,
    tail: Option<Joined>,
    /// A frame of the tail that came before the store stream reached it.
    waiting: Option<Arc<Frame>>,
}

impl Follower {
    /// A client's stream of `room` after seq `after`, starting on its own
    /// store stream `stored`.
    pub(crate) fn new(
        store: Arc<dyn ThreadStore>,
        tails: Arc<RoomTails>,
        room: ThreadId,
        after: u64,
        stored: EntryStream,
    ) -> Self {
        Self {
            store,
            tails,
            room,
            last: after,
            stored: Some(stored),
            tail: None,
            waiting: None,
        }
    }

    /// The next entry's frame; `None` when the store stream ended.
    pub(crate) async fn next(&mut self) -> Option<Result<Arc<Frame>, StoreError>> {
        loop {
            if self.tail.is_none() {
                // Without a tail the store stream is enough on its own.
                self.tail = self.tails.join(&*self.store, &self.room).await.ok();
            }
            if let Some(frame) = self.take_waiting() {
                return Some(Ok(frame));
            }
            if self.stored.is_none() {
                match self.next_shared().await {
                    Some(frame) => return Some(Ok(frame)),
                    None => continue,
                }
            }
            let receiver = match (&mut self.tail, &self.waiting) {
                (Some((_, receiver)), None) => Some(receiver),
                _ => None,
            };
            let stored = self.stored.as_mut()?;
            tokio::select! {
                item = stored.next() => {
                    return match item? {
                        Ok(entry) => {
                            self.last = entry.seq;
                            Some(Ok(Arc::new(Frame::of(&entry))))
                        }
                        Err(error) => Some(Err(error)),
                    };
                }
                received = recv(receiver) => match received {
                    Ok(frame) => self.waiting = Some(frame),
                    // The store stream covers the frames dropped.
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => self.tail = None,
                },
            }
        }
    }

    /// Moves onto the tail when the frame kept from it is not ahead of the
    /// client: returns it when it is the next entry.
    fn take_waiting(&mut self) -> Option<Arc<Frame>> {
        let frame = self.waiting.take()?;
        if frame.seq > self.last + 1 {
            // The store stream has not reached it yet.
            self.waiting = Some(frame);
            return None;
        }
        self.stored = None;
        if frame.seq == self.last + 1 {
            self.last = frame.seq;
            return Some(frame);
        }
        // The tail is behind the client: its next frames lead up to it.
        None
    }

    /// The next frame of the tail; `None` when the client fell behind or
    /// the tail stopped (it reads the store again).
    async fn next_shared(&mut self) -> Option<Arc<Frame>> {
        loop {
            let Some((_, receiver)) = self.tail.as_mut() else {
                self.back_to_store().await;
                return None;
            };
            match receiver.recv().await {
                Ok(frame) if frame.seq <= self.last => {}
                Ok(frame) if frame.seq == self.last + 1 => {
                    self.last = frame.seq;
                    return Some(frame);
                }
                // A gap, a lag or a stopped tail.
                Ok(_) | Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => {
                    self.back_to_store().await;
                    return None;
                }
            }
        }
    }

    /// Reads the store again from the last entry sent, and leaves the tail
    /// (it is joined again, at its end).
    async fn back_to_store(&mut self) {
        self.tail = None;
        self.waiting = None;
        let stored = match self.store.subscribe(&self.room, self.last + 1).await {
            Ok(stored) => stored,
            Err(error) => Box::pin(futures::stream::once(async move { Err(error) })),
        };
        self.stored = Some(stored);
    }
}

/// Receives from `receiver`; never, without one.
async fn recv(
    receiver: Option<&mut broadcast::Receiver<Arc<Frame>>>,
) -> Result<Arc<Frame>, RecvError> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use roundtable_thread_stream::{Expect, MemoryStore, NewEntry};

    use super::*;

    async fn say(store: &MemoryStore, room: &ThreadId, n: usize) {
        let entry = NewEntry::new("alice", EntryBody::chat(format!("note {n}")));
        store.append(room, Expect::Any, vec![entry]).await.unwrap();
    }

    async fn read(follower: &mut Follower) -> Arc<Frame> {
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
    ) -> Follower {
        let stored = store.subscribe(room, 1).await.unwrap();
        let store: Arc<dyn ThreadStore> = store.clone();
        Follower::new(store, tails.clone(), room.clone(), 0, stored)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_share_one_tail_and_one_behind_it_reads_the_store_missing_nothing() {
        let store = Arc::new(MemoryStore::new());
        let room = ThreadId::new("room-1").unwrap();
        say(&store, &room, 0).await;
        let tails = Arc::new(RoomTails::default());
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
            assert_eq!(got.iter().map(|f| f.seq).collect::<Vec<_>>(), expected);
        }
        // Both are on the tail again: the next entry is one frame, shared.
        say(&store, &room, n).await;
        let (a, b) = (read(&mut fast).await, read(&mut slow).await);
        assert_eq!(a.seq, n as u64 + 1);
        assert!(Arc::ptr_eq(&a, &b), "the clients share the tail's frame");
        assert_eq!(tails.lock().len(), 1);
    }
}
