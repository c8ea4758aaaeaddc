//! Writes a running turn into its thread as it happens: assistant messages
//! and tool results as they complete, and (for shared threads) text deltas
//! as coalesced `chat.chunk` entries; then the entries that close it. Every
//! runner uses it, so a turn interrupted by a crash keeps every message it
//! completed.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use roundtable_providers::Message;
use roundtable_thread_stream::{
    AssistantEntry, Chunk, ChunkKind, Entry, EntryBody, Expect, NewEntry, StoreError, ThreadId,
    ThreadStore, ToolResultEntry,
};
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use super::approvals::{ApprovalDecidedRecord, ApprovalRequestedRecord, ApprovalVerdict};
use super::compaction_records::{CompactionEndedRecord, CompactionStartedRecord};
use super::retries::RetryRecord;
use super::{turn_closed, turn_interrupted};
use crate::event::{EventSink, OutputKind, TurnEvent};
use crate::turn::TurnOutcome;

/// What the sinks and the write loop share: where the entries go, the
/// entries made from the turn's events and not yet written, and the loop's
/// waker. A sink turns an event into its entry in place (under the lock, in
/// event order) and wakes the loop only when there is something to write,
/// so an event the writer keeps nothing of costs no hand-off at all.
struct WriterShared {
    target: TurnThread,
    pending: Mutex<Pending>,
    /// The write loop's task, woken when there is something to write (or
    /// held text to time).
    loop_task: AtomicWaker,
}

impl WriterShared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // The lock guards plain data, left whole by a panicking holder.
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What the write loop is to write now: everything pending, once there
    /// is an entry or a waiting append, the writer is finished, or the held
    /// text's time is up (`timer` times it).
    fn poll_due(&self, cx: &mut Context<'_>, timer: &mut Option<Pin<Box<Sleep>>>) -> Poll<Due> {
        // Registered before looking, so that a sink's change after the look
        // wakes the loop.
        self.loop_task.register(cx.waker());
        let mut pending = self.pending();
        let last = pending.finished || pending.senders == 0;
        if last || !pending.batch.is_empty() || !pending.replies.is_empty() {
            return Poll::Ready(pending.take_due(&self.target, last));
        }
        if let (Some(since), Some(interval)) = (pending.text_since, pending.chunks) {
            let deadline = since + interval;
            let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
            if sleep.deadline() != deadline {
                sleep.as_mut().reset(deadline);
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(pending.take_due(&self.target, false));
            }
        }
        Poll::Pending
    }
}

/// What the write loop takes to write in one append.
struct Due {
    batch: Vec<NewEntry>,
    replies: Vec<Reply>,
    /// The writer is finished (or every sink is gone): the loop stops
    /// after this append.
    last: bool,
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
/// in order with them. Cheap to clone.
pub struct WriterSink {
    shared: Arc<WriterShared>,
}

impl Clone for WriterSink {
    fn clone(&self) -> Self {
        self.shared.pending().senders += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for WriterSink {
    fn drop(&mut self) {
        let mut pending = self.shared.pending();
        pending.senders = pending.senders.saturating_sub(1);
        let gone = pending.senders == 0;
        drop(pending);
        if gone {
            // Nothing can be sent any more: the loop writes what is held
            // and stops.
            self.shared.loop_task.wake();
        }
    }
}

impl std::fmt::Debug for WriterSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterSink").finish_non_exhaustive()
    }
}

impl EventSink for WriterSink {
    fn emit(&self, event: TurnEvent) {
        let mut pending = self.shared.pending();
        // A finished writer means the turn is over; late events are dropped.
        if pending.finished {
            return;
        }
        let held_text = pending.text_since.is_some();
        pending.event(&self.shared.target, event);
        let wake = !pending.batch.is_empty() || !held_text && pending.text_since.is_some();
        drop(pending);
        if wake {
            self.shared.loop_task.wake();
        }
    }
}

impl WriterSink {
    /// Asks the write loop to write what it holds and stop, as closing the
    /// writer does (for a runner whose turn stopped before it could close
    /// its writer).
    pub fn finish(&self) {
        self.shared.pending().finished = true;
        self.shared.loop_task.wake();
    }

