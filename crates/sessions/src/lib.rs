//! Agentic sessions on the thread stream.
//!
//! A session is a thread: everything that happens in it (the session's
//! creation, messages, turns, tool calls, approvals, verification) is an
//! entry of the session's thread, and every event a client sees is derived
//! from one stored entry, with the entry's seq as its id. A client that
//! reconnects, a server that restarts, or another server process reading
//! the same store replays exactly what was missed.
//!
//! Workflows run here too: [`WorkflowRunner`] runs the phases of a
//! `roundtable_skills::Workflow` as turns of one session, each with its
//! skills staged in the workspace, each phase's start and end an entry of
//! the thread (so a run resumes after a restart where it stopped).

mod approver;
pub mod attachments;
mod blob;
mod bound_turn;
mod builder;
mod cache;
mod caller;
mod compaction;
mod config;
mod context;
mod conversation;
mod core;
mod engine;
mod error;
mod events;
mod host_tools;
mod ids;
mod info;
mod message_files;
mod models;
mod plan;
mod provenance;
mod questions;
mod records;
mod requests;
mod runtime;
mod state;
mod turn_driver;
mod turn_tools;
mod verify;
mod watch;
mod workflow;
mod working_tree;

pub use attachments::{AttachmentError, AttachmentLimits, AttachmentRef};
pub use blob::{
    BlobError, BlobInfo, BlobPath, BlobStore, FolderBlobStore, InvalidBlobPath, TurnArtifacts,
};
#[cfg(feature = "nats")]
pub use blob::{NatsBlobOptions, NatsBlobStore};
pub use builder::{DEFAULT_AGENT, SessionEngineBuilder};
pub use cache::{DEFAULT_MAX_RUNTIMES, DEFAULT_RUNTIME_TTL};
pub use caller::{Caller, UnownedSessions};
pub use config::{CreateSession, agents_md_verify_commands};
pub use engine::{DEFAULT_USER, EventStream, SessionEngine};
pub use error::{ErrorKind, SessionError};
pub use events::{EventId, EventType, EventView, InvalidEventId, SessionEvent};
pub use ids::{InvalidId, MessageId, SessionId, TurnId};
pub use info::{ProviderCircuit, QueuedInfo, SessionInfo};
pub use models::model_key;
pub use plan::UpdatePlanInput;
pub use questions::AskUserInput;
pub use records::{
    Answer, CancelRequested, FileChanged, HostTool, ModeChanged, ModelChanged, PHASE_GATE_TOOL,
    PhaseCompleted, PhaseFailed, PhaseStarted, PlanStep, PlanUpdated, Provenance, Question,
    QuestionAnswered, QuestionAsked, QueueAdded, QueueExit, QueueMode, QueueRemoved, QueueSnapshot,
    QueuedText, SessionCreated, SessionMode, SessionRecord, Settled, StepStatus, ToolRun,
    ToolsChanged, Verification, VerificationRun,
};
pub use requests::{ApprovalAction, PlanAction, Submit, Submitted};
pub use state::{
    MessageInfo, PendingApproval, PlanState, QueueChange, QueuedMessage, SessionState,
    SessionStatus, TurnInfo, TurnProgress,
};
pub use verify::VERIFY_AUTHOR;
pub use workflow::{PhaseStop, WorkflowRun, WorkflowRunner};
