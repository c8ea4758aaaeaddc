//! The session event view: a pure function from one stored entry to the
//! events a client sees, in the spec's envelope
//! `{id, ts, session_id, turn_id, type, data}`.
//!
//! An event's id is its entry's seq, with a sub-index when one entry gives
//! several events (an assistant message and its tool calls): `12`, `12.1`,
//! `12.2`. Because every event comes from a stored entry, resuming after an
//! id replays exactly the events after it, whichever process serves them
//! and however often the client reconnects.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use roundtable_chat_runner::lifecycle::records::RetryRecord;
use roundtable_chat_runner::lifecycle::records::{
    ApprovalDecidedRecord, ApprovalRequestedRecord, ApprovalVerdict,
};
use roundtable_chat_runner::lifecycle::records::{CompactionEndedRecord, CompactionStartedRecord};
use roundtable_providers::{AssistantBlock, UserBlock};
use roundtable_thread_stream::{
    AssistantEntry, Chat, ChunkKind, Entry, EntryBody, FinishReason, ToolResultEntry, TurnReason,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event_data::{
    ApprovalDecision, ApprovalRequest, ApprovalScope, CancelRequest, CompactionEnd,
    CompactionStart, EventData, Failure, Finish, Message, MessageAdded, ModelOutput, NoData, Part,
    PatchReview, PlanUpdate, QuestionAnswer, QuestionAsk, QueueChangeKind, QueueUpdate, RetryWait,
    Role, TextDelta, ToolCallEnd, ToolCallRef, ToolCallStart, ToolResultRef, TurnStart,
};

use crate::records::{
    CancelRequested, ModeChanged, ModelChanged, PhaseCompleted, PhaseFailed, PhaseStarted,
    PlanUpdated, Provenance, QuestionAnswered, QuestionAsked, QueueAdded, QueueRemoved,
    SessionCreated, SessionRecord, Settled, ToolsChanged, Verification,
};

/// An event's position: its entry's seq and its index among that entry's
/// events. Written `seq` for the first event of an entry, `seq.sub` for the
/// others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId {
    /// The entry's seq.
    pub seq: u64,
    /// The event's index among the entry's events.
    pub sub: u32,
}

impl EventId {
    /// The first event of the entry at `seq`.
    pub fn of_entry(seq: u64) -> Self {
        Self { seq, sub: 0 }
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sub == 0 {
            write!(f, "{}", self.seq)
        } else {
            write!(f, "{}.{}", self.seq, self.sub)
        }
    }
}

/// An event id that does not read as `seq` or `seq.sub`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an event id (expected `seq` or `seq.sub`)")]
pub struct InvalidEventId(pub String);

impl FromStr for EventId {
    type Err = InvalidEventId;

    fn from_str(text: &str) -> Result<Self, InvalidEventId> {
        let invalid = || InvalidEventId(text.chars().take(40).collect());
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let (seq, sub) = match text.split_once('.') {
            Some((seq, sub)) if digits(seq) && digits(sub) => (seq, sub),
            None if digits(text) => (text, "0"),
            _ => return Err(invalid()),
        };
        Ok(Self {
            seq: seq.parse().map_err(|_| invalid())?,
            sub: sub.parse().map_err(|_| invalid())?,
        })
    }
}

impl Serialize for EventId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EventId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl EventData {
    /// The event's type, as its `type` says.
    pub fn kind(&self) -> EventType {
        match self {
            Self::SessionCreated(_) => EventType::SessionCreated,
            Self::MessageAdded(_) => EventType::MessageAdded,
            Self::TurnStarted(_) => EventType::TurnStarted,
            Self::ModelOutputDelta(_) => EventType::ModelOutputDelta,
            Self::ModelThinkingDelta(_) => EventType::ModelThinkingDelta,
            Self::ModelOutputCompleted(_) => EventType::ModelOutputCompleted,
            Self::ToolCallStarted(_) => EventType::ToolCallStarted,
            Self::ToolCallCompleted(_) => EventType::ToolCallCompleted,
            Self::PatchReviewed(_) => EventType::PatchReviewed,
            Self::ApprovalRequested(_) => EventType::ApprovalRequested,
            Self::ApprovalGranted(_) => EventType::ApprovalGranted,
            Self::ApprovalDenied(_) => EventType::ApprovalDenied,
            Self::Retry(_) => EventType::Retry,
            Self::CancelRequested(_) => EventType::CancelRequested,
            Self::VerificationCompleted(_) => EventType::VerificationCompleted,
            Self::QueueUpdated(_) => EventType::QueueUpdated,
            Self::Settled(_) => EventType::Settled,
            Self::QuestionAsked(_) => EventType::QuestionAsked,
            Self::QuestionAnswered(_) => EventType::QuestionAnswered,
            Self::ModeChanged(_) => EventType::ModeChanged,
            Self::ModelChanged(_) => EventType::ModelChanged,
            Self::PlanUpdated(_) => EventType::PlanUpdated,
            Self::ToolsChanged(_) => EventType::ToolsChanged,
            Self::ProvenanceRecorded(_) => EventType::ProvenanceRecorded,
            Self::CompactionStarted(_) => EventType::CompactionStarted,
            Self::CompactionEnded(_) => EventType::CompactionEnded,
            Self::PhaseStarted(_) => EventType::PhaseStarted,
            Self::PhaseCompleted(_) => EventType::PhaseCompleted,
            Self::PhaseFailed(_) => EventType::PhaseFailed,
            Self::TurnCompleted(_) => EventType::TurnCompleted,
            Self::TurnFailed(_) => EventType::TurnFailed,
            Self::SessionCompleted(_) => EventType::SessionCompleted,
            Self::SessionFailed(_) => EventType::SessionFailed,
            Self::SessionCanceled(_) => EventType::SessionCanceled,
        }
    }
}

