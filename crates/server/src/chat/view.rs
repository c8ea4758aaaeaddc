//! The chat view of a session: its events (`SessionEvent`, each from one
//! stored entry) turned into the NDJSON events of `/api/chat` and into the
//! assistant messages the turns wrote. Pure: it holds only what one
//! stream (or one transcript) has seen, so the same events always give the
//! same lines.
//!
//! | session event | chat event |
//! | --- | --- |
//! | `turn_started` | `start`, `state` `agent_start`, `state` `turn_start` |
//! | `model_output_delta` | `delta` |
//! | `model_thinking_delta` | `thinking` |
//! | `model_output_completed` | what the deltas did not carry: `delta` for text, `thinking` per reasoning block when none was streamed |
//! | `tool_call_started` | `tool` `pending` (a part typed `tool-<toolName>`) |
//! | `approval_requested` / `_granted` / `_denied` | `tool` `approval-requested` / `approval-responded` / `output-denied` |
//! | `question_asked` / `_answered` | `tool` `question-requested` / `question-answered` |
//! | `tool_call_completed` | `tool` `output-available` or `output-error` |
//! | `plan_updated`, `mode_changed` | `plan` |
//! | `queue_updated` | `queue` (the texts in `steering` and `followUp`, their ids in `steeringIds` and `followUpIds`) |
//! | `retry` | `retry` `start`; the next output of the turn gives `retry` `end` |
//! | `compaction_started` / `_ended` | `compaction` `start` / `end` |
//! | `turn_completed` | `state` `turn_end`, `state` `agent_end`, `done` |
//! | `turn_failed` | `error` (not for an abort), `state` `turn_end`, `state` `agent_end`, `done` |
//! | `cancel_requested`, `verification_completed`, `settled` | `state` |
//! | `phase_started` / `_completed` / `_failed` (a workflow's) | `state` `phase_start` / `phase_end` / `phase_failed`, with the phase's name |

use std::collections::HashMap;
use std::sync::Arc;

use roundtable_providers::{AssistantBlock, AssistantMessage, JsonObject};
use roundtable_sessions::event_data::{CompactionEnd, CompactionStart, Part, QueueUpdate, Role};
use roundtable_sessions::records::{PlanStep, QueuedText, StepStatus};
use roundtable_sessions::state::PlanState;
use roundtable_sessions::{EventData, EventType, SessionEvent, SessionMode};
use roundtable_thread_stream::{ChunkKind, FinishReason};
use serde_json::{Value, json};

use super::protocol::{
    ChatMessage, ChatStreamEvent, CompactionView, MessagePart, PlanSteps, PlanView, QueueView,
    RetryView, StateSignal, StreamSession, ToolApproval, ToolPart, ToolState,
};

/// What one stream or transcript has seen of a session.
#[derive(Debug)]
pub(crate) struct ChatView {
    session: StreamSession,
    mode: SessionMode,
    executing: bool,
    steps: Vec<PlanStep>,
    turns: HashMap<Arc<str>, TurnParts>,
    /// The turn whose model call is being retried, and the attempt.
    retrying: Option<(Arc<str>, u64)>,
}

/// An assistant turn's message, as it builds up.
#[derive(Debug)]
struct TurnParts {
    created_at: Arc<str>,
    parts: Vec<MessagePart>,
    /// Where the model round being streamed starts in `parts`.
    round_start: usize,
    /// The text the round's deltas gave so far.
    round_text: String,
    /// The reasoning the round's deltas gave so far.
    round_thinking: String,
    /// Tool call id -> index in `parts`.
    tools: HashMap<Arc<str>, usize>,
}

impl TurnParts {
    fn new(ts: &str) -> Self {
        Self {
            created_at: Arc::from(ts),
            parts: Vec::new(),
            round_start: 0,
            round_text: String::new(),
            round_thinking: String::new(),
            tools: HashMap::new(),
        }
    }
}

impl ChatView {
    /// The view of `session`, whose mode and plan are `mode` and `plan`
    /// before the first event it is given.
    pub(crate) fn new(session: StreamSession, mode: SessionMode, plan: Option<&PlanState>) -> Self {
        Self {
            session,
            mode,
            executing: plan.is_some_and(|p| p.executing),
            steps: plan.map(|p| p.steps.clone()).unwrap_or_default(),
            turns: HashMap::new(),
            retrying: None,
        }
    }

