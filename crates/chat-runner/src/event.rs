//! What a turn tells its host while it runs: [`TurnEvent`]s, delivered to an
//! [`EventSink`].

use std::sync::Arc;

use roundtable_providers::{AssistantMessage, JsonObject, ToolResultMessage, Usage, UserMessage};
use roundtable_thread_stream::Chat;
use roundtable_tools::ToolsChange;
use serde::{Deserialize, Serialize};

pub use roundtable_thread_stream::FinishReason;
use tokio::sync::mpsc;

/// Which stream a model-output delta belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// Answer text.
    Text,
    /// Reasoning.
    Thinking,
}

/// One thing that happened in a turn, for hosts (UIs, logs, dashboards).
///
/// The serde shape is stable: an object tagged by `type` in snake_case
/// (`turn_started`, `output_delta`, `output_completed`, `tool_call_started`,
/// `tool_call_completed`, `approval_requested`, `approval_granted`,
/// `approval_denied`, `retrying`, `input_added`, `compaction_started`,
/// `compaction_ended`, `tools_changed`, `turn_completed`, `turn_failed`), snake_case fields,
/// messages in pi-ai's JSON.
///
/// ```
/// use roundtable_chat_runner::{OutputKind, TurnEvent};
///
/// let event = TurnEvent::OutputDelta { turn: "t1".into(), round: 1, kind: OutputKind::Text, delta: "Hi".into() };
/// assert_eq!(
///     serde_json::to_string(&event).unwrap(),
///     r#"{"type":"output_delta","turn":"t1","round":1,"kind":"text","delta":"Hi"}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnEvent {
    /// The turn began.
    TurnStarted {
        /// The turn's id.
        turn: Arc<str>,
    },
    /// More model output in round `round` (1-based).
    OutputDelta {
        /// The turn's id.
        turn: Arc<str>,
        /// The round (model call) it belongs to, from 1.
        round: u32,
        /// Text or thinking.
        kind: OutputKind,
        /// The new piece.
        delta: Arc<str>,
    },
    /// The model call of round `round` ended with this message.
    OutputCompleted {
        /// The turn's id.
        turn: Arc<str>,
        /// The round, from 1.
        round: u32,
        /// The complete assistant message (shared with the turn's history).
        message: Arc<AssistantMessage>,
    },
    /// A tool call is about to run (after its approval, if it needed one).
    ToolCallStarted {
        /// The turn's id.
        turn: Arc<str>,
        /// The round, from 1.
        round: u32,
        /// The call's id.
        call_id: Arc<str>,
        /// The tool's name.
        tool: Arc<str>,
        /// The call's arguments.
        arguments: JsonObject,
    },
    /// A tool call has its result (also a call that was denied, cancelled or
    /// never run because the turn ended).
    ToolCallCompleted {
        /// The turn's id.
        turn: Arc<str>,
        /// The round, from 1.
        round: u32,
        /// The call's id.
        call_id: Arc<str>,
        /// The tool's name.
        tool: Arc<str>,
        /// The result as the model sees it (shared with the turn's history).
        result: Arc<ToolResultMessage>,
    },
    /// A call needs the host's approval; nothing runs until it decides.
    ApprovalRequested {
        /// The turn's id.
        turn: Arc<str>,
        /// The call's id.
        call_id: Arc<str>,
        /// The tool's name.
        tool: Arc<str>,
        /// The call's arguments.
        arguments: JsonObject,
    },
    /// The host approved the call.
    ApprovalGranted {
        /// The turn's id.
        turn: Arc<str>,
        /// The call's id.
        call_id: Arc<str>,
        /// The tool's name.
        tool: Arc<str>,
        /// The decision is already an entry of the thread (the approver's
        /// decider appended it), so the turn's writer does not record it.
        #[serde(default, skip_serializing_if = "is_false")]
        recorded: bool,
    },
    /// The host refused the call; the model gets an error result.
    ApprovalDenied {
        /// The turn's id.
        turn: Arc<str>,
        /// The call's id.
        call_id: Arc<str>,
        /// The tool's name.
        tool: Arc<str>,
        /// Why, if the host said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The decision is already an entry of the thread.
        #[serde(default, skip_serializing_if = "is_false")]
        recorded: bool,
    },
    /// The model call of round `round` failed before its response started,
    /// or its stream stalled before any output (then `delay_ms` is 0 and
    /// `max_attempts` is the limits' stall retries), and is sent again
    /// after `delay_ms` (cancelling the turn cuts the wait short).
    Retrying {
        /// The turn's id.
        turn: Arc<str>,
        /// The round whose call is retried.
        round: u32,
        /// Which retry this is (1 for the first).
        attempt: u32,
        /// How many retries the provider allows.
        max_attempts: u32,
        /// The wait, in milliseconds.
        delay_ms: u64,
        /// Why the previous attempt failed.
        error: String,
    },
    /// A message joined the conversation between two model calls (a user
    /// steering the running turn, a verification report).
    InputAdded {
        /// The turn's id.
        turn: Arc<str>,
        /// The round whose model call comes next.
        round: u32,
        /// Who it is from (the author of its `chat` entry).
        author: Arc<str>,
        /// The id its entry gets, if the host chose one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<Arc<str>>,
        /// What is stored: the message as its author wrote it.
        chat: Chat,
        /// What the model reads (labelled with its author, as a projection
        /// of the stored entry would be).
        message: Arc<UserMessage>,
    },
    /// The turn's conversation is being compacted before its next model
    /// request.
    CompactionStarted {
        /// The turn's id.
        turn: Arc<str>,
        /// Why: the estimate passed the threshold, the model refused the
        /// context, or a host asked.
        reason: CompactionReason,
        /// The estimated tokens of the request before compacting.
        tokens_before: u64,
    },
    /// A compaction ended: it wrote its `compaction` entry, or it did not
    /// (`error` says why, `aborted` when the turn was cancelled).
    CompactionEnded {
        /// The turn's id.
        turn: Arc<str>,
        /// Why it ran.
        reason: CompactionReason,
        /// The last seq the new summary covers, when it was written.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        covers_seq: Option<u64>,
        /// The estimated tokens of the request after compacting.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_after: Option<u64>,
        /// The turn was cancelled while compacting.
        #[serde(default, skip_serializing_if = "is_false")]
        aborted: bool,
        /// The refused model request is sent again with the compacted
        /// context.
        #[serde(default, skip_serializing_if = "is_false")]
        will_retry: bool,
        /// What went wrong, or why automatic compaction stops for this bot
        /// (it could not help, or did not bring the request well under the
        /// threshold).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The tools on offer changed since the runner's previous turn (a tool
    /// source, such as an MCP server, listed new ones): this turn, and the
    /// next ones, run with the new list. Emitted before the turn starts.
    ToolsChanged {
        /// The turn about to start with the new tools.
        turn: Arc<str>,
        /// The names added, removed and changed.
        change: ToolsChange,
    },
    /// The turn ended by one of its own ends (`stop`, `length`, `max-rounds`,
    /// `budget`).
    TurnCompleted {
        /// The turn's id.
        turn: Arc<str>,
        /// Why it ended.
        finish_reason: FinishReason,
        /// Model calls made.
        rounds: u32,
        /// Usage and cost summed over the rounds.
        usage: Usage,
        /// Wall time in milliseconds.
        duration_ms: u64,
    },
    /// The turn was cut off or failed (`timeout`, `aborted`, `error`).
    TurnFailed {
        /// The turn's id.
        turn: Arc<str>,
        /// Why it ended.
        finish_reason: FinishReason,
        /// What went wrong.
        error: String,
        /// Model calls made.
        rounds: u32,
        /// Usage and cost summed over the rounds.
        usage: Usage,
        /// Wall time in milliseconds.
        duration_ms: u64,
    },
}

