//! The entries a session writes besides messages and turns: each a
//! `signal.<name>` entry whose data is one of the records here. This module
//! is the one place their names and shapes are defined; the state, the
//! event view and the engine all read and write them through it.
//!
//! | signal | record | written when |
//! | --- | --- | --- |
//! | `signal.session_created` | [`SessionCreated`] | the session is created (its first entry) |
//! | `signal.cancel_requested` | [`CancelRequested`] | a caller cancels the running turn |
//! | `signal.call_started` | [`CallStarted`] | a gated call a person approved is about to run |
//! | `signal.verification` | [`Verification`] | an auto-verify command finished |
//! | `signal.queue_added` | [`QueueAdded`] | a message arrives while a turn runs (or a late steer becomes a follow-up) |
//! | `signal.queue_removed` | [`QueueRemoved`] | a queued message is delivered, removed or cleared |
//! | `signal.message_keyed` | [`MessageKeyed`] | a message sent with an idempotency key is added or queued (before its entry) |
//! | `signal.settled` | [`Settled`] | nothing runs and nothing is queued any more |
//! | `signal.question_asked` | [`QuestionAsked`] | the model asks the user (`ask_user`) |
//! | `signal.question_answered` | [`QuestionAnswered`] | the user answers (or the question expires) |
//! | `signal.mode_changed` | [`ModeChanged`] | the session switches between agent and plan mode |
//! | `signal.model_changed` | [`ModelChanged`] | the session's turns switch to another of the engine's models |
//! | `signal.plan_updated` | [`PlanUpdated`] | the model writes or updates its plan |
//! | `signal.provenance` | [`Provenance`] | a run ends: what it ran and changed, what it cost |
//! | `signal.phase_started` | [`PhaseStarted`] | a workflow phase staged its skills and submits its prompt |
//! | `signal.phase_completed` | [`PhaseCompleted`] | a workflow phase's turn finished |
//! | `signal.phase_failed` | [`PhaseFailed`] | a workflow phase failed (its turn, its gate, its workspace): the workflow stops |
//! | `signal.tools_changed` | [`ToolsChanged`] | a turn starts with host tools other than the session's previous turn had |
//! | `signal.session_deleted` | [`SessionDeleted`] | the session is being deleted (its last entry: the thread goes next) |
//!
//! Approvals use the turn lifecycle's records
//! (`roundtable_chat_runner::lifecycle::records`), and so does a workflow
//! phase's gate: an approval request for the tool [`PHASE_GATE_TOOL`],
//! decided like any gated call.

use std::path::PathBuf;
use std::sync::Arc;

use roundtable_thread_stream::{Chat, EntryBody, Signal};
use roundtable_tools::{ApprovalPolicy, PatchReviewPolicy, ToolsChange, VerifyPolicy};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::limits::SessionLimits;

/// A record stored as the data of `signal.<NAME>`.
pub trait SessionRecord: Serialize + DeserializeOwned {
    /// The signal's name.
    const NAME: &'static str;

    /// The record in `body`, if `body` is this record's signal and reads as
    /// one.
    fn from_body(body: &EntryBody) -> Option<Self> {
        match body {
            EntryBody::Signal(signal) if signal.name == Self::NAME => signal.data.decode().ok(),
            _ => None,
        }
    }

    /// Whether `body` is this record's signal, without reading its data.
    fn is_signal_of(body: &EntryBody) -> bool {
        matches!(body, EntryBody::Signal(signal) if signal.name == Self::NAME)
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
    /// The limits the session chose for its turns over the engine's (none
    /// in sessions created before there were any).
    #[serde(default, skip_serializing_if = "SessionLimits::is_empty")]
    pub limits: SessionLimits,
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

/// A gated call a person approved is about to run: a process carrying the
/// turn on after this one stopped knows the call may have run (and does
/// not run it again). A call approved but not marked never started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallStarted {
    /// The call's turn.
    pub turn: Arc<str>,
    /// The call.
    pub call_id: Arc<str>,
}

impl SessionRecord for CallStarted {
    const NAME: &'static str = "call_started";
}

/// One verification command's result after the workspace changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// Into the running turn, at its next round boundary.
    Steer,
    /// As the next turn, once the running one ends.
    FollowUp,
}

/// A queued message, as the queue's snapshot shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueuedText {
    /// The message id it will have.
    pub id: Arc<str>,
    /// Its text.
    pub text: Arc<str>,
}

/// The queue after a change: the steering and follow-up messages waiting,
/// oldest first. Each queue record carries it, so a client that reads one
/// event knows the whole queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSnapshot {
    /// Messages for the running turn's next round boundary.
    pub steering: Vec<QueuedText>,
    /// Messages for the turns after it.
    pub follow_up: Vec<QueuedText>,
}

