//! The workflow runner: the phases of a workflow, one after the other, as
//! turns of one session (the steps and the resume rule are in the module
//! above).

use std::path::PathBuf;
use std::sync::Arc;

use roundtable_skills::workflow::{PhaseGate, WorkflowPhase};
use roundtable_skills::{StageMode, Workflow};
use roundtable_thread_stream::{Expect, NewEntry};
use serde::Serialize;
use serde_json::{Map, Value};

use super::gate::{self, GateVerdict};
use super::phase_turn::{self, PhaseMessage, TurnEnd};
use super::progress::{AttemptState, WorkflowProgress};
use super::{prompt, workspace};
use crate::caller::Caller;
use crate::engine::SessionEngine;
use crate::error::SessionError;
use crate::events::EventId;
use crate::records::{PhaseCompleted, PhaseFailed, PhaseStarted, SessionRecord};
use crate::runtime::SessionRuntime;

/// Runs a [`Workflow`]'s phases as turns of a session.
///
/// ```no_run
/// # async fn demo(engine: roundtable_sessions::SessionEngine, session: &str) -> Result<(), Box<dyn std::error::Error>> {
/// use roundtable_sessions::{Caller, WorkflowRunner};
/// use roundtable_skills::{SkillLibrary, Workflow};
///
/// let workflow = Workflow::load("workflows/review.yaml", &SkillLibrary::new("."))?;
/// let run = WorkflowRunner::new(engine, workflow)
///     .agent_context("agent-context")
///     .run(&Caller::Host, session)
///     .await?;
/// if let Some(stop) = &run.stopped {
///     eprintln!("phase {} failed: {}", stop.phase, stop.reason);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct WorkflowRunner {
    engine: SessionEngine,
    workflow: Arc<Workflow>,
    stage_mode: StageMode,
    agent_context: Option<PathBuf>,
    context: Map<String, Value>,
}

/// What a run of a workflow did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkflowRun {
    /// The workflow's name.
    pub workflow: String,
    /// Phases an earlier run completed (skipped by this one), in order.
    pub already_completed: Vec<String>,
    /// Phases this run completed, in order.
    pub completed: Vec<String>,
    /// The phase that failed and stopped the workflow, if one did.
    pub stopped: Option<PhaseStop>,
}

impl WorkflowRun {
    /// True when every phase has completed (now or before).
    pub fn is_complete(&self) -> bool {
        self.stopped.is_none()
    }
}

/// The phase that stopped a workflow, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseStop {
    /// The phase.
    pub phase: String,
    /// Its attempt that failed.
    pub attempt: u32,
    /// Why (as its `phase_failed` entry says).
    pub reason: String,
}

/// What one attempt at a phase came to.
enum Attempt {
    /// The phase completed.
    Completed,
    /// It failed: the workflow stops.
    Stopped(PhaseStop),
    /// A restart interrupted it: the phase runs again when the attempt
    /// was one an earlier run left behind, else the workflow stops.
    Interrupted(PhaseStop),
}

impl WorkflowRunner {
    /// A runner of `workflow` in `engine`'s sessions: skills staged as
    /// copies, no agent context, an empty context map.
    pub fn new(engine: SessionEngine, workflow: Workflow) -> Self {
        Self {
            engine,
            workflow: Arc::new(workflow),
            stage_mode: StageMode::Copy,
            agent_context: None,
            context: Map::new(),
        }
    }

    /// How skills reach the workspace: copies (the default) or symbolic
    /// links.
    ///
    /// A session's workspace tools are confined to the workspace and
    /// refuse a path that a symbolic link leads out of it, so with links
    /// the agent still sees the catalogue and `read_skill` reads each
    /// SKILL.md, but `read_file` and `shell` cannot reach a skill's
    /// `scripts/` and `references/`. Links suit an agent whose own tools
    /// follow host paths.
    pub fn stage_mode(mut self, mode: StageMode) -> Self {
        self.stage_mode = mode;
        self
    }

    /// The `agent-context/` folder whose `*.md` files become the
    /// workspace's `AGENTS.md`, written before the session's first phase.
    pub fn agent_context(mut self, dir: impl Into<PathBuf>) -> Self {
        self.agent_context = Some(dir.into());
        self
    }

    /// The values the phases' prompts see: `{{key}}` in a template, the
    /// `Context:` lines of a skill nudge.
    pub fn context(mut self, context: Map<String, Value>) -> Self {
        self.context = context;
        self
    }

    /// The workflow.
    pub fn workflow(&self) -> &Workflow {
        &self.workflow
    }

