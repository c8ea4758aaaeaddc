//! A session's events as a followed stream: the session's SSE clients
//! share one live tail ([`crate::live_tail`]), each event encoded once.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Bytes;
use futures::StreamExt;
use roundtable_sessions::{Caller, EventId, SessionEngine, SessionError, SessionEvent};

use crate::api_error::ApiError;
use crate::live_tail::{Followed, Frame, Items, LiveTails};

/// The live tails of an engine's sessions.
pub(crate) type SessionTails = LiveTails<EventId>;

/// One session's events, as one caller may read them.
pub(crate) struct SessionStream {
    pub(crate) engine: SessionEngine,
    pub(crate) caller: Caller,
    pub(crate) session: Arc<str>,
}

#[async_trait]
impl Followed for SessionStream {
    type Id = EventId;
    type Item = SessionEvent;
    type Error = SessionError;

    fn key(&self) -> &str {
        &self.session
    }

    async fn stored(&self, after: Option<EventId>) -> Result<Items<Self>, SessionError> {
        let events = self.engine.subscribe(&self.caller, &self.session, after);
        Ok(events.await?.boxed())
    }

    /// The tail starts after the last stored entry: what is stored
    /// already, a client reads from the store.
    async fn live(&self) -> Result<(Items<Self>, EventId), SessionError> {
        let info = self.engine.get(&Caller::Host, &self.session).await?;
        let start = EventId {
            seq: info.last_seq,
            sub: u32::MAX,
        };
        let events = self
            .engine
            .subscribe(&Caller::Host, &self.session, Some(start))
            .await?;
        Ok((events.boxed(), start))
    }

    fn id(event: &SessionEvent) -> EventId {
        event.id
    }

    /// An event that cannot be encoded is an `error` message in its place.
    fn frame(prev: EventId, event: &SessionEvent) -> Frame<EventId> {
        let wire = encode(event).unwrap_or_else(|error| {
            error_frame(SessionError::Setup(format!(
                "event {} could not be written: {error}",
                event.id
            )))
        });
        Frame {
            prev,
            id: event.id,
            wire,
            ends_for: None,
        }
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

/// The `error` message that ends a stream.
pub(crate) fn error_frame(error: SessionError) -> Bytes {
    let body = ApiError::from(error).body();
    Bytes::from(format!("event: error\ndata: {body}\n\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::time::Duration;

    use roundtable_providers::{AssistantMessage, Model, OPENAI_COMPLETIONS, ScriptedProvider};
    use roundtable_sessions::{CreateSession, Submit};
    use roundtable_thread_stream::MemoryStore;

    use super::*;
    use crate::live_tail::{Follower, Tail};
    use tokio::sync::broadcast;

    /// What a client got: each event, and whether it came from the tail
    /// (a frame sent once the client left its store stream).
    async fn read(follower: &mut Follower<SessionStream>) -> (SessionEvent, bool) {
        let next = tokio::time::timeout(Duration::from_secs(10), follower.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        let frame = next.unwrap_or_else(|error| panic!("{error}"));
        let text = std::str::from_utf8(&frame.wire).unwrap();
        let json = text.split_once("data: ").unwrap().1.trim_end();
        (serde_json::from_str(json).unwrap(), !follower.on_store())
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
        let tails = Arc::new(SessionTails::new(4));
        let follower = |after| {
            let stream = SessionStream {
                engine: engine.clone(),
                caller: Caller::Host,
                session: Arc::from(&*session.id),
            };
            let tails = tails.clone();
            async move {
                let stored = stream.stored(after).await.unwrap();
                Follower::new(stream, tails, after, stored)
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
            .get(&session.id)
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
        assert_eq!(tails.live(), 1);
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
        let tail = Arc::new(Tail::new(&sender, tokio::spawn(async {})));
        let stream = SessionStream {
            engine,
            caller: Caller::Host,
            session: Arc::from("sess_1"),
        };
        let mut client = Follower::new(
            stream,
            Arc::new(SessionTails::new(8)),
            None,
            stored_rx.boxed(),
        );
        client.tail = Some((tail, receiver));
        for seq in 1..=2 {
            let got = client.next().await.unwrap().unwrap();
            assert!(client.on_store(), "event {seq} comes from the store");
            assert_eq!(got.id.seq, seq);
        }
        let frame = |prev: u64, seq: u64| {
            Arc::new(SessionStream::frame(EventId::of_entry(prev), &event(seq)))
        };
        sender.send(frame(1, 2)).unwrap();
        // Event 3 waits in the store stream, but the tail is at event 2:
        // the client moves onto it, and takes event 3 from it.
        let (next, _) = tokio::join!(client.next(), async {
            tokio::task::yield_now().await;
            sender.send(frame(2, 3)).unwrap();
        });
        let next = next.unwrap().unwrap();
        assert_eq!(next.id.seq, 3);
        assert!(
            !client.on_store(),
            "event 3 comes from the tail: the store stream is left"
        );
        drop(stored_tx);
    }
}