/// What happened, as the event's `type` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// The session was created.
    SessionCreated,
    /// A message joined the conversation.
    MessageAdded,
    /// A turn started.
    TurnStarted,
    /// A piece of the assistant's text.
    ModelOutputDelta,
    /// A piece of the assistant's reasoning (`text`), streamed before the
    /// message that holds it completes.
    ModelThinkingDelta,
    /// An assistant message is complete (`stop_reason`, `usage`, and the
    /// whole `message`: its text is in its `text` blocks, not repeated
    /// beside it, since a long answer would be sent twice).
    ModelOutputCompleted,
    /// The model called a tool (it runs once approved, where approval is
    /// required).
    ToolCallStarted,
    /// A tool call has its result.
    ToolCallCompleted,
    /// A patch was reviewed automatically (`patch_review: "auto"`) before
    /// it applied: `mode`, `diff` (cut when long: `diff_truncated`), the
    /// `preview` artifact holding the whole diff, and whether it `applied`.
    /// It comes just before the call's `tool_call_completed`.
    PatchReviewed,
    /// A gated call waits for a decision.
    ApprovalRequested,
    /// A gated call was approved.
    ApprovalGranted,
    /// A gated call was denied (or its approval expired).
    ApprovalDenied,
    /// A model call failed before its response started and is retried
    /// after a wait (`attempt`, `max_attempts`, `delay_ms`, `error`).
    Retry,
    /// A caller asked to cancel the running turn.
    CancelRequested,
    /// A verification command finished.
    VerificationCompleted,
    /// The queue changed (its `data` holds the whole queue after it).
    QueueUpdated,
    /// Nothing runs and nothing is queued.
    Settled,
    /// The model asked the user (`ask_user`); the call waits for answers.
    QuestionAsked,
    /// The user answered (or the question expired).
    QuestionAnswered,
    /// The session switched between agent and plan mode.
    ModeChanged,
    /// The session's turns run on another model from now on (`model`:
    /// `provider/id`).
    ModelChanged,
    /// The plan was written or updated.
    PlanUpdated,
    /// The host's tools (MCP servers') changed since the session's previous
    /// turn: `added`, `removed` and `changed` names (each omitted when
    /// empty); the turn is the first to run with them.
    ToolsChanged,
    /// A run ended; its provenance is stored.
    ProvenanceRecorded,
    /// The conversation is being compacted: its older part summarised
    /// (`reason`: `threshold` before a request that nears the model's
    /// window, `overflow` after the model refused one as too large,
    /// `manual` on a caller's request).
    CompactionStarted,
    /// A compaction ended: `covers_seq` (the last entry the summary
    /// covers) when the summary was written, else `error`.
    CompactionEnded,
    /// A workflow phase started: its skills are staged, its prompt is
    /// submitted as the message of the event's turn (`workflow`, `phase`,
    /// `index`, `attempt`, `message_id`, `skills`). A gated phase's gate
    /// comes before it as `approval_requested` for the tool
    /// `workflow_phase_gate`, then `approval_granted` or `approval_denied`.
    PhaseStarted,
    /// A workflow phase's turn finished (`workflow`, `phase`, `attempt`,
    /// `finish_reason`).
    PhaseCompleted,
    /// A workflow phase failed and its workflow stopped (`workflow`,
    /// `phase`, `attempt`, `reason`, `interrupted`).
    PhaseFailed,
    /// A turn finished by one of its own ends.
    TurnCompleted,
    /// A turn failed, was cancelled or was interrupted.
    TurnFailed,
    /// The session has nothing left to run (its queued follow-ups and
    /// verification runs done) and its last turn finished: once per quiet
    /// spell, with `settled`, not after every turn.
    SessionCompleted,
    /// The session has nothing left to run and its last turn failed; or a
    /// turn was interrupted (`interrupted`), which stops the queue.
    SessionFailed,
    /// A turn was cancelled: the session stops there (a queue waits for the
    /// next message).
    SessionCanceled,
}

/// One event, in the spec's envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// Its id (the entry's seq, and a sub-index).
    pub id: EventId,
    /// When its entry was written (RFC 3339, UTC, milliseconds).
    pub ts: String,
    /// The session.
    pub session_id: Arc<str>,
    /// The turn it belongs to, if any.
    pub turn_id: Option<Arc<str>>,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The details, per type.
    pub data: Value,
}

impl SessionEvent {
    /// The event's typed payload, read back from its `type` and `data`:
    /// what a client matches on instead of reading `data` by key.
    pub fn payload(&self) -> Result<EventData, serde_json::Error> {
        let mut tagged = serde_json::Map::new();
        tagged.insert("type".into(), serde_json::to_value(self.kind)?);
        tagged.insert("data".into(), self.data.clone());
        serde_json::from_value(Value::Object(tagged))
    }
}