    /// Runs the workflow in `session`, from where the session's thread
    /// says it stopped, until its last phase completed or a phase failed.
    /// A failed phase is an outcome ([`WorkflowRun::stopped`]), not an
    /// error; errors are the engine's (an unknown session, a store that
    /// fails).
    pub async fn run(&self, caller: &Caller, session: &str) -> Result<WorkflowRun, SessionError> {
        let info = self.engine.get(caller, session).await?;
        let runtime = self.engine.core().runtime(caller, session).await?;
        let session = info.id.to_string();
        let workspace = info.workspace_path.clone();
        let workflow = &self.workflow;
        let progress = self.progress(&runtime).await?;
        let start = progress.resume_index(workflow);
        let mut run = WorkflowRun {
            workflow: workflow.name.clone(),
            already_completed: workflow.phases[..start]
                .iter()
                .map(|p| p.name.clone())
                .collect(),
            ..WorkflowRun::default()
        };
        for (index, phase) in workflow.phases.iter().enumerate().skip(start) {
            let mut resumed = true;
            loop {
                let progress = self.progress(&runtime).await?;
                let step = Step {
                    runner: self,
                    caller,
                    session: &session,
                    runtime: &runtime,
                    workspace: &workspace,
                    index,
                    phase,
                };
                match step.attempt(&progress, resumed).await? {
                    Attempt::Completed => {
                        run.completed.push(phase.name.clone());
                        break;
                    }
                    Attempt::Stopped(stop) => {
                        run.stopped = Some(stop);
                        return Ok(run);
                    }
                    // Only an attempt a restart left behind runs again; a
                    // turn interrupted under this run stops it.
                    Attempt::Interrupted(_) if resumed => resumed = false,
                    Attempt::Interrupted(stop) => {
                        run.stopped = Some(stop);
                        return Ok(run);
                    }
                }
            }
        }
        Ok(run)
    }

    /// The workflow's progress as the session's thread holds it now.
    async fn progress(&self, runtime: &SessionRuntime) -> Result<WorkflowProgress, SessionError> {
        let store = &self.engine.core().store;
        let tip = store.last_seq(&runtime.thread).await?;
        let entries = store.read(&runtime.thread, 1..=tip.max(1)).await?;
        Ok(WorkflowProgress::fold(&self.workflow.name, &entries))
    }
}

/// What an attempt does next.
enum Next {
    /// Ask for the phase's gate.
    AskGate,
    /// Wait for the decision about gate (call id, seq of the request).
    AwaitGate(Arc<str>, u64),
    /// Stop: the gate was denied (the decider's reason).
    Deny(Option<String>),
    /// Prepare the workspace and start the phase's turn.
    Start,
    /// Wait for the started turn (its id, the seq of `phase_started`).
    Await(Arc<str>, u64),
}

/// One phase of one run.
struct Step<'a> {
    runner: &'a WorkflowRunner,
    caller: &'a Caller,
    session: &'a str,
    runtime: &'a SessionRuntime,
    workspace: &'a std::path::Path,
    index: usize,
    phase: &'a WorkflowPhase,
}

