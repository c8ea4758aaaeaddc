//! Approvals: the host decides whether a gated tool call may run.

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_providers::ToolCall;
use roundtable_tools::ToolDefinition;

/// A call waiting for the host's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The turn asking.
    pub turn: Arc<str>,
    /// The call, with its arguments.
    pub call: ToolCall,
    /// The tool's definition (kind, description).
    pub definition: ToolDefinition,
}

/// The host's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Run the call.
    Approve,
    /// Do not run it; the model reads an error result with the reason.
    Deny {
        /// Why, shown to the model.
        reason: Option<String>,
    },
}

/// Decides gated tool calls. The turn loop awaits it before the call runs
/// (and stops waiting, with a cancelled result, when the turn is cancelled or
/// times out), so an approver may ask a human and take its time.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Approves or denies one call.
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision;

    /// True when this approver's decisions are already entries of the
    /// thread (its decider appends `signal.approval_decided`), so the turn's
    /// writer must not record them a second time. False by default: the
    /// writer records what an in-process approver answered.
    fn records_decisions(&self) -> bool {
        false
    }
}

/// Approves everything (for trusted offline runs and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

#[async_trait]
impl Approver for ApproveAll {
    async fn decide(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Approve
    }
}

/// Denies everything: the default, so that a host that configured no
/// approver never runs a gated call.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

#[async_trait]
impl Approver for DenyAll {
    async fn decide(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Deny {
            reason: Some("no approver is configured".into()),
        }
    }
}
