//! `NatsStore`: threads in a NATS JetStream stream, shared by hosts on
//! several machines.
//!
//! # Layout
//!
//! One stream (default `ROUNDTABLE_THREADS`, file storage, replicas as
//! configured) holds every thread as its own subject `<prefix>.<thread>`
//! (default prefix `roundtable.threads`). Thread ids are valid subject tokens
//! by construction (see [`ThreadId`]).
//!
//! # One message per append
//!
//! Each append is **one** JetStream message, whatever the batch size: its body
//! is the batch's entries as JSONL (the same lines, `more` batch marker
//! included, that the JSONL store writes), and headers carry the first seq
//! (`Roundtable-Seq`) and the entry count (`Roundtable-Count`). The server
//! stores, replicates and delivers a message whole or not at all, so a batch
//! is all or nothing for every reader, without the atomic batch publish that
//! older servers lack. Per-thread seqs are carried in the entries and stay
//! dense: a batch of `n` entries after seq `k` holds `k+1..=k+n`. One
//! batch must fit the server's `max_payload` (1 MiB by default); a larger one
//! is refused with [`StoreError::Backend`] and nothing is written.
//!
//! # Optimistic concurrency
//!
//! An append publishes with `Nats-Expected-Last-Subject-Sequence` set to the
//! stream sequence of the thread's last batch as the appender knows it (0 for
//! an empty thread). The server refuses the message if anything was appended
//! to the subject since, so two processes can never both write seq `k+1`:
//! with [`Expect::LastSeq`] the loser gets [`StoreError::Conflict`] and wrote
//! nothing; with [`Expect::Any`] the store re-reads the tip and tries again.
//! Inside one process, appends to a thread queue on a local lock first, so
//! the server check only ever settles races between processes.
//!
//! # Idempotent retries
//!
//! Every batch carries `Nats-Msg-Id: <thread>/<first entry id>`. When a
//! publish times out or the connection drops, the store cannot know whether
//! the server stored it, so it publishes the same message again; a copy the
//! server already holds is dropped as a duplicate (within the stream's
//! duplicate window) and the append returns the stored batch. If the retry
//! is refused because the thread moved on, the store looks whether the batch
//! after the expected seq is its own before it reports a conflict. A stored
//! batch counts as its own only if it holds the same entries: another batch
//! that reused the first entry's id is [`StoreError::DuplicateId`], never
//! returned as this append's.
//!
//! # Reads and subscriptions
//!
//! Reads locate the stream message holding the first wanted seq (the
//! thread's first or last message, a per-process cache of batch positions,
//! or a binary search over stream sequences with "next message on this
//! subject" gets) and then read the following batches of the subject only:
//! one get each for a short read, a short-lived ordered consumer for a long
//! one (see `read.rs`). Cached positions only narrow the search: when the
//! server's messages disagree with them (the stream was purged and a thread
//! started over), the store drops them and looks again on the server's
//! answers alone; only a gap found that way is [`StoreError::Corrupt`].
//! Subscriptions and reads take the thread's tip once and locate their start
//! against that same tip, so an append landing meanwhile cannot push the
//! start past the first wanted entry.
//! Every read goes to the stream leader, so a read sees every acknowledged
//! append. Subscriptions use an ordered consumer on the thread's subject (see
//! `subscription.rs`) and resume after a lost server or connection.
//! Listing threads asks the stream for its per-subject counts.

mod backend;
mod batch;
mod index;
mod read;
mod subscription;

use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::header;
use async_nats::jetstream::{self, stream::StorageType};
use async_trait::async_trait;
use tokio::sync::watch;

use self::backend::{Backend, PublishFailure, backoff};
use self::batch::{BatchPos, encode, message_id, position_headers};
use self::index::ThreadState;
use self::read::{CONSUMER_READ_ENTRIES, CONSUMER_READ_SPAN, RangeRead};
use crate::lease::{NatsLeaseOptions, NatsLeases};
use crate::storable::StorableBatch;
use crate::store::{EntryStream, Expect, ThreadStore};
use crate::thread_table::ThreadTable;
use crate::{Entry, NewEntry, StoreError, ThreadId};