impl Step<'_> {
    /// Runs (or goes on with) the phase's current attempt. `resumed`: the
    /// attempt may be one an earlier run left behind.
    async fn attempt(
        &self,
        progress: &WorkflowProgress,
        resumed: bool,
    ) -> Result<Attempt, SessionError> {
        let name = self.phase.name.as_str();
        let last = progress.last_attempt(name);
        // A phase run again after an interruption was let through its gate
        // already.
        let after_interruption = matches!(
            last.map(|l| &l.state),
            Some(AttemptState::Failed { interrupted: true })
        );
        let fresh = if self.phase.gate == PhaseGate::Approval && !after_interruption {
            Next::AskGate
        } else {
            Next::Start
        };
        let (attempt, mut next) = match last.map(|l| (l.attempt, &l.state)) {
            None => (1, fresh),
            Some((n, AttemptState::Completed | AttemptState::Failed { .. })) => (n + 1, fresh),
            Some((n, AttemptState::GatePending { call_id, seq })) => {
                (n, Next::AwaitGate(call_id.clone(), *seq))
            }
            Some((n, AttemptState::GateApproved)) => (n, Next::Start),
            Some((n, AttemptState::GateDenied { reason })) => (n, Next::Deny(reason.clone())),
            Some((n, AttemptState::Started { turn, seq })) => (n, Next::Await(turn.clone(), *seq)),
        };
        let message = PhaseMessage::new(self.session, &self.runner.workflow.name, name, attempt);
        if let Next::AskGate = next {
            let (call_id, seq) = gate::request(
                &self.runner.engine,
                self.runtime,
                &self.runner.workflow.name,
                name,
                attempt,
                &message.turn_id(),
            )
            .await?;
            next = Next::AwaitGate(call_id, seq);
        }
        if let Next::AwaitGate(call_id, seq) = &next {
            let engine = &self.runner.engine;
            next = match gate::decision(engine, self.caller, self.session, call_id, *seq).await? {
                GateVerdict::Approved => Next::Start,
                GateVerdict::Denied(reason) => Next::Deny(reason),
            };
        }
        match next {
            Next::Deny(reason) => {
                let reason = match reason {
                    Some(reason) => format!("the phase's gate was denied: {reason}"),
                    None => "the phase's gate was denied".to_owned(),
                };
                self.fail(attempt, None, reason, false).await
            }
            Next::Await(turn, seq) => {
                if resumed {
                    // A turn no process runs any more is closed as
                    // interrupted rather than waited for.
                    self.runner
                        .engine
                        .core()
                        .close_dead_turns(self.runtime)
                        .await?;
                }
                self.finish(attempt, &message, turn, seq).await
            }
            // The gate was settled above.
            Next::Start | Next::AskGate | Next::AwaitGate(..) => {
                self.start(attempt, &message, progress).await
            }
        }
    }

    /// Prepares the workspace, writes `phase_started` and runs the turn.
    async fn start(
        &self,
        attempt: u32,
        message: &PhaseMessage,
        progress: &WorkflowProgress,
    ) -> Result<Attempt, SessionError> {
        let runner = self.runner;
        let prepared = workspace::prepare(
            self.workspace,
            self.phase,
            runner.stage_mode,
            runner.agent_context.as_deref(),
            !progress.session_started_phases,
        );
        if let Err(error) = prepared {
            let reason = format!("the workspace could not be prepared: {error}");
            return self.fail(attempt, None, reason, false).await;
        }
        if let Err(reason) = self.prompt() {
            return self.fail(attempt, None, reason, false).await;
        }
        let started = PhaseStarted {
            workflow: runner.workflow.name.as_str().into(),
            phase: self.phase.name.as_str().into(),
            index: u32::try_from(self.index).unwrap_or(u32::MAX),
            attempt,
            turn: message.turn_id(),
            message_id: message.message_id.as_arc().clone(),
            skills: self.phase.skills.clone(),
        };
        let seq = self.append(started.to_body()?).await?;
        self.finish(attempt, message, message.turn_id(), seq).await
    }

    /// Submits the phase's message (again, when resuming) and records how
    /// its turn ended.
    async fn finish(
        &self,
        attempt: u32,
        message: &PhaseMessage,
        turn: Arc<str>,
        started_seq: u64,
    ) -> Result<Attempt, SessionError> {
        let prompt = match self.prompt() {
            Ok(prompt) => prompt,
            Err(reason) => return self.fail(attempt, Some(turn), reason, false).await,
        };
        let ended = phase_turn::run(
            &self.runner.engine,
            self.caller,
            self.session,
            message,
            prompt,
            EventId::of_entry(started_seq),
        )
        .await?;
        match ended {
            TurnEnd::Completed { finish_reason } => {
                let completed = PhaseCompleted {
                    workflow: self.runner.workflow.name.as_str().into(),
                    phase: self.phase.name.as_str().into(),
                    attempt,
                    turn,
                    finish_reason,
                };
                self.append(completed.to_body()?).await?;
                Ok(Attempt::Completed)
            }
            TurnEnd::Failed {
                reason,
                interrupted,
            } => {
                let stopped = self.fail(attempt, Some(turn), reason, interrupted).await?;
                Ok(match stopped {
                    Attempt::Stopped(stop) if interrupted => Attempt::Interrupted(stop),
                    other => other,
                })
            }
            TurnEnd::Withdrawn => {
                let reason = "the phase's message was removed from the queue".to_owned();
                self.fail(attempt, Some(turn), reason, false).await
            }
        }
    }

    /// The phase's prompt, or why it has none.
    fn prompt(&self) -> Result<String, String> {
        prompt::phase_prompt(
            &self.runner.workflow.name,
            self.phase,
            self.session,
            &self.runner.context,
        )
    }

    /// Writes `phase_failed`; the workflow stops there.
    async fn fail(
        &self,
        attempt: u32,
        turn: Option<Arc<str>>,
        reason: String,
        interrupted: bool,
    ) -> Result<Attempt, SessionError> {
        let failed = PhaseFailed {
            workflow: self.runner.workflow.name.as_str().into(),
            phase: self.phase.name.as_str().into(),
            attempt,
            turn,
            reason: reason.clone(),
            interrupted,
        };
        self.append(failed.to_body()?).await?;
        Ok(Attempt::Stopped(PhaseStop {
            phase: self.phase.name.clone(),
            attempt,
            reason,
        }))
    }

    /// Appends one record as the session's agent; returns its seq.
    async fn append(&self, body: roundtable_thread_stream::EntryBody) -> Result<u64, SessionError> {
        let core = self.runner.engine.core();
        let written = core
            .store
            .append(
                &self.runtime.thread,
                Expect::Any,
                vec![NewEntry::new(core.agent.clone(), body)],
            )
            .await?;
        Ok(written.last().map_or(0, |e| e.seq))
    }
}