/// Turns a session's entries into its events.
#[derive(Debug, Clone)]
pub struct EventView {
    session_id: Arc<str>,
    agent: Arc<str>,
}

impl EventView {
    /// The view of session `session_id`, whose agent writes as `agent`.
    pub fn new(session_id: impl Into<Arc<str>>, agent: impl Into<Arc<str>>) -> Self {
        Self {
            session_id: session_id.into(),
            agent: agent.into(),
        }
    }

    /// The events of `entry`, in order (none for entries clients do not
    /// see, such as lifecycle records of other kinds).
    pub fn events(&self, entry: &Entry) -> Vec<SessionEvent> {
        let mut out = Events {
            view: self,
            entry,
            events: Vec::new(),
            ts: None,
        };
        out.collect();
        out.events
    }
}

/// The events of one entry, as they are built.
struct Events<'a> {
    view: &'a EventView,
    entry: &'a Entry,
    events: Vec<SessionEvent>,
    ts: Option<String>,
}

impl Events<'_> {
    /// Adds the event `data` of `turn`, its `type` and `data` as the
    /// typed payload serialises them.
    fn push(&mut self, turn: Option<&Arc<str>>, data: EventData) {
        let kind = data.kind();
        let data = match serde_json::to_value(&data) {
            Ok(Value::Object(mut fields)) => fields.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        };
        let ts = self
            .ts
            .get_or_insert_with(|| rfc3339_millis(self.entry.at))
            .clone();
        let sub = u32::try_from(self.events.len()).unwrap_or(u32::MAX);
        self.events.push(SessionEvent {
            id: EventId {
                seq: self.entry.seq,
                sub,
            },
            ts,
            session_id: self.view.session_id.clone(),
            turn_id: turn.cloned(),
            kind,
            data,
        });
    }

    /// The spec's message object of this entry: `{id, role, parts,
    /// created_at}`, its id the message's (the one `POST .../messages`
    /// answered).
    fn message(&self, role: Role, parts: &[Part]) -> Message {
        Message {
            id: self.entry.id.clone(),
            role,
            parts: parts.to_vec(),
            created_at: rfc3339_millis(self.entry.at),
        }
    }

    /// `message_added` for this entry's message, written by `role`.
    fn message_added(&mut self, turn: Option<&Arc<str>>, role: Role, parts: Vec<Part>) {
        let data = MessageAdded {
            message_id: self.entry.id.clone(),
            role,
            author: self.entry.author.clone(),
            message: self.message(role, &parts),
            parts,
        };
        self.push(turn, EventData::MessageAdded(data));
    }

    /// An assistant message: its output, its tool calls, and the message
    /// itself as `message_added` when it says something (the turn's final
    /// answer among them). The message comes last, so that the ids of the
    /// calls' events stay what they were.
    fn assistant(&mut self, assistant: &AssistantEntry) {
        let turn = assistant.turn.as_ref();
        let message = assistant.message();
        let output = ModelOutput {
            stop_reason: message.stop_reason,
            usage: message.usage,
            message: message.clone(),
        };
        self.push(turn, EventData::ModelOutputCompleted(output));
        let mut parts = Vec::new();
        for block in &message.content {
            match block {
                AssistantBlock::ToolCall(call) => {
                    let data = ToolCallStart {
                        tool: call.name.clone(),
                        tool_call_id: call.id.clone(),
                        input: call.arguments.clone(),
                        tool_call: ToolCallRef {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            input: Some(call.arguments.clone()),
                        },
                    };
                    self.push(turn, EventData::ToolCallStarted(data));
                }
                AssistantBlock::Text(t) if !t.text.is_empty() => {
                    parts.push(Part::Text {
                        text: Arc::from(&*t.text),
                    });
                }
                _ => {}
            }
        }
        if !parts.is_empty() {
            self.message_added(turn, Role::Assistant, parts);
        }
    }

    /// A tool's result: the spec's `tool_call` and `tool_result` objects
    /// beside the flat fields, and first the automatic review of a patch
    /// when the result carries one.
    fn tool_result(&mut self, result: &ToolResultEntry) {
        let message = &result.message;
        let turn = result.turn.as_ref();
        let review = message
            .details
            .as_ref()
            .filter(|_| &*message.tool_name == crate::patch_review::APPLY_PATCH)
            .and_then(|d| d.get(crate::patch_review::PATCH_REVIEW));
        if let Some(Value::Object(review)) = review {
            let mut review = review.clone();
            review.remove("tool_call_id");
            let data = PatchReview {
                review,
                tool_call_id: message.tool_call_id.clone(),
            };
            self.push(turn, EventData::PatchReviewed(data));
        }
        let output: Vec<&str> = message
            .content
            .iter()
            .filter_map(|b| match b {
                UserBlock::Text(t) => Some(&*t.text),
                UserBlock::Image(_) => None,
            })
            .collect();
        let id = &message.tool_call_id;
        let data = ToolCallEnd {
            tool: message.tool_name.clone(),
            tool_call_id: id.clone(),
            ok: !message.is_error,
            output: output.join("\n"),
            details: message.details.clone(),
            tool_call: ToolCallRef {
                id: id.clone(),
                name: message.tool_name.clone(),
                input: None,
            },
            tool_result: ToolResultRef {
                id: id.clone(),
                ok: !message.is_error,
                parts: message.content.iter().map(block_part).collect(),
            },
        };
        self.push(turn, EventData::ToolCallCompleted(data));
    }

    /// The session's outcome when its last turn's own entry did not
    /// already say it (`session_completed` after a turn that ended,
    /// `session_failed` after one that failed), then `settled`: a
    /// client reading until `settled` sees both.
    fn settled(&mut self, settled: &Settled) {
        if let Some(last) = &settled.last_turn {
            let turn = Some(&last.turn);
            let reason = TurnReason::parse(&last.reason);
            if last.ended {
                let data = Finish {
                    finish_reason: last.reason.clone(),
                };
                self.push(turn, EventData::SessionCompleted(data));
            } else if stopping_event(&reason).is_none() {
                self.push(turn, EventData::SessionFailed(failure_data(&reason)));
            }
        }
        self.push(None, EventData::Settled(NoData {}));
    }

    fn collect(&mut self) {
        let entry = self.entry;
        match &entry.body {
            EntryBody::Chat(chat) => {
                let role = if entry.author == self.view.agent {
                    Role::Assistant
                } else {
                    Role::User
                };
                self.message_added(None, role, chat_parts(chat));
            }
            EntryBody::TurnStarted(started) => {
                let data = TurnStart {
                    trigger_seq: started.trigger,
                    reason: started.reason.clone(),
                };
                self.push(Some(&started.turn), EventData::TurnStarted(data));
            }
            EntryBody::Chunk(chunk) => {
                let text = TextDelta {
                    text: chunk.delta.clone(),
                };
                let data = match chunk.kind {
                    ChunkKind::Text => EventData::ModelOutputDelta(text),
                    ChunkKind::Thinking => EventData::ModelThinkingDelta(text),
                };
                self.push(Some(&chunk.turn), data);
            }
            EntryBody::Assistant(assistant) => self.assistant(assistant),
            EntryBody::ToolResult(result) => self.tool_result(result),
            EntryBody::TurnEnded(ended) => {
                let turn = Some(&ended.turn);
                let data = Finish {
                    finish_reason: ended.reason.to_string(),
                };
                self.push(turn, EventData::TurnCompleted(data));
            }
            EntryBody::TurnFailed(failed) => {
                let turn = Some(&failed.turn);
                let reason = &failed.reason;
                self.push(turn, EventData::TurnFailed(failure_data(reason)));
                // A cancelled or interrupted turn stops the session: its
                // queue waits for the next message, so nothing is left to
                // run. Any other failure lets the queue go on; `settled`
                // says how the session ended.
                if let Some(stopping) = stopping_event(reason) {
                    self.push(turn, stopping(failure_data(reason)));
                }
            }
            EntryBody::Signal(_) => self.signal(),
            _ => {}
        }
    }

    fn signal(&mut self) {
        let body = &self.entry.body;
        if let Some(created) = SessionCreated::from_body(body) {
            self.push(None, EventData::SessionCreated(created));
        } else if let Some(request) = ApprovalRequestedRecord::from_body(body) {
            let data = ApprovalRequest {
                tool: request.tool.clone(),
                tool_call_id: request.call_id.clone(),
                input: request.arguments.clone(),
            };
            self.push(Some(&request.turn), EventData::ApprovalRequested(data));
        } else if let Some(decision) = ApprovalDecidedRecord::from_body(body) {
            self.approval_decided(&decision);
        } else if let Some(retry) = RetryRecord::from_body(body) {
            let data = RetryWait {
                round: retry.round,
                attempt: retry.attempt,
                max_attempts: retry.max_attempts,
                delay_ms: retry.delay_ms,
                error: retry.error.clone(),
            };
            self.push(Some(&retry.turn), EventData::Retry(data));
        } else if let Some(cancel) = CancelRequested::from_body(body) {
            let data = CancelRequest {
                reason: cancel.reason.clone(),
            };
            self.push(Some(&cancel.turn), EventData::CancelRequested(data));
        } else if let Some(verification) = Verification::from_body(body) {
            let turn = verification.turn.clone();
            self.push(Some(&turn), EventData::VerificationCompleted(verification));
        } else if !self.queue(body) {
            self.session_signal(body);
        }
    }

    /// `approval_granted` or `approval_denied`, with what the approval
    /// covers.
    fn approval_decided(&mut self, decision: &ApprovalDecidedRecord) {
        let (granted, scope) = match decision.verdict {
            ApprovalVerdict::Approve => (true, ApprovalScope::Call),
            ApprovalVerdict::ApproveSession => (true, ApprovalScope::Session),
            ApprovalVerdict::Deny => (false, ApprovalScope::Call),
            ApprovalVerdict::Expired => (false, ApprovalScope::Expired),
        };
        let data = ApprovalDecision {
            tool: decision.tool.clone(),
            tool_call_id: decision.call_id.clone(),
            verdict: decision.verdict,
            scope,
            reason: decision.reason.clone(),
        };
        let data = if granted {
            EventData::ApprovalGranted(data)
        } else {
            EventData::ApprovalDenied(data)
        };
        self.push(Some(&decision.turn), data);
    }

    /// `queue_updated` when `body` changed the queue; false when it is
    /// no queue record.
    fn queue(&mut self, body: &EntryBody) -> bool {
        let data = if let Some(added) = QueueAdded::from_body(body) {
            QueueUpdate {
                change: QueueChangeKind::Added,
                message_id: added.id.clone(),
                mode: Some(added.mode),
                steering: added.queue.steering,
                follow_up: added.queue.follow_up,
            }
        } else if let Some(removed) = QueueRemoved::from_body(body) {
            QueueUpdate {
                change: removed.exit.into(),
                message_id: removed.id.clone(),
                mode: None,
                steering: removed.queue.steering,
                follow_up: removed.queue.follow_up,
            }
        } else {
            return false;
        };
        self.push(None, EventData::QueueUpdated(data));
        true
    }

    /// The events of the session's other records: its settling, questions,
    /// mode, model, tools, plan, provenance, workflow phases and
    /// compactions.
    fn session_signal(&mut self, body: &EntryBody) {
        if let Some(settled) = Settled::from_body(body) {
            self.settled(&settled);
        } else if let Some(asked) = QuestionAsked::from_body(body) {
            let data = QuestionAsk {
                tool_call_id: asked.call_id.clone(),
                questions: asked.questions,
            };
            self.push(Some(&asked.turn), EventData::QuestionAsked(data));
        } else if let Some(answered) = QuestionAnswered::from_body(body) {
            let data = QuestionAnswer {
                tool_call_id: answered.call_id.clone(),
                expired: answered.answers.is_none(),
                answers: answered.answers,
            };
            self.push(Some(&answered.turn), EventData::QuestionAnswered(data));
        } else if let Some(changed) = ModeChanged::from_body(body) {
            self.push(None, EventData::ModeChanged(changed));
        } else if let Some(changed) = ModelChanged::from_body(body) {
            self.push(None, EventData::ModelChanged(changed));
        } else if let Some(changed) = ToolsChanged::from_body(body) {
            self.push(Some(&changed.turn), EventData::ToolsChanged(changed.change));
        } else if let Some(plan) = PlanUpdated::from_body(body) {
            let completed = plan
                .steps
                .iter()
                .filter(|s| s.status == crate::records::StepStatus::Completed)
                .count();
            let data = PlanUpdate {
                total: plan.steps.len(),
                completed,
                steps: plan.steps,
            };
            self.push(Some(&plan.turn), EventData::PlanUpdated(data));
        } else if let Some(provenance) = Provenance::from_body(body) {
            let run = provenance.run_id.clone();
            self.push(Some(&run), EventData::ProvenanceRecorded(provenance));
        } else {
            self.phase_or_compaction(body);
        }
    }

    /// The events of a workflow phase's or a compaction's record.
    fn phase_or_compaction(&mut self, body: &EntryBody) {
        if let Some(started) = PhaseStarted::from_body(body) {
            let turn = started.turn.clone();
            self.push(Some(&turn), EventData::PhaseStarted(started));
        } else if let Some(completed) = PhaseCompleted::from_body(body) {
            let turn = completed.turn.clone();
            self.push(Some(&turn), EventData::PhaseCompleted(completed));
        } else if let Some(failed) = PhaseFailed::from_body(body) {
            let turn = failed.turn.clone();
            self.push(turn.as_ref(), EventData::PhaseFailed(failed));
        } else if let Some(started) = CompactionStartedRecord::from_body(body) {
            let data = CompactionStart {
                reason: started.reason,
                tokens_before: started.tokens_before,
            };
            self.push(started.turn.as_ref(), EventData::CompactionStarted(data));
        } else if let Some(ended) = CompactionEndedRecord::from_body(body) {
            let data = CompactionEnd {
                reason: ended.reason,
                covers_seq: ended.covers_seq,
                tokens_after: ended.tokens_after,
                aborted: ended.aborted,
                will_retry: ended.will_retry,
                error: ended.error.clone(),
            };
            self.push(ended.turn.as_ref(), EventData::CompactionEnded(data));
        }
    }
}