    /// The chat events of `event`, in order (none when its data does not
    /// read as its type's).
    pub(crate) fn apply(&mut self, event: &SessionEvent) -> Vec<ChatStreamEvent> {
        match event.payload() {
            Ok(data) => self.apply_data(event, &data),
            Err(error) => {
                tracing::warn!(%error, kind = ?event.kind, "an event's data is not its type's");
                Vec::new()
            }
        }
    }

    /// The events of a turn's message and of its start and end; the others
    /// go on to [`Self::signal_event`].
    fn apply_data(&mut self, event: &SessionEvent, data: &EventData) -> Vec<ChatStreamEvent> {
        let mut out = Vec::new();
        let turn = event.turn_id.clone();
        match data {
            EventData::TurnStarted(_) => {
                if let Some(turn) = turn {
                    self.start(&turn, &event.ts, &mut out);
                }
            }
            EventData::ModelOutputDelta(delta) | EventData::ModelThinkingDelta(delta) => {
                let kind = match data {
                    EventData::ModelThinkingDelta(_) => ChunkKind::Thinking,
                    _ => ChunkKind::Text,
                };
                if let Some(turn) = turn {
                    self.end_retry(&turn, true, &mut out);
                    self.delta(&turn, &event.ts, kind, &delta.text, &mut out);
                }
            }
            EventData::ModelOutputCompleted(output) => {
                if let Some(turn) = turn {
                    self.end_retry(&turn, true, &mut out);
                    self.completed(&turn, &event.ts, &output.message, &mut out);
                }
            }
            EventData::TurnCompleted(finish) => {
                if let Some(turn) = turn {
                    self.end_retry(&turn, true, &mut out);
                    let reason = Arc::from(finish.finish_reason.as_str());
                    self.finish(&event.ts, &turn, reason, None, &mut out);
                }
            }
            EventData::TurnFailed(failure) => {
                if let Some(turn) = turn {
                    self.end_retry(&turn, false, &mut out);
                    let reason: Arc<str> =
                        Arc::from(failure.finish_reason.as_deref().unwrap_or("error"));
                    let error = (*reason != *FinishReason::Aborted.as_str())
                        .then(|| failure.error.as_deref().unwrap_or(&failure.reason));
                    self.finish(&event.ts, &turn, reason, error, &mut out);
                }
            }
            _ => self.signal_event(event, data, &mut out),
        }
        out
    }

    /// The events beside a turn's message: plan, queue, retry, compaction,
    /// state and phase signals; the others go on to [`Self::tool_event`].
    fn signal_event(
        &mut self,
        event: &SessionEvent,
        data: &EventData,
        out: &mut Vec<ChatStreamEvent>,
    ) {
        let turn = event.turn_id.clone();
        match data {
            EventData::PlanUpdated(plan) => {
                self.steps = plan.steps.clone();
                out.push(self.plan_event());
            }
            EventData::ModeChanged(changed) => {
                self.mode = changed.mode;
                self.executing = changed.executing;
                out.push(self.plan_event());
            }
            EventData::QueueUpdated(queue) => out.push(queue_event(queue)),
            EventData::Retry(retry) => {
                let attempt = u64::from(retry.attempt);
                if let Some(turn) = &turn {
                    self.retrying = Some((turn.clone(), attempt));
                }
                out.push(ChatStreamEvent::Retry(RetryView {
                    phase: "start",
                    attempt,
                    max_attempts: Some(u64::from(retry.max_attempts)),
                    delay_ms: Some(retry.delay_ms),
                    error_message: Some(retry.error.clone()),
                    success: None,
                }));
            }
            EventData::CompactionStarted(started) => out.push(compaction_started(started)),
            EventData::CompactionEnded(ended) => out.push(compaction_ended(ended)),
            EventData::CancelRequested(_) => out.push(state("abort_requested", turn, None)),
            EventData::VerificationCompleted(_) => {
                out.push(state("verification", turn, Some(event.data.clone())));
            }
            EventData::Settled(_) => out.push(state("settled", None, None)),
            EventData::PhaseStarted(p) => {
                out.push(phase(event, "phase_start", &p.phase, Some(&p.turn)));
            }
            EventData::PhaseCompleted(p) => {
                out.push(phase(event, "phase_end", &p.phase, Some(&p.turn)));
            }
            EventData::PhaseFailed(p) => {
                out.push(phase(event, "phase_failed", &p.phase, p.turn.as_ref()));
            }
            _ => self.tool_event(event, data, out),
        }
    }

