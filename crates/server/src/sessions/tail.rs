//! One live tail per session, shared by the session's event streams.
//!
//! Without it, every client following a session reads every entry from the
//! store and encodes every event's JSON for itself: a thousand clients on
//! one session decode each entry a thousand times. A [`Tail`] follows the
//! session's events once (one store subscription, one decode of each entry)
//! and encodes each event once; its frames go to every live client through
//! a bounded broadcast.
//!
//! Every frame still comes from a stored entry, and a client never depends
//! on the tail for completeness: it starts by reading the store itself from
//! where it resumes, and moves onto the tail only when the tail's next frame
//! follows the last event it sent with nothing in between (each frame names
//! the event before it). A client that falls behind the broadcast (the
//! channel drops the oldest frames it has not read) goes back to reading
//! the store at its own pace from its last event, then joins the tail
//! again: a slow client costs the server no buffer beyond the channel's
//! bound, and every event is sent exactly once, in order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use axum::body::Bytes;
use futures::StreamExt;
use roundtable_sessions::{
    Caller, EventId, SessionEngine, SessionError, SessionEvent, SessionEvents,
};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::task::JoinHandle;

/// How many frames a session's tail holds for clients that read behind
/// it: a client further behind reads the store instead.
pub(crate) const TAIL_FRAMES: usize = 256;

/// One encoded event of a tail.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The event before it (or where the tail started): no event lies
    /// between the two.
    prev: EventId,
    /// The event's id.
    id: EventId,
    /// The event's whole SSE message, encoded once: every client's
    /// response sends these bytes (a reference to them), not a copy.
    wire: Bytes,
}

impl Frame {
    fn of(prev: EventId, event: &SessionEvent) -> Result<Self, serde_json::Error> {
        Ok(Self {
            prev,
            id: event.id,
            wire: encode(event)?,
        })
    }

    /// The SSE message of the frame, shared with the tail's other clients.
    pub(crate) fn wire(&self) -> Bytes {
        self.wire.clone()
    }
}

/// A session's live tail: the task following the session and the channel
/// its frames go out on. It lives while a client holds it.
pub(crate) struct Tail {
    frames: broadcast::WeakSender<Arc<Frame>>,
    task: JoinHandle<()>,
}

impl Drop for Tail {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Tail {
    /// A receiver of the frames sent from now on; `None` once the tail
    /// stopped (its store subscription failed).
    fn receiver(&self) -> Option<broadcast::Receiver<Arc<Frame>>> {
        self.frames.upgrade().map(|sender| sender.subscribe())
    }
}

/// The live tails of an engine's sessions, by session id.
#[derive(Debug)]
pub(crate) struct LiveTails {
    tails: Mutex<HashMap<Arc<str>, Weak<Tail>>>,
    /// How many frames each tail holds for its slower clients.
    capacity: usize,
}

impl std::fmt::Debug for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tail").finish_non_exhaustive()
    }
}

