//! Approvals on the thread: a gated call's request and its decision are
//! entries of the turn's trace, so they survive a reconnect and a restart
//! finds the calls still waiting.
//!
//! - `signal.approval_requested` ([`ApprovalRequestedRecord`]): written by
//!   the turn's writer when the loop asks for a decision.
//! - `signal.approval_decided` ([`ApprovalDecidedRecord`]): written by
//!   whoever decided. An approver that answers in-process has the writer
//!   record its answer; an approver whose decisions arrive as entries (a
//!   human deciding from another connection or process) reports
//!   [`records_decisions`](crate::Approver::records_decisions) and the
//!   decision entry is the one its decider appended.

use std::sync::Arc;

use roundtable_providers::JsonObject;
use roundtable_thread_stream::{EntryBody, Signal};
use serde::{Deserialize, Serialize};

use crate::lifecycle::signals::signal_data;

/// The signal name of an approval request (`signal.approval_requested`).
pub const APPROVAL_REQUESTED: &str = "approval_requested";

/// The signal name of an approval decision (`signal.approval_decided`).
pub const APPROVAL_DECIDED: &str = "approval_decided";

/// A gated call waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequestedRecord {
    /// The turn asking.
    pub turn: Arc<str>,
    /// The call's id.
    pub call_id: Arc<str>,
    /// The tool's name.
    pub tool: Arc<str>,
    /// The call's arguments (for a patch, the diff to review).
    pub arguments: JsonObject,
}

/// What was decided about a gated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalVerdict {
    /// Run this call.
    Approve,
    /// Run this call and every later call of the same tool in the session.
    ApproveSession,
    /// Do not run the call; the model reads the reason.
    Deny,
    /// Nobody decided before the turn stopped (a restart closed it).
    Expired,
}

impl ApprovalVerdict {
    /// True when the call may run.
    pub fn approves(self) -> bool {
        matches!(self, Self::Approve | Self::ApproveSession)
    }
}

/// The decision about a gated call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecidedRecord {
    /// The turn that asked.
    pub turn: Arc<str>,
    /// The call's id.
    pub call_id: Arc<str>,
    /// The tool's name.
    pub tool: Arc<str>,
    /// What was decided.
    pub verdict: ApprovalVerdict,
    /// Why, if the decider said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ApprovalRequestedRecord {
    /// The record in `body`, if it is one.
    pub fn from_body(body: &EntryBody) -> Option<Self> {
        signal_data(body, APPROVAL_REQUESTED)
    }

    /// The entry body of the record.
    pub fn to_body(&self) -> Result<EntryBody, serde_json::Error> {
        Ok(EntryBody::Signal(Signal::encode(APPROVAL_REQUESTED, self)?))
    }
}

impl ApprovalDecidedRecord {
    /// The record in `body`, if it is one.
    pub fn from_body(body: &EntryBody) -> Option<Self> {
        signal_data(body, APPROVAL_DECIDED)
    }

    /// The entry body of the record.
    pub fn to_body(&self) -> Result<EntryBody, serde_json::Error> {
        Ok(EntryBody::Signal(Signal::encode(APPROVAL_DECIDED, self)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_from_their_entries() {
        let requested = ApprovalRequestedRecord {
            turn: "turn_1".into(),
            call_id: "call_1".into(),
            tool: "shell".into(),
            arguments: Arc::new(
                serde_json::json!({"command": "make test"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        };
        let body = requested.to_body().unwrap();
        assert_eq!(body.kind(), "signal.approval_requested");
        assert_eq!(ApprovalRequestedRecord::from_body(&body), Some(requested));
        assert_eq!(ApprovalDecidedRecord::from_body(&body), None);

        let decided = ApprovalDecidedRecord {
            turn: "turn_1".into(),
            call_id: "call_1".into(),
            tool: "shell".into(),
            verdict: ApprovalVerdict::ApproveSession,
            reason: None,
        };
        let body = decided.to_body().unwrap();
        let EntryBody::Signal(signal) = &body else {
            panic!("a signal")
        };
        assert_eq!(
            signal.data,
            serde_json::json!({"turn": "turn_1", "call_id": "call_1", "tool": "shell", "verdict": "approve_session"})
        );
        assert_eq!(ApprovalDecidedRecord::from_body(&body), Some(decided));
    }
}
