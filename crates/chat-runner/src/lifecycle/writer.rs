//! Writes a running turn into its thread as it happens: assistant messages
//! and tool results as they complete, and (for shared threads) text deltas
//! as coalesced `chat.chunk` entries; then the entries that close it. Every
//! runner uses it, so a turn interrupted by a crash keeps every message it
//! completed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use roundtable_providers::Message;
use roundtable_thread_stream::{
    AssistantEntry, Chunk, ChunkKind, Entry, EntryBody, Expect, NewEntry, StoreError, ThreadId,
    ThreadStore, ToolResultEntry,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::records::RetryRecord;
use super::records::{ApprovalDecidedRecord, ApprovalRequestedRecord, ApprovalVerdict};
use super::records::{CompactionEndedRecord, CompactionStartedRecord};
use super::{turn_closed, turn_interrupted};
use crate::event::{EventSink, OutputKind, TurnEvent};
use crate::turn::TurnOutcome;

/// What the sinks and the write loop share: where the entries go, and
/// whether the writer is finished.
struct WriterShared {
    target: TurnThread,
    /// How long text deltas may be held before they are written (`None`:
    /// they are not written).
    chunks: Option<Duration>,
    /// Closed: later events are dropped and appends refused.
    finished: AtomicBool,
}

/// What a sink hands the write loop, in the order it was sent.
enum ToLoop {
    /// A text or thinking delta, to be held and written with its
    /// neighbours as one chunk.
    Delta { kind: ChunkKind, delta: Arc<str> },
    /// An entry made from an event; `after_text` writes the held deltas
    /// before it.
    Entry { entry: NewEntry, after_text: bool },
    /// Entries to append, and where the stored ones go.
    Append {
        entries: Vec<NewEntry>,
        written: oneshot::Sender<Result<Vec<Entry>, StoreError>>,
    },
    /// Write what is held and stop.
    Finish,
}

/// Told of every entry a turn's writer stores, as stored (one call per
/// append, in seq order), so a host that keeps state folded from the
/// thread can fold the turn's own entries without reading them back.
/// Called on the writer's task: it must not block.
pub trait StoredEntries: Send + Sync {
    /// `entries` were appended (consecutive seqs).
    fn stored(&self, entries: &[Entry]);
}

/// Where a turn's events go to be written (give it to the turn loop, or tee
/// the loop's events into it), and a way to append other entries of the turn
/// in order with them. Cheap to clone; once every sink is gone, the write
/// loop writes what it holds and stops.
#[derive(Clone)]
pub struct WriterSink {
    shared: Arc<WriterShared>,
    to_loop: mpsc::UnboundedSender<ToLoop>,
}

impl std::fmt::Debug for WriterSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterSink").finish_non_exhaustive()
    }
}

impl EventSink for WriterSink {
    fn emit(&self, event: TurnEvent) {
        // A finished writer means the turn is over; late events are dropped.
        if self.shared.finished.load(Ordering::Acquire) {
            return;
        }
        // Only the events the writer keeps something of are sent.
        if let Some(item) = to_loop(&self.shared, event) {
            let _ = self.to_loop.send(item);
        }
    }
}

impl WriterSink {
    /// Asks the write loop to write what it holds and stop, as closing the
    /// writer does (for a runner whose turn stopped before it could close
    /// its writer).
    pub fn finish(&self) {
        self.shared.finished.store(true, Ordering::Release);
        let _ = self.to_loop.send(ToLoop::Finish);
    }

    /// Appends `entries` after everything sent so far (and in the same
    /// append as what is still held), returning them as stored. With no
    /// entries it waits until everything sent so far is written (an error
    /// if an earlier append of the turn failed).
    pub async fn append(&self, entries: Vec<NewEntry>) -> Result<Vec<Entry>, StoreError> {
        let finished = || StoreError::Backend("the turn's writer has finished".into());
        if self.shared.finished.load(Ordering::Acquire) {
            return Err(finished());
        }
        let (written, done) = oneshot::channel();
        self.to_loop
            .send(ToLoop::Append { entries, written })
            .map_err(|_| finished())?;
        done.await
            .unwrap_or_else(|_| Err(StoreError::Backend("the turn's writer stopped".into())))
    }
}

/// What the write loop wrote.
#[derive(Debug, Default)]
struct Written {
    /// How many of the turn's messages (assistant messages and tool results,
    /// in order) are in the thread.
    messages: usize,
    /// The first append that failed, if any (nothing is written after it).
    error: Option<StoreError>,
}

