//! What callers give the engine's calls, and what the calls return.

use std::sync::Arc;

use roundtable_chat_runner::lifecycle::records::ApprovalVerdict;
use roundtable_thread_stream::FileRef;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{MessageId, TurnId};
use crate::records::{QueueMode, SessionMode};

/// The default author of messages that name none.
pub const DEFAULT_USER: &str = "user";

/// A message to add to a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Submit {
    /// What it says.
    pub text: String,
    /// Attachments it refers to (uploaded first).
    pub files: Vec<FileRef>,
    /// Who wrote it (default: the caller, the session's owner, or `user`).
    pub author: Option<Arc<str>>,
    /// Whether it starts a turn (default: the session's `auto_run`).
    pub auto_run: Option<bool>,
    /// How it waits when a turn is running (default: as a follow-up).
    pub queue: Option<QueueMode>,
    /// The mode the session switches to first, if another.
    pub mode: Option<SessionMode>,
    /// The model the session's turns switch to first (`provider/id`, one
    /// of [`SessionEngine::models`]), if another; it stays the session's
    /// until another message chooses again.
    ///
    /// [`SessionEngine::models`]: crate::SessionEngine::models
    pub model: Option<String>,
    /// A step of plan mode: carry the plan out, or revise it with this
    /// message as feedback.
    pub plan_action: Option<PlanAction>,
    /// Makes a retried submit return the same ids instead of adding the
    /// message twice.
    pub idempotency_key: Option<String>,
    /// Refuses the message with [`SessionError::Busy`] when a turn is
    /// running, instead of queueing it. Checked against the state the
    /// message is appended after, so of submits racing on an idle session
    /// exactly one gets in and the others are refused.
    ///
    /// [`SessionError::Busy`]: crate::SessionError::Busy
    pub if_idle: bool,
}

impl Submit {
    /// A message holding `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// The SHA-256 (hex) of what the message is: its text, files, mode,
    /// model, plan action, queue behaviour and `auto_run`; not who sends
    /// it, nor how a busy session answers it. Stored with an idempotency
    /// key, it tells a retry from another message reusing the key, so it
    /// must stay the same for the same request from release to release.
    pub(crate) fn digest(&self) -> Result<Arc<str>, serde_json::Error> {
        #[derive(Serialize)]
        struct Digested<'a> {
            text: &'a str,
            files: &'a [FileRef],
            auto_run: Option<bool>,
            queue: Option<QueueMode>,
            mode: Option<SessionMode>,
            model: Option<&'a str>,
            plan_action: Option<PlanAction>,
        }
        let json = serde_json::to_vec(&Digested {
            text: &self.text,
            files: &self.files,
            auto_run: self.auto_run,
            queue: self.queue,
            mode: self.mode,
            model: self.model.as_deref(),
            plan_action: self.plan_action,
        })?;
        Ok(Arc::from(hex::encode(Sha256::digest(&json))))
    }
}

/// A step of plan mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    /// Switch to agent mode and carry the plan out.
    Execute,
    /// Stay in plan mode and revise the plan (the message is the feedback).
    Refine,
}

/// What a submit did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Submitted {
    /// The message's id.
    pub message_id: MessageId,
    /// The turn that answers it (already running, or to run once the
    /// running turn ends), if it runs one. A steering message is answered
    /// by the running turn; it gets this id only if it ends up a follow-up.
    pub turn_id: Option<TurnId>,
    /// How it waits, when a turn was running: it is delivered later.
    pub queued: Option<QueueMode>,
}

/// What a submit did, and where: the session's events of its message come
/// after [`after`](Self::after).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// What the submit did.
    pub submitted: Submitted,
    /// The last seq of the session's thread before the message's entries
    /// (for a message submitted before, where the thread stood when it was
    /// found: its entries are older).
    pub after: u64,
}

impl Placed {
    /// `submitted`, whose entries follow seq `after`.
    pub(crate) fn at(submitted: Submitted, after: u64) -> Self {
        Self { submitted, after }
    }
}

/// A decision about a gated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    /// Run this call.
    Approve,
    /// Run this call and every later call of the same tool in the session.
    ApproveSession,
    /// Do not run it.
    Deny,
}

impl ApprovalAction {
    /// The stored verdict of this decision.
    pub(crate) fn verdict(self) -> ApprovalVerdict {
        match self {
            Self::Approve => ApprovalVerdict::Approve,
            Self::ApproveSession => ApprovalVerdict::ApproveSession,
            Self::Deny => ApprovalVerdict::Deny,
        }
    }
}
