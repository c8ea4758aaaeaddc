//! `mode: "harness"`: a prompt that runs the host's workflow
//! ([`WorkflowRunner`]) on the session, the message as the workflow's
//! `input` (a template's `{{input}}`, a skill nudge's `Context:` line).
//!
//! The run goes on in a task of its own: a client that disconnects stops
//! reading, nothing more (`POST /api/chat/abort` cancels the running
//! phase's turn, which stops the workflow). A phase's gate is an approval
//! request in the phase's turn, decided through `POST /api/chat/question`
//! like a gated call. The stream shows every phase (`state` `phase_start`,
//! then the turn, then `phase_end` or `phase_failed`) and ends once the
//! run has ended and its last entry was shown: with `state` `workflow_end`
//! when every phase completed (sent just before the last phase's `done`,
//! which a stream ends with), with `error` when one failed.

use std::sync::Arc;

use roundtable_sessions::workflow::WorkflowRun;
use roundtable_sessions::{
    Caller, EventData, EventType, SessionError, SessionEvent, WorkflowRunner,
};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::protocol::{ChatStreamEvent, StateSignal};
use crate::api_error::ApiError;

/// How a run ended, as the stream's last line says it.
pub(crate) type RunOutcome = Result<WorkflowRun, SessionError>;

/// The host's workflow: its runner, and the values every run's prompts
/// see beside `input`.
#[derive(Debug, Clone)]
pub(crate) struct HostWorkflow {
    pub(crate) runner: WorkflowRunner,
    pub(crate) context: Map<String, Value>,
}

impl HostWorkflow {
    /// Starts the workflow on `session` for `caller` with `input` as the
    /// prompts' `input`; its outcome arrives on the receiver.
    pub(crate) fn start(
        &self,
        caller: Caller,
        session: Arc<str>,
        input: &str,
    ) -> oneshot::Receiver<RunOutcome> {
        let mut context = self.context.clone();
        context.insert("input".into(), Value::String(input.to_string()));
        let runner = self.runner.clone().context(context);
        let (send, receive) = oneshot::channel();
        tokio::spawn(async move {
            let outcome = runner.run(&caller, &session).await;
            // The stream may have gone: the run's entries are stored anyway.
            let _ = send.send(outcome);
        });
        receive
    }
}

/// The phase entry a run writes last, which the stream must show before
/// it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LastPhase {
    kind: EventType,
    phase: String,
}

/// Where a workflow's stream stands: which phases it showed, and, once the
/// run ended, what is left to show.
#[derive(Debug)]
pub(crate) struct WorkflowWatch {
    /// The run's outcome, until it arrives.
    pub(crate) outcome: Option<oneshot::Receiver<RunOutcome>>,
    /// The workflow's name (phase entries of other workflows are not its).
    workflow: String,
    /// Phase entries shown so far.
    shown: Vec<LastPhase>,
    /// Once the run ended: the entry to wait for, and the stream's last
    /// line.
    ending: Option<(Option<LastPhase>, ChatStreamEvent)>,
}

impl WorkflowWatch {
    /// Watches the run of `runner`'s workflow whose outcome `outcome`
    /// brings.
    pub(crate) fn new(runner: &WorkflowRunner, outcome: oneshot::Receiver<RunOutcome>) -> Self {
        Self {
            outcome: Some(outcome),
            workflow: runner.workflow().name.clone(),
            shown: Vec::new(),
            ending: None,
        }
    }

    /// Notes a phase entry the stream showed.
    pub(crate) fn saw(&mut self, event: &SessionEvent) {
        if !matches!(
            event.kind,
            EventType::PhaseCompleted | EventType::PhaseFailed
        ) {
            return;
        }
        let (workflow, phase) = match event.payload() {
            Ok(EventData::PhaseCompleted(p)) => (p.workflow, p.phase),
            Ok(EventData::PhaseFailed(p)) => (p.workflow, p.phase),
            _ => return,
        };
        if *workflow == *self.workflow {
            self.shown.push(LastPhase {
                kind: event.kind,
                phase: phase.to_string(),
            });
        }
    }

    /// The run ended with `outcome` (a dropped sender is a run that could
    /// not finish).
    pub(crate) fn ended(&mut self, outcome: Result<RunOutcome, oneshot::error::RecvError>) {
        self.outcome = None;
        let (last, line) = match outcome {
            Err(_) => (None, error("the workflow's run stopped before it ended")),
            Ok(Err(e)) => (None, error(&ApiError::from(e).message)),
            Ok(Ok(run)) => match (&run.stopped, run.completed.last()) {
                (Some(stop), _) => (
                    Some(LastPhase {
                        kind: EventType::PhaseFailed,
                        phase: stop.phase.clone(),
                    }),
                    error(&format!(
                        "workflow {}: phase {} failed: {}",
                        run.workflow, stop.phase, stop.reason
                    )),
                ),
                (None, Some(phase)) => (
                    Some(LastPhase {
                        kind: EventType::PhaseCompleted,
                        phase: phase.clone(),
                    }),
                    workflow_end(&run),
                ),
                (None, None) => (
                    None,
                    error(&format!(
                        "workflow {} has already run to its end in this session: start a new session to run it again",
                        run.workflow
                    )),
                ),
            },
        };
        self.ending = Some((last, line));
    }

    /// The stream's last line, once the run ended and its last phase entry
    /// was shown.
    pub(crate) fn last_line(&mut self) -> Option<ChatStreamEvent> {
        let (last, _) = self.ending.as_ref()?;
        let shown = last.as_ref().is_none_or(|last| self.shown.contains(last));
        if !shown {
            return None;
        }
        self.ending.take().map(|(_, line)| line)
    }
}

fn error(message: &str) -> ChatStreamEvent {
    ChatStreamEvent::Error {
        message: message.to_string(),
        run_id: None,
    }
}

/// `state` `workflow_end`: every phase completed; the detail is the run.
fn workflow_end(run: &WorkflowRun) -> ChatStreamEvent {
    ChatStreamEvent::State {
        state: StateSignal {
            name: "workflow_end",
            turn_id: None,
            detail: serde_json::to_value(run).ok(),
            phase: None,
        },
    }
}
