//! What the engine keeps in memory for one session: its state, kept up to
//! date from the thread, the turn this process runs, the lock that makes
//! this process run the session's turns one at a time, and what its turns
//! reuse (the agent's setup, the conversation projected so far).
//!
//! Nothing here is the source of truth: a runtime is rebuilt from the
//! thread whenever it is needed and was not kept. The state keeps only
//! what the engine decides with (see [`SessionState`]), so a runtime a
//! `get` rebuilds costs a few KB however long the session; the kept setup
//! and conversation are made by the session's first turn in this process
//! and live as long as the runtime is cached.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use roundtable_chat_runner::lifecycle::StoredEntries;
use roundtable_thread_stream::{Entry, ThreadId, ThreadStore};
use tokio::sync::{MutexGuard, watch};
use tokio_util::sync::CancellationToken;

use crate::context::SetupCache;
use crate::conversation::KeptConversation;
use crate::error::SessionError;
use crate::ids::SessionId;
use crate::state::SessionState;
use crate::turn_tools::KeptTools;

/// A turn this process runs, and how to cancel it.
#[derive(Debug, Clone)]
pub(crate) struct LocalTurn {
    pub(crate) turn: Arc<str>,
    pub(crate) cancel: CancellationToken,
}

/// One session's runtime.
pub(crate) struct SessionRuntime {
    pub(crate) id: SessionId,
    pub(crate) thread: ThreadId,
    state: tokio::sync::Mutex<SessionState>,
    /// Held by this process's driver of the session's turns.
    pub(crate) driver: tokio::sync::Mutex<()>,
    /// The turn this process runs now.
    local: Mutex<Option<LocalTurn>>,
    /// How many drivers of this process work on (or wait for) the session.
    busy: watch::Sender<usize>,
    /// A caller asked for the queue to run even after a cancelled turn.
    resume: AtomicBool,
    /// The agent's tools and prompt, kept between turns.
    pub(crate) setup: SetupCache,
    /// The conversation as of the last turn's start, kept between turns.
    pub(crate) conversation: KeptConversation,
    /// The turns' tools and loop, kept between turns.
    pub(crate) tools: KeptTools,
}