    /// The `tool` events: a tool part's state changes. The rest say nothing
    /// a chat shows: the user's own message, the session-level echo of a
    /// turn's end, provenance (served by `/api/chat/provenance`),
    /// creation.
    fn tool_event(
        &mut self,
        event: &SessionEvent,
        data: &EventData,
        out: &mut Vec<ChatStreamEvent>,
    ) {
        match data {
            EventData::ToolCallStarted(call) => {
                let call_ref = ToolRef::new(&call.tool_call_id, &call.tool, object(&call.input));
                self.tool(event, call_ref, out, |part| part.state = ToolState::Pending);
            }
            EventData::ApprovalRequested(request) => {
                let input = object(&request.input);
                let call_ref = ToolRef::new(&request.tool_call_id, &request.tool, input);
                self.tool(event, call_ref, out, |part| {
                    part.state = ToolState::ApprovalRequested;
                    part.approval = Some(ToolApproval {
                        approved: None,
                        scope: None,
                        reason: None,
                    });
                });
            }
            EventData::ApprovalGranted(decision) | EventData::ApprovalDenied(decision) => {
                let approved = matches!(data, EventData::ApprovalGranted(_));
                let call_ref = ToolRef::new(&decision.tool_call_id, &decision.tool, Value::Null);
                self.tool(event, call_ref, out, |part| {
                    part.state = if approved {
                        ToolState::ApprovalResponded
                    } else {
                        ToolState::OutputDenied
                    };
                    part.approval = Some(ToolApproval {
                        approved: Some(approved),
                        scope: Some(json!(decision.scope)),
                        reason: decision.reason.clone().map(Value::String),
                    });
                });
            }
            EventData::QuestionAsked(asked) => {
                self.tool(event, ToolRef::ask_user(&asked.tool_call_id), out, |part| {
                    part.state = ToolState::QuestionRequested;
                    part.questions = Some(asked.questions.clone());
                });
            }
            EventData::QuestionAnswered(answered) => {
                self.tool(
                    event,
                    ToolRef::ask_user(&answered.tool_call_id),
                    out,
                    |part| {
                        part.state = ToolState::QuestionAnswered;
                        part.answers = answered.answers.clone();
                    },
                );
            }
            EventData::ToolCallCompleted(done) => {
                let call_ref = ToolRef::new(&done.tool_call_id, &done.tool, Value::Null);
                self.tool(event, call_ref, out, |part| {
                    if done.ok {
                        part.state = ToolState::OutputAvailable;
                        part.output = Some(Value::String(done.output.clone()));
                    } else {
                        part.state = ToolState::OutputError;
                        part.error_text = Some(done.output.clone());
                    }
                    part.details = done.details.clone().filter(|d| !d.is_null());
                });
            }
            _ => {}
        }
    }

    /// The assistant messages of the turns still open (a transcript of a
    /// session whose turn runs).
    pub(crate) fn open_message(&self, turn: &Arc<str>) -> Option<ChatMessage> {
        self.turns.get(turn).map(|t| assistant(turn, t))
    }

    fn start(&mut self, turn: &Arc<str>, ts: &str, out: &mut Vec<ChatStreamEvent>) {
        if self.turns.contains_key(turn) {
            return;
        }
        self.turns.insert(turn.clone(), TurnParts::new(ts));
        out.push(ChatStreamEvent::Start {
            id: turn.clone(),
            run_id: turn.clone(),
            session: self.session.clone(),
            diagnostics: None,
        });
        out.push(state("agent_start", Some(turn.clone()), None));
        out.push(state("turn_start", Some(turn.clone()), None));
    }

    /// The turn's parts, starting the turn first when its start came
    /// before the stream did.
    fn parts(
        &mut self,
        turn: &Arc<str>,
        ts: &str,
        out: &mut Vec<ChatStreamEvent>,
    ) -> &mut TurnParts {
        self.start(turn, ts, out);
        // `start` has inserted it if it was missing.
        self.turns
            .entry(turn.clone())
            .or_insert_with(|| TurnParts::new(ts))
    }

