//! Range reads of the NATS store: from the stream message holding the first
//! wanted entry, the thread's following batches, fetched one get at a time
//! for short reads or streamed through a short-lived ordered consumer for
//! long ones.

use async_nats::jetstream::consumer::{DeliverPolicy, push};
use futures::StreamExt;

use super::backend::Backend;
use super::batch::{self, BatchPos};
use super::index::ThreadState;
use crate::{Entry, StoreError, ThreadId};

/// A read whose first and last batch lie this many stream messages apart or
/// more streams the batches through a consumer instead of fetching them one
/// request at a time.
pub(super) const CONSUMER_READ_SPAN: u64 = 32;

/// A read of this many entries or more streams them through a consumer too
/// (a get returns its message base64-encoded in JSON, which costs more than
/// a delivery once messages are large).
pub(super) const CONSUMER_READ_ENTRIES: u64 = 64;

/// A range read in progress: the entries taken so far and where it goes on.
pub(super) struct RangeRead<'a> {
    pub(super) thread: &'a ThreadId,
    pub(super) state: &'a ThreadState,
    /// The next entry seq to take.
    pub(super) next: u64,
    /// The last entry seq to take (at most the thread's tip).
    pub(super) to: u64,
    /// The stream sequence to look from for the next batch.
    pub(super) stream_next: u64,
    pub(super) out: Vec<Entry>,
    /// Set when a batch started past the next wanted entry: the read began
    /// at the wrong message (see [`RangeRead::take`]).
    pub(super) gap: bool,
}

impl RangeRead<'_> {
    /// Takes the wanted entries of one batch. A batch that starts past the
    /// next wanted entry means the read started after the message holding it
    /// (a wrong position from the cache, or data the server lost): that is
    /// [`StoreError::Corrupt`], with [`RangeRead::gap`] set so the caller can
    /// look the position up again first.
    fn take(&mut self, pos: BatchPos, entries: Vec<Entry>) -> Result<(), StoreError> {
        self.state.remember(pos);
        self.stream_next = pos.stream_seq + 1;
        if pos.last() < self.next {
            return Ok(());
        }
        if pos.first > self.next {
            self.gap = true;
            return Err(StoreError::Corrupt {
                thread: self.thread.clone(),
                location: format!("stream message {}", pos.stream_seq),
                message: format!("expected entry {}, found {}", self.next, pos.first),
            });
        }
        let (next, to) = (self.next, self.to);
        self.out
            .extend(entries.into_iter().filter(|e| e.seq >= next && e.seq <= to));
        self.next = pos.last() + 1;
        Ok(())
    }

    /// Fetches the following batches one by one.
    pub(super) async fn by_gets(&mut self, backend: &Backend) -> Result<(), StoreError> {
        while self.next <= self.to {
            let Some(batch) = backend.next_from(self.thread, self.stream_next).await? else {
                break;
            };
            self.take(batch.pos, batch.entries)?;
        }
        Ok(())
    }

    /// Streams the following batches through a short-lived ordered consumer.
    /// It stops early (leaving the rest to [`RangeRead::by_gets`]) if the
    /// consumer fails or falls silent.
    pub(super) async fn by_consumer(&mut self, backend: &Backend) -> Result<(), StoreError> {
        let config = push::OrderedConfig {
            deliver_subject: backend.client.new_inbox(),
            filter_subject: backend.subject(self.thread),
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: self.stream_next,
            },
            ..Default::default()
        };
        let Ok(consumer) = backend.stream.create_consumer(config).await else {
            return Ok(());
        };
        let name = consumer.cached_info().name.clone();
        let mut result = Ok(());
        if let Ok(mut messages) = consumer.messages().await {
            while self.next <= self.to {
                let item = tokio::time::timeout(backend.request_timeout, messages.next()).await;
                let Ok(Some(Ok(message))) = item else { break };
                let Ok(info) = message.info() else { break };
                result = batch::decode(
                    self.thread,
                    info.stream_sequence,
                    message.headers.as_ref(),
                    &message.payload,
                )
                .and_then(|(pos, entries)| self.take(pos, entries));
                if result.is_err() {
                    break;
                }
            }
        }
        // The server would drop the consumer once nobody listens; saying so
        // spares it the wait.
        let stream = backend.stream.clone();
        tokio::spawn(async move {
            let _ = stream.delete_consumer(&name).await;
        });
        result
    }
}
