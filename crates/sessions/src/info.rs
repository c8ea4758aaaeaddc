//! What a caller sees of a session: the spec's session object (and
//! `session.json`), derived from the session's state.

use std::path::PathBuf;
use std::sync::Arc;

use roundtable_providers::BreakerState;
use roundtable_tools::{ApprovalPolicy, PatchReviewPolicy, VerifyPolicy};
use serde::{Deserialize, Serialize};

use crate::events::rfc3339_millis;
use crate::limits::SessionLimits;
use crate::records::{QueueMode, SessionMode};
use crate::state::{PendingApproval, PlanState, SessionState, SessionStatus};

/// A session's metadata and latest state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionInfo {
    /// The session's id.
    pub id: Arc<str>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When its last entry was written (RFC 3339).
    pub updated_at: String,
    /// Where it stands.
    pub status: SessionStatus,
    /// The workspace, canonicalised.
    pub workspace_path: PathBuf,
    /// The session's own instructions.
    pub system_prompt: Option<String>,
    /// What the session is about, for lists: the first line of its first
    /// message, cut to [`TITLE_CHARS`](crate::state::TITLE_CHARS) characters
    /// (absent before a message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<Arc<str>>,
    /// The last turn that started.
    pub last_turn_id: Option<Arc<str>>,
    /// The turn running now, if any.
    pub running_turn_id: Option<Arc<str>>,
    /// Whether messages start turns unless they say otherwise.
    pub auto_run: bool,
    /// Which tool calls wait for a human.
    pub approval_policy: ApprovalPolicy,
    /// What runs after the workspace changed.
    pub verify_policy: VerifyPolicy,
    /// Whether patches are reviewed before they apply.
    pub patch_review: PatchReviewPolicy,
    /// The user the session belongs to.
    pub owner: Option<Arc<str>>,
    /// The limits the session chose for its turns over the engine's
    /// (absent when it chose none).
    #[serde(default, skip_serializing_if = "SessionLimits::is_empty")]
    pub limits: SessionLimits,
    /// Gated calls waiting for a decision, oldest first.
    pub pending_approvals: Vec<PendingApproval>,
    /// Messages waiting to be delivered, oldest first.
    pub queued_messages: Vec<QueuedInfo>,
    /// Agent or plan mode.
    pub mode: SessionMode,
    /// The model the session chose for its turns (`provider/id`), when it
    /// chose one: none runs on the engine's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The plan and how far it got, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanState>,
    /// The last seq of the session's thread: the id of its last event is
    /// at or after it.
    pub last_seq: u64,
    /// Set while the model provider's circuit breaker is not closed (calls
    /// fail fast after repeated failures). Live state, never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_circuit: Option<ProviderCircuit>,
}

/// The model provider's circuit breaker, when it is not closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum ProviderCircuit {
    /// Calls fail fast; a probe is let through after `retry_in_ms`.
    Open {
        /// Milliseconds until a probe call is let through.
        retry_in_ms: u64,
    },
    /// One probe call decides whether calls go through again.
    HalfOpen,
}

impl ProviderCircuit {
    /// The circuit as a caller sees it: `None` when calls go through.
    pub fn of(state: BreakerState) -> Option<Self> {
        match state {
            BreakerState::Closed => None,
            BreakerState::Open { until } => Some(Self::Open {
                retry_in_ms: u64::try_from(
                    until
                        .saturating_duration_since(std::time::Instant::now())
                        .as_millis(),
                )
                .unwrap_or(u64::MAX),
            }),
            BreakerState::HalfOpen { .. } => Some(Self::HalfOpen),
        }
    }
}

/// A queued message, as a caller sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueuedInfo {
    /// The id the message will have.
    pub message_id: Arc<str>,
    /// How it is delivered.
    pub mode: QueueMode,
    /// Its text.
    pub text: Arc<str>,
}

impl SessionInfo {
    /// What a list shows of session `id`, whose thread cannot be read:
    /// status [`Unreadable`](SessionStatus::Unreadable), and nothing the
    /// thread holds (times at the epoch, no workspace, defaults).
    pub fn unreadable(id: &str) -> Self {
        Self {
            id: Arc::from(id),
            created_at: rfc3339_millis(0),
            updated_at: rfc3339_millis(0),
            status: SessionStatus::Unreadable,
            workspace_path: PathBuf::new(),
            system_prompt: None,
            title: None,
            last_turn_id: None,
            running_turn_id: None,
            auto_run: false,
            approval_policy: ApprovalPolicy::default(),
            verify_policy: VerifyPolicy::default(),
            patch_review: PatchReviewPolicy::default(),
            limits: SessionLimits::default(),
            owner: None,
            pending_approvals: Vec::new(),
            queued_messages: Vec::new(),
            mode: SessionMode::default(),
            model: None,
            plan: None,
            last_seq: 0,
            provider_circuit: None,
        }
    }

    /// The info of session `id` in `state` (`None` when the state holds no
    /// session).
    pub fn from_state(id: &str, state: &SessionState) -> Option<Self> {
        let created = state.created.as_ref()?;
        let mut pending: Vec<PendingApproval> = state.pending_approvals.values().cloned().collect();
        pending.sort_by_key(|p| p.requested_at);
        Some(Self {
            id: Arc::from(id),
            created_at: rfc3339_millis(state.created_at),
            updated_at: rfc3339_millis(state.updated_at),
            status: state.status(),
            workspace_path: created.workspace_path.clone(),
            system_prompt: created.system_prompt.clone(),
            title: state.title.clone(),
            last_turn_id: state.last_turn().map(|t| t.id.clone()),
            running_turn_id: state.running_turn().map(|t| t.id.clone()),
            auto_run: created.auto_run,
            approval_policy: created.approval_policy.clone(),
            verify_policy: created.verify_policy.clone(),
            patch_review: created.patch_review,
            owner: created.owner.clone(),
            limits: created.limits,
            pending_approvals: pending,
            queued_messages: state
                .queue
                .iter()
                .map(|q| QueuedInfo {
                    message_id: q.item.id.clone(),
                    mode: q.item.mode,
                    text: q.item.chat.text.clone(),
                })
                .collect(),
            mode: state.mode,
            model: state.model.clone(),
            plan: state.plan.clone(),
            last_seq: state.upto,
            provider_circuit: None,
        })
    }
}
