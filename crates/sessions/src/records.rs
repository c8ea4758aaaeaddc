//! The entries a session writes besides messages and turns: each a
//! `signal.<name>` entry whose data is one of the records here. This module
//! is the one place their names and shapes are defined; the state, the
//! event view and the engine all read and write them through it.
//!
//! | signal | record | written when |
//! | --- | --- | --- |
//! | `signal.session_created` | [`SessionCreated`] | the session is created (its first entry) |
//! | `signal.cancel_requested` | [`CancelRequested`] | a caller cancels the running turn |
//! | `signal.verification` | [`Verification`] | an auto-verify command finished |
//! | `signal.queue_added` | [`QueueAdded`] | a message arrives while a turn runs |
//! | `signal.queue_removed` | [`QueueRemoved`] | a queued message is delivered, removed or cleared |
//!
//! Approvals use the turn lifecycle's records
//! (`roundtable_chat_runner::lifecycle::approvals`).

use std::path::PathBuf;
use std::sync::Arc;

use roundtable_thread_stream::{Chat, EntryBody, Signal};
use roundtable_tools::{ApprovalPolicy, PatchReviewPolicy, VerifyPolicy};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A record stored as the data of `signal.<NAME>`.
pub trait SessionRecord: Serialize + DeserializeOwned {
    /// The signal's name.
    const NAME: &'static str;

    /// The record in `body`, if `body` is this record's signal and reads as
    /// one.
    fn from_body(body: &EntryBody) -> Option<Self> {
        match body {
            EntryBody::Signal(signal) if signal.name == Self::NAME => {
                Self::deserialize(&signal.data).ok()
            }
            _ => None,
        }
    }

    /// The entry body of the record.
    fn to_body(&self) -> Result<EntryBody, serde_json::Error> {
        Ok(EntryBody::Signal(Signal::encode(Self::NAME, self)?))
    }
}

/// The session's settings, as created. The first entry of every session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionCreated {
    /// The workspace, canonicalised.
    pub workspace_path: PathBuf,
    /// The session's own instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Whether a message starts a turn unless it says otherwise.
    pub auto_run: bool,
    /// Which tool calls wait for a human.
    pub approval_policy: ApprovalPolicy,
    /// What runs after the workspace changed.
    pub verify_policy: VerifyPolicy,
    /// Whether patches are reviewed before they apply.
    pub patch_review: PatchReviewPolicy,
    /// The user the session belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Arc<str>>,
}

impl SessionRecord for SessionCreated {
    const NAME: &'static str = "session_created";
}

/// A caller asked to cancel a running turn. The process running the turn
/// cancels it when it reads this (the caller's own process at once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequested {
    /// The turn to cancel.
    pub turn: Arc<str>,
    /// Why, if the caller said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl SessionRecord for CancelRequested {
    const NAME: &'static str = "cancel_requested";
}

/// One verification command's result after the workspace changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// The turn that changed the workspace.
    pub turn: Arc<str>,
    /// Which verification of the turn this is (1 for the first).
    pub attempt: u32,
    /// The command, as the policy gives it.
    pub command: String,
    /// True when it passed.
    pub ok: bool,
    /// Its exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The end of its output (the whole log is the artifact).
    pub output: String,
    /// Where the whole log is kept, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
}

impl SessionRecord for Verification {
    const NAME: &'static str = "verification";
}

/// How a queued message reaches the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// Into the running turn, at its next round boundary.
    Steer,
    /// As the next turn, once the running one ends.
    FollowUp,
}

/// A message queued while a turn runs. Its `chat` entry is written when it
/// is delivered, with the queued item's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueAdded {
    /// The message id it will have.
    pub id: Arc<str>,
    /// How it is delivered.
    pub mode: QueueMode,
    /// Who wrote it.
    pub author: Arc<str>,
    /// What it says.
    pub chat: Chat,
}

impl SessionRecord for QueueAdded {
    const NAME: &'static str = "queue_added";
}

/// Why a queued message left the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueExit {
    /// It joined the conversation (its `chat` entry follows).
    Delivered,
    /// A caller removed it.
    Removed,
    /// A caller cleared the queue.
    Cleared,
}

/// A queued message left the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRemoved {
    /// The queued message's id.
    pub id: Arc<str>,
    /// Why.
    pub exit: QueueExit,
}

impl SessionRecord for QueueRemoved {
    const NAME: &'static str = "queue_removed";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_from_their_signals() {
        let cancel = CancelRequested {
            turn: "turn_1".into(),
            reason: None,
        };
        let body = cancel.to_body().unwrap();
        assert_eq!(body.kind(), "signal.cancel_requested");
        assert_eq!(CancelRequested::from_body(&body), Some(cancel));
        assert_eq!(Verification::from_body(&body), None);
        assert_eq!(
            CancelRequested::from_body(&EntryBody::chat("signal.cancel_requested")),
            None
        );
    }
}
