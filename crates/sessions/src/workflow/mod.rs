//! Workflow phases: a [`Workflow`](roundtable_skills::Workflow) run as
//! turns of one session, phase after phase, in the session's workspace.
//!
//! For each phase the runner
//!
//! 1. asks for its gate when it has one (`gate: approval`): an approval
//!    request for the tool [`PHASE_GATE_TOOL`](crate::records::PHASE_GATE_TOOL),
//!    decided with [`SessionEngine::decide`](crate::SessionEngine::decide)
//!    from any process, like a gated tool call; a denial stops the
//!    workflow (`gate`);
//! 2. clears `<workspace>/.agents/skills/` and stages exactly the phase's
//!    skills, and before the session's first phase writes `AGENTS.md` from
//!    the agent-context folder, once per session (`workspace`);
//! 3. builds the phase's prompt: its rendered template, or the nudge
//!    toward its primary skill (`prompt`);
//! 4. writes `phase_started`, submits the prompt as a message and waits for
//!    the turn it starts to end (`phase_turn`), then writes
//!    `phase_completed`, or `phase_failed` and stops.
//!
//! Every step is an entry of the session's thread, so the session's event
//! stream shows the phases (`phase_started`, `phase_completed`,
//! `phase_failed`, the gate's `approval_*`), and a restart loses nothing.
//!
//! # Resuming
//!
//! Running a workflow on a session whose thread already holds its phases
//! continues where the thread says it stopped (`progress`); a restart
//! never redoes finished work:
//!
//! - the phases up to the last completed one (in the workflow's order) are
//!   done and skipped; a workflow whose last phase completed does nothing;
//! - a phase whose last attempt failed (its turn failed or was cancelled,
//!   its gate was denied) runs again as a new attempt, gate included;
//! - a phase whose gate waits for a decision keeps waiting for that one
//!   (a decision made while no runner ran counts);
//! - a phase whose turn was started goes on waiting for that turn; a turn
//!   a restart interrupted (see
//!   [`SessionEngine::recover`](crate::SessionEngine::recover)) fails the
//!   attempt as interrupted and the phase runs again at once.
//!
//! Progress is keyed by the workflow's name, so two workflows on one
//! session keep apart, and an attempt's message is submitted with an
//! idempotency key (workflow, phase, attempt): a runner that resumes after
//! writing `phase_started` finds the message it already sent.

pub(crate) mod gate;
pub(crate) mod phase_turn;
pub(crate) mod progress;
pub(crate) mod prompt;
mod runner;
pub(crate) mod workspace;

pub use runner::{PhaseStop, WorkflowRun, WorkflowRunner};