/// Settings of a [`NatsStore`]: which stream, and how hard to retry.
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// The stream's name (no spaces, dots or wildcards). Default
    /// `ROUNDTABLE_THREADS`.
    pub stream: String,
    /// Threads live on `<subject_prefix>.<thread>`. Default
    /// `roundtable.threads`.
    pub subject_prefix: String,
    /// Copies of every message in a cluster (1, 3 or 5; 1 on a single
    /// server). Only used when the store creates the stream.
    pub replicas: usize,
    /// How long the server remembers message ids to drop retried publishes.
    /// Default 2 minutes.
    pub duplicate_window: Duration,
    /// How long one request (publish, get) waits for the server. Default 5 s.
    pub request_timeout: Duration,
    /// How long a call keeps retrying through transient failures (a leader
    /// election, a reconnect) before it gives up with
    /// [`StoreError::Backend`]. Default 30 s.
    pub retry_for: Duration,
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
}

impl Default for NatsOptions {
    fn default() -> Self {
        Self {
            stream: "ROUNDTABLE_THREADS".into(),
            subject_prefix: "roundtable.threads".into(),
            replicas: 1,
            duplicate_window: Duration::from_secs(120),
            request_timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl NatsOptions {
    fn check(&self) -> Result<(), StoreError> {
        let bad = |what: String| Err(StoreError::Backend(format!("invalid NATS options: {what}")));
        let name_ok = !self.stream.is_empty()
            && self
                .stream
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return bad(format!("stream name {:?}", self.stream));
        }
        let prefix_ok = self.subject_prefix.split('.').all(|token| {
            !token.is_empty()
                && token
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
        if !prefix_ok {
            return bad(format!("subject prefix {:?}", self.subject_prefix));
        }
        if self.replicas == 0 || self.replicas > 5 {
            return bad(format!("{} replicas", self.replicas));
        }
        Ok(())
    }
}

/// A [`ThreadStore`] on a NATS JetStream stream: durable, replicated, and
/// shared by every process connected to the same server or cluster.
///
/// Cloning gives another handle on the same connection. See the module
/// documentation for how entries map to messages.
///
/// ```no_run
/// # async fn demo() -> Result<(), roundtable_thread_stream::StoreError> {
/// use roundtable_thread_stream::{
///     EntryBody, Expect, NatsOptions, NatsStore, NewEntry, ThreadId, ThreadStore,
/// };
///
/// let store = NatsStore::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
/// let thread = ThreadId::new("general").unwrap();
/// let hi = NewEntry::new("alice", EntryBody::chat("hi"));
/// let written = store.append(&thread, Expect::LastSeq(0), vec![hi]).await?;
/// assert_eq!(written[0].seq, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct NatsStore {
    inner: Arc<Inner>,
}

/// How many threads keep their local state (the append queue, the cache of
/// batch positions) while nothing uses them: the state only saves round
/// trips, and a server serving many threads must not keep it for every one
/// it ever touched.
const IDLE_THREADS_KEPT: usize = 256;

struct Inner {
    backend: Arc<Backend>,
    /// Each thread's local state, let go when idle longest beyond
    /// [`IDLE_THREADS_KEPT`].
    threads: Mutex<ThreadTable<ThreadState>>,
    closed: watch::Sender<bool>,
}

/// Connects to the NATS servers of `url` (several servers of a cluster may
/// be given comma-separated), the one way every roundtable client of NATS
/// connects; the error names the URL.
pub async fn connect_nats(
    url: &str,
    connect_timeout: Duration,
    request_timeout: Duration,
) -> Result<async_nats::Client, String> {
    let servers: Vec<&str> = url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    async_nats::ConnectOptions::new()
        .connection_timeout(connect_timeout)
        .request_timeout(Some(request_timeout))
        .connect(servers.as_slice())
        .await
        .map_err(|e| format!("cannot connect to NATS at {url}: {e}"))
}

fn poisoned() -> StoreError {
    StoreError::Backend("the store's thread table was poisoned by a panic".into())
}

impl NatsStore {
    /// Connects to `url` (several servers of a cluster may be given
    /// comma-separated) and opens the stream, creating it if it does not
    /// exist. A server that cannot be reached is a [`StoreError::Backend`]
    /// naming the URL.
    pub async fn connect(url: &str, options: NatsOptions) -> Result<Self, StoreError> {
        options.check()?;
        let client = connect_nats(url, options.connect_timeout, options.request_timeout)
            .await
            .map_err(StoreError::Backend)?;
        Self::with_client(client, options).await
    }

    /// Opens the stream over an existing connection (for hosts that set up
    /// authentication or TLS themselves), creating it if it does not exist.
    pub async fn with_client(
        client: async_nats::Client,
        options: NatsOptions,
    ) -> Result<Self, StoreError> {
        options.check()?;
        let js = jetstream::ContextBuilder::new()
            .timeout(options.request_timeout)
            .build(client.clone());
        let wildcard = format!("{}.>", options.subject_prefix);
        let config = jetstream::stream::Config {
            name: options.stream.clone(),
            subjects: vec![wildcard.clone()],
            storage: StorageType::File,
            num_replicas: options.replicas,
            duplicate_window: options.duplicate_window,
            // Append-only: no message is ever deleted one by one.
            deny_delete: true,
            ..Default::default()
        };
        let stream = js.get_or_create_stream(config).await.map_err(|e| {
            StoreError::Backend(format!("cannot open stream {}: {e}", options.stream))
        })?;
        let subjects = &stream.cached_info().config.subjects;
        if !subjects.contains(&wildcard) {
            return Err(StoreError::Backend(format!(
                "stream {} exists but holds {subjects:?}, not {wildcard}",
                options.stream
            )));
        }
        let backend = Backend {
            client,
            js,
            stream,
            prefix: options.subject_prefix.clone(),
            retry_for: options.retry_for,
            request_timeout: options.request_timeout,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                backend: Arc::new(backend),
                threads: Mutex::new(ThreadTable::default()),
                closed: watch::Sender::new(false),
            }),
        })
    }

