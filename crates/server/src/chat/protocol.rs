//! The wire format of `/api/chat`: the NDJSON stream's events (one JSON
//! object per line, tagged by `type`) and the chat messages they build.
//! Every field is camelCase, as the chat clients of the spec read them.
//! This module is the one place these shapes are defined.

use std::borrow::Cow;
use std::sync::Arc;

use roundtable_sessions::records::{PlanStep, Question};
use roundtable_sessions::{QuestionReply, SessionMode};
use roundtable_skills::SkillDiagnostic;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// The content type of the stream.
pub(crate) const NDJSON: &str = "application/x-ndjson";

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub(crate) enum ChatStreamEvent {
    /// An assistant turn starts (one per turn the stream shows).
    Start {
        /// The assistant message's id (the turn's id).
        id: Arc<str>,
        /// The run: the turn's id, as `/api/chat/provenance` names it.
        run_id: Arc<str>,
        /// The session.
        #[serde(flatten)]
        session: StreamSession,
        /// What the session's agent setup found wrong as it loaded (the
        /// shape `/api/chat/resources` gives): on the stream's first
        /// `start` only, and only when there is something.
        #[serde(skip_serializing_if = "Option::is_none")]
        diagnostics: Option<Vec<SkillDiagnostic>>,
    },
    /// A piece of the assistant's text.
    Delta {
        /// The text.
        text: Arc<str>,
        /// The assistant message it belongs to.
        message_id: Arc<str>,
    },
    /// The model's reasoning, one block at a time.
    Thinking {
        /// The text.
        text: Arc<str>,
        /// The assistant message it belongs to.
        message_id: Arc<str>,
    },
    /// A tool call changed state.
    Tool {
        /// The call as it stands now.
        part: Box<ToolPart>,
        /// The assistant message it belongs to.
        message_id: Arc<str>,
    },
    /// The session's mode and plan after a change.
    Plan(PlanView),
    /// A lifecycle signal.
    State {
        /// What happened.
        state: StateSignal,
    },
    /// The queue after a change.
    Queue(QueueView),
    /// The conversation is being compacted (`start`), or was (`end`).
    Compaction(CompactionView),
    /// The model provider retries a failed call (`start`, before the
    /// wait), or a retried call went through or gave up (`end`).
    Retry(RetryView),
    /// A turn ended: its whole message.
    Done {
        /// The run (the turn's id).
        run_id: Arc<str>,
        /// The assistant message the turn wrote.
        message: ChatMessage,
        /// The session.
        #[serde(flatten)]
        session: StreamSession,
        /// How it ended (`stop`, `aborted`, `error`, ...).
        finish_reason: Arc<str>,
    },
    /// A turn failed, or the stream cannot go on.
    Error {
        /// What went wrong.
        message: String,
        /// The run it concerns, if one.
        #[serde(skip_serializing_if = "Option::is_none")]
        run_id: Option<Arc<str>>,
    },
}

/// The session a stream's `start` and `done` are about.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StreamSession {
    /// Its id.
    pub(crate) session_id: Arc<str>,
    /// The absolute path of its thread file, when the engine's store keeps
    /// threads in files (a client may name the session by it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_file: Option<Arc<str>>,
    /// True when the request named a session the caller cannot continue
    /// (unknown, removed, another user's) and this one was started in its
    /// place; left out otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) session_reset: bool,
}

#[cfg(test)]
impl StreamSession {
    /// Session `id`, with no file and not reset.
    pub(crate) fn id(id: impl Into<Arc<str>>) -> Self {
        Self {
            session_id: id.into(),
            session_file: None,
            session_reset: false,
        }
    }
}

/// A lifecycle signal of the `state` event.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StateSignal {
    /// `agent_start` and `agent_end` (a run's first and last signal),
    /// `turn_start`, `turn_end`, `abort_requested`, `verification`,
    /// `settled`; for a workflow's run, `phase_start`, `phase_end`,
    /// `phase_failed` and, last, `workflow_end`.
    pub(crate) name: &'static str,
    /// The workflow's phase it concerns (`phase_*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) phase: Option<Arc<str>>,
    /// The turn it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) turn_id: Option<Arc<str>>,
    /// Details, per signal (a verification's command and result).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<Value>,
}

/// The `plan` event: the mode and the plan's progress.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlanView {
    /// `agent` or `plan`.
    pub(crate) mode: SessionMode,
    /// True while agent mode carries the plan out.
    pub(crate) executing: bool,
    /// Steps done.
    pub(crate) completed: usize,
    /// Steps in all.
    pub(crate) total: usize,
    /// The steps.
    pub(crate) state: PlanSteps,
}

/// The steps of a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct PlanSteps {
    /// In order, each with its status.
    pub(crate) steps: Vec<PlanStep>,
}

