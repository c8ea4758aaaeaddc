//! `PostgresMirror`: its public face, the thread followers that read the
//! store, and the status. The writing is `mirror_writer.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::connection::{backoff, connect_config};
use super::derive::DeriveOptions;
use super::mirror_writer::{Progress, WriterMsg, WriterSettings, run};
use crate::{StoreError, ThreadId, ThreadStore};

/// Settings of a [`PostgresMirror`].
#[derive(Debug, Clone)]
pub struct MirrorOptions {
    /// The PostgreSQL schema of the mirror's tables (created if missing).
    /// Default `roundtable`.
    pub schema: String,
    /// Most entries written in one transaction. Default 500.
    pub batch_size: usize,
    /// How often [`PostgresMirror::follow_all`] looks for new threads.
    /// Default 2 s.
    pub discover_every: Duration,
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
    /// What the derived rows need to know of the host's tools.
    pub derive: DeriveOptions,
}

impl Default for MirrorOptions {
    fn default() -> Self {
        Self {
            schema: "roundtable".into(),
            batch_size: 500,
            discover_every: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(5),
            derive: DeriveOptions::default(),
        }
    }
}

/// How far the mirror is, from [`PostgresMirror::status`].
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorStatus {
    /// Whether the writer holds a working connection.
    pub connected: bool,
    /// Entries written since the mirror started.
    pub entries_written: u64,
    /// Failed writes since the mirror started (each one is retried).
    pub errors: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// Every followed thread, sorted by id.
    pub threads: Vec<MirrorThreadStatus>,
}

/// How far one thread is mirrored.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorThreadStatus {
    /// The thread.
    pub thread: ThreadId,
    /// The last seq written to the database.
    pub mirrored: u64,
    /// The last seq read from the store.
    pub read: u64,
    /// The store's last seq (None when the store could not say).
    pub source_last: Option<u64>,
    /// Entries the store holds that the database does not yet.
    pub lag: u64,
}

/// Mirrors threads of a [`ThreadStore`] into PostgreSQL tables for
/// dashboards, without ever holding the store back.
///
/// The store stays the source of truth. For each followed thread the mirror
/// subscribes to the store from the thread's last mirrored seq + 1 and
/// writes what arrives, in chunks of what is ready, in transactions:
/// `mirror_entries` (the line and its `jsonb` body), `mirror_threads` (the
/// last mirrored seq), and the rows derived from each entry by
/// [`derive_rows`](super::derive_rows): `runs`, `tool_executions`,
/// `file_mutations`. The store's subscriptions are pulled at the mirror's
/// pace, so a slow or absent database slows only the mirror: appends and
/// other subscribers never wait for it, and a write that fails is retried.
/// After a restart or an outage the mirror resumes after the last mirrored
/// seq of each thread; a batch written twice (after a lost answer, or by a
/// second mirror) is stored once, because the transaction that writes it
/// first locks the thread's row and drops what it already holds.
///
/// ```no_run
/// # async fn demo(store: std::sync::Arc<dyn roundtable_thread_stream::ThreadStore>)
/// # -> Result<(), roundtable_thread_stream::StoreError> {
/// use roundtable_thread_stream::{MirrorOptions, PostgresMirror};
///
/// let mirror = PostgresMirror::start(store, "postgres://app@127.0.0.1/app", MirrorOptions::default())?;
/// mirror.follow_all(); // every thread, new ones included
/// let status = mirror.status().await;
/// # Ok(())
/// # }
/// ```
pub struct PostgresMirror {
    shared: Arc<Shared>,
}

struct Shared {
    source: Arc<dyn ThreadStore>,
    options: MirrorOptions,
    to_writer: Mutex<Option<mpsc::Sender<WriterMsg>>>,
    progress: Arc<Progress>,
    followed: Mutex<HashMap<ThreadId, Followed>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    discovery: Mutex<Option<JoinHandle<()>>>,
    stop: watch::Sender<bool>,
}