impl std::fmt::Debug for SessionRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRuntime")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SessionRuntime {
    /// Loads session `id` from `store`: its whole thread, folded. An error
    /// when the thread holds no session.
    pub(crate) async fn load(store: &dyn ThreadStore, id: SessionId) -> Result<Self, SessionError> {
        let thread = id.thread()?;
        let state = SessionState::fold(&store.read_all(&thread).await?);
        if state.created.is_none() {
            return Err(SessionError::UnknownSession(id.to_string()));
        }
        let (busy, _) = watch::channel(0);
        Ok(Self {
            id,
            thread,
            state: tokio::sync::Mutex::new(state),
            driver: tokio::sync::Mutex::new(()),
            local: Mutex::new(None),
            busy,
            resume: AtomicBool::new(false),
            setup: SetupCache::default(),
            conversation: KeptConversation::default(),
            tools: KeptTools::default(),
        })
    }

    /// The state, with every entry written since the last look folded in.
    pub(crate) async fn refresh(
        &self,
        store: &dyn ThreadStore,
    ) -> Result<MutexGuard<'_, SessionState>, SessionError> {
        let mut state = self.state.lock().await;
        let tip = store.last_seq(&self.thread).await?;
        if tip < state.upto {
            // The thread is shorter than what was folded: it was deleted
            // (by another process), and holds no session any more.
            *state = SessionState::default();
        }
        if tip > state.upto {
            for entry in store.read(&self.thread, state.upto + 1..=tip).await? {
                state.apply(&entry);
            }
        }
        Ok(state)
    }

    /// The state with `stored` folded in: entries this process just
    /// appended, as the store returned them. Entries the state holds
    /// already are skipped, and those after a gap (another caller appended
    /// in between) are left to the next [`refresh`](Self::refresh), which
    /// reads them from the store in order.
    pub(crate) async fn absorb(&self, stored: &[Entry]) -> MutexGuard<'_, SessionState> {
        let mut state = self.state.lock().await;
        fold_consecutive(&mut state, stored);
        self.conversation.stored(stored);
        state
    }

    /// The state as last refreshed, without reading the store.
    pub(crate) async fn cached(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().await
    }

    /// Records that this process claimed `turn` (appended its
    /// `turn.started`) and will run it; returns how to cancel it.
    pub(crate) fn claim(&self, turn: Arc<str>) -> CancellationToken {
        let cancel = CancellationToken::new();
        *lock(&self.local) = Some(LocalTurn {
            turn,
            cancel: cancel.clone(),
        });
        cancel
    }

    /// Forgets the turn this process ran (it ended, or could not run).
    pub(crate) fn release(&self, turn: &str) {
        let mut local = lock(&self.local);
        if local.as_ref().is_some_and(|l| &*l.turn == turn) {
            *local = None;
        }
    }

    /// The turn this process runs now.
    pub(crate) fn local(&self) -> Option<LocalTurn> {
        lock(&self.local).clone()
    }

    /// Counts a driver that starts (`true`) or ends (`false`).
    pub(crate) fn set_busy(&self, starts: bool) {
        self.busy.send_modify(|n| {
            *n = if starts {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            }
        });
    }

    /// True while a driver of this process works on (or waits for) the
    /// session.
    pub(crate) fn is_busy(&self) -> bool {
        *self.busy.borrow() > 0
    }

    /// Waits until no driver of this process works on the session.
    pub(crate) async fn idle(&self) {
        let mut busy = self.busy.subscribe();
        // The sender lives as long as `self`: waiting cannot fail.
        let _ = busy.wait_for(|busy| *busy == 0).await;
    }

    /// Asks the next driver to run the queue even after a cancelled turn
    /// (a new message arrived).
    pub(crate) fn request_resume(&self) {
        self.resume.store(true, Ordering::SeqCst);
    }

    /// Withdraws a request to run the queue (an abort came after it).
    pub(crate) fn withdraw_resume(&self) {
        self.resume.store(false, Ordering::SeqCst);
    }

    /// Takes the request to run the queue.
    pub(crate) fn take_resume(&self) -> bool {
        self.resume.swap(false, Ordering::SeqCst)
    }
}

/// Folds in the entries of `stored` that follow the state's last seq
/// without a gap.
fn fold_consecutive(state: &mut SessionState, stored: &[Entry]) {
    for entry in stored {
        if entry.seq == state.upto + 1 {
            state.apply(entry);
        } else if entry.seq > state.upto {
            return;
        }
    }
}

/// A running turn's writer hands the runtime what it stores, so the
/// driver's next look at the state reads nothing back from the store.
impl StoredEntries for SessionRuntime {
    fn stored(&self, entries: &[Entry]) {
        // Called on the writer's task, which must not wait: when the state
        // is locked, the next refresh reads these entries instead.
        if let Ok(mut state) = self.state.try_lock() {
            fold_consecutive(&mut state, entries);
        }
        self.conversation.stored(entries);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one replace: a poisoned lock still holds consistent
    // data.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use roundtable_thread_stream::{EntryBody, NewEntry};

    use super::*;

    fn chats(thread: &ThreadId, seqs: impl IntoIterator<Item = u64>) -> Vec<Entry> {
        seqs.into_iter()
            .map(|seq| {
                NewEntry::new("alice", EntryBody::chat(format!("message {seq}")))
                    .into_entry(thread.clone(), seq)
            })
            .collect()
    }

    #[test]
    fn stored_entries_are_folded_only_when_they_follow_without_a_gap() {
        let thread = ThreadId::new("sess_1").unwrap();
        let mut state = SessionState::fold(&chats(&thread, 1..=3));
        // Already folded, then new: only the new ones count.
        fold_consecutive(&mut state, &chats(&thread, 2..=5));
        assert_eq!(state.upto, 5);
        // Seq 6 was appended by someone else: 7 and 8 wait for a read.
        fold_consecutive(&mut state, &chats(&thread, 7..=8));
        assert_eq!(state.upto, 5);
    }
}
