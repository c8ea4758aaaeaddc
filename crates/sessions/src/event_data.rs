//! The data of every session event, one type per event type: the one
//! definition both the event view (which writes them) and clients such as
//! the server's chat view (which read them) use, so that the compiler, not
//! a string key, checks that they agree. Serialised with its `type` beside
//! its `data`, as the event's envelope holds them.

use std::sync::Arc;

use roundtable_chat_runner::CompactionReason;
use roundtable_chat_runner::lifecycle::records::ApprovalVerdict;
use roundtable_providers::{AssistantMessage, JsonObject, StopReason, Usage};
use roundtable_tools::ToolsChange;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::records::{
    ModeChanged, ModelChanged, PhaseCompleted, PhaseFailed, PhaseStarted, PlanStep, Provenance,
    Question, QuestionReply, QueueExit, QueueMode, QueuedText, SessionCreated, Verification,
};

/// What happened and its details: an event's `type` and `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum EventData {
    /// The session was created, with its settings.
    SessionCreated(#[schemars(with = "Map<String, Value>")] SessionCreated),
    /// A message joined the conversation.
    MessageAdded(MessageAdded),
    /// A turn started.
    TurnStarted(TurnStart),
    /// A piece of the assistant's text.
    ModelOutputDelta(TextDelta),
    /// A piece of the assistant's reasoning.
    ModelThinkingDelta(TextDelta),
    /// An assistant message is complete.
    ModelOutputCompleted(ModelOutput),
    /// The model called a tool.
    ToolCallStarted(ToolCallStart),
    /// A tool call has its result.
    ToolCallCompleted(ToolCallEnd),
    /// A patch was reviewed automatically before it applied.
    PatchReviewed(PatchReview),
    /// A gated call waits for a decision.
    ApprovalRequested(ApprovalRequest),
    /// A gated call was approved.
    ApprovalGranted(ApprovalDecision),
    /// A gated call was denied (or its approval expired).
    ApprovalDenied(ApprovalDecision),
    /// A model call failed before its response started and is retried.
    Retry(RetryWait),
    /// A caller asked to cancel the running turn.
    CancelRequested(CancelRequest),
    /// A verification command finished.
    VerificationCompleted(Verification),
    /// The queue changed.
    QueueUpdated(QueueUpdate),
    /// Nothing runs and nothing is queued.
    Settled(NoData),
    /// The model asked the user; the call waits for answers.
    QuestionAsked(QuestionAsk),
    /// The user answered (or the question expired).
    QuestionAnswered(QuestionAnswer),
    /// The session switched between agent and plan mode.
    ModeChanged(ModeChanged),
    /// The session's turns run on another model from now on.
    ModelChanged(ModelChanged),
    /// The plan was written or updated.
    PlanUpdated(PlanUpdate),
    /// The host's tools changed since the session's previous turn.
    ToolsChanged(#[schemars(with = "Map<String, Value>")] ToolsChange),
    /// A run ended; its provenance is stored.
    ProvenanceRecorded(#[schemars(with = "Map<String, Value>")] Provenance),
    /// The conversation is being compacted.
    CompactionStarted(CompactionStart),
    /// A compaction ended.
    CompactionEnded(CompactionEnd),
    /// A workflow phase started.
    PhaseStarted(PhaseStarted),
    /// A workflow phase's turn finished.
    PhaseCompleted(PhaseCompleted),
    /// A workflow phase failed and its workflow stopped.
    PhaseFailed(PhaseFailed),
    /// A turn finished by one of its own ends.
    TurnCompleted(Finish),
    /// A turn failed, was cancelled or was interrupted.
    TurnFailed(Failure),
    /// The session has nothing left to run and its last turn finished.
    SessionCompleted(Finish),
    /// The session has nothing left to run and its last turn failed, or a
    /// turn was interrupted.
    SessionFailed(Failure),
    /// A turn was cancelled: the session stops there.
    SessionCanceled(Failure),
}

/// The data of an event that carries none: `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NoData {}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A person, or another bot.
    User,
    /// The session's agent.
    Assistant,
}

/// One part of a message or of a tool's result, as the spec has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Text.
    Text {
        /// The text.
        text: Arc<str>,
    },
    /// An image: a stored file's `ref`, a tool's inline `data` (base64),
    /// or only its type for a block of a message.
    Image {
        /// The stored file holding it.
        #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
        reference: Option<Arc<str>>,
        /// Its MIME type.
        mime_type: Arc<str>,
        /// The image in base64, for a tool's image.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<Arc<str>>,
    },
    /// An audio file.
    Audio {
        /// The stored file holding it.
        #[serde(rename = "ref")]
        reference: Arc<str>,
        /// Its MIME type.
        mime_type: Arc<str>,
    },
    /// Any other file.
    File {
        /// The stored file holding it.
        #[serde(rename = "ref")]
        reference: Arc<str>,
        /// Its MIME type.
        mime_type: Arc<str>,
    },
}