/// A message queued while a turn runs. Its `chat` entry is written when it
/// is delivered, with the queued item's id. A queued id added again moves
/// the message to the other queue, keeping its place (a steer that came too
/// late becomes a follow-up).
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
    /// The queue after this change.
    #[serde(default)]
    pub queue: QueueSnapshot,
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
    /// The queue after this change.
    #[serde(default)]
    pub queue: QueueSnapshot,
}

impl SessionRecord for QueueRemoved {
    const NAME: &'static str = "queue_removed";
}

/// The digest of the request that sent a message with an idempotency key
/// (see [`Submit`](crate::Submit)'s fields it covers): a submit that
/// reuses the key is a retry only when its request has the same digest.
/// Stored in the thread, since the state is rebuilt from it. A message
/// without one (stored before digests were) takes any retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageKeyed {
    /// The message's id (the one its key gives).
    pub message: Arc<str>,
    /// The request's SHA-256, in hex.
    pub digest: Arc<str>,
}

impl SessionRecord for MessageKeyed {
    const NAME: &'static str = "message_keyed";
}

/// Nothing runs and nothing is queued: the session waits for a message.
/// It names how the session's last turn closed, so that the event of the
/// session's outcome (`session_completed`, `session_failed`) comes from it,
/// once the queued follow-ups have run, rather than after every turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// The session's last turn and how it closed, when one ran (none in
    /// records stored before they said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_turn: Option<LastTurn>,
}

/// How a session's last turn closed, as [`Settled`] says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastTurn {
    /// The turn.
    pub turn: Arc<str>,
    /// True when it ended by one of its own ends (`turn.ended`); false
    /// when it failed, was cancelled or was interrupted.
    pub ended: bool,
    /// Its closing reason as stored (`stop`, `error: ...`, `interrupted`).
    pub reason: String,
}

/// The session is being deleted: written before its files are removed, so
/// that a call racing the deletion finds no session, and a deletion cut
/// short (a crash) is finished by the next recovery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionDeleted {}

impl SessionRecord for SessionDeleted {
    const NAME: &'static str = "session_deleted";
}

impl SessionRecord for Settled {
    const NAME: &'static str = "settled";
}

/// One question of a questionnaire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Question {
    /// A short id to answer it by (`q1`, `scope`...).
    pub id: String,
    /// The question.
    pub question: String,
    /// The choices, if it is a choice; empty for a free-text answer.
    #[serde(default)]
    pub options: Vec<String>,
    /// Whether several choices may be picked.
    #[serde(default)]
    pub multiple: bool,
}

/// The model asked the user something; the call waits for the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionAsked {
    /// The turn asking.
    pub turn: Arc<str>,
    /// The `ask_user` call.
    pub call_id: Arc<str>,
    /// The questions.
    pub questions: Vec<Question>,
}

impl SessionRecord for QuestionAsked {
    const NAME: &'static str = "question_asked";
}

/// The answer to one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuestionReply {
    /// The question's id.
    pub id: String,
    /// The picked choices, or the free text (one item).
    pub values: Vec<String>,
}

/// The user answered a question (or nobody did before the turn stopped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionAnswered {
    /// The turn that asked.
    pub turn: Arc<str>,
    /// The `ask_user` call.
    pub call_id: Arc<str>,
    /// The answers; `None` when the question expired.
    pub answers: Option<Vec<QuestionReply>>,
}

impl SessionRecord for QuestionAnswered {
    const NAME: &'static str = "question_answered";
}

/// How the session's agent works.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    /// Every tool of the session.
    #[default]
    Agent,
    /// Read tools only, and the plan tool: the model investigates and
    /// writes a plan.
    Plan,
}

/// The session switched modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModeChanged {
    /// The new mode.
    pub mode: SessionMode,
    /// True when agent mode starts to carry out the plan.
    #[serde(default)]
    pub executing: bool,
}

impl SessionRecord for ModeChanged {
    const NAME: &'static str = "mode_changed";
}

/// The session's turns run on another model from now on (the turn running
/// meanwhile keeps its own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelChanged {
    /// The model's key, `provider/id`.
    pub model: String,
}

impl SessionRecord for ModelChanged {
    const NAME: &'static str = "model_changed";
}

/// The host's tools (the engine's, beside the session's own: MCP servers'
/// tools) that a turn starts with differ from those of the session's
/// previous turn: written by the turn before its first model call. The
/// first turn of a session that gets host tools writes one too, all of them
/// added.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsChanged {
    /// The turn that first runs with them.
    pub turn: Arc<str>,
    /// The names added, removed and changed.
    #[serde(flatten)]
    pub change: ToolsChange,
    /// Every host tool of the turn, what the next turn compares with.
    pub tools: Vec<HostTool>,
}

impl SessionRecord for ToolsChanged {
    const NAME: &'static str = "tools_changed";
}