    /// Appends `entries` after everything sent so far (and in the same
    /// append as what is still held), returning them as stored. With no
    /// entries it waits until everything sent so far is written (an error
    /// if an earlier append of the turn failed).
    pub async fn append(&self, entries: Vec<NewEntry>) -> Result<Vec<Entry>, StoreError> {
        let (written, done) = oneshot::channel();
        {
            let mut pending = self.shared.pending();
            if pending.finished {
                return Err(StoreError::Backend("the turn's writer has finished".into()));
            }
            pending.take_text(&self.shared.target);
            let first = pending.batch.len();
            pending.replies.push(Reply {
                first,
                count: entries.len(),
                written,
            });
            pending.batch.extend(entries);
        }
        self.shared.loop_task.wake();
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
    done: oneshot::Sender<Written>,
}

impl TurnWriteLoop {
    /// Writes the turn's entries until the writer is closed (or every sink
    /// is dropped).
    pub async fn run(self) {
        let mut written = Written::default();
        let mut timer = None;
        loop {
            let due = std::future::poll_fn(|cx| self.shared.poll_due(cx, &mut timer)).await;
            written
                .append(&self.shared.target, due.batch, due.replies)
                .await;
            if due.last {
                break;
            }
        }
        let _ = self.done.send(written);
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
        let shared = Arc::new(WriterShared {
            target: TurnThread {
                store,
                thread,
                author,
                turn,
                observer,
            },
            pending: Mutex::new(Pending::new(chunks)),
            loop_task: AtomicWaker::new(),
        });
        let writer = Self {
            sink: WriterSink {
                shared: shared.clone(),
            },
            written,
        };
        (writer, TurnWriteLoop { shared, done })
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
/// callers waiting for their appends: the state the sinks change in place.
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
    /// The sinks alive (the writer's own among them).
    senders: usize,
    /// Closed: nothing more is taken.
    finished: bool,
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
            // The writer's own sink.
            senders: 1,
            finished: false,
        }
    }

    /// Everything pending, to be written in one append (the held text
    /// last, as one chunk).
    fn take_due(&mut self, to: &TurnThread, last: bool) -> Due {
        self.take_text(to);
        Due {
            batch: std::mem::take(&mut self.batch),
            replies: std::mem::take(&mut self.replies),
            last,
        }
    }

    /// Makes the entry an event is written as (if any) and adds it to the
    /// batch; text deltas are held to be written together.
    fn event(&mut self, to: &TurnThread, event: TurnEvent) {
        match event {
            TurnEvent::OutputDelta { kind, delta, .. } if self.chunks.is_some() => {
                let kind = match kind {
                    OutputKind::Text => ChunkKind::Text,
                    OutputKind::Thinking => ChunkKind::Thinking,
                };
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
            TurnEvent::OutputCompleted { message, .. } => {
                self.take_text(to);
                self.batch.push(NewEntry::new(
                    to.author.clone(),
                    EntryBody::Assistant(AssistantEntry::new(Some(to.turn.clone()), message)),
                ));
            }
            TurnEvent::ToolCallCompleted { result, .. } => {
                self.batch.push(NewEntry::new(
                    to.author.clone(),
                    EntryBody::ToolResult(ToolResultEntry {
                        turn: Some(to.turn.clone()),
                        message: result,
                    }),
                ));
            }
            TurnEvent::InputAdded {
                author, id, chat, ..
            } => {
                self.take_text(to);
                let mut entry = NewEntry::new(author, EntryBody::Chat(chat));
                if let Some(id) = id {
                    entry.id = id;
                }
                self.batch.push(entry);
            }
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
                self.record(to, record.to_body());
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
                self.record(to, record.to_body());
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
                self.record(to, record.to_body());
            }
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
                self.record(to, record.to_body());
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
                self.record(to, record.to_body());
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
                self.record(to, record.to_body());
            }
            _ => {}
        }
    }

    /// Adds a record of the turn authored by the turn's author.
    fn record(&mut self, to: &TurnThread, body: Result<EntryBody, serde_json::Error>) {
        self.take_text(to);
        // The records hold strings and JSON objects only, so encoding them
        // cannot fail; were it to, a missing record is no reason to stop
        // the turn.
        if let Ok(body) = body {
            self.batch.push(NewEntry::new(to.author.clone(), body));
        }
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