/// A turn's writer: the turn loop's events go to its [`sink`](Self::sink),
/// which makes their entries as they come; a write loop (its own task, or
/// run beside the turn) appends them in event order; [`end`](Self::end)
/// closes the turn.
///
/// It writes neither the turn's `turn.started` (each runner appends that
/// its own way: with the prompt, or as a claim) nor anything after a failed
/// append: a turn whose entries could not all be written stays open, and
/// the next turn on the thread closes it as interrupted.
pub struct TurnWriter {
    sink: WriterSink,
    /// What the write loop wrote, handed back when it stops (wherever it
    /// runs: its own task, or the caller's).
    written: oneshot::Receiver<Written>,
}

/// Where a turn's entries go: the store and thread, who writes them and
/// for which turn, and who is told of what is stored. Shared by the
/// writer, its write loop and the turn's closing append.
#[derive(Clone)]
struct TurnThread {
    store: Arc<dyn ThreadStore>,
    thread: ThreadId,
    author: Arc<str>,
    turn: Arc<str>,
    /// Told of what is stored.
    observer: Option<Arc<dyn StoredEntries>>,
}

impl TurnThread {
    /// Appends `entries` expecting `expect`, and tells the observer what
    /// was stored.
    async fn append(
        &self,
        expect: Expect,
        entries: Vec<NewEntry>,
    ) -> Result<Vec<Entry>, StoreError> {
        let stored = self.store.append(&self.thread, expect, entries).await?;
        if let Some(observer) = &self.observer {
            observer.stored(&stored);
        }
        Ok(stored)
    }
}

/// The write loop of a writer made by [`TurnWriter::start_inline`]: the
/// caller runs it beside the turn (in the same task, e.g. with
/// `futures::future::join`) until the writer is closed.
#[must_use = "the turn's entries are written only while this runs"]
pub struct TurnWriteLoop {
    shared: Arc<WriterShared>,
    from_sinks: mpsc::UnboundedReceiver<ToLoop>,
    done: oneshot::Sender<Written>,
}

impl TurnWriteLoop {
    /// Writes the turn's entries until the writer is closed (or every sink
    /// is dropped): each append takes everything sent while the previous
    /// one ran, and held text is written once its interval is up.
    pub async fn run(self) {
        let Self {
            shared,
            mut from_sinks,
            done,
        } = self;
        let target = &shared.target;
        let mut pending = Pending::new(shared.chunks);
        let mut written = Written::default();
        loop {
            let deadline = pending
                .text_since
                .zip(pending.chunks)
                .map(|(since, interval)| since + interval);
            let received = match deadline {
                Some(deadline) => tokio::select! {
                    received = from_sinks.recv() => Some(received),
                    () = tokio::time::sleep_until(deadline) => None,
                },
                None => Some(from_sinks.recv().await),
            };
            let mut last = match received {
                // The held text's time is up.
                None => {
                    pending.take_text(target);
                    false
                }
                Some(Some(message)) => pending.take(target, message),
                // Every sink is gone.
                Some(None) => true,
            };
            // Everything else already sent goes in the same append.
            while !last {
                match from_sinks.try_recv() {
                    Ok(message) => last = pending.take(target, message),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => last = true,
                }
            }
            if last {
                // What was sent before the close is still written.
                from_sinks.close();
                while let Ok(message) = from_sinks.try_recv() {
                    pending.take(target, message);
                }
            }
            if last || !pending.batch.is_empty() || !pending.replies.is_empty() {
                let (batch, replies) = pending.take_due(target);
                written.append(target, batch, replies).await;
            }
            if last {
                break;
            }
        }
        let _ = done.send(written);
    }
}

impl std::fmt::Debug for TurnWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = &self.sink.shared.target;
        f.debug_struct("TurnWriter")
            .field("thread", &target.thread)
            .field("author", &target.author)
            .field("turn", &target.turn)
            .finish_non_exhaustive()
    }
}

impl TurnWriter {
    /// Starts writing the entries of `turn`, authored by `author`, into
    /// `thread`. With `chunks`, text and thinking deltas are written as
    /// `chat.chunk` entries, each held for at most that long so that tiny
    /// deltas share one entry; without, deltas are not written.
    pub fn start(
        store: Arc<dyn ThreadStore>,
        thread: ThreadId,
        author: Arc<str>,
        turn: Arc<str>,
        chunks: Option<Duration>,
    ) -> Self {
        let (writer, writing) = Self::start_inline(store, thread, author, turn, chunks, None);
        tokio::spawn(writing.run());
        writer
    }

