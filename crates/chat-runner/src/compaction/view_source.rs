//! Where a compaction reads a bot's view: the entries its projection takes,
//! in the order it takes them. Each runner knows its own (the thread in
//! store order, or with the bot's turns placed where they started, or
//! without a session's superseded turns); the compaction asks it.

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_thread_stream::{Entry, StoreError, ThreadId, ThreadStore};

/// A bot's view of its thread, as its runner projects it.
#[async_trait]
pub trait ViewSource: Send + Sync {
    /// The entries of the bot's view up to what the store holds now, in
    /// the order its projection takes them, with their store seqs. The
    /// bot's projection is `project_view(bot, &view, roster)`.
    async fn view(&self) -> Result<Vec<Entry>, StoreError>;
}

/// Which entries a [`StoreView`] keeps.
type Keep = Arc<dyn Fn(&Entry) -> bool + Send + Sync>;

/// The view of a runner that projects a thread in store order: every entry
/// of the thread (or those a filter keeps). The chat runner's sessions and
/// a session engine's threads are seen this way.
///
/// ```
/// use std::sync::Arc;
/// use roundtable_chat_runner::compaction::{StoreView, ViewSource};
/// use roundtable_thread_stream::{EntryBody, Expect, MemoryStore, NewEntry, ThreadId, ThreadStore};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let thread = ThreadId::new("t").unwrap();
/// store.append(&thread, Expect::Any, vec![
///     NewEntry::new("alice", EntryBody::chat("kept")),
///     NewEntry::new("alice", EntryBody::chat("left out")),
/// ]).await.unwrap();
/// let view = StoreView::new(store, thread).keeping(|e| e.seq != 2);
/// assert_eq!(view.view().await.unwrap().len(), 1);
/// # });
/// ```
#[derive(Clone)]
pub struct StoreView {
    store: Arc<dyn ThreadStore>,
    thread: ThreadId,
    keep: Option<Keep>,
}

impl std::fmt::Debug for StoreView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreView")
            .field("thread", &self.thread)
            .field("filtered", &self.keep.is_some())
            .finish_non_exhaustive()
    }
}

impl StoreView {
    /// Every entry of `thread`, in store order.
    pub fn new(store: Arc<dyn ThreadStore>, thread: ThreadId) -> Self {
        Self {
            store,
            thread,
            keep: None,
        }
    }

    /// Only the entries `keep` accepts (a session leaving out the entries
    /// of turns a retry superseded, as its projection does).
    pub fn keeping(mut self, keep: impl Fn(&Entry) -> bool + Send + Sync + 'static) -> Self {
        self.keep = Some(Arc::new(keep));
        self
    }
}

#[async_trait]
impl ViewSource for StoreView {
    async fn view(&self) -> Result<Vec<Entry>, StoreError> {
        let mut entries = self.store.read_all(&self.thread).await?;
        if let Some(keep) = &self.keep {
            entries.retain(|e| keep(e));
        }
        Ok(entries)
    }
}
