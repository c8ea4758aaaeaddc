//! Watching a running turn's thread for what callers decide about it, from
//! this process or any other: approval decisions, answers to questions and
//! cancel requests are entries, and the watcher hands them to the turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::future::Either;
use roundtable_chat_runner::lifecycle::records::ApprovalDecidedRecord;
use roundtable_thread_stream::{ThreadId, ThreadStore};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::records::{CancelRequested, QuestionAnswered, SessionRecord};

/// Replies (decisions, answers) about the turn's calls: those already read,
/// and the calls waiting for one.
#[derive(Debug)]
pub(crate) struct Replies<T> {
    inner: Mutex<RepliesInner<T>>,
}

#[derive(Debug)]
struct RepliesInner<T> {
    arrived: HashMap<Arc<str>, T>,
    waiting: HashMap<Arc<str>, oneshot::Sender<T>>,
}

impl<T> Default for Replies<T> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(RepliesInner {
                arrived: HashMap::new(),
                waiting: HashMap::new(),
            }),
        }
    }
}

impl<T> Replies<T> {
    /// Hands a reply read from the thread to the call waiting for it, or
    /// keeps it for the call that will ask.
    fn deliver(&self, call_id: Arc<str>, reply: T) {
        let mut inner = lock(&self.inner);
        match inner.waiting.remove(&call_id) {
            Some(waiter) => {
                let _ = waiter.send(reply);
            }
            None => {
                inner.arrived.insert(call_id, reply);
            }
        }
    }

    /// Waits for the reply about `call_id` (at once if already read);
    /// `None` once the watcher stopped (the turn is ending).
    pub(crate) async fn wait(&self, call_id: &Arc<str>) -> Option<T> {
        let receiver = {
            let mut inner = lock(&self.inner);
            if let Some(reply) = inner.arrived.remove(call_id) {
                return Some(reply);
            }
            let (sender, receiver) = oneshot::channel();
            inner.waiting.insert(call_id.clone(), sender);
            receiver
        };
        receiver.await.ok()
    }
}

/// What the watcher hands a running turn.
#[derive(Debug, Default)]
pub(crate) struct TurnInbox {
    /// Decisions about gated calls.
    pub(crate) decisions: Replies<ApprovalDecidedRecord>,
    /// Answers to `ask_user` calls.
    pub(crate) answers: Replies<QuestionAnswered>,
}

/// Runs `work` (the turn loop) while `watching` follows the thread, in the
/// caller's task: the watcher stops when the work ends.
pub(crate) async fn while_watching<T>(
    work: impl Future<Output = T>,
    watching: impl Future<Output = ()>,
) -> T {
    let work = std::pin::pin!(work);
    let watching = std::pin::pin!(watching);
    match futures::future::select(work, watching).await {
        Either::Left((done, _)) => done,
        // The store closed: the turn runs on, deaf.
        Either::Right(((), work)) => work.await,
    }
}

/// Follows the thread from `from` while the turn runs: cancels the turn on
/// its `cancel_requested`, delivers decisions about its calls. Runs until
/// dropped (the turn ended) or the store closes.
pub(crate) async fn watch_turn(
    store: Arc<dyn ThreadStore>,
    thread: ThreadId,
    mut from: u64,
    turn: Arc<str>,
    cancel: CancellationToken,
    inbox: Arc<TurnInbox>,
) {
    loop {
        let Ok(mut entries) = store.subscribe(&thread, from).await else {
            // A store that cannot be followed cannot deliver decisions;
            // try again shortly rather than leave the turn deaf.
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        };
        while let Some(item) = entries.next().await {
            let Ok(entry) = item else { break };
            from = entry.seq + 1;
            if let Some(request) = CancelRequested::from_body(&entry.body)
                && request.turn == turn
            {
                cancel.cancel();
            } else if let Some(decision) = ApprovalDecidedRecord::from_body(&entry.body)
                && decision.turn == turn
            {
                inbox.decisions.deliver(decision.call_id.clone(), decision);
            } else if let Some(answer) = QuestionAnswered::from_body(&entry.body)
                && answer.turn == turn
            {
                inbox.answers.deliver(answer.call_id.clone(), answer);
            }
        }
        if store.last_seq(&thread).await.is_err() {
            return;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one insert or remove: a poisoned lock still holds
    // consistent data.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