/// The session event a failed turn gives on its own: a cancelled turn
/// cancels the session, an interrupted one fails it (either way the queue
/// waits for the next message). None for other failures.
fn stopping_event(reason: &TurnReason) -> Option<fn(Failure) -> EventData> {
    if reason.finish_reason() == Some(FinishReason::Aborted) {
        Some(EventData::SessionCanceled)
    } else if reason.is_interrupted() {
        Some(EventData::SessionFailed)
    } else {
        None
    }
}

/// The spec's parts of a chat message: its text, its extra blocks, and the
/// files it refers to (`image`, `audio` or `file` by their type).
fn chat_parts(chat: &Chat) -> Vec<Part> {
    let mut parts = Vec::new();
    if !chat.text.is_empty() {
        parts.push(Part::Text {
            text: chat.text.clone(),
        });
    }
    for part in &chat.parts {
        parts.push(match part {
            UserBlock::Text(t) => Part::Text {
                text: Arc::from(&*t.text),
            },
            UserBlock::Image(i) => Part::Image {
                reference: None,
                mime_type: i.mime_type.clone(),
                data: None,
            },
        });
    }
    for file in &chat.files {
        let (reference, mime_type) = (file.reference.clone(), file.mime_type.clone());
        parts.push(if file.mime_type.starts_with("image/") {
            Part::Image {
                reference: Some(reference),
                mime_type,
                data: None,
            }
        } else if file.mime_type.starts_with("audio/") {
            Part::Audio {
                reference,
                mime_type,
            }
        } else {
            Part::File {
                reference,
                mime_type,
            }
        });
    }
    parts
}

