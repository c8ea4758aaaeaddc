//! One live tail per followed stream (a session's events, a room's
//! entries), shared by the clients following it in this process.
//!
//! Without it, every client reads every item from the store and encodes it
//! for itself: a thousand clients on one stream decode each entry a
//! thousand times. A tail follows the stream once (one store subscription,
//! one decode of each entry) and encodes each item once; its frames go to
//! every live client through a bounded broadcast.
//!
//! Every frame still comes from a stored entry, and a client never depends
//! on the tail for completeness: it starts by reading the store itself from
//! where it resumes, and moves onto the tail only when the tail's next frame
//! follows the last item it sent with nothing in between (each frame names
//! the item before it). A client that falls behind the broadcast (the
//! channel drops the oldest frames it has not read) goes back to reading
//! the store at its own pace from its last item, then joins the tail
//! again: a slow client costs the server no buffer beyond the channel's
//! bound, and every item is sent exactly once, in order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use axum::body::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::task::JoinHandle;

/// How many frames a tail holds for clients that read behind it: a client
/// further behind reads the store instead.
pub(crate) const TAIL_FRAMES: usize = 256;

/// A stream of items as the store gives them.
pub(crate) type Items<S> =
    BoxStream<'static, Result<<S as Followed>::Item, <S as Followed>::Error>>;

/// What clients follow: a stream of the store read from a position, whose
/// items are encoded as frames.
#[async_trait]
pub(crate) trait Followed: Send + Sync + 'static {
    /// A position in the stream (an item's id).
    type Id: Copy + Ord + Send + Sync + 'static;
    /// One item as the store gives it.
    type Item: Send + 'static;
    /// What reading the store fails with.
    type Error: Send + 'static;

    /// The key of the stream, shared by everyone who follows it.
    fn key(&self) -> &str;

    /// The items after `after` (from the start for `None`), for one client.
    async fn stored(&self, after: Option<Self::Id>) -> Result<Items<Self>, Self::Error>;

    /// The items written from now on, for a new tail, and the position
    /// before the first of them.
    async fn live(&self) -> Result<(Items<Self>, Self::Id), Self::Error>;

    /// The id of `item`.
    fn id(item: &Self::Item) -> Self::Id;

    /// The frame of `item`, which comes right after `prev`.
    fn frame(prev: Self::Id, item: &Self::Item) -> Frame<Self::Id>;
}

/// One item, encoded once as its whole SSE message.
#[derive(Debug)]
pub(crate) struct Frame<Id> {
    /// The item before it (or where the tail started): no item lies
    /// between the two.
    pub(crate) prev: Id,
    /// The item's id.
    pub(crate) id: Id,
    /// The SSE message; every client's response sends these bytes (a
    /// reference to them), not a copy.
    pub(crate) wire: Bytes,
    /// The user whose stream ends with this item (a member leaving a room).
    pub(crate) ends_for: Option<Arc<str>>,
}

impl<Id> Frame<Id> {
    /// The SSE message of the frame, shared with the tail's other clients.
    pub(crate) fn wire(&self) -> Bytes {
        self.wire.clone()
    }
}

/// A live tail: the task following the stream and the channel its frames go
/// out on. It lives while a client holds it.
pub(crate) struct Tail<Id> {
    frames: broadcast::WeakSender<Arc<Frame<Id>>>,
    task: JoinHandle<()>,
}

impl<Id> Drop for Tail<Id> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<Id> std::fmt::Debug for Tail<Id> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tail").finish_non_exhaustive()
    }
}

impl<Id: Send + Sync + 'static> Tail<Id> {
    /// A tail sending what `sender` sends, kept alive by `task`.
    pub(crate) fn new(sender: &broadcast::Sender<Arc<Frame<Id>>>, task: JoinHandle<()>) -> Self {
        Self {
            frames: sender.downgrade(),
            task,
        }
    }

    /// A receiver of the frames sent from now on; `None` once the tail
    /// stopped (its store subscription failed).
    pub(crate) fn receiver(&self) -> Option<broadcast::Receiver<Arc<Frame<Id>>>> {
        self.frames.upgrade().map(|sender| sender.subscribe())
    }
}

/// A tail and a receiver of its frames.
pub(crate) type Joined<Id> = (Arc<Tail<Id>>, broadcast::Receiver<Arc<Frame<Id>>>);

