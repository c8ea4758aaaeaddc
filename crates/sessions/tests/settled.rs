//! How a turn ends in the thread: its closing entries and `settled` in one
//! append when nothing else runs and nothing is queued, and a check again
//! when another caller appends in between.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use roundtable_providers::ScriptedProvider;
use roundtable_sessions::{Caller, SessionEngine, Submit};
use roundtable_thread_stream::{
    Entry, EntryBody, EntryStream, Expect, MemoryStore, NewEntry, StoreError, ThreadId, ThreadStore,
};
use support::{Fixture, engine, text};

/// The `signal.settled` entry's type tag.
const SETTLED: &str = "signal.settled";

/// A `MemoryStore` that records the type tags of every batch appended,
/// and can append a note of another caller right before the first batch
/// that holds `signal.settled` (so that batch's expectation fails once).
struct WatchedStore {
    inner: MemoryStore,
    batches: Mutex<Vec<Vec<String>>>,
    interpose: AtomicBool,
}

impl WatchedStore {
    fn new(interpose: bool) -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryStore::new(),
            batches: Mutex::new(Vec::new()),
            interpose: AtomicBool::new(interpose),
        })
    }

    fn batches(&self) -> Vec<Vec<String>> {
        self.batches.lock().unwrap().clone()
    }
}

#[async_trait]
impl ThreadStore for WatchedStore {
    async fn append(
        &self,
        thread: &ThreadId,
        expect: Expect,
        entries: Vec<NewEntry>,
    ) -> Result<Vec<Entry>, StoreError> {
        let kinds: Vec<String> = entries.iter().map(|e| e.body.kind().into_owned()).collect();
        let interpose =
            kinds.iter().any(|k| k == SETTLED) && self.interpose.swap(false, Ordering::SeqCst);
        if interpose {
            let note = NewEntry::new("bob", EntryBody::chat("a note while the turn closes"));
            self.inner.append(thread, Expect::Any, vec![note]).await?;
            self.batches.lock().unwrap().push(vec!["chat".into()]);
        }
        let stored = self.inner.append(thread, expect, entries).await?;
        self.batches.lock().unwrap().push(kinds);
        Ok(stored)
    }

    async fn read(
        &self,
        thread: &ThreadId,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<Entry>, StoreError> {
        self.inner.read(thread, range).await
    }

    async fn last_seq(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        self.inner.last_seq(thread).await
    }

    async fn subscribe(&self, thread: &ThreadId, from: u64) -> Result<EntryStream, StoreError> {
        self.inner.subscribe(thread, from).await
    }

    async fn list_threads(&self) -> Result<Vec<ThreadId>, StoreError> {
        self.inner.list_threads().await
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.inner.close().await
    }

    fn thread_file(&self, thread: &ThreadId) -> Option<PathBuf> {
        self.inner.thread_file(thread)
    }

    fn thread_of_file(&self, path: &Path) -> Option<ThreadId> {
        self.inner.thread_of_file(path)
    }
}

/// Runs one answered turn in a new session over `store`; returns the
/// session's entries' type tags.
async fn one_turn(fx: &Fixture, store: Arc<WatchedStore>) -> Vec<String> {
    let provider = Arc::new(ScriptedProvider::new(vec![text("Done.")]));
    let engine: SessionEngine = engine(store.clone(), provider, &fx.data());
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    engine
        .submit(&Caller::Host, &session.id, Submit::text("Hello"))
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();
    let thread = ThreadId::new(&*session.id).unwrap();
    store
        .read_all(&thread)
        .await
        .unwrap()
        .iter()
        .map(|e| e.body.kind().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_nothing_after_it_closes_and_settles_in_one_append() {
    let fx = Fixture::new();
    let store = WatchedStore::new(false);
    let kinds = one_turn(&fx, store.clone()).await;
    assert_eq!(kinds.iter().filter(|k| *k == SETTLED).count(), 1);
    assert_eq!(kinds.last().map(String::as_str), Some(SETTLED));
    // The turn's last append holds its end, its run record and `settled`.
    let last = store.batches().pop().unwrap();
    assert_eq!(
        last,
        ["turn.ended", "signal.provenance", SETTLED].map(String::from)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_appended_while_the_turn_closes_is_seen_before_settling() {
    let fx = Fixture::new();
    let store = WatchedStore::new(true);
    let kinds = one_turn(&fx, store.clone()).await;
    // The closing append lost to the note, checked again, and then closed
    // the turn once, with `settled`, after the note.
    // The session's chats: the message, then the note.
    let note = kinds.iter().rposition(|k| k == "chat").unwrap();
    let ended: Vec<usize> = (0..kinds.len())
        .filter(|&i| kinds[i] == "turn.ended")
        .collect();
    assert_eq!(ended.len(), 1);
    assert_eq!(kinds.iter().filter(|k| *k == SETTLED).count(), 1);
    let batches = store.batches();
    let closing = batches.last().unwrap();
    assert_eq!(
        closing,
        &["turn.ended", "signal.provenance", SETTLED].map(String::from)
    );
    let interposed = batches.iter().rposition(|b| b == &["chat"]).unwrap();
    assert_eq!(interposed, batches.len() - 2);
    assert!(note < ended[0]);
}