/// The spec's part of a tool result's block: text, or an image inline
/// (`data` in base64, since a tool's image has no stored reference).
fn block_part(block: &UserBlock) -> Part {
    match block {
        UserBlock::Text(t) => Part::Text {
            text: Arc::from(&*t.text),
        },
        UserBlock::Image(i) => Part::Image {
            reference: None,
            mime_type: i.mime_type.clone(),
            data: Some(i.data.clone()),
        },
    }
}

/// The data of a failed turn's events.
fn failure_data(reason: &TurnReason) -> Failure {
    Failure {
        finish_reason: reason.finish_reason().map(|r| r.as_str().to_string()),
        interrupted: reason.is_interrupted(),
        error: reason.message().map(str::to_string),
        reason: reason.to_string(),
    }
}

/// `ms` (Unix milliseconds) as RFC 3339 in UTC with milliseconds:
/// `2025-01-01T00:00:00.000Z`.
pub(crate) fn rfc3339_millis(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use roundtable_chat_runner::lifecycle::{turn_interrupted, turn_started_by};
    use roundtable_providers::{AssistantMessage, ToolCall};
    use roundtable_thread_stream::{AssistantEntry, NewEntry, ThreadId, TurnEnded, TurnFailed};

    use serde_json::json;

    use super::*;

    fn entry(seq: u64, author: &str, body: EntryBody) -> Entry {
        NewEntry::new(author, body)
            .at(1_735_689_600_000)
            .into_entry(ThreadId::new("sess_1").unwrap(), seq)
    }

    #[test]
    fn event_ids_read_and_write_as_seq_or_seq_dot_sub() {
        for (text, id) in [("12", (12, 0)), ("12.1", (12, 1)), ("0", (0, 0))] {
            let parsed: EventId = text.parse().unwrap();
            assert_eq!((parsed.seq, parsed.sub), id);
            assert_eq!(parsed.to_string(), text);
        }
        for bad in [
            "",
            ".",
            "1.",
            ".1",
            "a",
            "1.2.3",
            "-1",
            "1 ",
            "99999999999999999999999",
        ] {
            assert!(bad.parse::<EventId>().is_err(), "{bad:?}");
        }
        assert!(EventId { seq: 3, sub: 1 } > EventId::of_entry(3));
        assert!(EventId { seq: 3, sub: 9 } < EventId::of_entry(4));
    }

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(1_735_689_600_000),
            "2025-01-01T00:00:00.000Z"
        );
        assert_eq!(rfc3339_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_millis(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn an_assistant_message_gives_its_output_and_one_event_per_tool_call() {
        let view = EventView::new("sess_1", "agent");
        let mut message = AssistantMessage::empty("openai-completions", "scripted", "m", 0);
        message.content.push(AssistantBlock::text("Let me look."));
        for id in ["c1", "c2"] {
            let args = serde_json::json!({"path": "README.md"});
            message.content.push(AssistantBlock::ToolCall(ToolCall::new(
                id,
                "read_file",
                args.as_object().cloned().unwrap_or_default(),
            )));
        }
        let events = view.events(&entry(
            7,
            "agent",
            EntryBody::Assistant(AssistantEntry::new(Some("turn_1".into()), message)),
        ));
        let kinds: Vec<_> = events.iter().map(|e| (e.id.to_string(), e.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("7".to_string(), EventType::ModelOutputCompleted),
                ("7.1".to_string(), EventType::ToolCallStarted),
                ("7.2".to_string(), EventType::ToolCallStarted),
                ("7.3".to_string(), EventType::MessageAdded),
            ]
        );
        assert_eq!(events[1].data["tool_call"]["name"], "read_file");
        assert_eq!(events[1].data["tool_call_id"], "c1");
        assert_eq!(events[2].data["input"]["path"], "README.md");
        assert_eq!(events[0].turn_id.as_deref(), Some("turn_1"));
        assert_eq!(events[0].ts, "2025-01-01T00:00:00.000Z");
        let json = serde_json::to_value(&events[1]).unwrap();
        assert_eq!(json["type"], "tool_call_started");
        assert_eq!(json["id"], "7.1");
        assert_eq!(json["session_id"], "sess_1");
    }

    #[test]
    fn turn_ends_give_the_turn_event_and_stopping_ones_the_session_event() {
        let view = EventView::new("sess_1", "agent");
        let agent: Arc<str> = "agent".into();
        let turn: Arc<str> = "turn_1".into();
        let kinds = |body| -> Vec<EventType> {
            view.events(&entry(9, "agent", body))
                .into_iter()
                .map(|e| e.kind)
                .collect()
        };
        assert_eq!(
            kinds(turn_started_by(&agent, &turn, 1, "message").body),
            [EventType::TurnStarted]
        );
        assert_eq!(
            kinds(EntryBody::TurnEnded(TurnEnded {
                turn: turn.clone(),
                reason: "stop".into()
            })),
            [EventType::TurnCompleted]
        );
        assert_eq!(
            kinds(EntryBody::TurnFailed(TurnFailed {
                turn: turn.clone(),
                reason: TurnReason::failed(FinishReason::Error, "down"),
            })),
            [EventType::TurnFailed]
        );
        assert_eq!(
            kinds(EntryBody::TurnFailed(TurnFailed {
                turn: turn.clone(),
                reason: TurnReason::failed(FinishReason::Aborted, "the turn was cancelled"),
            })),
            [EventType::TurnFailed, EventType::SessionCanceled]
        );
        let events = view.events(&entry(10, "agent", turn_interrupted(&agent, &turn).body));
        assert_eq!(events[1].kind, EventType::SessionFailed);
        assert_eq!(events[1].data["interrupted"], true);
    }

    #[test]
    fn settled_gives_the_sessions_outcome_once_unless_its_turn_said_it() {
        let view = EventView::new("sess_1", "agent");
        let settled = |last_turn: Option<(bool, &str)>| {
            let record = Settled {
                last_turn: last_turn.map(|(ended, reason)| crate::records::LastTurn {
                    turn: "turn_2".into(),
                    ended,
                    reason: reason.into(),
                }),
            };
            view.events(&entry(12, "agent", record.to_body().unwrap()))
        };
        let done = settled(Some((true, "stop")));
        let kinds: Vec<_> = done.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventType::SessionCompleted, EventType::Settled]);
        assert_eq!(done[0].turn_id.as_deref(), Some("turn_2"));
        let failed = settled(Some((false, "error: down")));
        assert_eq!(failed[0].kind, EventType::SessionFailed);
        assert_eq!(failed[0].data["error"], "down");
        // A cancelled or interrupted turn said it itself.
        assert_eq!(settled(Some((false, "aborted: stop"))).len(), 1);
        assert_eq!(settled(Some((false, "interrupted"))).len(), 1);
        assert_eq!(settled(None).len(), 1);
    }

    #[test]
    fn messages_and_tool_results_carry_the_specs_objects() {
        use roundtable_providers::ToolResultMessage;

        let view = EventView::new("sess_1", "agent");
        let mut message = AssistantMessage::empty("openai-completions", "scripted", "m", 0);
        message.content.push(AssistantBlock::text("Done."));
        let events = view.events(&entry(
            8,
            "agent",
            EntryBody::Assistant(AssistantEntry::new(Some("turn_1".into()), message)),
        ));
        assert_eq!(events[1].kind, EventType::MessageAdded);
        assert_eq!(events[1].turn_id.as_deref(), Some("turn_1"));
        let m = &events[1].data["message"];
        assert_eq!(m["role"], "assistant");
        assert_eq!(m["parts"], json!([{"type": "text", "text": "Done."}]));
        assert_eq!(m["created_at"], "2025-01-01T00:00:00.000Z");
        assert!(m["id"].is_string());
        let call = ToolCall::new("c1", "shell", Default::default());
        let result = ToolResultMessage::text(&call, "ok", false, 0);
        let body = EntryBody::ToolResult(ToolResultEntry {
            turn: Some("turn_1".into()),
            message: Arc::new(result),
        });
        let events = view.events(&entry(9, "agent", body));
        assert_eq!(
            events[0].data["tool_call"],
            json!({"id": "c1", "name": "shell"})
        );
        assert_eq!(
            events[0].data["tool_result"],
            json!({"id": "c1", "ok": true, "parts": [{"type": "text", "text": "ok"}]})
        );
        assert_eq!(events[0].data["output"], "ok");
    }

    #[test]
    fn text_and_thinking_chunks_give_their_own_delta_events() {
        use roundtable_thread_stream::Chunk;

        let view = EventView::new("sess_1", "agent");
        let text = view.events(&entry(
            4,
            "agent",
            EntryBody::Chunk(Chunk::text("turn_1", "Hi")),
        ));
        let thinking = view.events(&entry(
            5,
            "agent",
            EntryBody::Chunk(Chunk::thinking("turn_1", "Hmm")),
        ));
        assert_eq!(text[0].kind, EventType::ModelOutputDelta);
        assert_eq!(thinking[0].kind, EventType::ModelThinkingDelta);
        assert_eq!(thinking[0].data, json!({"text": "Hmm"}));
        assert_eq!(thinking[0].turn_id.as_deref(), Some("turn_1"));
    }

    #[test]
    fn compaction_records_give_the_compaction_events() {
        use roundtable_chat_runner::CompactionReason;
        use roundtable_thread_stream::Compaction;

        let view = EventView::new("sess_1", "agent");
        let started = CompactionStartedRecord {
            turn: Some("turn_1".into()),
            reason: CompactionReason::Threshold,
            tokens_before: 190_000,
        };
        let events = view.events(&entry(5, "agent", started.to_body().unwrap()));
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, EventType::CompactionStarted);
        assert_eq!(events[0].turn_id.as_deref(), Some("turn_1"));
        assert_eq!(
            events[0].data,
            json!({"reason": "threshold", "tokens_before": 190_000})
        );
        // The summary itself is no event of its own.
        let summary = EntryBody::Compaction(Compaction {
            summary: "S".into(),
            upto: 4,
        });
        assert!(view.events(&entry(6, "agent", summary)).is_empty());
        let ended = CompactionEndedRecord {
            turn: None,
            reason: CompactionReason::Manual,
            covers_seq: None,
            tokens_after: None,
            aborted: false,
            will_retry: false,
            error: Some("the summarizer failed: down".into()),
        };
        let events = view.events(&entry(7, "agent", ended.to_body().unwrap()));
        assert_eq!(events[0].kind, EventType::CompactionEnded);
        assert_eq!(events[0].turn_id, None);
        assert_eq!(events[0].data["reason"], "manual");
        assert_eq!(events[0].data["covers_seq"], Value::Null);
        assert_eq!(events[0].data["error"], "the summarizer failed: down");
        let json = serde_json::to_value(&events[0]).unwrap();
        assert_eq!(json["type"], "compaction_ended");
    }

    #[test]
    fn phase_records_give_the_phase_events() {
        let view = EventView::new("sess_1", "agent");
        let started = PhaseStarted {
            workflow: "wf".into(),
            phase: "review".into(),
            index: 1,
            attempt: 1,
            turn: "turn_9".into(),
            message_id: "msg_9".into(),
            skills: vec!["pr-review".into()],
        };
        let events = view.events(&entry(3, "agent", started.to_body().unwrap()));
        assert_eq!(events[0].kind, EventType::PhaseStarted);
        assert_eq!(events[0].turn_id.as_deref(), Some("turn_9"));
        assert_eq!(events[0].data["phase"], "review");
        assert_eq!(events[0].data["skills"][0], "pr-review");
        let completed = PhaseCompleted {
            workflow: "wf".into(),
            phase: "review".into(),
            attempt: 1,
            turn: "turn_9".into(),
            finish_reason: "stop".into(),
        };
        let events = view.events(&entry(4, "agent", completed.to_body().unwrap()));
        assert_eq!(events[0].kind, EventType::PhaseCompleted);
        let failed = PhaseFailed {
            workflow: "wf".into(),
            phase: "fix".into(),
            attempt: 2,
            turn: None,
            reason: "the gate was denied".into(),
            interrupted: false,
        };
        let events = view.events(&entry(5, "agent", failed.to_body().unwrap()));
        assert_eq!(events[0].kind, EventType::PhaseFailed);
        assert_eq!(events[0].turn_id, None);
        let json = serde_json::to_value(&events[0]).unwrap();
        assert_eq!(json["type"], "phase_failed");
        assert_eq!(json["data"]["reason"], "the gate was denied");
    }

    #[test]
    fn entries_clients_do_not_see_give_no_event() {
        let view = EventView::new("sess_1", "agent");
        let other = EntryBody::Other {
            kind: "future.kind".into(),
            fields: Default::default(),
        };
        assert!(view.events(&entry(1, "x", other)).is_empty());
        let signal = EntryBody::Signal(roundtable_thread_stream::Signal {
            name: "typing".into(),
            data: Value::Null.into(),
        });
        assert!(view.events(&entry(2, "x", signal)).is_empty());
    }

    /// Every event's `type` and `data` read back as its typed payload and
    /// written again give the same JSON, byte for byte.
    fn assert_round_trips(events: &[SessionEvent]) {
        for event in events {
            let payload = event.payload().unwrap();
            assert_eq!(payload.kind(), event.kind);
            let wire = json!({"type": event.kind, "data": event.data});
            assert_eq!(
                serde_json::to_string(&payload).unwrap(),
                serde_json::to_string(&wire).unwrap()
            );
        }
    }

    #[test]
    fn every_event_reads_back_as_its_typed_payload() {
        use roundtable_providers::ToolResultMessage;
        use roundtable_thread_stream::{Chunk, TurnFailed};

        let view = EventView::new("sess_1", "agent");
        let mut message = AssistantMessage::empty("openai-completions", "scripted", "m", 0);
        message.content.push(AssistantBlock::text("Let me look."));
        let call = ToolCall::new("c1", "shell", Default::default());
        message.content.push(AssistantBlock::ToolCall(call.clone()));
        let result = ToolResultMessage::text(&call, "ok", true, 0);
        let bodies = [
            EntryBody::Assistant(AssistantEntry::new(Some("t".into()), message)),
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some("t".into()),
                message: Arc::new(result),
            }),
            EntryBody::Chunk(Chunk::thinking("t", "Hmm")),
            EntryBody::TurnFailed(TurnFailed {
                turn: "t".into(),
                reason: TurnReason::failed(FinishReason::Aborted, "cancelled"),
            }),
            Settled::default().to_body().unwrap(),
            EntryBody::Chat(Chat::new("hi")),
        ];
        for body in bodies {
            let events = view.events(&entry(3, "agent", body));
            assert!(!events.is_empty());
            assert_round_trips(&events);
        }
    }

    #[test]
    fn the_event_schema_names_every_event_type() {
        let schema = serde_json::to_string(&schemars::schema_for!(EventData)).unwrap();
        for kind in ["session_created", "tool_call_completed", "session_canceled"] {
            assert!(schema.contains(&format!("\"{kind}\"")), "{kind}");
        }
    }
}