/// The live tails of the streams followed in this process, by key.
pub(crate) struct LiveTails<Id> {
    tails: Mutex<HashMap<Arc<str>, Weak<Tail<Id>>>>,
    /// How many frames each tail holds for its slower clients.
    capacity: usize,
}

impl<Id> std::fmt::Debug for LiveTails<Id> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTails").finish_non_exhaustive()
    }
}

impl<Id: Copy + Send + Sync + 'static> LiveTails<Id> {
    /// Tails holding `capacity` frames each.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            tails: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// The live tail of `followed` (started now when none runs) and a
    /// receiver of its frames from now on.
    async fn join<S: Followed<Id = Id>>(&self, followed: &S) -> Result<Joined<Id>, S::Error> {
        if let Some(tail) = self.lock().get(followed.key()).and_then(Weak::upgrade)
            && let Some(receiver) = tail.receiver()
        {
            return Ok((tail, receiver));
        }
        // What is stored already, a client reads from the store.
        let (items, start) = followed.live().await?;
        let (sender, receiver) = broadcast::channel(self.capacity);
        let task = tokio::spawn(follow::<S>(items, start, sender.clone()));
        let tail = Arc::new(Tail::new(&sender, task));
        drop(sender);
        let mut tails = self.lock();
        // Another client may have started one meanwhile: the newer wins
        // the map, both are correct.
        tails.retain(|_, tail| tail.strong_count() > 0);
        tails.insert(Arc::from(followed.key()), Arc::downgrade(&tail));
        Ok((tail, receiver))
    }

    /// How many tails are live.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.lock()
            .values()
            .filter(|t| t.strong_count() > 0)
            .count()
    }

    /// The tail of `key`, if one runs.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &str) -> Option<Arc<Tail<Id>>> {
        self.lock().get(key).and_then(Weak::upgrade)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Weak<Tail<Id>>>> {
        // Every update is one insert or a retain: a poisoned lock still
        // holds a consistent map.
        self.tails
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The tail's task: each item encoded once and sent to every receiver. It
/// stops when the store stream fails or ends (its clients go back to the
/// store, which tells them why).
async fn follow<S: Followed>(
    mut items: Items<S>,
    start: S::Id,
    sender: broadcast::Sender<Arc<Frame<S::Id>>>,
) {
    let mut prev = start;
    while let Some(Ok(item)) = items.next().await {
        let frame = S::frame(prev, &item);
        prev = frame.id;
        // No receiver now is no reason to stop: one may join.
        let _ = sender.send(Arc::new(frame));
    }
}

/// One client's frames after a position: from the store until the
/// stream's tail can take over, then from the tail (and the store again
/// whenever the client falls behind the tail).
pub(crate) struct Follower<S: Followed> {
    followed: S,
    tails: Arc<LiveTails<S::Id>>,
    /// The last item sent (or where the client resumes).
    last: Option<S::Id>,
    /// The client's own store stream, while it reads the store.
    stored: Option<Items<S>>,
    /// The tail it follows or waits to follow, and its receiver.
    pub(crate) tail: Option<Joined<S::Id>>,
    /// A frame of the tail that came before the store stream reached it.
    waiting: Option<Arc<Frame<S::Id>>>,
}

impl<S: Followed> Follower<S> {
    /// A client's frames of `followed` after `after`, starting on its own
    /// store stream `stored` (read with the client's rights).
    pub(crate) fn new(
        followed: S,
        tails: Arc<LiveTails<S::Id>>,
        after: Option<S::Id>,
        stored: Items<S>,
    ) -> Self {
        Self {
            followed,
            tails,
            last: after,
            stored: Some(stored),
            tail: None,
            waiting: None,
        }
    }

    /// Whether the client reads its own store stream.
    #[cfg(test)]
    pub(crate) fn on_store(&self) -> bool {
        self.stored.is_some()
    }

    /// The next frame; `None` when the store stream ended.
    pub(crate) async fn next(&mut self) -> Option<Result<Arc<Frame<S::Id>>, S::Error>> {
        loop {
            if self.tail.is_none() {
                // A failure to start the tail leaves the store stream,
                // which is enough on its own.
                self.tail = self.tails.join(&self.followed).await.ok();
            }
            if self.stored.is_none() {
                match self.next_shared().await {
                    Some(frame) => return Some(Ok(frame)),
                    None => continue,
                }
            }
            match self.take_over() {
                TakeOver::Send(frame) => {
                    self.stored = None;
                    self.last = Some(frame.id);
                    return Some(Ok(frame));
                }
                TakeOver::AtLast => {
                    self.stored = None;
                    continue;
                }
                TakeOver::NotYet => {}
            }
            let receiver = match (&mut self.tail, &self.waiting) {
                (Some((_, receiver)), None) => Some(receiver),
                _ => None,
            };
            let stored = self.stored.as_mut()?;
            tokio::select! {
                item = stored.next() => {
                    return match item? {
                        Ok(item) => {
                            let id = S::id(&item);
                            let frame = S::frame(self.last.unwrap_or(id), &item);
                            self.last = Some(id);
                            Some(Ok(Arc::new(frame)))
                        }
                        Err(error) => Some(Err(error)),
                    };
                }
                received = recv(receiver) => self.keep(received),
            }
        }
    }

    /// The next frame of the tail, in tail mode; `None` when the client
    /// fell behind or the tail stopped (it reads the store again).
    async fn next_shared(&mut self) -> Option<Arc<Frame<S::Id>>> {
        loop {
            let Some((_, receiver)) = self.tail.as_mut() else {
                self.back_to_store().await;
                return None;
            };
            match receiver.recv().await {
                Ok(frame) if self.last.is_some_and(|last| frame.id <= last) => {}
                Ok(frame) if self.follows(&frame) => {
                    self.last = Some(frame.id);
                    return Some(frame);
                }
                // A gap, a lag or a stopped tail: back to the store.
                Ok(_) | Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => {
                    self.back_to_store().await;
                    return None;
                }
            }
        }
    }

    /// Starts reading the store again from the last item sent, and leaves
    /// the tail (it is joined again, at its end).
    async fn back_to_store(&mut self) {
        self.tail = None;
        self.waiting = None;
        let stored = match self.followed.stored(self.last).await {
            Ok(stored) => stored,
            Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
        };
        self.stored = Some(stored);
    }

    /// True when `frame` comes right after the last item sent (a client
    /// that sent nothing yet and reads from the start reads the store
    /// first).
    fn follows(&self, frame: &Frame<S::Id>) -> bool {
        self.last.is_some_and(|last| frame.prev <= last)
    }

    /// Whether the frames already received show that the tail continues
    /// right after the last item sent, so the client can move onto it.
    fn take_over(&mut self) -> TakeOver<S::Id> {
        loop {
            if let Some(frame) = self.waiting.take() {
                if self.last == Some(frame.id) {
                    // The tail has reached the item the store sent last:
                    // its next frame is the client's next item. (The store
                    // stream is often the quicker of the two: a client that
                    // moved only on a frame the store had not sent yet could
                    // stay on the store for ever.)
                    return TakeOver::AtLast;
                } else if self.last.is_some_and(|last| frame.id < last) {
                    // Sent already from the store.
                } else if self.follows(&frame) {
                    return TakeOver::Send(frame);
                } else {
                    // The store stream has not reached it yet.
                    self.waiting = Some(frame);
                    return TakeOver::NotYet;
                }
            }
            let Some((_, receiver)) = self.tail.as_mut() else {
                return TakeOver::NotYet;
            };
            let received = match receiver.try_recv() {
                Ok(frame) => Ok(frame),
                Err(TryRecvError::Empty) => return TakeOver::NotYet,
                Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
                Err(TryRecvError::Closed) => Err(RecvError::Closed),
            };
            self.keep(received);
        }
    }

    /// Keeps a frame received while reading the store, for
    /// [`take_over`](Self::take_over).
    fn keep(&mut self, received: Result<Arc<Frame<S::Id>>, RecvError>) {
        match received {
            Ok(frame) => self.waiting = Some(frame),
            // Frames were dropped before this client read them: the store
            // stream covers them; the next frames may still take over.
            Err(RecvError::Lagged(_)) => {}
            // The tail stopped: the store stream goes on alone, and a new
            // tail is joined next time.
            Err(RecvError::Closed) => self.tail = None,
        }
    }
}

/// What [`Follower::take_over`] found.
enum TakeOver<Id> {
    /// The tail's next frame to send continues the client's items.
    Send(Arc<Frame<Id>>),
    /// The tail is at the client's last item: what it sends next follows.
    AtLast,
    /// The tail cannot take over yet.
    NotYet,
}

/// Receives from `receiver`; never, without one.
async fn recv<Id: Clone>(
    receiver: Option<&mut broadcast::Receiver<Arc<Frame<Id>>>>,
) -> Result<Arc<Frame<Id>>, RecvError> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}