    /// [`start`](Self::start) without a task of its own: the returned loop
    /// does the writing, and the caller runs it beside the turn, so the
    /// turn's events reach it without waking another thread.
    /// [`end`](Self::end) waits for the loop: run both together. `observer`
    /// (when given) is told of every entry the writer stores, its closing
    /// entries included.
    pub fn start_inline(
        store: Arc<dyn ThreadStore>,
        thread: ThreadId,
        author: Arc<str>,
        turn: Arc<str>,
        chunks: Option<Duration>,
        observer: Option<Arc<dyn StoredEntries>>,
    ) -> (Self, TurnWriteLoop) {
        let (done, written) = oneshot::channel();
        let (to_loop, from_sinks) = mpsc::unbounded_channel();
        let shared = Arc::new(WriterShared {
            target: TurnThread {
                store,
                thread,
                author,
                turn,
                observer,
            },
            chunks,
            finished: AtomicBool::new(false),
        });
        let writer = Self {
            sink: WriterSink {
                shared: shared.clone(),
                to_loop,
            },
            written,
        };
        let writing = TurnWriteLoop {
            shared,
            from_sinks,
            done,
        };
        (writer, writing)
    }

    /// The sink to give the turn loop (or to tee the loop's events into).
    pub fn sink(&self) -> WriterSink {
        self.sink.clone()
    }

    /// Closes a turn the loop ran to `outcome`: waits for everything sent so
    /// far to be written, then appends in one batch the turn's messages the
    /// events did not cover, `turn.ended` or `turn.failed`, and `then` (the
    /// runner's own closing entries, e.g. a result record).
    pub async fn end(self, outcome: &TurnOutcome, then: Vec<NewEntry>) -> Result<(), StoreError> {
        self.flushed(outcome)
            .await?
            .end(outcome, then, Expect::Any)
            .await
    }

    /// Closes a turn whose runner is shutting down in the middle of it: its
    /// messages, then `turn.failed {reason: "interrupted"}`, so that the wake
    /// it answered is owed again.
    pub async fn end_interrupted(self, outcome: &TurnOutcome) -> Result<(), StoreError> {
        let flushed = self.flushed(outcome).await?;
        let closing = turn_interrupted(&flushed.target.author, &flushed.target.turn);
        flushed.append(vec![closing], Expect::Any).await
    }

    /// The first half of [`end`](Self::end): waits for everything sent so
    /// far to be written and stops the write loop. The closing append is
    /// left to [`FlushedTurn::end`], for a runner that appends it with an
    /// expectation of its own (and tries again after a conflict).
    pub async fn flushed(self, outcome: &TurnOutcome) -> Result<FlushedTurn, StoreError> {
        let Self { sink, written } = self;
        let target = sink.shared.target.clone();
        sink.finish();
        drop(sink);
        // A loop that panicked (or was dropped unrun) never answers.
        let written = written.await.unwrap_or_else(|_| Written {
            messages: 0,
            error: Some(StoreError::Backend(
                "the turn's write loop stopped before the turn ended".into(),
            )),
        });
        if let Some(e) = written.error {
            return Err(e);
        }
        let rest = message_entries(
            &target.author,
            &target.turn,
            &outcome.messages,
            written.messages,
        );
        Ok(FlushedTurn { target, rest })
    }
}

/// A turn whose events are all written (see [`TurnWriter::flushed`]): what
/// is left is its closing append.
pub struct FlushedTurn {
    target: TurnThread,
    /// The turn's messages its events did not cover.
    rest: Vec<NewEntry>,
}

impl std::fmt::Debug for FlushedTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushedTurn")
            .field("thread", &self.target.thread)
            .field("turn", &self.target.turn)
            .finish_non_exhaustive()
    }
}

impl FlushedTurn {
    /// Appends in one batch, expecting `expect`, the turn's messages the
    /// events did not cover, `turn.ended` or `turn.failed` for `outcome`,
    /// and `then`. After a conflict nothing is written, and it may be tried
    /// again.
    pub async fn end(
        &self,
        outcome: &TurnOutcome,
        then: Vec<NewEntry>,
        expect: Expect,
    ) -> Result<(), StoreError> {
        let mut closing = vec![turn_closed(&self.target.author, outcome)];
        closing.extend(then);
        self.append(closing, expect).await
    }