    /// Leases in a KV bucket over this store's connection (see
    /// [`NatsLeases`]): for processes sharing the store to agree on who runs
    /// what.
    pub async fn leases(&self, options: &NatsLeaseOptions) -> Result<NatsLeases, StoreError> {
        NatsLeases::open(self.backend().client.clone(), options).await
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if *self.inner.closed.borrow() {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    fn thread(&self, id: &ThreadId) -> Result<Arc<ThreadState>, StoreError> {
        self.check_open()?;
        let (state, _dropped) = {
            let mut threads = self.inner.threads.lock().map_err(|_| poisoned())?;
            let state = threads.get(id);
            (state, threads.trim(IDLE_THREADS_KEPT, |_| true))
        };
        Ok(state)
    }

    fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// The stream sequence of the message holding entry `seq`, or None when
    /// the thread is shorter.
    ///
    /// Cached batch positions narrow the search; if the server's messages do
    /// not bear them out (the stream was purged and the thread started over),
    /// the cache is dropped and the search runs again on the server's answers
    /// alone, which only fails if the stream itself lacks the entry.
    async fn locate(
        &self,
        thread: &ThreadId,
        state: &ThreadState,
        seq: u64,
        tip: Option<Option<BatchPos>>,
    ) -> Result<Option<BatchPos>, StoreError> {
        if !state.knows_any() {
            return self.locate_once(thread, state, seq, tip).await;
        }
        match self.locate_once(thread, state, seq, tip).await {
            Err(StoreError::Corrupt { .. }) => {
                state.forget();
                self.locate_once(thread, state, seq, None).await
            }
            other => other,
        }
    }

    /// One search for the message holding `seq` (see [`NatsStore::locate`]).
    async fn locate_once(
        &self,
        thread: &ThreadId,
        state: &ThreadState,
        seq: u64,
        tip: Option<Option<BatchPos>>,
    ) -> Result<Option<BatchPos>, StoreError> {
        let (before, after) = state.around(seq);
        if let Some(p) = before.filter(|p| p.holds(seq)) {
            return Ok(Some(p));
        }
        if seq == 1 {
            let first = self.backend().next_from(thread, 1).await?;
            if let Some(f) = &first {
                state.remember(f.pos);
            }
            return Ok(first.map(|f| f.pos).filter(|p| p.holds(seq)));
        }
        let tip = match tip {
            Some(tip) => tip,
            None => self.backend().tip(thread).await?,
        };
        let Some(tip) = tip else {
            return Ok(None);
        };
        state.remember(tip);
        if tip.last() < seq {
            return Ok(None);
        }
        if tip.holds(seq) {
            return Ok(Some(tip));
        }
        // The wanted message lies in [lo, hi): binary search with "first
        // message of the subject at or after".
        let mut lo = before.map_or(1, |p| p.stream_seq + 1);
        let mut hi = after.map_or(tip.stream_seq, |p| p.stream_seq.min(tip.stream_seq));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(found) = self.backend().next_from(thread, mid).await? else {
                break;
            };
            let pos = found.pos;
            state.remember(pos);
            if pos.holds(seq) {
                return Ok(Some(pos));
            }
            if pos.first > seq {
                hi = mid;
            } else {
                lo = pos.stream_seq + 1;
            }
        }
        Err(StoreError::Corrupt {
            thread: thread.clone(),
            location: format!("stream {}", self.backend().stream.cached_info().config.name),
            message: format!(
                "no message holds entry {seq}, yet the thread reaches {}",
                tip.last()
            ),
        })
    }

    /// Whether the batch holding `seq` is `batch` as published with
    /// `msg_id` (an earlier try of this append that did land); its entries
    /// if so.
    async fn own_batch(
        &self,
        thread: &ThreadId,
        state: &ThreadState,
        seq: u64,
        msg_id: &str,
        batch: &StorableBatch,
    ) -> Result<Option<Vec<Entry>>, StoreError> {
        let Some(pos) = self.locate(thread, state, seq, None).await? else {
            return Ok(None);
        };
        let fetched = self.backend().at(thread, pos.stream_seq).await?;
        let own = fetched.msg_id.as_deref() == Some(msg_id)
            && fetched.pos.first == seq
            && batch.is_stored_as(&fetched.entries);
        Ok(own.then_some(fetched.entries))
    }
}

/// One append under way: the batch, what it knows of the thread's tip, and
/// its retry budget. Each [`PendingAppend::step`] publishes once (or reads
/// the tip again); `cached` is the thread's last tip as this process knows
/// it, kept up to date as the append learns more.
struct PendingAppend<'a> {
    store: &'a NatsStore,
    thread: &'a ThreadId,
    state: &'a ThreadState,
    batch: StorableBatch,
    subject: String,
    /// The batch's `Nats-Msg-Id`; None for an empty batch.
    msg_id: Option<String>,
    tip: Option<BatchPos>,
    /// Whether `tip` was just read from the server (else it is this
    /// process's last view, which another process may have overtaken).
    fresh: bool,
    /// Whether an earlier try of this append may have been stored.
    ambiguous: bool,
    deadline: Instant,
    attempt: u32,
}