    /// More of the round being streamed: its text or its reasoning, added
    /// to the round's last part of that kind or as a new part.
    fn delta(
        &mut self,
        turn: &Arc<str>,
        ts: &str,
        kind: ChunkKind,
        text: &str,
        out: &mut Vec<ChatStreamEvent>,
    ) {
        let parts = self.parts(turn, ts, out);
        let round = match kind {
            ChunkKind::Text => &mut parts.round_text,
            ChunkKind::Thinking => &mut parts.round_thinking,
        };
        round.push_str(text);
        let in_round = parts.parts.len() > parts.round_start;
        match (kind, parts.parts.last_mut()) {
            (ChunkKind::Text, Some(MessagePart::Text { text: last }))
            | (ChunkKind::Thinking, Some(MessagePart::Thinking { text: last }))
                if in_round =>
            {
                last.push_str(text)
            }
            _ => parts.parts.push(match kind {
                ChunkKind::Text => MessagePart::Text {
                    text: text.to_string(),
                },
                ChunkKind::Thinking => MessagePart::Thinking {
                    text: text.to_string(),
                },
            }),
        }
        let (text, message_id) = (Arc::from(text), turn.clone());
        out.push(match kind {
            ChunkKind::Text => ChatStreamEvent::Delta { text, message_id },
            ChunkKind::Thinking => ChatStreamEvent::Thinking { text, message_id },
        });
    }

    /// A model round is complete: text the deltas did not carry (a stream
    /// that joined late) is sent now, and so is its reasoning, first in the
    /// round, when none of it was streamed (a session whose turns write no
    /// deltas).
    fn completed(
        &mut self,
        turn: &Arc<str>,
        ts: &str,
        message: &AssistantMessage,
        out: &mut Vec<ChatStreamEvent>,
    ) {
        let text: String = message
            .content
            .iter()
            .filter_map(|b| match b {
                AssistantBlock::Text(t) => Some(&*t.text),
                _ => None,
            })
            .collect();
        let missing = {
            let parts = self.parts(turn, ts, out);
            text.strip_prefix(parts.round_text.as_str())
                .filter(|rest| !rest.is_empty())
                .map(str::to_string)
        };
        if let Some(rest) = missing {
            self.delta(turn, ts, ChunkKind::Text, &rest, out);
        }
        let parts = self.parts(turn, ts, out);
        let mut at = parts.round_start;
        let streamed_thinking = !parts.round_thinking.is_empty();
        for block in &message.content {
            if let AssistantBlock::Thinking(thinking) = block
                && !streamed_thinking
                && !thinking.thinking.is_empty()
            {
                parts.parts.insert(
                    at,
                    MessagePart::Thinking {
                        text: thinking.thinking.to_string(),
                    },
                );
                at += 1;
                out.push(ChatStreamEvent::Thinking {
                    text: thinking.thinking.clone(),
                    message_id: turn.clone(),
                });
            }
        }
        for index in parts.tools.values_mut() {
            if *index >= parts.round_start {
                *index += at - parts.round_start;
            }
        }
        parts.round_start = parts.parts.len();
        parts.round_text.clear();
        parts.round_thinking.clear();
    }

    /// Updates (or adds) the tool part of `call` and sends it.
    fn tool(
        &mut self,
        event: &SessionEvent,
        call: ToolRef<'_>,
        out: &mut Vec<ChatStreamEvent>,
        change: impl FnOnce(&mut ToolPart),
    ) {
        let Some(turn) = &event.turn_id else {
            return;
        };
        let parts = self.parts(turn, &event.ts, out);
        let index = match parts.tools.get(call.id) {
            Some(&index) => index,
            None => {
                parts.parts.push(MessagePart::Tool(Box::new(ToolPart::new(
                    call.id, call.name, call.input,
                ))));
                let index = parts.parts.len() - 1;
                parts.tools.insert(call.id.clone(), index);
                index
            }
        };
        // A round's tool calls come after its text: the next deltas start
        // a new text part.
        parts.round_start = parts.round_start.max(index + 1);
        if let Some(MessagePart::Tool(part)) = parts.parts.get_mut(index) {
            change(part);
            out.push(ChatStreamEvent::Tool {
                part: part.clone(),
                message_id: turn.clone(),
            });
        }
    }

    fn end_retry(&mut self, turn: &Arc<str>, success: bool, out: &mut Vec<ChatStreamEvent>) {
        if let Some((retried, attempt)) = self.retrying.take() {
            if retried == *turn {
                out.push(ChatStreamEvent::Retry(RetryView {
                    phase: "end",
                    attempt,
                    max_attempts: None,
                    delay_ms: None,
                    error_message: None,
                    success: Some(success),
                }));
            } else {
                self.retrying = Some((retried, attempt));
            }
        }
    }