/// The spec's message object: its id is the one `POST .../messages`
/// answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// The message's id.
    pub id: Arc<str>,
    /// Who wrote it.
    pub role: Role,
    /// What it says.
    pub parts: Vec<Part>,
    /// When it was written (RFC 3339).
    pub created_at: String,
}

/// `message_added`: the flat fields beside the spec's message object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MessageAdded {
    /// The message's id.
    pub message_id: Arc<str>,
    /// Who wrote it.
    pub role: Role,
    /// Its author's name.
    pub author: Arc<str>,
    /// What it says.
    pub parts: Vec<Part>,
    /// The message itself.
    pub message: Message,
}

/// `turn_started`: what woke the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnStart {
    /// The seq of the entry that woke it, if one did.
    pub trigger_seq: Option<u64>,
    /// Why it woke, if known.
    pub reason: Option<Box<str>>,
}

/// A streamed piece of text or reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TextDelta {
    /// The piece.
    pub text: Arc<str>,
}

/// `model_output_completed`: the whole assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelOutput {
    /// Why the model stopped.
    #[schemars(with = "String")]
    pub stop_reason: StopReason,
    /// What the call used.
    #[schemars(with = "Map<String, Value>")]
    pub usage: Usage,
    /// The message (its text is in its `text` blocks).
    #[schemars(with = "Map<String, Value>")]
    pub message: Arc<AssistantMessage>,
}

/// A tool call as the spec names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallRef {
    /// The call's id.
    pub id: Arc<str>,
    /// The tool's name.
    pub name: Arc<str>,
    /// The call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub input: Option<JsonObject>,
}

/// `tool_call_started`: the flat fields beside the spec's `tool_call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallStart {
    /// The tool's name.
    pub tool: Arc<str>,
    /// The call's id.
    pub tool_call_id: Arc<str>,
    /// The call's arguments.
    #[schemars(with = "Map<String, Value>")]
    pub input: JsonObject,
    /// The call.
    pub tool_call: ToolCallRef,
}

/// A tool's result as the spec names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResultRef {
    /// The call's id.
    pub id: Arc<str>,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// What it returned.
    pub parts: Vec<Part>,
}

/// `tool_call_completed`: the flat fields beside the spec's `tool_call`
/// and `tool_result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallEnd {
    /// The tool's name.
    pub tool: Arc<str>,
    /// The call's id.
    pub tool_call_id: Arc<str>,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// Its text output, blocks joined by newlines.
    pub output: String,
    /// Its structured details for hosts, if any.
    pub details: Option<Value>,
    /// The call.
    pub tool_call: ToolCallRef,
    /// The result.
    pub tool_result: ToolResultRef,
}

/// `patch_reviewed`: the review the tool stored (`mode`, `diff`,
/// `preview`, `applied`...) and the call it is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PatchReview {
    /// The review's fields.
    #[serde(flatten)]
    pub review: Map<String, Value>,
    /// The call's id.
    pub tool_call_id: Arc<str>,
}

/// `approval_requested`: the gated call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRequest {
    /// The tool's name.
    pub tool: Arc<str>,
    /// The call's id.
    pub tool_call_id: Arc<str>,
    /// The call's arguments.
    #[schemars(with = "Map<String, Value>")]
    pub input: JsonObject,
}

/// What an approval covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This call.
    Call,
    /// Every call of the tool in the session.
    Session,
    /// Nothing: the approval expired.
    Expired,
}

/// `approval_granted` and `approval_denied`: the decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalDecision {
    /// The tool's name.
    pub tool: Arc<str>,
    /// The call's id.
    pub tool_call_id: Arc<str>,
    /// What was decided.
    #[schemars(with = "String")]
    pub verdict: ApprovalVerdict,
    /// What it covers.
    pub scope: ApprovalScope,
    /// Why, if the decider said.
    pub reason: Option<String>,
}

/// `retry`: the failed attempt and the wait before the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RetryWait {
    /// The turn's model round.
    pub round: u32,
    /// The attempt that failed.
    pub attempt: u32,
    /// How many attempts are allowed.
    pub max_attempts: u32,
    /// The wait before the next.
    pub delay_ms: u64,
    /// Why it failed.
    pub error: String,
}

/// `cancel_requested`: why, if the caller said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CancelRequest {
    /// Why.
    pub reason: Option<String>,
}

/// How a queue changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueChangeKind {
    /// A message joined it.
    Added,
    /// A message left it to join the conversation.
    Delivered,
    /// A caller removed a message.
    Removed,
    /// A caller cleared it.
    Cleared,
}