struct Followed {
    read: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PostgresMirror {
    /// Starts a mirror of `source` into the database at `url`. It does not
    /// wait for the database: the writer connects (and creates or upgrades
    /// the tables) in the background and keeps trying while the database is
    /// away; [`status`](Self::status) and `tracing` say how it goes. Only a
    /// malformed URL or schema name fails here. Needs a Tokio runtime.
    pub fn start(
        source: Arc<dyn ThreadStore>,
        url: &str,
        options: MirrorOptions,
    ) -> Result<Self, StoreError> {
        let config = connect_config(url, &options.schema, options.connect_timeout)
            .map_err(StoreError::Backend)?;
        let (to_writer, inbox) = mpsc::channel(64);
        let progress = Arc::new(Progress::default());
        let stop = watch::Sender::new(false);
        let settings = WriterSettings {
            config,
            schema: options.schema.clone(),
            derive: options.derive.clone(),
            batch_size: options.batch_size.max(1),
        };
        let writer = tokio::spawn(run(settings, inbox, progress.clone(), stop.subscribe()));
        Ok(Self {
            shared: Arc::new(Shared {
                source,
                options,
                to_writer: Mutex::new(Some(to_writer)),
                progress,
                followed: Mutex::new(HashMap::new()),
                writer: Mutex::new(Some(writer)),
                discovery: Mutex::new(None),
                stop,
            }),
        })
    }

    /// Mirrors `thread` from now on (its stored entries first). Following a
    /// thread twice changes nothing.
    pub fn follow(&self, thread: &ThreadId) {
        self.shared.follow(thread);
    }

    /// Mirrors every thread of the store, and each new one within
    /// [`MirrorOptions::discover_every`] of its first entry.
    pub fn follow_all(&self) {
        let mut discovery = lock(&self.shared.discovery);
        if discovery.is_some() {
            return;
        }
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let every = self.shared.options.discover_every;
        *discovery = Some(tokio::spawn(async move {
            loop {
                let Some(shared) = weak.upgrade() else { return };
                match shared.source.list_threads().await {
                    Ok(threads) => {
                        for thread in &threads {
                            shared.follow(thread);
                        }
                    }
                    Err(StoreError::Closed) => return,
                    Err(error) => tracing::warn!(%error, "mirror cannot list the store's threads"),
                }
                drop(shared);
                tokio::time::sleep(every).await;
            }
        }));
    }

    /// Where the mirror stands: connection, errors, and per thread what is
    /// written against what the store holds.
    pub async fn status(&self) -> MirrorStatus {
        let followed: Vec<(ThreadId, u64)> = lock(&self.shared.followed)
            .iter()
            .map(|(thread, f)| (thread.clone(), f.read.load(Ordering::Relaxed)))
            .collect();
        let mut threads = Vec::with_capacity(followed.len());
        for (thread, read) in followed {
            let mirrored = self.shared.progress.mirrored(&thread);
            let source_last = self.shared.source.last_seq(&thread).await.ok();
            let lag = source_last.unwrap_or(read).saturating_sub(mirrored);
            threads.push(MirrorThreadStatus {
                thread,
                mirrored,
                read,
                source_last,
                lag,
            });
        }
        threads.sort_by(|a, b| a.thread.cmp(&b.thread));
        let progress = &self.shared.progress;
        MirrorStatus {
            connected: progress.connected.load(Ordering::Relaxed),
            entries_written: progress.written.load(Ordering::Relaxed),
            errors: progress.errors.load(Ordering::Relaxed),
            last_error: lock(&progress.last_error).clone(),
            threads,
        }
    }

    /// Waits until `thread` is mirrored up to `seq` at least.
    pub async fn wait_for(&self, thread: &ThreadId, seq: u64) {
        let mut mirrored = self.shared.progress.watch(thread);
        let _ = mirrored.wait_for(|m| *m >= seq).await;
    }

    /// Stops following, writes what the writer already holds if the
    /// database takes it, and ends the writer. What was not written is read
    /// again from the store by the next mirror.
    pub async fn shutdown(&self) {
        if let Some(discovery) = lock(&self.shared.discovery).take() {
            discovery.abort();
        }
        for (_, followed) in lock(&self.shared.followed).drain() {
            followed.task.abort();
        }
        self.shared.stop.send_replace(true);
        lock(&self.shared.to_writer).take();
        let writer = lock(&self.shared.writer).take();
        if let Some(writer) = writer {
            let _ = writer.await;
        }
    }
}

impl Shared {
    fn follow(&self, thread: &ThreadId) {
        let mut followed = lock(&self.followed);
        if followed.contains_key(thread) {
            return;
        }
        let Some(to_writer) = lock(&self.to_writer).clone() else {
            return;
        };
        let read = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(read_thread(
            self.source.clone(),
            thread.clone(),
            to_writer,
            read.clone(),
            self.options.batch_size.max(1),
        ));
        followed.insert(thread.clone(), Followed { read, task });
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let followed = self.followed.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, f) in followed.drain() {
            f.task.abort();
        }
        for task in [&mut self.discovery, &mut self.writer] {
            if let Some(task) = task.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
                task.abort();
            }
        }
    }
}

/// Follows one thread of the store and hands its entries to the writer,
/// resubscribing after the last entry read when the subscription fails.
async fn read_thread(
    source: Arc<dyn ThreadStore>,
    thread: ThreadId,
    to_writer: mpsc::Sender<WriterMsg>,
    read: Arc<AtomicU64>,
    batch_size: usize,
) {
    let (reply, cursor) = oneshot::channel();
    let cursor_request = WriterMsg::Cursor {
        thread: thread.clone(),
        reply,
    };
    if to_writer.send(cursor_request).await.is_err() {
        return;
    }
    let Ok(mirrored) = cursor.await else { return };
    read.store(mirrored, Ordering::Relaxed);
    let mut next = mirrored + 1;
    let mut attempt = 0u32;
    loop {
        let subscription = match source.subscribe(&thread, next).await {
            Ok(subscription) => subscription,
            Err(StoreError::Closed) => return,
            Err(error) => {
                tracing::warn!(%thread, %error, "mirror cannot subscribe; retrying");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
                continue;
            }
        };
        let mut chunks = subscription.ready_chunks(batch_size);
        let mut failed = false;
        while let Some(chunk) = chunks.next().await {
            let mut entries = Vec::with_capacity(chunk.len());
            for item in chunk {
                match item {
                    Ok(entry) => entries.push(entry),
                    Err(error) => {
                        tracing::warn!(%thread, %error, "mirror subscription failed; resubscribing");
                        failed = true;
                        break;
                    }
                }
            }
            if let Some(last) = entries.last() {
                attempt = 0;
                next = last.seq + 1;
                read.store(last.seq, Ordering::Relaxed);
                let batch = WriterMsg::Batch {
                    thread: thread.clone(),
                    entries,
                };
                if to_writer.send(batch).await.is_err() {
                    return;
                }
            }
            if failed {
                break;
            }
        }
        if !failed {
            // The store closed: nothing more will come.
            return;
        }
        tokio::time::sleep(backoff(attempt)).await;
        attempt += 1;
    }
}