    /// The turn's end: its `error` first when it failed (not for an
    /// abort), then its message.
    fn finish(
        &mut self,
        ts: &str,
        turn: &Arc<str>,
        finish_reason: Arc<str>,
        error: Option<&str>,
        out: &mut Vec<ChatStreamEvent>,
    ) {
        if let Some(message) = error {
            out.push(ChatStreamEvent::Error {
                message: message.to_string(),
                run_id: Some(turn.clone()),
            });
        }
        let parts = self.parts(turn, ts, out);
        let message = assistant(turn, parts);
        self.turns.remove(turn);
        out.push(state("turn_end", Some(turn.clone()), None));
        out.push(state("agent_end", Some(turn.clone()), None));
        out.push(ChatStreamEvent::Done {
            run_id: turn.clone(),
            message,
            session: self.session.clone(),
            finish_reason,
        });
    }

    fn plan_event(&self) -> ChatStreamEvent {
        ChatStreamEvent::Plan(PlanView {
            mode: self.mode,
            executing: self.executing,
            completed: self
                .steps
                .iter()
                .filter(|s| s.status == StepStatus::Completed)
                .count(),
            total: self.steps.len(),
            state: PlanSteps {
                steps: self.steps.clone(),
            },
        })
    }
}

/// True when a stream that has shown `event` has nothing more to show:
/// the session settled (nothing runs, nothing is queued), or its turn was
/// aborted or interrupted (the queue then waits for the next message).
pub(crate) fn ends_stream(event: &SessionEvent) -> bool {
    match event.kind {
        EventType::Settled | EventType::SessionCanceled => true,
        EventType::SessionFailed => {
            matches!(event.payload(), Ok(EventData::SessionFailed(f)) if f.interrupted)
        }
        _ => false,
    }
}

/// The user message of a `message_added` event (none for other events,
/// or for the agent's own messages).
pub(crate) fn user_message(event: &SessionEvent) -> Option<ChatMessage> {
    if event.kind != EventType::MessageAdded {
        return None;
    }
    let Ok(EventData::MessageAdded(added)) = event.payload() else {
        return None;
    };
    if added.role != Role::User {
        return None;
    }
    let parts = added.parts.iter().map(user_part).collect();
    Some(ChatMessage {
        id: added.message_id.clone(),
        role: "user",
        author: Some(added.author.clone()),
        parts,
        created_at: Arc::from(event.ts.as_str()),
    })
}

/// A user message's part: its text, or the file it refers to.
fn user_part(part: &Part) -> MessagePart {
    match part {
        Part::Text { text } => MessagePart::Text {
            text: text.to_string(),
        },
        Part::Image {
            reference,
            mime_type,
            ..
        } => MessagePart::File {
            reference: reference.as_deref().map_or(Value::Null, |r| json!(r)),
            mime_type: json!(&**mime_type),
        },
        Part::Audio {
            reference,
            mime_type,
        }
        | Part::File {
            reference,
            mime_type,
        } => MessagePart::File {
            reference: json!(&**reference),
            mime_type: json!(&**mime_type),
        },
    }
}

/// The tool call a `tool` event is about: its id, its tool and its
/// input (null when the event does not carry it).
struct ToolRef<'a> {
    id: &'a Arc<str>,
    name: &'a str,
    input: Value,
}

impl<'a> ToolRef<'a> {
    fn new(id: &'a Arc<str>, name: &'a str, input: Value) -> Self {
        Self { id, name, input }
    }

    /// An `ask_user` call, whose question events carry no input.
    fn ask_user(id: &'a Arc<str>) -> Self {
        Self::new(id, "ask_user", Value::Null)
    }
}

/// A call's arguments as the JSON object they are.
fn object(input: &JsonObject) -> Value {
    Value::Object((**input).clone())
}

/// The `state` event of a workflow phase's event, with the phase's name
/// and its turn (the event's, else the record's).
fn phase(
    event: &SessionEvent,
    name: &'static str,
    phase: &Arc<str>,
    turn: Option<&Arc<str>>,
) -> ChatStreamEvent {
    ChatStreamEvent::State {
        state: StateSignal {
            name,
            turn_id: event.turn_id.clone().or_else(|| turn.cloned()),
            detail: Some(event.data.clone()),
            phase: Some(phase.clone()),
        },
    }
}

/// The `compaction` `start` event.
fn compaction_started(started: &CompactionStart) -> ChatStreamEvent {
    ChatStreamEvent::Compaction(CompactionView {
        phase: "start",
        reason: json!(started.reason),
        tokens_before: Some(started.tokens_before),
        tokens_after: None,
        aborted: None,
        will_retry: None,
        error_message: None,
    })
}

