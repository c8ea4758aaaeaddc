//! The server calls of the NATS store, each retried through transient
//! failures (a lost connection, a stream leader being re-elected) until the
//! store's retry budget runs out.

use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use async_nats::jetstream::{self, message::StreamMessage};
use async_nats::{HeaderMap, header};
use bytes::Bytes;
use futures::TryStreamExt;

use super::batch::{BatchPos, COUNT_HEADER, SEQ_HEADER, decode};
use crate::{Entry, StoreError, ThreadId};

/// The store's stream and how to reach it.
pub(crate) struct Backend {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) stream: Stream,
    pub(crate) prefix: String,
    pub(crate) retry_for: Duration,
    pub(crate) request_timeout: Duration,
}

/// How a publish ended, when it did not store the batch.
pub(crate) enum PublishFailure {
    /// The subject's last message is not the one the publish expected.
    WrongLast,
    /// The server may or may not have stored it (timeout, lost connection).
    Transient(String),
    /// It cannot succeed (too large, refused).
    Fatal(StoreError),
}

/// A batch message fetched by stream sequence.
pub(crate) struct Fetched {
    pub(crate) pos: BatchPos,
    pub(crate) entries: Vec<Entry>,
    /// The message's `Nats-Msg-Id`.
    pub(crate) msg_id: Option<String>,
}

/// Waits a little longer after each failed attempt (25 ms doubling, at most 1 s).
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(25u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(1))
}

impl Backend {
    /// The subject of a thread: `<prefix>.<thread>`.
    pub(crate) fn subject(&self, thread: &ThreadId) -> String {
        format!("{}.{}", self.prefix, thread)
    }

    /// Runs `call` until it succeeds, fails for good, or the retry budget is
    /// spent (the last transient failure is then a [`StoreError::Backend`]).
    async fn retrying<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Attempt>>,
    {
        let deadline = Instant::now() + self.retry_for;
        let mut attempt = 0u32;
        loop {
            match call().await {
                Ok(value) => return Ok(value),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Transient(message)) => {
                    if Instant::now() >= deadline {
                        return Err(StoreError::Backend(format!("{what}: {message}")));
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
            }
        }
    }

    /// The last batch of a thread (None: the thread is empty), read from the
    /// stream leader so it reflects every acknowledged append.
    pub(crate) async fn tip(&self, thread: &ThreadId) -> Result<Option<BatchPos>, StoreError> {
        let subject = self.subject(thread);
        self.retrying("reading a thread's last batch", || async {
            match self.stream.get_last_raw_message_by_subject(&subject).await {
                Ok(msg) => position(thread, &msg).map(Some).map_err(Attempt::Fatal),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
                Err(e) => Err(Attempt::Transient(e.to_string())),
            }
        })
        .await
    }

    /// The thread's last batch, tried once (for checks that may fail).
    pub(crate) async fn tip_once(&self, thread: &ThreadId) -> Result<Option<BatchPos>, StoreError> {
        match self
            .stream
            .get_last_raw_message_by_subject(&self.subject(thread))
            .await
        {
            Ok(msg) => position(thread, &msg).map(Some),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(StoreError::Backend(e.to_string())),
        }
    }

    /// The first batch of the thread at or after stream sequence `from`.
    pub(crate) async fn next_from(
        &self,
        thread: &ThreadId,
        from: u64,
    ) -> Result<Option<Fetched>, StoreError> {
        let subject = self.subject(thread);
        self.retrying("reading a thread's batch", || async {
            let got = self
                .stream
                .raw_message_builder()
                .sequence(from.max(1))
                .next_by_subject(subject.clone())
                .send()
                .await;
            match got {
                Ok(msg) => fetched(thread, &msg).map(Some).map_err(Attempt::Fatal),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
                Err(e) => Err(Attempt::Transient(e.to_string())),
            }
        })
        .await
    }

    /// The batch at stream sequence `seq`.
    pub(crate) async fn at(&self, thread: &ThreadId, seq: u64) -> Result<Fetched, StoreError> {
        self.retrying("reading a stored batch", || async {
            match self.stream.get_raw_message(seq).await {
                Ok(msg) => fetched(thread, &msg).map_err(Attempt::Fatal),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                    Err(Attempt::Fatal(StoreError::Corrupt {
                        thread: thread.clone(),
                        location: format!("stream message {seq}"),
                        message: "acknowledged message is missing".into(),
                    }))
                }
                Err(e) => Err(Attempt::Transient(e.to_string())),
            }
        })
        .await
    }

    /// Publishes one batch message once; the caller decides what to retry.
    pub(crate) async fn publish(
        &self,
        subject: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<jetstream::publish::PublishAck, PublishFailure> {
        let message = PublishMessage::build().payload(body).headers(headers);
        let ack = match self.js.send_publish(subject.to_owned(), message).await {
            Ok(future) => future.await,
            Err(e) => Err(e),
        };
        ack.map_err(|e| match e.kind() {
            PublishErrorKind::WrongLastSequence => PublishFailure::WrongLast,
            PublishErrorKind::MaxPayloadExceeded => PublishFailure::Fatal(StoreError::Backend(
                format!("the batch is larger than the server's max payload: {e}"),
            )),
            _ => PublishFailure::Transient(e.to_string()),
        })
    }

    /// Removes every message of the thread's subject.
    pub(crate) async fn purge(&self, thread: &ThreadId) -> Result<(), StoreError> {
        let subject = self.subject(thread);
        self.retrying("deleting a thread", || async {
            self.stream
                .purge()
                .filter(subject.clone())
                .await
                .map(|_| ())
                .map_err(|e| Attempt::Transient(e.to_string()))
        })
        .await
    }

    /// Every thread subject holding at least one message, from the stream's
    /// per-subject state (no message is read).
    pub(crate) async fn subjects(&self) -> Result<Vec<String>, StoreError> {
        let filter = format!("{}.>", self.prefix);
        self.retrying("listing threads", || async {
            let info = self
                .stream
                .info_with_subjects(&filter)
                .await
                .map_err(|e| Attempt::Transient(e.to_string()))?;
            info.try_filter(|(_, count)| futures::future::ready(*count > 0))
                .map_ok(|(subject, _)| subject)
                .try_collect::<Vec<String>>()
                .await
                .map_err(|e| Attempt::Transient(e.to_string()))
        })
        .await
    }
}

/// One try of a server call.
pub(crate) enum Attempt {
    /// Worth trying again.
    Transient(String),
    /// Not worth trying again.
    Fatal(StoreError),
}

/// A header's value as a number.
fn number(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name).and_then(|v| v.as_str().parse().ok())
}

/// Where a stored batch sits, from its headers when they are there (no body
/// parsing), else from its body.
fn position(thread: &ThreadId, msg: &StreamMessage) -> Result<BatchPos, StoreError> {
    match (
        number(&msg.headers, SEQ_HEADER),
        number(&msg.headers, COUNT_HEADER),
    ) {
        (Some(first), Some(count)) if first > 0 && count > 0 => Ok(BatchPos {
            stream_seq: msg.sequence,
            first,
            count,
        }),
        _ => fetched(thread, msg).map(|f| f.pos),
    }
}

fn fetched(thread: &ThreadId, msg: &StreamMessage) -> Result<Fetched, StoreError> {
    let (pos, entries) = decode(thread, msg.sequence, Some(&msg.headers), &msg.payload)?;
    let msg_id = msg
        .headers
        .get(header::NATS_MESSAGE_ID)
        .map(|v| v.as_str().to_owned());
    Ok(Fetched {
        pos,
        entries,
        msg_id,
    })
}