type CachedTip = Option<Option<BatchPos>>;

impl<'a> PendingAppend<'a> {
    async fn start(
        store: &'a NatsStore,
        thread: &'a ThreadId,
        state: &'a ThreadState,
        batch: StorableBatch,
        cached: CachedTip,
    ) -> Result<Self, StoreError> {
        let backend = store.backend();
        let (tip, fresh) = match cached {
            Some(tip) => (tip, false),
            None => (backend.tip(thread).await?, true),
        };
        Ok(Self {
            subject: backend.subject(thread),
            msg_id: batch.entries().first().map(|e| message_id(thread, &e.id)),
            store,
            thread,
            state,
            batch,
            tip,
            fresh,
            ambiguous: false,
            deadline: Instant::now() + backend.retry_for,
            attempt: 0,
        })
    }

    /// One try: the stored entries when the append is settled, None to try
    /// again.
    async fn step(
        &mut self,
        expect: Expect,
        cached: &mut CachedTip,
    ) -> Result<Option<Vec<Entry>>, StoreError> {
        let last = self.tip.map_or(0, |p| p.last());
        let unmet = matches!(expect, Expect::LastSeq(expected) if expected != last);
        // An empty batch writes nothing, so only a fresh tip can tell
        // whether its expectation holds.
        if (unmet || self.msg_id.is_none()) && !self.fresh {
            self.refresh().await?;
            return Ok(None);
        }
        if let Expect::LastSeq(expected) = expect
            && unmet
        {
            *cached = Some(self.tip);
            return self.conflict(expected, last).await.map(Some);
        }
        let Some(id) = self.msg_id.clone() else {
            *cached = Some(self.tip);
            return Ok(Some(Vec::new()));
        };
        let written = self.batch.clone().place(self.thread, last);
        let body = encode(self.thread, &written)?;
        let mut headers = position_headers(last + 1, written.len());
        headers.insert(header::NATS_MESSAGE_ID, id.as_str());
        headers.insert(
            header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            self.tip.map_or(0, |p| p.stream_seq).to_string().as_str(),
        );
        let backend = self.store.backend();
        match backend.publish(&self.subject, headers, body).await {
            Ok(ack) if !ack.duplicate => {
                let pos = BatchPos {
                    stream_seq: ack.sequence,
                    first: last + 1,
                    count: written.len() as u64,
                };
                self.state.remember(pos);
                *cached = Some(Some(pos));
                Ok(Some(written))
            }
            Ok(ack) => self.duplicate(ack.sequence, cached).await.map(Some),
            Err(failure) => self.failed(failure, cached).await.map(|()| None),
        }
    }