/// The `compaction` `end` event.
fn compaction_ended(ended: &CompactionEnd) -> ChatStreamEvent {
    ChatStreamEvent::Compaction(CompactionView {
        phase: "end",
        reason: json!(ended.reason),
        tokens_before: None,
        tokens_after: ended.tokens_after,
        aborted: Some(ended.aborted),
        will_retry: Some(ended.will_retry),
        error_message: ended.error.clone(),
    })
}

fn assistant(turn: &Arc<str>, parts: &TurnParts) -> ChatMessage {
    ChatMessage {
        id: turn.clone(),
        role: "assistant",
        author: None,
        parts: parts.parts.clone(),
        created_at: parts.created_at.clone(),
    }
}

/// The `queue` event of a `queue_updated` event: the texts where the
/// spec has them, the ids beside.
fn queue_event(queue: &QueueUpdate) -> ChatStreamEvent {
    let texts = |queue: &[QueuedText]| queue.iter().map(|q| q.text.clone()).collect();
    let ids = |queue: &[QueuedText]| queue.iter().map(|q| q.id.clone()).collect();
    ChatStreamEvent::Queue(QueueView {
        steering: texts(&queue.steering),
        follow_up: texts(&queue.follow_up),
        steering_ids: ids(&queue.steering),
        follow_up_ids: ids(&queue.follow_up),
        change: json!(queue.change),
        message_id: json!(&*queue.message_id),
    })
}