impl TurnEvent {
    /// The id of the turn the event belongs to.
    pub fn turn(&self) -> &str {
        match self {
            Self::TurnStarted { turn }
            | Self::OutputDelta { turn, .. }
            | Self::OutputCompleted { turn, .. }
            | Self::ToolCallStarted { turn, .. }
            | Self::ToolCallCompleted { turn, .. }
            | Self::ApprovalRequested { turn, .. }
            | Self::ApprovalGranted { turn, .. }
            | Self::ApprovalDenied { turn, .. }
            | Self::Retrying { turn, .. }
            | Self::InputAdded { turn, .. }
            | Self::CompactionStarted { turn, .. }
            | Self::CompactionEnded { turn, .. }
            | Self::ToolsChanged { turn, .. }
            | Self::TurnCompleted { turn, .. }
            | Self::TurnFailed { turn, .. } => turn,
        }
    }
}

fn is_false(value: &bool) -> bool {
    !value
}

/// Why a turn's conversation is compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionReason {
    /// The request's estimate passed the threshold (window less reserve).
    Threshold,
    /// The model refused the request as larger than its context window.
    Overflow,
    /// A host asked for it.
    Manual,
}

impl CompactionReason {
    /// The word used in events and messages: `threshold`, `overflow`,
    /// `manual`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Threshold => "threshold",
            Self::Overflow => "overflow",
            Self::Manual => "manual",
        }
    }
}