    /// Reads the thread's tip from the server.
    async fn refresh(&mut self) -> Result<(), StoreError> {
        self.tip = self.store.backend().tip(self.thread).await?;
        self.fresh = true;
        Ok(())
    }

    /// The thread is not at `expected`: the batch after it if it is this
    /// append's from an earlier try, else a conflict.
    async fn conflict(&self, expected: u64, actual: u64) -> Result<Vec<Entry>, StoreError> {
        if self.ambiguous
            && let Some(id) = &self.msg_id
            && let Some(stored) = self
                .store
                .own_batch(self.thread, self.state, expected + 1, id, &self.batch)
                .await?
        {
            return Ok(stored);
        }
        Err(StoreError::Conflict {
            thread: self.thread.clone(),
            expected,
            actual,
        })
    }

    /// The server holds a message with this batch's id already: an earlier
    /// try of this append (return that batch as stored), or another batch
    /// that reused the first entry's id (refuse: this one was not written).
    async fn duplicate(
        &self,
        stream_seq: u64,
        cached: &mut CachedTip,
    ) -> Result<Vec<Entry>, StoreError> {
        let stored = self.store.backend().at(self.thread, stream_seq).await?;
        self.state.remember(stored.pos);
        *cached = None;
        if !self.batch.is_stored_as(&stored.entries) {
            return Err(StoreError::DuplicateId {
                thread: self.thread.clone(),
                id: self
                    .batch
                    .entries()
                    .first()
                    .map(|e| e.id.to_string())
                    .unwrap_or_default(),
            });
        }
        Ok(stored.entries)
    }