fn state(name: &'static str, turn_id: Option<Arc<str>>, detail: Option<Value>) -> ChatStreamEvent {
    ChatStreamEvent::State {
        state: StateSignal {
            name,
            turn_id,
            detail,
            phase: None,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roundtable_sessions::EventId;
    use serde_json::json;

    use super::*;

    fn event(seq: u64, kind: EventType, turn: Option<&str>, data: Value) -> SessionEvent {
        SessionEvent {
            id: EventId::of_entry(seq),
            ts: "2025-01-01T00:00:00.000Z".into(),
            session_id: "sess_1".into(),
            turn_id: turn.map(Arc::from),
            kind,
            data,
        }
    }

    fn types(events: &[ChatStreamEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    fn completed(turn: &str, content: Value) -> SessionEvent {
        let usage = json!({
            "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
        });
        let message = json!({
            "role": "assistant", "content": content, "api": "openai-completions",
            "provider": "scripted", "model": "m", "usage": usage,
            "stopReason": "stop", "timestamp": 0
        });
        event(
            9,
            EventType::ModelOutputCompleted,
            Some(turn),
            json!({"stop_reason": "stop", "usage": usage, "message": message}),
        )
    }

    #[test]
    fn a_turn_gives_start_deltas_thinking_and_done_with_its_message() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        let mut all = Vec::new();
        all.extend(view.apply(&event(3, EventType::TurnStarted, Some("turn_1"), json!({}))));
        for text in ["Hel", "lo"] {
            all.extend(view.apply(&event(
                4,
                EventType::ModelOutputDelta,
                Some("turn_1"),
                json!({"text": text}),
            )));
        }
        all.extend(view.apply(&completed(
            "turn_1",
            json!([{"type": "thinking", "thinking": "Greet."}, {"type": "text", "text": "Hello"}]),
        )));
        all.extend(view.apply(&event(
            10,
            EventType::TurnCompleted,
            Some("turn_1"),
            json!({"finish_reason": "stop"}),
        )));
        assert_eq!(
            types(&all),
            [
                "start", "state", "state", "delta", "delta", "thinking", "state", "state", "done"
            ]
        );
        let ChatStreamEvent::Done {
            message,
            finish_reason,
            ..
        } = all.last().unwrap()
        else {
            panic!("no done");
        };
        assert_eq!(&**finish_reason, "stop");
        assert_eq!(
            message.parts,
            [
                MessagePart::Thinking {
                    text: "Greet.".into()
                },
                MessagePart::Text {
                    text: "Hello".into()
                }
            ]
        );
    }

    #[test]
    fn streamed_reasoning_is_sent_as_it_comes_and_not_again_with_the_message() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        let mut all = Vec::new();
        all.extend(view.apply(&event(3, EventType::TurnStarted, Some("turn_1"), json!({}))));
        for (kind, text) in [
            (EventType::ModelThinkingDelta, "Gre"),
            (EventType::ModelThinkingDelta, "et."),
            (EventType::ModelOutputDelta, "Hello"),
        ] {
            all.extend(view.apply(&event(4, kind, Some("turn_1"), json!({"text": text}))));
        }
        all.extend(view.apply(&completed(
            "turn_1",
            json!([{"type": "thinking", "thinking": "Greet."}, {"type": "text", "text": "Hello"}]),
        )));
        all.extend(view.apply(&event(
            10,
            EventType::TurnCompleted,
            Some("turn_1"),
            json!({"finish_reason": "stop"}),
        )));
        assert_eq!(
            types(&all),
            [
                "start", "state", "state", "thinking", "thinking", "delta", "state", "state",
                "done"
            ]
        );
        let ChatStreamEvent::Done { message, .. } = all.last().unwrap() else {
            panic!("no done");
        };
        assert_eq!(
            message.parts,
            [
                MessagePart::Thinking {
                    text: "Greet.".into()
                },
                MessagePart::Text {
                    text: "Hello".into()
                }
            ]
        );
    }

    #[test]
    fn a_stream_that_joins_late_starts_the_turn_and_sends_the_missing_text() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        let out = view.apply(&completed(
            "turn_1",
            json!([{"type": "text", "text": "All of it"}]),
        ));
        assert_eq!(types(&out), ["start", "state", "state", "delta"]);
        let ChatStreamEvent::Delta { text, .. } = &out[3] else {
            panic!("no delta");
        };
        assert_eq!(&**text, "All of it");
    }

    #[test]
    fn a_tool_call_moves_through_its_states_in_one_part() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        let call = json!({
            "tool": "shell", "tool_call_id": "c1", "input": {"command": "ls"},
            "tool_call": {"id": "c1", "name": "shell", "input": {"command": "ls"}},
        });
        view.apply(&event(3, EventType::TurnStarted, Some("t"), json!({})));
        let mut states = Vec::new();
        for (kind, data) in [
            (EventType::ToolCallStarted, call.clone()),
            (EventType::ApprovalRequested, call.clone()),
            (
                EventType::ApprovalGranted,
                json!({"tool": "shell", "tool_call_id": "c1", "verdict": "approve", "scope": "call", "reason": null}),
            ),
            (
                EventType::ToolCallCompleted,
                json!({
                    "tool": "shell", "tool_call_id": "c1", "ok": true, "output": "a.txt",
                    "details": null, "tool_call": {"id": "c1", "name": "shell"},
                    "tool_result": {"id": "c1", "ok": true, "parts": [{"type": "text", "text": "a.txt"}]},
                }),
            ),
        ] {
            for e in view.apply(&event(5, kind, Some("t"), data)) {
                let json = serde_json::to_value(&e).unwrap();
                states.push(json["part"]["state"].as_str().unwrap().to_string());
            }
        }
        assert_eq!(
            states,
            [
                "pending",
                "approval-requested",
                "approval-responded",
                "output-available"
            ]
        );
        // Text after the call is a new part, after it.
        view.apply(&event(
            6,
            EventType::ModelOutputDelta,
            Some("t"),
            json!({"text": "Done."}),
        ));
        let message = view.open_message(&Arc::from("t")).unwrap();
        assert!(
            matches!(&message.parts[0], MessagePart::Tool(p) if p.output == Some(json!("a.txt")))
        );
        assert_eq!(
            message.parts[1],
            MessagePart::Text {
                text: "Done.".into()
            }
        );
    }

    #[test]
    fn a_failed_turn_says_error_then_done_and_an_abort_only_done() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        view.apply(&event(3, EventType::TurnStarted, Some("a"), json!({})));
        let failed = view.apply(&event(
            4,
            EventType::TurnFailed,
            Some("a"),
            json!({"finish_reason": "error", "interrupted": false, "error": "boom", "reason": "error: boom"}),
        ));
        assert_eq!(types(&failed), ["error", "state", "state", "done"]);
        view.apply(&event(5, EventType::TurnStarted, Some("b"), json!({})));
        let aborted = view.apply(&event(
            6,
            EventType::TurnFailed,
            Some("b"),
            json!({"finish_reason": "aborted", "interrupted": false, "error": "cancelled", "reason": "aborted: cancelled"}),
        ));
        assert_eq!(types(&aborted), ["state", "state", "done"]);
        assert!(ends_stream(&event(
            7,
            EventType::SessionCanceled,
            Some("b"),
            json!({})
        )));
        assert!(ends_stream(&event(7, EventType::Settled, None, json!({}))));
        assert!(!ends_stream(&event(
            7,
            EventType::SessionFailed,
            Some("a"),
            json!({"interrupted": false})
        )));
        assert!(ends_stream(&event(
            7,
            EventType::SessionFailed,
            Some("a"),
            json!({"finish_reason": null, "interrupted": true, "error": null, "reason": "interrupted"})
        )));
    }

    #[test]
    fn a_queue_event_carries_the_texts_and_their_ids_beside() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        let out = view.apply(&event(
            3,
            EventType::QueueUpdated,
            Some("t"),
            json!({
                "steering": [{"id": "msg_s", "text": "use staging"}],
                "follow_up": [{"id": "msg_f", "text": "then tidy up"}],
                "change": "added",
                "message_id": "msg_f",
            }),
        ));
        assert_eq!(
            serde_json::to_value(&out[0]).unwrap(),
            json!({
                "type": "queue", "steering": ["use staging"], "followUp": ["then tidy up"],
                "steeringIds": ["msg_s"], "followUpIds": ["msg_f"],
                "change": "added", "messageId": "msg_f",
            })
        );
    }

    #[test]
    fn a_run_opens_with_agent_start_and_closes_with_agent_end_before_done() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        let mut all = view.apply(&event(3, EventType::TurnStarted, Some("t"), json!({})));
        all.extend(view.apply(&event(
            4,
            EventType::TurnCompleted,
            Some("t"),
            json!({"finish_reason": "stop"}),
        )));
        let names: Vec<String> = all
            .iter()
            .map(|e| {
                let json = serde_json::to_value(e).unwrap();
                let name = json["state"]["name"].as_str().unwrap_or("");
                format!("{}{name}", json["type"].as_str().unwrap())
            })
            .collect();
        assert_eq!(
            names,
            [
                "start",
                "stateagent_start",
                "stateturn_start",
                "stateturn_end",
                "stateagent_end",
                "done"
            ]
        );
    }

    #[test]
    fn plan_and_mode_changes_give_the_whole_plan() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Plan, None);
        let out = view.apply(&event(
            3,
            EventType::PlanUpdated,
            Some("t"),
            json!({
                "steps": [{"title": "a", "status": "completed"}, {"title": "b", "status": "pending"}],
                "completed": 1, "total": 2,
            }),
        ));
        let json = serde_json::to_value(&out[0]).unwrap();
        assert_eq!(json["mode"], "plan");
        assert_eq!(json["completed"], 1);
        assert_eq!(json["total"], 2);
        assert_eq!(json["state"]["steps"][1]["title"], "b");
        let out = view.apply(&event(
            4,
            EventType::ModeChanged,
            None,
            json!({"mode": "agent", "executing": true}),
        ));
        let json = serde_json::to_value(&out[0]).unwrap();
        assert_eq!(json["mode"], "agent");
        assert_eq!(json["executing"], true);
        assert_eq!(json["total"], 2);
    }

    #[test]
    fn compactions_start_and_end() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        let started = view.apply(&event(
            3,
            EventType::CompactionStarted,
            Some("t"),
            json!({"reason": "threshold", "tokens_before": 9000}),
        ));
        assert_eq!(
            serde_json::to_value(&started[0]).unwrap(),
            json!({"type": "compaction", "phase": "start", "reason": "threshold", "tokensBefore": 9000})
        );
        let ended = view.apply(&event(
            5,
            EventType::CompactionEnded,
            Some("t"),
            json!({"reason": "overflow", "covers_seq": 4, "tokens_after": 1200, "aborted": false, "will_retry": true, "error": null}),
        ));
        assert_eq!(
            serde_json::to_value(&ended[0]).unwrap(),
            json!({"type": "compaction", "phase": "end", "reason": "overflow", "tokensAfter": 1200, "aborted": false, "willRetry": true})
        );
    }

    #[test]
    fn a_retry_starts_and_ends_with_the_next_output() {
        let mut view = ChatView::new(StreamSession::id("sess_1"), SessionMode::Agent, None);
        view.apply(&event(3, EventType::TurnStarted, Some("t"), json!({})));
        let out = view.apply(&event(
            4,
            EventType::Retry,
            Some("t"),
            json!({"round": 1, "attempt": 1, "max_attempts": 3, "delay_ms": 10, "error": "overloaded"}),
        ));
        let json = serde_json::to_value(&out[0]).unwrap();
        assert_eq!(
            json,
            json!({"type": "retry", "phase": "start", "attempt": 1, "maxAttempts": 3, "delayMs": 10, "errorMessage": "overloaded"})
        );
        let out = view.apply(&event(
            5,
            EventType::ModelOutputDelta,
            Some("t"),
            json!({"text": "ok"}),
        ));
        assert_eq!(types(&out), ["retry", "delta"]);
        assert_eq!(serde_json::to_value(&out[0]).unwrap()["success"], true);
    }
}