impl LiveTails {
    /// Tails holding `capacity` frames each.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            tails: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// The live tail of `session` (started now when none runs) and a
    /// receiver of its frames from now on.
    async fn join(
        &self,
        engine: &SessionEngine,
        session: &Arc<str>,
    ) -> Result<(Arc<Tail>, broadcast::Receiver<Arc<Frame>>), SessionError> {
        if let Some(tail) = self.lock().get(session).and_then(Weak::upgrade)
            && let Some(receiver) = tail.receiver()
        {
            return Ok((tail, receiver));
        }
        // The tail starts after the last stored entry: what is stored
        // already, a client reads from the store.
        let info = engine.get(&Caller::Host, session).await?;
        let start = EventId {
            seq: info.last_seq,
            sub: u32::MAX,
        };
        let events = engine
            .subscribe(&Caller::Host, session, Some(start))
            .await?;
        let (sender, receiver) = broadcast::channel(self.capacity);
        let frames = sender.downgrade();
        let task = tokio::spawn(follow(events, start, sender));
        let tail = Arc::new(Tail { frames, task });
        let mut tails = self.lock();
        // Another client may have started one meanwhile: the newer wins
        // the map, both are correct.
        tails.retain(|_, tail| tail.strong_count() > 0);
        tails.insert(session.clone(), Arc::downgrade(&tail));
        Ok((tail, receiver))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Weak<Tail>>> {
        // Every update is one insert or a retain: a poisoned lock still
        // holds a consistent map.
        self.tails
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The tail's task: each event of `events` encoded once and sent to every
/// receiver. It stops when the store stream fails or ends (its clients go
/// back to the store, which tells them why).
async fn follow(mut events: SessionEvents, start: EventId, sender: broadcast::Sender<Arc<Frame>>) {
    let mut prev = start;
    while let Some(Ok(event)) = events.next().await {
        let Ok(frame) = Frame::of(prev, &event) else {
            // An event that cannot be encoded: the clients read it from
            // the store, which says so.
            return;
        };
        prev = event.id;
        // No receiver now is no reason to stop: one may join.
        let _ = sender.send(Arc::new(frame));
    }
}

/// What a client's stream sends next.
pub(crate) enum FollowedEvent {
    /// An event the client's own store stream read.
    Stored(SessionEvent),
    /// A frame of the tail.
    Shared(Arc<Frame>),
    /// The client's store stream failed.
    Failed(SessionError),
}

/// One client's events after `after`: from the store until the session's
/// tail can take over, then from the tail (and the store again whenever
/// the client falls behind the tail).
pub(crate) struct Follower {
    engine: SessionEngine,
    tails: Arc<LiveTails>,
    caller: Caller,
    session: Arc<str>,
    /// The last event sent (or where the client resumes).
    last: Option<EventId>,
    /// The client's own store stream, while it reads the store.
    stored: Option<SessionEvents>,
    /// The tail it follows or waits to follow, and its receiver.
    tail: Option<(Arc<Tail>, broadcast::Receiver<Arc<Frame>>)>,
    /// A frame of the tail that came before the store stream reached it.
    waiting: Option<Arc<Frame>>,
}

impl Follower {
    /// A client's stream: its store stream `stored` (the engine's, which
    /// checked that `caller` may see the session) from after `after`.
    pub(crate) fn new(
        engine: SessionEngine,
        tails: Arc<LiveTails>,
        caller: Caller,
        session: Arc<str>,
        after: Option<EventId>,
        stored: SessionEvents,
    ) -> Self {
        Self {
            engine,
            tails,
            caller,
            session,
            last: after,
            stored: Some(stored),
            tail: None,
            waiting: None,
        }
    }

    /// The next event; `None` when the store stream ended.
    pub(crate) async fn next(&mut self) -> Option<FollowedEvent> {
        loop {
            if self.tail.is_none() {
                // A failure to start the tail leaves the store stream,
                // which is enough on its own.
                if let Ok(joined) = self.tails.join(&self.engine, &self.session).await {
                    self.tail = Some(joined);
                }
            }
            if self.stored.is_none() {
                match self.next_shared().await {
                    Some(frame) => return Some(FollowedEvent::Shared(frame)),
                    None => continue,
                }
            }
            match self.take_over() {
                TakeOver::Send(frame) => {
                    self.stored = None;
                    self.last = Some(frame.id);
                    return Some(FollowedEvent::Shared(frame));
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
                    return match item {
                        Some(Ok(event)) => {
                            self.last = Some(event.id);
                            Some(FollowedEvent::Stored(event))
                        }
                        Some(Err(error)) => Some(FollowedEvent::Failed(error)),
                        None => None,
                    };
                }
                received = recv(receiver) => self.keep(received),
            }
        }
    }

    /// The next frame of the tail, in tail mode; `None` when the client
    /// fell behind or the tail stopped (it reads the store again).
    async fn next_shared(&mut self) -> Option<Arc<Frame>> {
        loop {
            let (_, receiver) = self.tail.as_mut()?;
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

    /// Starts reading the store again from the last event sent, and
    /// leaves the tail (it is joined again, at its end).
    async fn back_to_store(&mut self) {
        self.tail = None;
        self.waiting = None;
        match self
            .engine
            .subscribe(&self.caller, &self.session, self.last)
            .await
        {
            Ok(stored) => self.stored = Some(stored),
            Err(error) => {
                self.stored = Some(Box::pin(futures::stream::once(async move { Err(error) })))
            }
        }
    }

    /// True when `frame` comes right after the last event sent (a client
    /// that sent nothing yet and reads from the start reads the store
    /// first: a session's history is never empty).
    fn follows(&self, frame: &Frame) -> bool {
        self.last.is_some_and(|last| frame.prev <= last)
    }

    /// Whether the frames already received show that the tail continues
    /// right after the last event sent, so the client can move onto it.
    fn take_over(&mut self) -> TakeOver {
        loop {
            if let Some(frame) = self.waiting.take() {
                if self.last == Some(frame.id) {
                    // The tail has reached the event the store sent last:
                    // its next frame is the client's next event. (The
                    // store stream is often the quicker of the two: a
                    // client that moved only on a frame the store had not
                    // sent yet could stay on the store for ever.)
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
    fn keep(&mut self, received: Result<Arc<Frame>, RecvError>) {
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
enum TakeOver {
    /// The tail's next frame to send continues the client's events.
    Send(Arc<Frame>),
    /// The tail is at the client's last event: what it sends next follows.
    AtLast,
    /// The tail cannot take over yet.
    NotYet,
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

/// The SSE message of `event`: `id:` its id, `data:` its JSON envelope
/// (compact JSON holds no line break), and no `event:` field.
pub(crate) fn encode(event: &SessionEvent) -> Result<Bytes, serde_json::Error> {
    let id = event.id.to_string();
    let mut wire = Vec::with_capacity(id.len() + 256);
    wire.extend_from_slice(b"id: ");
    wire.extend_from_slice(id.as_bytes());
    wire.extend_from_slice(b"\ndata: ");
    serde_json::to_writer(&mut wire, event)?;
    wire.extend_from_slice(b"\n\n");
    Ok(Bytes::from(wire))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::time::Duration;

    use roundtable_providers::{AssistantMessage, Model, OPENAI_COMPLETIONS, ScriptedProvider};
    use roundtable_sessions::{CreateSession, Submit};
    use roundtable_thread_stream::MemoryStore;

    use super::*;

    /// What a client got: each event, and whether it came from the tail.
    async fn read(follower: &mut Follower) -> (SessionEvent, bool) {
        let next = tokio::time::timeout(Duration::from_secs(10), follower.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        match next {
            FollowedEvent::Stored(event) => (event, false),
            FollowedEvent::Shared(frame) => {
                let text = std::str::from_utf8(&frame.wire).unwrap();
                let json = text.split_once("data: ").unwrap().1.trim_end();
                (serde_json::from_str(json).unwrap(), true)
            }
            FollowedEvent::Failed(error) => panic!("{error}"),
        }
    }

    async fn note(engine: &SessionEngine, session: &str, n: usize) {
        let submit = Submit {
            auto_run: Some(false),
            ..Submit::text(format!("note {n}"))
        };
        engine.submit(&Caller::Host, session, submit).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_share_the_tail_and_one_that_falls_behind_reads_the_store_missing_nothing() {
        let engine = SessionEngine::builder(
            Arc::new(MemoryStore::new()),
            Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new())),
            Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""),
        )
        .build();
        let workspace = tempfile::tempdir().unwrap();
        let session = engine
            .create(&Caller::Host, CreateSession::new(workspace.path()))
            .await
            .unwrap();
        let tails = Arc::new(LiveTails::new(4));
        let follower = |after| {
            let (engine, tails, session) = (engine.clone(), tails.clone(), session.id.clone());
            async move {
                let stored = engine
                    .subscribe(&Caller::Host, &session, after)
                    .await
                    .unwrap();
                Follower::new(engine, tails, Caller::Host, session, after, stored)
            }
        };
        let (mut fast, mut slow) = (follower(None).await, follower(None).await);
        // Both read the history from the store (and join the tail).
        let (mut got_fast, mut got_slow) =
            (vec![read(&mut fast).await], vec![read(&mut slow).await]);
        // A probe on the tail, to let it catch up with each note before the
        // clients read: whether a client that reads the store finds the
        // tail at its last event depends on the tail's task having run
        // by then, which a test must not leave to the scheduler.
        let mut probe = tails
            .lock()
            .get(&session.id)
            .and_then(Weak::upgrade)
            .and_then(|tail| tail.receiver())
            .unwrap();
        let mut n = 0;
        while !got_fast.iter().any(|(_, shared)| *shared)
            || !got_slow.iter().any(|(_, shared)| *shared)
        {
            assert!(n < 5, "never moved onto the tail");
            note(&engine, &session.id, n).await;
            n += 1;
            let written = engine
                .get(&Caller::Host, &session.id)
                .await
                .unwrap()
                .last_seq;
            while probe.recv().await.unwrap().id.seq < written {}
            got_fast.push(read(&mut fast).await);
            got_slow.push(read(&mut slow).await);
        }
        drop(probe);
        // The slow client stops reading while far more than the tail
        // holds is written; the fast one keeps up.
        let paused_at = got_slow.len();
        let fast_at = got_fast.len();
        for _ in 0..20 {
            note(&engine, &session.id, n).await;
            n += 1;
            got_fast.push(read(&mut fast).await);
        }
        while got_slow.len() < n + 1 {
            got_slow.push(read(&mut slow).await);
        }
        let stored = engine
            .events(&Caller::Host, &session.id, None)
            .await
            .unwrap();
        assert_eq!(stored.len(), n + 1);
        for got in [&got_fast, &got_slow] {
            let events: Vec<SessionEvent> = got.iter().map(|(e, _)| e.clone()).collect();
            assert_eq!(events, stored);
        }
        assert!(got_fast[fast_at..].iter().all(|(_, shared)| *shared));
        // Behind the tail, the slow one read the store, then the tail again.
        let after_pause = &got_slow[paused_at..];
        assert!(
            !after_pause[0].1,
            "the first event after the pause is the store's"
        );
        // One more event: both are on the tail again.
        note(&engine, &session.id, n).await;
        assert!(read(&mut fast).await.1);
        let (last, _) = read(&mut slow).await;
        assert_eq!(last.data["parts"][0]["text"], format!("note {n}"));
        // The two clients shared one tail.
        assert_eq!(tails.lock().len(), 1);
    }

    /// A client whose own store stream is quicker than the tail moves onto
    /// the tail once the tail reaches the event it sent last, without
    /// waiting to see a frame the store has not sent yet.
    #[tokio::test]
    async fn a_client_ahead_of_the_tail_moves_onto_it_at_its_last_event() {
        let engine = SessionEngine::builder(
            Arc::new(MemoryStore::new()),
            Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new())),
            Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""),
        )
        .build();
        let event = |seq: u64| SessionEvent {
            id: EventId::of_entry(seq),
            ts: "2026-11-24T00:00:00.000Z".into(),
            session_id: Arc::from("sess_1"),
            turn_id: None,
            kind: roundtable_sessions::EventType::MessageAdded,
            data: serde_json::json!({"seq": seq}),
        };
        // The client's store stream has events 1 to 3 ready; the tail
        // has sent the frame of event 2 only.
        let (stored_tx, stored_rx) = futures::channel::mpsc::unbounded();
        for seq in 1..=3 {
            stored_tx.unbounded_send(Ok(event(seq))).unwrap();
        }
        let (sender, receiver) = broadcast::channel(8);
        let tail = Arc::new(Tail {
            frames: sender.downgrade(),
            task: tokio::spawn(async {}),
        });
        let mut client = Follower::new(
            engine,
            Arc::new(LiveTails::new(8)),
            Caller::Host,
            Arc::from("sess_1"),
            None,
            Box::pin(stored_rx),
        );
        client.tail = Some((tail, receiver));
        for seq in 1..=2 {
            let Some(FollowedEvent::Stored(got)) = client.next().await else {
                panic!("event {seq} comes from the store");
            };
            assert_eq!(got.id.seq, seq);
        }
        let frame = |prev: u64, seq: u64| {
            Arc::new(Frame::of(EventId::of_entry(prev), &event(seq)).unwrap())
        };
        sender.send(frame(1, 2)).unwrap();
        // Event 3 waits in the store stream, but the tail is at event 2:
        // the client moves onto it, and takes event 3 from it.
        let (next, _) = tokio::join!(client.next(), async {
            tokio::task::yield_now().await;
            sender.send(frame(2, 3)).unwrap();
        });
        match next {
            Some(FollowedEvent::Shared(frame)) => assert_eq!(frame.id.seq, 3),
            Some(FollowedEvent::Stored(event)) => panic!("event {} came from the store", event.id),
            _ => panic!("no event"),
        }
        assert!(client.stored.is_none(), "the store stream is left");
        drop(stored_tx);
    }
}