/// The `queue` event: the messages waiting, after a change.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QueueView {
    /// The texts of the messages for the running turn's next round
    /// boundary, oldest first (the spec's `steering: string[]`).
    pub(crate) steering: Vec<Arc<str>>,
    /// The texts of the messages for the turns after it, oldest first
    /// (the spec's `followUp: string[]`).
    pub(crate) follow_up: Vec<Arc<str>>,
    /// The message ids of `steering`, in the same order.
    pub(crate) steering_ids: Vec<Arc<str>>,
    /// The message ids of `follow_up`, in the same order.
    pub(crate) follow_up_ids: Vec<Arc<str>>,
    /// What changed: `added`, `delivered`, `removed` or `cleared`.
    pub(crate) change: Value,
    /// The message that changed.
    pub(crate) message_id: Value,
}

/// The `compaction` event.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CompactionView {
    /// `start` or `end`.
    pub(crate) phase: &'static str,
    /// Why: `threshold` (the request neared the context window),
    /// `overflow` (the model refused it as too large) or `manual`.
    pub(crate) reason: Value,
    /// The estimated tokens of the request before compacting (`start`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens_before: Option<u64>,
    /// The estimated tokens after (`end`, when a summary was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens_after: Option<u64>,
    /// It was cancelled (`end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) aborted: Option<bool>,
    /// The overflowed request is sent again (`end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) will_retry: Option<bool>,
    /// What went wrong (`end`, when no summary was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error_message: Option<String>,
}

/// The `retry` event.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RetryView {
    /// `start` or `end`.
    pub(crate) phase: &'static str,
    /// Which attempt (1 for the first retry).
    pub(crate) attempt: u64,
    /// The most attempts the provider makes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_attempts: Option<u64>,
    /// How long it waits before the attempt, in milliseconds (`start`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) delay_ms: Option<u64>,
    /// Why the call failed (`start`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error_message: Option<String>,
    /// Whether the retried call went through (`end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) success: Option<bool>,
}

/// A chat message: a user's, or the one an assistant turn wrote.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatMessage {
    /// The message's id (a user message's id, or the turn's id).
    pub(crate) id: Arc<str>,
    /// `user` or `assistant`.
    pub(crate) role: &'static str,
    /// Who wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) author: Option<Arc<str>>,
    /// Its parts, in order.
    pub(crate) parts: Vec<MessagePart>,
    /// When it was written (RFC 3339).
    pub(crate) created_at: Arc<str>,
}

/// One part of a chat message, tagged by `type`: `text`, `thinking`,
/// `file`, or `tool-<toolName>` for a tool call (the spec's convention).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MessagePart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's reasoning.
    Thinking {
        /// The text.
        text: String,
    },
    /// A file the message refers to (an attachment of the session).
    File {
        /// Its reference in the session (written as `ref`).
        reference: Value,
        /// Its media type.
        mime_type: Value,
    },
    /// A tool call, as it stands.
    Tool(Box<ToolPart>),
}

/// The parts other than tool calls, as they are written.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
enum TaggedPart<'a> {
    Text {
        text: &'a str,
    },
    Thinking {
        text: &'a str,
    },
    File {
        #[serde(rename = "ref")]
        reference: &'a Value,
        mime_type: &'a Value,
    },
}

impl Serialize for MessagePart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text { text } => TaggedPart::Text { text }.serialize(serializer),
            Self::Thinking { text } => TaggedPart::Thinking { text }.serialize(serializer),
            Self::File {
                reference,
                mime_type,
            } => TaggedPart::File {
                reference,
                mime_type,
            }
            .serialize(serializer),
            // A tool part names its own type (`tool-<toolName>`).
            Self::Tool(part) => part.serialize(serializer),
        }
    }
}

/// A part is one of the tagged ones, or a tool call.
impl JsonSchema for MessagePart {
    fn schema_name() -> Cow<'static, str> {
        "MessagePart".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let tagged = generator.subschema_for::<TaggedPart<'static>>();
        let tool = generator.subschema_for::<ToolPart>();
        json_schema!({
            "description": "One part of a chat message: `text`, `thinking`, `file`, or a tool call (`tool-<toolName>`).",
            "oneOf": [tagged, tool],
        })
    }
}

/// A tool call as it stands: the spec's `ChatToolPart`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolPart {
    /// `tool-<toolName>`, the part's type in a message (see [`Self::new`]).
    #[serde(rename = "type")]
    pub(crate) kind: Arc<str>,
    /// The call's id.
    pub(crate) tool_call_id: Arc<str>,
    /// The tool.
    pub(crate) tool_name: Arc<str>,
    /// Where the call stands.
    pub(crate) state: ToolState,
    /// The call's arguments.
    pub(crate) input: Value,
    /// What the tool answered (`output-available`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) output: Option<Value>,
    /// Structured details of the result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) details: Option<Value>,
    /// What went wrong (`output-error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error_text: Option<String>,
    /// The approval, once one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<ToolApproval>,
    /// The questions of an `ask_user` call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) questions: Option<Vec<Question>>,
    /// The answers to them, once given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) answers: Option<Vec<QuestionReply>>,
}