    async fn append(&self, closing: Vec<NewEntry>, expect: Expect) -> Result<(), StoreError> {
        let mut entries = self.rest.clone();
        entries.extend(closing);
        self.target.append(expect, entries).await.map(drop)
    }
}

/// The entries made from the turn's events and not yet written, and the
/// callers waiting for their appends: the write loop's own state.
struct Pending {
    /// How long text deltas may be held before they are written (`None`:
    /// they are not written).
    chunks: Option<Duration>,
    /// Deltas not yet written, all of one kind.
    text: String,
    /// What the held deltas are: text or thinking.
    text_kind: ChunkKind,
    /// When the oldest unwritten delta arrived.
    text_since: Option<Instant>,
    /// Entries to write with the next append.
    batch: Vec<NewEntry>,
    /// Who waits for which entries of the batch.
    replies: Vec<Reply>,
}

/// A caller of [`WriterSink::append`] waiting for its entries: (index of
/// the first in the batch, how many, where the stored entries go).
struct Reply {
    first: usize,
    count: usize,
    written: oneshot::Sender<Result<Vec<Entry>, StoreError>>,
}

impl Pending {
    fn new(chunks: Option<Duration>) -> Self {
        Self {
            chunks,
            text: String::new(),
            text_kind: ChunkKind::Text,
            text_since: None,
            batch: Vec::new(),
            replies: Vec::new(),
        }
    }

    /// Everything pending, to be written in one append (the held text
    /// last, as one chunk).
    fn take_due(&mut self, to: &TurnThread) -> (Vec<NewEntry>, Vec<Reply>) {
        self.take_text(to);
        (
            std::mem::take(&mut self.batch),
            std::mem::take(&mut self.replies),
        )
    }

    /// Takes one message of a sink into the batch (deltas are held to be
    /// written together); true when it asks the loop to stop.
    fn take(&mut self, to: &TurnThread, message: ToLoop) -> bool {
        match message {
            ToLoop::Delta { kind, delta } => {
                if kind != self.text_kind {
                    // One chunk holds one kind: what is held goes first.
                    self.take_text(to);
                    self.text_kind = kind;
                }
                if self.text.is_empty() {
                    self.text_since = Some(Instant::now());
                }
                self.text.push_str(&delta);
            }
            ToLoop::Entry { entry, after_text } => {
                if after_text {
                    self.take_text(to);
                }
                self.batch.push(entry);
            }
            ToLoop::Append { entries, written } => {
                self.take_text(to);
                self.replies.push(Reply {
                    first: self.batch.len(),
                    count: entries.len(),
                    written,
                });
                self.batch.extend(entries);
            }
            ToLoop::Finish => return true,
        }
        false
    }

    /// Moves the held deltas into the batch as one chunk.
    fn take_text(&mut self, to: &TurnThread) {
        self.text_since = None;
        if self.text.is_empty() {
            return;
        }
        // Copied out, so that the buffer keeps its size for the next
        // deltas instead of growing again from nothing.
        let delta: Arc<str> = Arc::from(self.text.as_str());
        self.text.clear();
        let mut chunk = Chunk::text(to.turn.clone(), delta);
        chunk.kind = self.text_kind;
        self.batch
            .push(NewEntry::new(to.author.clone(), EntryBody::Chunk(chunk)));
    }
}

/// What the write loop is sent for an event: its entry, or its delta to be
/// held (`None` for an event the writer keeps nothing of).
fn to_loop(shared: &WriterShared, event: TurnEvent) -> Option<ToLoop> {
    let to = &shared.target;
    let entry = |body: EntryBody, after_text: bool| ToLoop::Entry {
        entry: NewEntry::new(to.author.clone(), body),
        after_text,
    };
    match event {
        TurnEvent::OutputDelta { kind, delta, .. } if shared.chunks.is_some() => {
            let kind = match kind {
                OutputKind::Text => ChunkKind::Text,
                OutputKind::Thinking => ChunkKind::Thinking,
            };
            Some(ToLoop::Delta { kind, delta })
        }
        TurnEvent::OutputCompleted { message, .. } => Some(entry(
            EntryBody::Assistant(AssistantEntry::new(Some(to.turn.clone()), message)),
            true,
        )),
        TurnEvent::ToolCallCompleted { result, .. } => Some(entry(
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some(to.turn.clone()),
                message: result,
            }),
            false,
        )),
        TurnEvent::InputAdded {
            author, id, chat, ..
        } => {
            let mut entry = NewEntry::new(author, EntryBody::Chat(chat));
            if let Some(id) = id {
                entry.id = id;
            }
            Some(ToLoop::Entry {
                entry,
                after_text: true,
            })
        }
        event => record(event).map(|body| entry(body, true)),
    }
}

