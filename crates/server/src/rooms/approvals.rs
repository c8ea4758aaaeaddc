//! Members approve a bot's gated tool calls: the bot's turn writes
//! `signal.approval_requested` into the room (every member's stream shows
//! it), a member answers with `POST /v1/rooms/{id}/approvals`, which
//! appends `signal.approval_decided` authored by them, and the turn waiting
//! on any process over the store reads that entry and goes on.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use roundtable_chat_runner::lifecycle::records::{ApprovalDecidedRecord, ApprovalVerdict};
use roundtable_chat_runner::{ApprovalDecision, ApprovalRequest, Approver};
use tokio::sync::oneshot;

/// How many decisions arriving before their call waits are kept (a
/// decision for a turn another process runs is never claimed here).
const EARLY_KEPT: usize = 1024;

/// A call: its turn and its id.
type CallKey = (Arc<str>, Arc<str>);

/// The approver of bots whose gated calls the room's members decide.
/// Give it to a bot's [`TurnLoop`](roundtable_chat_runner::TurnLoop)
/// (`with_approver`) and to the rooms
/// ([`RoomsApiBuilder::approvals`](super::RoomsApiBuilder::approvals)).
/// A call waits until a member decides it (or the turn is cancelled or
/// times out). Cheap to clone: the clones share their waiting calls.
#[derive(Debug, Clone, Default)]
pub struct RoomApprovals {
    inner: Arc<Mutex<Waiting>>,
}

/// The calls waiting for a decision, and decisions that came first.
#[derive(Debug, Default)]
struct Waiting {
    calls: HashMap<CallKey, oneshot::Sender<ApprovalDecision>>,
    early: VecDeque<(CallKey, ApprovalDecision)>,
}

impl RoomApprovals {
    /// An approver with no call waiting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands a decision read from a room to the call waiting for it, or
    /// keeps it for a call about to wait.
    pub(crate) fn resolve(&self, record: &ApprovalDecidedRecord) {
        let decision = match record.verdict {
            ApprovalVerdict::Approve | ApprovalVerdict::ApproveSession => ApprovalDecision::Approve,
            ApprovalVerdict::Deny | ApprovalVerdict::Expired => ApprovalDecision::Deny {
                reason: record.reason.clone(),
            },
        };
        let key = (record.turn.clone(), record.call_id.clone());
        let mut waiting = lock(&self.inner);
        match waiting.calls.remove(&key) {
            Some(sender) => {
                let _ = sender.send(decision);
            }
            None => {
                if waiting.early.len() == EARLY_KEPT {
                    waiting.early.pop_front();
                }
                waiting.early.push_back((key, decision));
            }
        }
    }

    /// The decision of `key` if it came already, else a receiver of it.
    fn wait(&self, key: &CallKey) -> Result<ApprovalDecision, oneshot::Receiver<ApprovalDecision>> {
        let mut waiting = lock(&self.inner);
        if let Some(at) = waiting.early.iter().position(|(k, _)| k == key)
            && let Some((_, decision)) = waiting.early.remove(at)
        {
            return Ok(decision);
        }
        let (sender, receiver) = oneshot::channel();
        waiting.calls.insert(key.clone(), sender);
        Err(receiver)
    }
}

/// Forgets a waiting call when its wait ends, decided or not (a cancelled
/// turn drops the wait).
struct Forget<'a> {
    approvals: &'a RoomApprovals,
    key: CallKey,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.approvals.inner).calls.remove(&self.key);
    }
}

#[async_trait]
impl Approver for RoomApprovals {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let key = (request.turn.clone(), request.call.id.clone());
        let receiver = match self.wait(&key) {
            Ok(decision) => return decision,
            Err(receiver) => receiver,
        };
        let _forget = Forget {
            approvals: self,
            key,
        };
        receiver.await.unwrap_or(ApprovalDecision::Deny {
            reason: Some("the rooms stopped before a member decided".into()),
        })
    }

    /// A member's decision is an entry of the room already.
    fn records_decisions(&self) -> bool {
        true
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one insert or remove: a poisoned lock still holds
    // consistent data.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