/// Where a turn's events go. Called inline by the loop, so it should be
/// quick (forward to a channel for slow consumers).
pub trait EventSink: Send + Sync {
    /// Receives one event.
    fn emit(&self, event: TurnEvent);
}

/// A sink that drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: TurnEvent) {}
}

impl EventSink for mpsc::UnboundedSender<TurnEvent> {
    fn emit(&self, event: TurnEvent) {
        // A closed receiver means nobody listens any more; the turn goes on.
        let _ = self.send(event);
    }
}

/// A sink calling a function for every event.
pub struct FnSink<F>(pub F);

impl<F: Fn(TurnEvent) + Send + Sync> EventSink for FnSink<F> {
    fn emit(&self, event: TurnEvent) {
        (self.0)(event)
    }
}

impl<S: EventSink + ?Sized> EventSink for Arc<S> {
    fn emit(&self, event: TurnEvent) {
        (**self).emit(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_providers::{StopReason, UserBlock};

    fn tag(event: &TurnEvent) -> serde_json::Value {
        serde_json::to_value(event).unwrap()
    }

    #[test]
    fn every_event_has_a_stable_snake_case_shape() {
        let turn: Arc<str> = "t".into();
        let message = AssistantMessage::empty("api", "p", "m", 0);
        let result = ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "ls".into(),
            content: vec![UserBlock::text("ok")],
            details: None,
            is_error: false,
            timestamp: 0,
        };
        let args: JsonObject = Arc::new(serde_json::Map::new());
        let cases = [
            (
                TurnEvent::TurnStarted { turn: turn.clone() },
                "turn_started",
                vec!["turn"],
            ),
            (
                TurnEvent::OutputCompleted {
                    turn: turn.clone(),
                    round: 1,
                    message: message.clone().into(),
                },
                "output_completed",
                vec!["turn", "round", "message"],
            ),
            (
                TurnEvent::ToolCallStarted {
                    turn: turn.clone(),
                    round: 1,
                    call_id: "c".into(),
                    tool: "ls".into(),
                    arguments: args.clone(),
                },
                "tool_call_started",
                vec!["turn", "round", "call_id", "tool", "arguments"],
            ),
            (
                TurnEvent::ToolCallCompleted {
                    turn: turn.clone(),
                    round: 1,
                    call_id: "c".into(),
                    tool: "ls".into(),
                    result: result.clone().into(),
                },
                "tool_call_completed",
                vec!["turn", "round", "call_id", "tool", "result"],
            ),
            (
                TurnEvent::ApprovalRequested {
                    turn: turn.clone(),
                    call_id: "c".into(),
                    tool: "rm".into(),
                    arguments: args,
                },
                "approval_requested",
                vec!["turn", "call_id", "tool", "arguments"],
            ),
            (
                TurnEvent::ApprovalGranted {
                    turn: turn.clone(),
                    call_id: "c".into(),
                    tool: "rm".into(),
                    recorded: false,
                },
                "approval_granted",
                vec!["turn", "call_id", "tool"],
            ),
            (
                TurnEvent::ApprovalDenied {
                    turn: turn.clone(),
                    call_id: "c".into(),
                    tool: "rm".into(),
                    reason: Some("no".into()),
                    recorded: false,
                },
                "approval_denied",
                vec!["turn", "call_id", "tool", "reason"],
            ),
            (
                TurnEvent::InputAdded {
                    turn: turn.clone(),
                    round: 2,
                    author: "alice".into(),
                    id: None,
                    chat: Chat::new("stop there"),
                    message: Arc::new(UserMessage::text("[Alice]: stop there", 0)),
                },
                "input_added",
                vec!["turn", "round", "author", "chat", "message"],
            ),
            (
                TurnEvent::TurnCompleted {
                    turn: turn.clone(),
                    finish_reason: FinishReason::MaxRounds,
                    rounds: 8,
                    usage: Usage::default(),
                    duration_ms: 5,
                },
                "turn_completed",
                vec!["turn", "finish_reason", "rounds", "usage", "duration_ms"],
            ),
            (
                TurnEvent::TurnFailed {
                    turn: turn.clone(),
                    finish_reason: FinishReason::Timeout,
                    error: "late".into(),
                    rounds: 1,
                    usage: Usage::default(),
                    duration_ms: 5,
                },
                "turn_failed",
                vec![
                    "turn",
                    "finish_reason",
                    "error",
                    "rounds",
                    "usage",
                    "duration_ms",
                ],
            ),
        ];
        for (event, kind, fields) in cases {
            let json = tag(&event);
            assert_eq!(json["type"], kind);
            let mut keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
            keys.retain(|k| k != "type");
            assert_eq!(keys, fields, "{kind}");
            let back: TurnEvent = serde_json::from_value(json).unwrap();
            assert_eq!(back, event);
            assert_eq!(back.turn(), "t");
        }
        let completed = tag(&TurnEvent::OutputCompleted {
            turn,
            round: 1,
            message: AssistantMessage::empty("api", "p", "m", 0).into(),
        });
        // Messages inside events keep pi-ai's JSON.
        assert_eq!(completed["message"]["api"], "api");
        assert_eq!(
            completed["message"]["stopReason"],
            serde_json::json!(StopReason::Stop)
        );
        for reason in [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::MaxRounds,
            FinishReason::Timeout,
            FinishReason::Aborted,
            FinishReason::Error,
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
    }

    #[test]
    fn compaction_events_have_a_stable_shape() {
        let started = TurnEvent::CompactionStarted {
            turn: "t".into(),
            reason: CompactionReason::Threshold,
            tokens_before: 190_000,
        };
        assert_eq!(
            serde_json::to_string(&started).unwrap(),
            r#"{"type":"compaction_started","turn":"t","reason":"threshold","tokens_before":190000}"#
        );
        let ended = TurnEvent::CompactionEnded {
            turn: "t".into(),
            reason: CompactionReason::Overflow,
            covers_seq: Some(41),
            tokens_after: Some(30_000),
            aborted: false,
            will_retry: true,
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&ended).unwrap(),
            r#"{"type":"compaction_ended","turn":"t","reason":"overflow","covers_seq":41,"tokens_after":30000,"will_retry":true}"#
        );
        let failed = TurnEvent::CompactionEnded {
            turn: "t".into(),
            reason: CompactionReason::Manual,
            covers_seq: None,
            tokens_after: None,
            aborted: true,
            will_retry: false,
            error: Some("cancelled".into()),
        };
        for event in [started, ended, failed] {
            let back: TurnEvent = serde_json::from_value(tag(&event)).unwrap();
            assert_eq!(back.turn(), "t");
            assert_eq!(back, event);
        }
        assert_eq!(CompactionReason::Manual.as_str(), "manual");
    }
}
