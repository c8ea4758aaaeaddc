//! Subscriptions of the NATS store: one ordered push consumer filtered to the
//! thread's subject, started at the stream message holding the first wanted
//! entry.
//!
//! History and live entries come through the same consumer, so there is no
//! seam to cross. The subscription remembers the stream sequence after the
//! last message it took and the next entry seq it owes: when the consumer
//! fails (a server restart, a dropped connection, a cluster node gone) a new
//! one starts right after that message, and entries it already delivered are
//! skipped by seq, so nothing is lost or repeated. A consumer that falls
//! silent while the thread holds entries it owes (its node died and the
//! client did not notice) is replaced the same way.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{DeliverPolicy, push};
use futures::StreamExt;
use tokio::sync::watch;

use super::backend::{Backend, backoff};
use super::batch::decode;
use crate::store::EntryStream;
use crate::{Entry, StoreError, ThreadId};

/// How long a subscription waits without a delivery before it checks that
/// its consumer is not stuck behind the thread.
const STALL_CHECK: Duration = Duration::from_secs(3);

struct Subscription {
    backend: Arc<Backend>,
    thread: ThreadId,
    /// The next entry seq to deliver.
    next: u64,
    /// The stream sequence to start a new consumer at.
    stream_next: u64,
    consumer: Option<push::Ordered>,
    buffer: VecDeque<Entry>,
    closed: watch::Receiver<bool>,
    /// Once the store closed: the last seq to deliver before ending.
    stop_at: Option<u64>,
    /// When the consumer started failing (for the retry budget).
    failing_since: Option<Instant>,
    attempt: u32,
    done: bool,
}

/// Entries of `thread` from seq `from` on, starting with the stream message at
/// `stream_seq` (the one holding `from`, or the first after the thread's tip).
pub(crate) fn subscribe(
    backend: Arc<Backend>,
    thread: ThreadId,
    from: u64,
    stream_seq: u64,
    closed: watch::Receiver<bool>,
) -> EntryStream {
    let state = Subscription {
        backend,
        thread,
        next: from.max(1),
        stream_next: stream_seq.max(1),
        consumer: None,
        buffer: VecDeque::new(),
        closed,
        stop_at: None,
        failing_since: None,
        attempt: 0,
        done: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        let item = s.next_item().await?;
        Some((item, s))
    })
    .boxed()
}

impl Subscription {
    /// The next entry, an error that ends the subscription, or None at its
    /// end.
    async fn next_item(&mut self) -> Option<Result<Entry, StoreError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(entry) = self.buffer.pop_front() {
                return Some(Ok(entry));
            }
            if let Some(stop) = self.stop_at {
                if self.next > stop {
                    return None;
                }
            } else if *self.closed.borrow_and_update() {
                // Deliver what the thread holds now, then end.
                let tip = self.backend.tip(&self.thread).await.ok()?;
                self.stop_at = Some(tip.map_or(0, |p| p.last()));
                continue;
            }
            if let Err(error) = self.receive().await {
                self.done = true;
                return Some(Err(error));
            }
        }
    }

    /// Waits for the consumer's next message and takes its entries, starting
    /// a consumer first if there is none; an error ends the subscription.
    async fn receive(&mut self) -> Result<(), StoreError> {
        if self.consumer.is_none()
            && let Err(error) = self.start().await
        {
            if self.out_of_budget() {
                return Err(error);
            }
            self.pause().await;
            return Ok(());
        }
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(());
        };
        let item = tokio::select! {
            item = consumer.next() => item,
            _ = self.closed.changed(), if self.stop_at.is_none() => return Ok(()),
            _ = tokio::time::sleep(STALL_CHECK) => {
                // Quiet for a while: if the thread holds entries this
                // subscription still owes, its consumer is stuck (its
                // server went away unnoticed): start a new one.
                if let Ok(Some(tip)) = self.backend.tip_once(&self.thread).await
                    && tip.last() >= self.next
                {
                    self.consumer = None;
                }
                return Ok(());
            }
        };
        match item {
            Some(Ok(message)) => {
                self.failing_since = None;
                self.attempt = 0;
                self.take(&message)
            }
            Some(Err(_)) | None => {
                // Start over right after the last message taken.
                self.consumer = None;
                if self.out_of_budget() {
                    return Err(StoreError::Backend(format!(
                        "subscription to thread {} lost its consumer",
                        self.thread
                    )));
                }
                self.pause().await;
                Ok(())
            }
        }
    }

    async fn start(&mut self) -> Result<(), StoreError> {
        let config = push::OrderedConfig {
            deliver_subject: self.backend.client.new_inbox(),
            filter_subject: self.backend.subject(&self.thread),
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: self.stream_next,
            },
            ..Default::default()
        };
        let consumer = self
            .backend
            .stream
            .create_consumer(config)
            .await
            .map_err(|e| StoreError::Backend(format!("cannot start a consumer: {e}")))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| StoreError::Backend(format!("cannot start a consumer: {e}")))?;
        self.consumer = Some(messages);
        // The server is there again: a later failure gets a fresh budget.
        self.failing_since = None;
        Ok(())
    }

    /// Buffers the entries of one delivered batch that are still owed.
    fn take(&mut self, message: &async_nats::jetstream::Message) -> Result<(), StoreError> {
        let stream_seq = message
            .info()
            .map_err(|e| StoreError::Backend(format!("bad delivery metadata: {e}")))?
            .stream_sequence;
        let (_, entries) = decode(
            &self.thread,
            stream_seq,
            message.headers.as_ref(),
            &message.payload,
        )?;
        self.stream_next = stream_seq + 1;
        for entry in entries {
            if entry.seq < self.next {
                continue;
            }
            if entry.seq > self.next {
                return Err(StoreError::Corrupt {
                    thread: self.thread.clone(),
                    location: format!("stream message {stream_seq}"),
                    message: format!("expected entry {}, found {}", self.next, entry.seq),
                });
            }
            self.next = entry.seq + 1;
            self.buffer.push_back(entry);
        }
        Ok(())
    }

    fn out_of_budget(&mut self) -> bool {
        let since = *self.failing_since.get_or_insert_with(Instant::now);
        since.elapsed() >= self.backend.retry_for
    }

    async fn pause(&mut self) {
        let wait = backoff(self.attempt);
        self.attempt += 1;
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = self.closed.changed(), if self.stop_at.is_none() => {}
        }
    }
}