impl ToolPart {
    /// Call `tool_call_id` of `tool_name` with `input`, `pending`: typed
    /// `tool-<toolName>`, as the spec's clients tell tool parts apart.
    pub(crate) fn new(tool_call_id: &str, tool_name: &str, input: Value) -> Self {
        Self {
            kind: Arc::from(format!("tool-{tool_name}")),
            tool_call_id: Arc::from(tool_call_id),
            tool_name: Arc::from(tool_name),
            state: ToolState::Pending,
            input,
            output: None,
            details: None,
            error_text: None,
            approval: None,
            questions: None,
            answers: None,
        }
    }
}

/// Where a tool call stands: `pending`, then `output-available` or
/// `output-error`, with the approval and question states between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ToolState {
    /// The model called the tool; it runs (or waits for its approval).
    Pending,
    /// The call waits for a human's decision.
    ApprovalRequested,
    /// The call was approved and runs.
    ApprovalResponded,
    /// The call was denied (or its approval expired): it never ran.
    OutputDenied,
    /// The call waits for the user's answers (`ask_user`).
    QuestionRequested,
    /// The user answered; the tool hands the answers to the model.
    QuestionAnswered,
    /// The tool answered.
    OutputAvailable,
    /// The tool failed.
    OutputError,
}

/// A call's approval.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolApproval {
    /// `None` while the decision is pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approved: Option<bool>,
    /// `call`, `session` (every later call of the tool too) or `expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) scope: Option<Value>,
    /// Why, if the decider said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<Value>,
}

/// One line of the stream: `event` as JSON and a newline.
pub(crate) fn line(event: &ChatStreamEvent) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(event).unwrap_or_else(|error| {
        // Every field serialises (strings, numbers, JSON values); this is
        // only reached if that ever changes.
        let fallback = ChatStreamEvent::Error {
            message: format!("an event could not be written: {error}"),
            run_id: None,
        };
        serde_json::to_vec(&fallback).unwrap_or_default()
    });
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn events_are_tagged_camel_case_lines() {
        let event = ChatStreamEvent::Delta {
            text: "Hi".into(),
            message_id: "turn_1".into(),
        };
        let bytes = line(&event);
        assert_eq!(bytes.last(), Some(&b'\n'));
        let json: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "delta", "text": "Hi", "messageId": "turn_1"})
        );
        let done = ChatStreamEvent::Done {
            run_id: "turn_1".into(),
            message: ChatMessage {
                id: "turn_1".into(),
                role: "assistant",
                author: None,
                parts: vec![MessagePart::Text { text: "Hi".into() }],
                created_at: "2025-01-01T00:00:00.000Z".into(),
            },
            session: StreamSession::id("sess_1"),
            finish_reason: "stop".into(),
        };
        let json: Value = serde_json::from_slice(&line(&done)).unwrap();
        assert_eq!(json["type"], "done");
        assert_eq!(json["runId"], "turn_1");
        assert_eq!(json["sessionId"], "sess_1");
        assert!(json.get("sessionFile").is_none() && json.get("sessionReset").is_none());
        assert_eq!(json["message"]["parts"][0]["type"], "text");
        assert_eq!(json["message"]["createdAt"], "2025-01-01T00:00:00.000Z");
        let start = ChatStreamEvent::Start {
            id: "turn_1".into(),
            run_id: "turn_1".into(),
            session: StreamSession {
                session_id: "sess_1".into(),
                session_file: Some("/data/sess_1.jsonl".into()),
                session_reset: true,
            },
            diagnostics: Some(vec![SkillDiagnostic::warning("/ws/AGENTS.md", "cut")]),
        };
        let json: Value = serde_json::from_slice(&line(&start)).unwrap();
        assert_eq!(json["sessionFile"], "/data/sess_1.jsonl");
        assert_eq!(json["sessionReset"], true);
        assert_eq!(json["diagnostics"][0]["kind"], "warning");
    }

    #[test]
    fn tool_parts_carry_their_state_in_kebab_case() {
        let part = ToolPart {
            state: ToolState::ApprovalRequested,
            approval: Some(ToolApproval {
                approved: None,
                scope: None,
                reason: None,
            }),
            ..ToolPart::new("c1", "shell", serde_json::json!({"command": "ls"}))
        };
        let json = serde_json::to_value(MessagePart::Tool(Box::new(part))).unwrap();
        assert_eq!(json["type"], "tool-shell");
        assert_eq!(json["toolName"], "shell");
        assert_eq!(json["state"], "approval-requested");
        assert_eq!(json["toolCallId"], "c1");
        assert_eq!(json["approval"], serde_json::json!({}));
        assert!(json.get("output").is_none());
    }
}