    /// A publish that stored nothing: read the tip again after a lost race,
    /// wait after a transient failure, give up when the budget is spent.
    async fn failed(
        &mut self,
        failure: PublishFailure,
        cached: &mut CachedTip,
    ) -> Result<(), StoreError> {
        let thread = self.thread;
        match failure {
            PublishFailure::WrongLast => {
                if Instant::now() >= self.deadline {
                    return Err(StoreError::Backend(format!(
                        "append to thread {thread} kept losing races to other writers"
                    )));
                }
                self.refresh().await?;
                *cached = Some(self.tip);
            }
            PublishFailure::Transient(message) => {
                self.ambiguous = true;
                *cached = None;
                if Instant::now() >= self.deadline {
                    return Err(StoreError::Backend(format!(
                        "append to thread {thread}: {message}"
                    )));
                }
                tokio::time::sleep(backoff(self.attempt)).await;
                self.attempt += 1;
            }
            PublishFailure::Fatal(error) => {
                *cached = None;
                return Err(error);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl ThreadStore for NatsStore {
    async fn append(
        &self,
        thread: &ThreadId,
        expect: Expect,
        entries: Vec<NewEntry>,
    ) -> Result<Vec<Entry>, StoreError> {
        let batch = StorableBatch::check(thread, entries)?;
        let state = self.thread(thread)?;
        let mut cached = state.append.lock().await;
        let mut append = PendingAppend::start(self, thread, &state, batch, *cached).await?;
        loop {
            self.check_open()?;
            if let Some(stored) = append.step(expect, &mut cached).await? {
                return Ok(stored);
            }
        }
    }

    async fn read(
        &self,
        thread: &ThreadId,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<Entry>, StoreError> {
        let state = self.thread(thread)?;
        let from = (*range.start()).max(1);
        if from > *range.end() {
            return Ok(Vec::new());
        }
        let Some(tip) = self.backend().tip(thread).await? else {
            return Ok(Vec::new());
        };
        state.remember(tip);
        let to = (*range.end()).min(tip.last());
        if from > to {
            return Ok(Vec::new());
        }
        let mut read = RangeRead {
            thread,
            state: &state,
            next: from,
            to,
            stream_next: 0,
            out: Vec::with_capacity((to - from + 1).min(1 << 16) as usize),
            gap: false,
        };
        // A start found with cached positions that turns out to lie past the
        // wanted entry is looked up again on the server's answers alone; only
        // a gap found that way is corruption.
        let mut cold = !state.knows_any();
        loop {
            let Some(start) = self
                .locate(thread, &state, read.next, Some(Some(tip)))
                .await?
            else {
                return Ok(read.out);
            };
            read.stream_next = start.stream_seq;
            read.gap = false;
            let mut result = Ok(());
            if tip.stream_seq - start.stream_seq >= CONSUMER_READ_SPAN
                || read.to - read.next >= CONSUMER_READ_ENTRIES
            {
                result = read.by_consumer(self.backend()).await;
            }
            if result.is_ok() {
                result = read.by_gets(self.backend()).await;
            }
            match result {
                Err(_) if read.gap && !cold => {
                    state.forget();
                    cold = true;
                }
                Err(error) => return Err(error),
                Ok(()) => return Ok(read.out),
            }
        }
    }

    async fn last_seq(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        let state = self.thread(thread)?;
        let tip = self.backend().tip(thread).await?;
        if let Some(pos) = tip {
            state.remember(pos);
        }
        Ok(tip.map_or(0, |p| p.last()))
    }

    async fn subscribe(&self, thread: &ThreadId, from: u64) -> Result<EntryStream, StoreError> {
        let state = self.thread(thread)?;
        let from = from.max(1);
        // The tip first: whatever is appended after this look lands in
        // messages after it, so starting from it can miss nothing.
        let tip = self.backend().tip(thread).await?;
        let start = match tip {
            // Empty: from the stream's start (the server skips other subjects).
            None => 1,
            // Past the end: right after the thread's last message.
            Some(tip) if tip.last() < from => tip.stream_seq + 1,
            Some(tip) => {
                state.remember(tip);
                match self.locate(thread, &state, from, Some(Some(tip))).await? {
                    Some(pos) => pos.stream_seq,
                    None => tip.stream_seq + 1,
                }
            }
        };
        Ok(subscription::subscribe(
            self.inner.backend.clone(),
            thread.clone(),
            from,
            start,
            self.inner.closed.subscribe(),
        ))
    }

    async fn list_threads(&self) -> Result<Vec<ThreadId>, StoreError> {
        self.check_open()?;
        let prefix = format!("{}.", self.backend().prefix);
        let mut ids: Vec<ThreadId> = self
            .backend()
            .subjects()
            .await?
            .iter()
            .filter_map(|s| s.strip_prefix(&prefix))
            .filter_map(|t| ThreadId::new(t).ok())
            .collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Purges the thread's subject from the stream (purging is allowed
    /// where deleting single messages is not). Subscriptions to it see no
    /// more entries.
    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), StoreError> {
        self.check_open()?;
        self.backend().purge(thread).await?;
        self.inner
            .threads
            .lock()
            .map_err(|_| poisoned())?
            .remove(thread);
        Ok(())
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.inner.closed.send_replace(true);
        // Whatever was published is acknowledged already; flushing only
        // pushes out anything still buffered for the server.
        self.backend()
            .client
            .flush()
            .await
            .map_err(|e| StoreError::Backend(format!("flushing the connection: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_before_connecting() {
        assert!(NatsOptions::default().check().is_ok());
        let bad = [
            NatsOptions {
                stream: "has.dot".into(),
                ..NatsOptions::default()
            },
            NatsOptions {
                stream: String::new(),
                ..NatsOptions::default()
            },
            NatsOptions {
                subject_prefix: "a..b".into(),
                ..NatsOptions::default()
            },
            NatsOptions {
                subject_prefix: "threads.>".into(),
                ..NatsOptions::default()
            },
            NatsOptions {
                replicas: 0,
                ..NatsOptions::default()
            },
        ];
        for options in bad {
            assert!(
                matches!(options.check(), Err(StoreError::Backend(m)) if m.starts_with("invalid NATS options")),
                "{options:?}"
            );
        }
    }
}