impl From<QueueExit> for QueueChangeKind {
    fn from(exit: QueueExit) -> Self {
        match exit {
            QueueExit::Delivered => Self::Delivered,
            QueueExit::Removed => Self::Removed,
            QueueExit::Cleared => Self::Cleared,
        }
    }
}

/// `queue_updated`: the change and the whole queue after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueueUpdate {
    /// How it changed.
    pub change: QueueChangeKind,
    /// The message that joined or left.
    pub message_id: Arc<str>,
    /// Where a message that joined waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<QueueMode>,
    /// The steering messages.
    pub steering: Vec<QueuedText>,
    /// The follow-ups.
    pub follow_up: Vec<QueuedText>,
}

/// `question_asked`: the questions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuestionAsk {
    /// The `ask_user` call's id.
    pub tool_call_id: Arc<str>,
    /// What it asks.
    pub questions: Vec<Question>,
}

/// `question_answered`: the answers, or none when it expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuestionAnswer {
    /// The `ask_user` call's id.
    pub tool_call_id: Arc<str>,
    /// The answers.
    pub answers: Option<Vec<QuestionReply>>,
    /// Whether the question expired unanswered.
    pub expired: bool,
}

/// `plan_updated`: the steps and how many are done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanUpdate {
    /// The steps.
    pub steps: Vec<PlanStep>,
    /// How many are completed.
    pub completed: usize,
    /// How many there are.
    pub total: usize,
}

/// `compaction_started`: why, and the conversation's size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CompactionStart {
    /// Why.
    #[schemars(with = "String")]
    pub reason: CompactionReason,
    /// The conversation's tokens before.
    pub tokens_before: u64,
}

/// `compaction_ended`: how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CompactionEnd {
    /// Why it ran.
    #[schemars(with = "String")]
    pub reason: CompactionReason,
    /// The last entry the summary covers, when it was written.
    pub covers_seq: Option<u64>,
    /// The conversation's tokens after, when known.
    pub tokens_after: Option<u64>,
    /// Whether it was cancelled.
    pub aborted: bool,
    /// Whether the turn retries its request after it.
    pub will_retry: bool,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// `turn_completed` and `session_completed`: how the turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Finish {
    /// The turn's end (`stop`, ...).
    pub finish_reason: String,
}

/// `turn_failed`, `session_failed` and `session_canceled`: how the turn
/// failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Failure {
    /// The model's finish reason, if the failure has one.
    pub finish_reason: Option<String>,
    /// Whether the turn was interrupted (its process went away).
    pub interrupted: bool,
    /// The error, if any.
    pub error: Option<String>,
    /// The whole reason, as stored.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::EventData;

    /// Each event type in the schema of [`EventData`] and its data's
    /// fields, when the schema lists them.
    fn schema_rows() -> Vec<(String, Vec<String>)> {
        let schema = serde_json::to_value(schemars::schema_for!(EventData)).unwrap();
        let defs = &schema["$defs"];
        let variants = schema["oneOf"].as_array().cloned().unwrap_or_default();
        variants
            .iter()
            .map(|variant| {
                let tag = &variant["properties"]["type"];
                let name = tag["const"]
                    .as_str()
                    .or(tag["enum"][0].as_str())
                    .unwrap()
                    .to_string();
                let data = &variant["properties"]["data"];
                let def = data["$ref"]
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .map_or(data, |name| &defs[name]);
                let fields = def["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                (name, fields)
            })
            .collect()
    }

    /// The rows of the README's event table: `| \`type\` | fields |`.
    fn readme_rows() -> Vec<(String, Vec<String>)> {
        let readme = include_str!("../README.md");
        let table = readme.split("<!-- events -->").nth(1).unwrap_or_default();
        table
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .map(|line| {
                let (name, rest) = line.split_once('`').unwrap();
                let fields = rest
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect();
                (name.to_string(), fields)
            })
            .collect()
    }

    #[test]
    fn the_readme_lists_every_event_and_its_data_fields() {
        let expected = schema_rows();
        let table: Vec<String> = expected
            .iter()
            .map(|(name, fields)| {
                let fields: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
                format!("| `{name}` | {} |", fields.join(", "))
            })
            .collect();
        let rows = readme_rows();
        let names = |rows: &[(String, Vec<String>)]| -> Vec<String> {
            rows.iter().map(|(n, _)| n.clone()).collect()
        };
        assert_eq!(names(&rows), names(&expected), "{}", table.join("\n"));
        for ((name, fields), (_, listed)) in expected.iter().zip(&rows) {
            // Records the schema leaves open list their fields by hand.
            if !fields.is_empty() {
                assert_eq!(listed, fields, "{name}:\n{}", table.join("\n"));
            }
        }
    }
}
