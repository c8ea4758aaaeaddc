//! Writes a running turn into its thread as it happens: assistant messages
//! and tool results as they complete, and (for shared threads) text deltas
//! as coalesced `chat.chunk` entries; then the entries that close it. Every
//! runner uses it, so a turn interrupted by a crash keeps every message it
//! completed.

use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::Message;
use roundtable_thread_stream::{
    AssistantEntry, Chunk, EntryBody, Expect, NewEntry, StoreError, ThreadId, ThreadStore,
    ToolResultEntry,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{turn_closed, turn_interrupted};
use crate::event::{OutputKind, TurnEvent};
use crate::turn::TurnOutcome;

/// What the write loop wrote.
#[derive(Debug, Default)]
struct Written {
    /// How many of the turn's messages (assistant messages and tool results,
    /// in order) are in the thread.
    messages: usize,
    /// The first append that failed, if any (nothing is written after it).
    error: Option<StoreError>,
}

/// A turn's writer: the turn loop's events go to its [`sink`](Self::sink);
/// a task appends them in event order; [`end`](Self::end) closes the turn.
///
/// It writes neither the turn's `turn.started` (each runner appends that
/// its own way: with the prompt, or as a claim) nor anything after a failed
/// append: a turn whose entries could not all be written stays open, and
/// the next turn on the thread closes it as interrupted.
pub struct TurnWriter {
    store: Arc<dyn ThreadStore>,
    thread: ThreadId,
    author: Arc<str>,
    turn: Arc<str>,
    tx: mpsc::UnboundedSender<TurnEvent>,
    task: JoinHandle<Written>,
}

impl std::fmt::Debug for TurnWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnWriter")
            .field("thread", &self.thread)
            .field("author", &self.author)
            .field("turn", &self.turn)
            .finish_non_exhaustive()
    }
}

impl TurnWriter {
    /// Starts writing the entries of `turn`, authored by `author`, into
    /// `thread`. With `chunks`, text deltas are written as `chat.chunk`
    /// entries, each held for at most that long so that tiny deltas share
    /// one entry; without, deltas are not written.
    pub fn start(
        store: Arc<dyn ThreadStore>,
        thread: ThreadId,
        author: Arc<str>,
        turn: Arc<str>,
        chunks: Option<Duration>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = WriteLoop {
            store: store.clone(),
            thread: thread.clone(),
            author: author.clone(),
            turn: turn.clone(),
            chunks,
            text: String::new(),
            text_since: None,
            batch: Vec::new(),
            written: Written::default(),
        };
        let task = tokio::spawn(state.run(rx));
        Self {
            store,
            thread,
            author,
            turn,
            tx,
            task,
        }
    }

    /// The sink to give the turn loop (or to tee the loop's events into).
    pub fn sink(&self) -> mpsc::UnboundedSender<TurnEvent> {
        self.tx.clone()
    }

    /// Closes a turn the loop ran to `outcome`: waits for everything sent so
    /// far to be written, then appends in one batch the turn's messages the
    /// events did not cover, `turn.ended` or `turn.failed`, and `then` (the
    /// runner's own closing entries, e.g. a result record).
    pub async fn end(self, outcome: &TurnOutcome, then: Vec<NewEntry>) -> Result<(), StoreError> {
        let author = self.author.clone();
        self.close(outcome, |mut rest| {
            rest.push(turn_closed(&author, outcome));
            rest.extend(then);
            rest
        })
        .await
    }

    /// Closes a turn whose runner is shutting down in the middle of it: its
    /// messages, then `turn.failed {reason: "interrupted"}`, so that the wake
    /// it answered is owed again.
    pub async fn end_interrupted(self, outcome: &TurnOutcome) -> Result<(), StoreError> {
        let (author, turn) = (self.author.clone(), self.turn.clone());
        self.close(outcome, |mut rest| {
            rest.push(turn_interrupted(&author, &turn));
            rest
        })
        .await
    }