/// One host tool a turn got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTool {
    /// Its name.
    pub name: Arc<str>,
    /// A digest of its definition (description, schema, kind): a tool kept
    /// with a new digest changed.
    pub digest: Arc<str>,
}

/// Where a plan step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanStep {
    /// What the step does.
    pub title: String,
    /// Where it stands.
    pub status: StepStatus,
}

/// The model wrote or updated its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanUpdated {
    /// The turn that wrote it.
    pub turn: Arc<str>,
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
}

impl SessionRecord for PlanUpdated {
    const NAME: &'static str = "plan_updated";
}

/// One tool call of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRun {
    /// The tool.
    pub tool: Arc<str>,
    /// The call's id.
    pub call_id: Arc<str>,
    /// SHA-256 of the call's arguments as JSON, hex.
    pub arguments_digest: String,
    /// True when the tool did what was asked.
    pub ok: bool,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
}

/// One file a run changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileChanged {
    /// The path, relative to the workspace.
    pub path: String,
    /// Lines added by the run's patches.
    pub added: u32,
    /// Lines removed by the run's patches.
    pub removed: u32,
}

/// One verification of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerificationRun {
    /// The command.
    pub command: String,
    /// True when it passed.
    pub ok: bool,
    /// Which verification of the turn.
    pub attempt: u32,
}

/// What one run (a prompt and the turn it caused) did: the tools it ran,
/// the files it changed, its verifications, its tokens and cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenance {
    /// The run's id: its turn's id.
    pub run_id: Arc<str>,
    /// The message it answered, if a message started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<Arc<str>>,
    /// When it started and ended (Unix ms).
    pub started_at: i64,
    /// When it ended (Unix ms).
    pub ended_at: i64,
    /// How it ended (`stop`, `error: ...`, ...).
    pub outcome: String,
    /// The tool calls, in order.
    pub tools: Vec<ToolRun>,
    /// The files its patches changed, and any other file the working tree
    /// shows changed after it (with no line counts).
    pub files: Vec<FileChanged>,
    /// `git status --porcelain` before the run, when the workspace is a git
    /// work tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_before: Option<String>,
    /// `git status --porcelain` after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_after: Option<String>,
    /// Its verifications.
    pub verification: Vec<VerificationRun>,
    /// Tokens and cost over its model calls.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub usage: roundtable_providers::Usage,
}

impl SessionRecord for Provenance {
    const NAME: &'static str = "provenance";
}

/// The tool name of a workflow phase's gate in its approval request and
/// decision: the gate is decided like a gated call
/// ([`SessionEngine::decide`](crate::SessionEngine::decide) with the
/// request's call id), from any process.
pub const PHASE_GATE_TOOL: &str = "workflow_phase_gate";

/// A workflow phase started: its skills are staged and its prompt is
/// submitted as the message of `turn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseStarted {
    /// The workflow's name.
    pub workflow: Arc<str>,
    /// The phase's name.
    pub phase: Arc<str>,
    /// Its position in the workflow (0 for the first).
    pub index: u32,
    /// Which attempt at the phase this is (1 for the first; a failed phase
    /// run again is the next).
    pub attempt: u32,
    /// The turn that runs it.
    pub turn: Arc<str>,
    /// The message carrying its prompt.
    pub message_id: Arc<str>,
    /// The skills staged for it, primary first.
    pub skills: Vec<String>,
}

impl SessionRecord for PhaseStarted {
    const NAME: &'static str = "phase_started";
}

/// A workflow phase's turn finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseCompleted {
    /// The workflow's name.
    pub workflow: Arc<str>,
    /// The phase's name.
    pub phase: Arc<str>,
    /// Which attempt completed.
    pub attempt: u32,
    /// The turn that ran it.
    pub turn: Arc<str>,
    /// How the turn finished (`stop`, ...).
    pub finish_reason: String,
}

impl SessionRecord for PhaseCompleted {
    const NAME: &'static str = "phase_completed";
}

/// A workflow phase failed, and the workflow stopped there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseFailed {
    /// The workflow's name.
    pub workflow: Arc<str>,
    /// The phase's name.
    pub phase: Arc<str>,
    /// Which attempt failed.
    pub attempt: u32,
    /// The turn that ran it, when it got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Arc<str>>,
    /// Why: the turn's failure, a denied gate, a workspace that could not
    /// be prepared.
    pub reason: String,
    /// True when a restart interrupted its turn: the phase is run again
    /// (next attempt) when the workflow resumes.
    #[serde(default)]
    pub interrupted: bool,
}

impl SessionRecord for PhaseFailed {
    const NAME: &'static str = "phase_failed";
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
        assert!(CancelRequested::is_signal_of(&body));
        assert!(!Verification::is_signal_of(&body));
        assert_eq!(
            CancelRequested::from_body(&EntryBody::chat("signal.cancel_requested")),
            None
        );
    }
}
