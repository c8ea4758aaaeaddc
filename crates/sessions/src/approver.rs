//! The session's approver: a gated call waits for a decision entry on the
//! session's thread, which any process may append
//! ([`SessionEngine::decide`](crate::SessionEngine::decide)). The request
//! is written by the turn's writer before the approver is asked, so a
//! client sees it as an event; the decision ends the wait wherever it was
//! made. A tool approved for the session is approved at once, and that
//! decision is recorded too.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use roundtable_chat_runner::lifecycle::WriterSink;
use roundtable_chat_runner::lifecycle::records::{ApprovalDecidedRecord, ApprovalVerdict};
use roundtable_chat_runner::{ApprovalDecision, ApprovalRequest, Approver};
use roundtable_thread_stream::NewEntry;

use crate::core::EngineCore;
use crate::error::SessionError;
use crate::records::{CallStarted, SessionRecord};
use crate::runtime::SessionRuntime;
use crate::watch::TurnInbox;

/// Waits for decisions stored on the thread.
pub(crate) struct StoredApprover {
    /// Where the turn's entries go, in order.
    pub(crate) sink: WriterSink,
    /// Decisions read from the thread.
    pub(crate) inbox: Arc<TurnInbox>,
    /// Tools approved for the rest of the session (as the turn started,
    /// then as decided during it).
    pub(crate) approved_tools: Mutex<HashSet<Arc<str>>>,
    /// The author of the decisions this approver records itself.
    pub(crate) author: Arc<str>,
    /// The session, recorded as waiting for approval while a call waits.
    pub(crate) session: (Arc<EngineCore>, Arc<SessionRuntime>),
}

#[async_trait]
impl Approver for StoredApprover {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let call = &request.call;
        let approved = lock(&self.approved_tools).contains(&call.name);
        if approved {
            let record = ApprovalDecidedRecord {
                turn: request.turn.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                verdict: ApprovalVerdict::Approve,
                reason: Some("the tool is approved for the session".into()),
            };
            let recorded = match record.to_body() {
                Ok(body) => self
                    .sink
                    .append(vec![NewEntry::new(self.author.clone(), body)])
                    .await
                    .is_ok(),
                Err(_) => false,
            };
            // A decision that could not be stored is not made: the call
            // waits for one that is.
            if recorded {
                return ApprovalDecision::Approve;
            }
        }
        // The list shows the session waiting, once the request is stored.
        let (core, runtime) = &self.session;
        let stored = self.sink.append(Vec::new()).await;
        if let Err(error) = stored
            .map_err(SessionError::from)
            .and(core.snapshot(runtime).await)
        {
            tracing::warn!(session = %runtime.id, %error, "session not recorded as waiting");
        }
        let waiting = crate::turn_log::ApprovalWait::start();
        let decided = self.inbox.decisions.wait(&call.id).await;
        drop(waiting);
        match decided {
            Some(decision) if decision.verdict.approves() => {
                if decision.verdict == ApprovalVerdict::ApproveSession {
                    lock(&self.approved_tools).insert(decision.tool);
                }
                self.mark_started(request).await
            }
            Some(decision) => ApprovalDecision::Deny {
                reason: decision.reason.or_else(|| match decision.verdict {
                    ApprovalVerdict::Expired => Some("the approval expired".into()),
                    _ => Some("denied by the user".into()),
                }),
            },
            // The watcher stopped: the turn is ending.
            None => ApprovalDecision::Deny {
                reason: Some("the turn ended before a decision".into()),
            },
        }
    }

    fn records_decisions(&self) -> bool {
        true
    }
}

impl StoredApprover {
    /// Approves `request`'s call once its start is stored (see
    /// [`CallStarted`]); a start that cannot be stored denies it, so that a
    /// call never runs unmarked.
    async fn mark_started(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let started = CallStarted {
            turn: request.turn.clone(),
            call_id: request.call.id.clone(),
        };
        let stored = match started.to_body() {
            Ok(body) => self
                .sink
                .append(vec![NewEntry::new(self.author.clone(), body)])
                .await
                .map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        match stored {
            Ok(_) => ApprovalDecision::Approve,
            Err(error) => ApprovalDecision::Deny {
                reason: Some(format!("the approved call could not be started: {error}")),
            },
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one insert: a poisoned lock still holds consistent
    // data.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