/// The lifecycle record an event leaves in the thread (of an approval, a
/// compaction or a retry), if it leaves one.
fn record(event: TurnEvent) -> Option<EntryBody> {
    let body = match event {
        event @ (TurnEvent::ApprovalRequested { .. }
        | TurnEvent::ApprovalGranted { .. }
        | TurnEvent::ApprovalDenied { .. }) => approval_record(event)?,
        TurnEvent::CompactionStarted {
            turn,
            reason,
            tokens_before,
        } => {
            let record = CompactionStartedRecord {
                turn: Some(turn),
                reason,
                tokens_before,
            };
            record.to_body()
        }
        TurnEvent::CompactionEnded {
            turn,
            reason,
            covers_seq,
            tokens_after,
            aborted,
            will_retry,
            error,
        } => {
            let record = CompactionEndedRecord {
                turn: Some(turn),
                reason,
                covers_seq,
                tokens_after,
                aborted,
                will_retry,
                error,
            };
            record.to_body()
        }
        TurnEvent::Retrying {
            turn,
            round,
            attempt,
            max_attempts,
            delay_ms,
            error,
        } => {
            let record = RetryRecord {
                turn,
                round,
                attempt,
                max_attempts,
                delay_ms,
                error,
            };
            record.to_body()
        }
        _ => return None,
    };
    // The records hold strings and JSON objects only, so encoding them
    // cannot fail; were it to, a missing record is no reason to stop the
    // turn.
    body.ok()
}

/// The record of an approval event: a request, or a decision not already
/// in the thread.
fn approval_record(event: TurnEvent) -> Option<Result<EntryBody, serde_json::Error>> {
    match event {
        TurnEvent::ApprovalRequested {
            turn,
            call_id,
            tool,
            arguments,
        } => {
            let record = ApprovalRequestedRecord {
                turn,
                call_id,
                tool,
                arguments,
            };
            Some(record.to_body())
        }
        TurnEvent::ApprovalGranted {
            turn,
            call_id,
            tool,
            recorded: false,
        } => {
            let record = ApprovalDecidedRecord {
                turn,
                call_id,
                tool,
                verdict: ApprovalVerdict::Approve,
                reason: None,
            };
            Some(record.to_body())
        }
        TurnEvent::ApprovalDenied {
            turn,
            call_id,
            tool,
            reason,
            recorded: false,
        } => {
            let record = ApprovalDecidedRecord {
                turn,
                call_id,
                tool,
                verdict: ApprovalVerdict::Deny,
                reason,
            };
            Some(record.to_body())
        }
        _ => None,
    }
}

impl Written {
    /// Appends `batch` (unless an earlier append failed), counts its
    /// messages and answers the callers waiting for their entries.
    async fn append(&mut self, to: &TurnThread, batch: Vec<NewEntry>, replies: Vec<Reply>) {
        if let Some(error) = &self.error {
            for reply in replies {
                let _ = reply.written.send(Err(StoreError::Backend(format!(
                    "an earlier append of the turn failed: {error}"
                ))));
            }
            return;
        }
        if batch.is_empty() {
            // Only empty appends were asked for: everything before them is
            // written.
            for reply in replies {
                let _ = reply.written.send(Ok(Vec::new()));
            }
            return;
        }
        let messages = batch
            .iter()
            .filter(|e| matches!(e.body, EntryBody::Assistant(_) | EntryBody::ToolResult(_)))
            .count();
        match to.append(Expect::Any, batch).await {
            Ok(stored) => {
                self.messages += messages;
                for reply in replies {
                    let end = reply.first.saturating_add(reply.count).min(stored.len());
                    let mine = stored.get(reply.first..end).unwrap_or_default().to_vec();
                    let _ = reply.written.send(Ok(mine));
                }
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply
                        .written
                        .send(Err(StoreError::Backend(format!("the append failed: {e}"))));
                }
                self.error = Some(e);
            }
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
            Message::Assistant(message) => Some(EntryBody::Assistant(AssistantEntry::new(
                Some(turn.clone()),
                message.clone(),
            ))),
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