    async fn close(
        self,
        outcome: &TurnOutcome,
        closing: impl FnOnce(Vec<NewEntry>) -> Vec<NewEntry>,
    ) -> Result<(), StoreError> {
        let Self {
            store,
            thread,
            author,
            turn,
            tx,
            task,
        } = self;
        drop(tx);
        let written = task.await.unwrap_or_else(|e| Written {
            messages: 0,
            error: Some(StoreError::Backend(format!("the turn writer failed: {e}"))),
        });
        if let Some(e) = written.error {
            return Err(e);
        }
        let rest = message_entries(&author, &turn, &outcome.messages, written.messages);
        store.append(&thread, Expect::Any, closing(rest)).await?;
        Ok(())
    }
}

struct WriteLoop {
    store: Arc<dyn ThreadStore>,
    thread: ThreadId,
    author: Arc<str>,
    turn: Arc<str>,
    /// How long text deltas may be held before they are written (`None`:
    /// they are not written).
    chunks: Option<Duration>,
    /// Text deltas not yet written.
    text: String,
    /// When the oldest unwritten delta arrived.
    text_since: Option<Instant>,
    /// Entries to write with the next append.
    batch: Vec<NewEntry>,
    written: Written,
}

impl WriteLoop {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<TurnEvent>) -> Written {
        loop {
            let event = match (self.text_since, self.chunks) {
                (Some(since), Some(interval)) if self.batch.is_empty() => {
                    let deadline = since + interval;
                    tokio::select! {
                        event = rx.recv() => event,
                        () = tokio::time::sleep_until(deadline) => {
                            self.flush().await;
                            continue;
                        }
                    }
                }
                _ => rx.recv().await,
            };
            let Some(event) = event else {
                self.flush().await;
                return self.written;
            };
            self.handle(event);
            // Everything already queued goes into the same append.
            while let Ok(event) = rx.try_recv() {
                self.handle(event);
            }
            if !self.batch.is_empty() {
                self.flush().await;
            }
        }
    }

    fn handle(&mut self, event: TurnEvent) {
        match event {
            TurnEvent::OutputDelta {
                kind: OutputKind::Text,
                delta,
                ..
            } if self.chunks.is_some() => {
                if self.text.is_empty() {
                    self.text_since = Some(Instant::now());
                }
                self.text.push_str(&delta);
            }
            TurnEvent::OutputCompleted { message, .. } => {
                self.take_text();
                self.batch.push(NewEntry::new(
                    self.author.clone(),
                    EntryBody::Assistant(AssistantEntry {
                        turn: Some(self.turn.clone()),
                        message,
                    }),
                ));
            }
            TurnEvent::ToolCallCompleted { result, .. } => {
                self.batch.push(NewEntry::new(
                    self.author.clone(),
                    EntryBody::ToolResult(ToolResultEntry {
                        turn: Some(self.turn.clone()),
                        message: result,
                    }),
                ));
            }
            _ => {}
        }
    }

    /// Moves the held text into the batch as one chunk.
    fn take_text(&mut self) {
        self.text_since = None;
        if self.text.is_empty() {
            return;
        }
        let delta: Arc<str> = Arc::from(std::mem::take(&mut self.text));
        self.batch.push(NewEntry::new(
            self.author.clone(),
            EntryBody::Chunk(Chunk {
                turn: self.turn.clone(),
                delta,
            }),
        ));
    }

    async fn flush(&mut self) {
        self.take_text();
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        if self.written.error.is_some() {
            return;
        }
        let messages = batch
            .iter()
            .filter(|e| matches!(e.body, EntryBody::Assistant(_) | EntryBody::ToolResult(_)))
            .count();
        match self.store.append(&self.thread, Expect::Any, batch).await {
            Ok(_) => self.written.messages += messages,
            Err(e) => self.written.error = Some(e),
        }
    }
}

/// The entries of the turn's messages from `from` on (those the writer did
/// not write, for a turn whose events did not cover every message).
fn message_entries(
    author: &Arc<str>,
    turn: &Arc<str>,
    messages: &[Message],
    from: usize,
) -> Vec<NewEntry> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(message) => Some(EntryBody::Assistant(AssistantEntry {
                turn: Some(turn.clone()),
                message: message.clone(),
            })),
            Message::ToolResult(message) => Some(EntryBody::ToolResult(ToolResultEntry {
                turn: Some(turn.clone()),
                message: message.clone(),
            })),
            Message::User(_) => None,
        })
        .skip(from)
        .map(|body| NewEntry::new(author.clone(), body))
        .collect()
}
